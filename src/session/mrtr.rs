//! A stateless request whose call a session-era server may ask the client something during
//! (`tools/call`, `prompts/get`, `resources/read`): the call is a future of its own, and
//! the server's requests end the client's request with an `input_required` result instead
//! of reaching it; the client's retry, carrying the gateway's `requestState` handle and its
//! `inputResponses`, answers them and carries the same call on (the 2026-07-28 era's
//! multi-round requests, translated for servers of the session era).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Map, Value};

use super::{Session, stateless};
use crate::protocol::{self, Reply, RpcError, methods};
use crate::relay::exchange::{Binding, Exchange};
use crate::relay::handle::{PREFIX, StateError};
use crate::relay::url_elicitation;
use crate::router::{RequestContext, Router};

/// A server that asks several things at once sends them one after the other: they go in
/// one result when each follows the last within this.
const GATHER_QUIET: Duration = Duration::from_millis(15);
/// ... but no request waits longer than this for the rest.
const GATHER_MAX: Duration = Duration::from_millis(200);

/// `method`, if its result may be `input_required` (the specification allows it on
/// these only), as the constant it equals: the call and its binding name it without a copy.
pub(super) fn may_need_input(method: &str) -> Option<&'static str> {
    [
        methods::TOOLS_CALL,
        methods::PROMPTS_GET,
        methods::RESOURCES_READ,
    ]
    .into_iter()
    .find(|m| *m == method)
}

impl Session {
    /// Runs (or, for a retry, carries on) the call of stateless request `key` until it
    /// completes or waits for the client.
    pub(super) async fn exchange(
        self: &Arc<Self>,
        key: &Arc<str>,
        method: &'static str,
        params: Option<Value>,
        uri: Option<String>,
    ) -> Result<Reply, RpcError> {
        let responses = input_responses(params.as_ref())?;
        let binding = Binding::of(method, params.as_ref());
        let principal = self.peer.principal().clone();
        let parked = &self.gateway.relay.parked;
        let (mut exchange, call, round) = match request_state(params.as_ref())? {
            Some(state) if state.starts_with(PREFIX) => {
                let resumed = (parked.resume(state, &principal, &binding))
                    .map_err(|e| RpcError::invalid_params(format!("Invalid params: {e}")))?;
                let peer = &resumed.exchange.peer;
                peer.carry_on_from(&self.peer);
                if let (Some(call), Some(retry)) = (peer.handoff(), self.peer.handoff()) {
                    call.follow(retry, key.clone(), progress_token(params.as_ref()));
                }
                (resumed.exchange, resumed.call, resumed.round)
            }
            _ => (
                self.start(key, method, params, binding),
                parked.new_call(),
                0,
            ),
        };
        exchange.answer_from(&responses);
        loop {
            if exchange.waits() {
                if let Some(done) = gather(&mut exchange, &responses).await {
                    return self.done(&exchange, method, uri, done);
                }
                let requests = exchange.input_required("");
                let ttl = self.gateway.config.load().gateway.timeout;
                match parked.park(call, round, exchange, &principal, ttl) {
                    Ok(state) => return Ok(self.input_required(requests, state)),
                    Err(back) => {
                        exchange = *back;
                        let full = StateError::Full.to_string();
                        let error = RpcError::new(protocol::BACKEND_UNAVAILABLE, full);
                        exchange.refuse_pending(&error);
                    }
                }
            }
            tokio::select! {
                done = &mut exchange.call => return self.done(&exchange, method, uri, done),
                Some(ask) = exchange.asks.recv() => exchange.take(ask, &responses),
            }
        }
    }

    /// The call of a first request, its server's requests to the client going to the
    /// exchange.
    fn start(
        self: &Arc<Self>,
        key: &Arc<str>,
        method: &'static str,
        params: Option<Value>,
        binding: Binding,
    ) -> Exchange {
        let (asks, asked) = crate::peer::asks();
        self.peer.accept_asks(asks);
        let context = RequestContext::new(&self.gateway, self.peer.clone(), Some(key.clone()));
        let gateway = self.gateway.clone();
        let call = Box::pin(async move {
            Router::new(&gateway)
                .dispatch(&context, method, params)
                .await
        });
        Exchange::new(self.peer.clone(), call, asked, binding)
    }

    /// The answer of a call that ended: -32021 if it needed a capability the carrying
    /// request did not declare; a session-era server's -32042 as the `input_required`
    /// round of its URLs; else its result as the stateless era shapes it.
    fn done(
        &self,
        exchange: &Exchange,
        method: &str,
        uri: Option<String>,
        answer: Result<Reply, RpcError>,
    ) -> Result<Reply, RpcError> {
        if let Some(missing) = exchange.peer.take_missing_capability() {
            return Err(missing);
        }
        if let Err(error) = &answer
            && let Some(mut round) = url_elicitation::as_input_required(error)
        {
            if !exchange.peer.client_has(url_elicitation::CAPABILITY) {
                return Err(url_elicitation::missing_capability());
            }
            // No state to carry: the retry is the call again, which the server now lets by.
            if let Some(result) = round.as_object_mut() {
                stateless::stamp_server_info(&self.gateway, result);
            }
            return Ok(Reply::from(round));
        }
        stateless::finish(&self.gateway, self.peer.principal(), method, uri, answer)
    }

    /// The `input_required` result: `requests` with the handle `state` in place.
    fn input_required(&self, mut requests: Value, state: String) -> Reply {
        if let Some(result) = requests.as_object_mut() {
            result.insert("requestState".into(), Value::String(state));
            stateless::stamp_server_info(&self.gateway, result);
        }
        Reply::from(requests)
    }
}

/// Waits briefly for more requests of the server's to put in the same result. `Some`: the
/// call ended meanwhile.
async fn gather(
    exchange: &mut Exchange,
    responses: &Map<String, Value>,
) -> Option<Result<Reply, RpcError>> {
    let deadline = tokio::time::Instant::now() + GATHER_MAX;
    loop {
        let quiet = tokio::time::Instant::now() + GATHER_QUIET;
        tokio::select! {
            done = &mut exchange.call => return Some(done),
            Some(ask) = exchange.asks.recv() => exchange.take(ask, responses),
            _ = tokio::time::sleep_until(quiet.min(deadline)) => return None,
        }
    }
}

/// The request's `inputResponses` (none: empty); -32602 when it is not an object.
fn input_responses(params: Option<&Value>) -> Result<Map<String, Value>, RpcError> {
    match params.and_then(|p| p.get("inputResponses")) {
        None => Ok(Map::new()),
        Some(Value::Object(responses)) => Ok(responses.clone()),
        Some(_) => Err(RpcError::invalid_params(
            "Invalid params: inputResponses must be an object of answers by key",
        )),
    }
}

/// The request's `requestState`; -32602 when it is not a string.
fn request_state(params: Option<&Value>) -> Result<Option<&str>, RpcError> {
    match params.and_then(|p| p.get("requestState")) {
        None => Ok(None),
        Some(Value::String(state)) => Ok(Some(state)),
        Some(_) => Err(RpcError::invalid_params(
            "Invalid params: requestState must be the string a result gave",
        )),
    }
}

fn progress_token(params: Option<&Value>) -> Option<Value> {
    params?.get("_meta")?.get("progressToken").cloned()
}
