//! A 2026-07-28 retry that reached a replica other than the one holding its call: the load
//! balancer spreads stateless requests without looking at their bodies, so the replica that
//! took the retry sends it on to the one its `requestState` names (`[http.replicas] peers`),
//! and hands its response back as it comes.

use std::time::Duration;

use axum::body::Body;
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use http_body_util::Full;
use hyper::body::Bytes;
use serde_json::{Value, json};

use super::Front;
use crate::backend::remote::client::{Hold, HttpClient};
use crate::peer::Principal;
use crate::protocol;
use crate::relay::handle::PREFIX;

/// Marks a request one replica sent another: it is never sent on again.
pub const FORWARDED_HEADER: &str = "wasmgate-forwarded";

/// The headers of a retry that go with it to the replica holding its call.
const PASSED: [&str; 8] = [
    "authorization",
    "accept",
    "content-type",
    "mcp-protocol-version",
    "mcp-method",
    "mcp-name",
    // The holder's span continues the client's trace.
    "traceparent",
    "tracestate",
];

/// How long reaching another replica may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// The response of the replica holding the call `params.requestState` names, when that is
/// another replica this one knows; `None` for any other request (which this replica
/// answers, refusing a handle it cannot carry on).
pub async fn to_holder(
    front: &Front,
    headers: &HeaderMap,
    request: (&Value, &str, Option<&Value>),
    principal: &Principal,
) -> Option<Response> {
    let (id, method, params) = request;
    let state = params?.get("requestState")?.as_str()?;
    if !state.starts_with(PREFIX) || headers.contains_key(FORWARDED_HEADER) {
        return None;
    }
    let holder = front
        .gateway
        .relay
        .parked
        .held_elsewhere(state, principal)?;
    let config = front.gateway.config.load();
    let replicas = config.http.replicas.as_ref()?;
    let base = replicas.peers.get(&holder)?;
    // The same endpoint: the profile's path, or the whole gateway's.
    let path = principal
        .profile
        .as_ref()
        .map_or_else(|| "/mcp".to_string(), |p| format!("/mcp/{p}"));
    let body = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
    let mut forwarded = http::Request::post(path)
        .body(Full::new(Bytes::from(body.to_string())))
        .ok()?;
    for (name, value) in headers {
        let name_text = name.as_str();
        if PASSED.contains(&name_text) || name_text.starts_with("mcp-param-") {
            forwarded.headers_mut().append(name.clone(), value.clone());
        }
    }
    if let Ok(me) = HeaderValue::from_str(&replicas.name) {
        forwarded.headers_mut().insert(FORWARDED_HEADER, me);
    }
    let sent = match HttpClient::new(base, None, 1) {
        Ok(client) => client.send(forwarded, CONNECT_TIMEOUT, Hold::Request).await,
        Err(why) => Err(why),
    };
    Some(match sent {
        Ok((response, _lease)) => {
            let (parts, body) = response.into_parts();
            Response::from_parts(parts, Body::new(body))
        }
        Err(why) => {
            tracing::warn!(replica = %holder, "a retry could not reach the replica holding its call: {why}");
            let error = protocol::RpcError::new(
                protocol::BACKEND_UNAVAILABLE,
                format!("the replica holding this call ({holder}) cannot be reached: {why}"),
            );
            let body = protocol::error_response(id.clone(), &error).to_string();
            let json = [(header::CONTENT_TYPE, "application/json")];
            (StatusCode::BAD_GATEWAY, json, body).into_response()
        }
    })
}
