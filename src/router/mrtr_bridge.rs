//! A client's call to a stateless (2026-07-28) server. The request carries the client's
//! own `_meta` (its capabilities, identity and log level: a server must not assume any it
//! was not told). A 2026 client gets an `input_required` result as the server wrote it
//! and retries by name like any call; a 2025 client cannot take one, so each round's
//! `inputRequests` become real requests to it inside its still-open call, and the call
//! is retried upstream with their answers and the echoed `requestState`.

use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::RequestContext;
use crate::backend::Backend;
use crate::backend::mcp_client::Upstream;
use crate::backend::modern;
use crate::gateway::Gateway;
use crate::peer::ClientPeer;
use crate::protocol::{self, RpcError, methods};
use crate::relay::url_elicitation;

/// Rounds of questions one call may take before the gateway gives up on it: a server that
/// always asks again would otherwise hold the client's call open for ever.
pub(super) const MAX_ROUNDS: usize = 8;

/// The `_meta` a stateless request for `peer` carries upstream.
pub(super) fn client_meta(peer: &ClientPeer) -> Value {
    let level = peer
        .log_level()
        .and_then(|rank| protocol::LOG_LEVELS.get(rank as usize))
        .copied();
    modern::client_meta(peer.capabilities(), peer.client_info(), level)
}

/// Sends `method` to the stateless `backend` for the client of `context`; see the module.
pub(super) async fn call(
    gateway: &Gateway,
    context: &RequestContext,
    backend: &Backend,
    method: &str,
    params: Value,
    timeout: Duration,
) -> Result<Box<RawValue>, RpcError> {
    let mut params = modern::stamp(Some(params), &client_meta(&context.peer));
    for round in 0..=MAX_ROUNDS {
        let raw = backend
            .request_raw(method, Some(params.clone()), timeout)
            .await
            .map_err(|e| e.to_rpc())?;
        // A 2026 client answers the round itself, and retries.
        if context.peer.is_stateless() {
            return Ok(raw);
        }
        let Some(asked) = input_required(&raw) else {
            return Ok(raw);
        };
        if round == MAX_ROUNDS {
            break;
        }
        let answers = ask_client(gateway, context, backend.name(), &asked, timeout).await?;
        params["inputResponses"] = Value::Object(answers);
        match asked.get("requestState") {
            Some(state) => params["requestState"] = state.clone(),
            None => {
                params.as_object_mut().map(|p| p.remove("requestState"));
            }
        }
    }
    Err(RpcError::new(
        protocol::INTERNAL_ERROR,
        format!(
            "server `{}` still asked for input after {MAX_ROUNDS} rounds; the call was given up",
            backend.name()
        ),
    ))
}

/// The result, when it is an `input_required` one (read only when its text says so).
fn input_required(raw: &RawValue) -> Option<Value> {
    if !raw.get().contains("input_required") {
        return None;
    }
    let result: Value = serde_json::from_str(raw.get()).ok()?;
    (result.get("resultType")? == "input_required").then_some(result)
}

/// The client capability a request of the server needs.
fn capability_of(method: &str) -> Option<&'static str> {
    match method {
        "elicitation/create" => Some("elicitation"),
        "sampling/createMessage" => Some("sampling"),
        "roots/list" => Some("roots"),
        _ => None,
    }
}

/// Asks the 2025 client each of a round's `inputRequests`, in turn, on its call's stream;
/// its answers, under the same keys.
async fn ask_client(
    gateway: &Gateway,
    context: &RequestContext,
    server: &str,
    asked: &Value,
    timeout: Duration,
) -> Result<Map<String, Value>, RpcError> {
    let mut answers = Map::new();
    let Some(requests) = asked.get("inputRequests").and_then(Value::as_object) else {
        return Ok(answers);
    };
    for (key, request) in requests {
        let method = request.get("method").and_then(Value::as_str).unwrap_or("");
        let Some(capability) = capability_of(method) else {
            return Err(RpcError::new(
                protocol::INTERNAL_ERROR,
                format!("server `{server}` asked for input with an unknown request `{method}`"),
            )
            .with_data(json!({"server": server})));
        };
        let params = request.get("params").cloned();
        let capability = match url_elicitation::is_url_mode(params.as_ref()) {
            true if method == methods::ELICITATION_CREATE => url_elicitation::CAPABILITY,
            _ => capability,
        };
        if !context.peer.client_has(capability) {
            return Err(context.peer.lacks_capability(server, capability));
        }
        let params = url_elicitation::with_elicitation_id(params, key);
        let answer = gateway
            .ask_through_chain(&context.peer, server, method, params, |params| {
                context.peer.request_client(
                    server,
                    json!(format!("input:{key}")),
                    method,
                    params,
                    timeout,
                    context.request.as_ref(),
                )
            })
            .await?;
        answers.insert(key.clone(), answer);
    }
    Ok(answers)
}
