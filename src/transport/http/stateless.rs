//! Streamable HTTP for the stateless era (MCP 2026-07-28) on the same `/mcp` endpoint:
//! which POSTs are of it, the checks of their headers against the body (`Mcp-Param-*` in
//! param_headers.rs), and one transient session per request whose answer (and its own
//! progress and log lines) is the response.

use std::sync::Arc;

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;

use super::forward;
use super::param_headers;
use super::respond::{self, VERSION_HEADER};
use super::streamable::answer_request;
use super::streams::Streams;
use super::{Caller, Front};
use crate::peer::Principal;
use crate::protocol::modern;
use crate::protocol::{self, Incoming, Message, RpcError, methods};
use crate::session::{Handled, Session, stateless};

const METHOD_HEADER: &str = "mcp-method";
const NAME_HEADER: &str = "mcp-name";

/// Whether a POST is of the stateless era: a 2026-07-28 `MCP-Protocol-Version`, or a body
/// whose `_meta` claims a version. Anything else takes the session path as before.
pub fn is_stateless(headers: &HeaderMap, incoming: &Incoming) -> bool {
    if respond::header(headers, VERSION_HEADER).is_some_and(modern::is_modern) {
        return true;
    }
    match incoming {
        Incoming::Single(Ok(
            Message::Request { params, .. } | Message::Notification { params, .. },
        )) => modern::body_claim(params.as_ref()).is_some(),
        _ => false,
    }
}

/// Whether `headers` name the stateless era (GET and DELETE have no meaning in it).
pub fn names_stateless(headers: &HeaderMap) -> bool {
    respond::header(headers, VERSION_HEADER).is_some_and(modern::is_modern)
}

/// 405 for GET and DELETE of the stateless era: it has no session and no stream of its own.
pub fn method_not_allowed() -> Response {
    let mut response = respond::rpc_error(
        StatusCode::METHOD_NOT_ALLOWED,
        protocol::INVALID_REQUEST,
        format!(
            "Method Not Allowed: protocol version {} has only POST",
            modern::MODERN_VERSION
        ),
    );
    response
        .headers_mut()
        .insert(header::ALLOW, axum::http::HeaderValue::from_static("POST"));
    response
}

/// A POST of the stateless era: checked in the specification's order (version, `_meta`,
/// the headers that mirror the body, the method), then run without a session.
pub async fn post(
    front: Arc<Front>,
    caller: Caller,
    headers: &HeaderMap,
    incoming: Incoming,
) -> Response {
    let message = match incoming {
        Incoming::Single(Ok(message)) => message,
        Incoming::Single(Err((id, error))) => return refuse(StatusCode::BAD_REQUEST, id, &error),
        Incoming::Batch(_) => {
            let error = RpcError::new(
                protocol::INVALID_REQUEST,
                "Invalid Request: protocol version 2026-07-28 has no batches",
            );
            return refuse(StatusCode::BAD_REQUEST, Value::Null, &error);
        }
    };
    // Closing the response stream is how a client cancels here; it answers no requests.
    let Message::Request { id, method, params } = message else {
        return respond::accepted();
    };
    let version = respond::header(headers, VERSION_HEADER);
    let meta = match stateless::check_meta(params.as_ref(), version) {
        Ok(meta) => meta,
        Err(error) => return refuse(StatusCode::BAD_REQUEST, id, &error),
    };
    if let Err(error) = check_mirrors(headers, &method, params.as_ref()) {
        return refuse(StatusCode::BAD_REQUEST, id, &error);
    }
    if method == methods::TOOLS_CALL {
        let profile = caller.profile.as_deref();
        let checked = param_headers::check(&front.gateway, profile, headers, params.as_ref());
        if let Err(error) = checked.await {
            return refuse(StatusCode::BAD_REQUEST, id, &error);
        }
    }
    if let Err(error) = stateless::check_method(&method) {
        return refuse(StatusCode::NOT_FOUND, id, &error);
    }
    crate::telemetry::metrics::mcp_request(&method);
    let principal = Principal {
        token: caller.token.map(Arc::from),
        profile: caller.profile.map(Arc::from),
        operator: caller.operator,
    };
    let request = (&id, method.as_str(), params.as_ref());
    if let Some(response) = forward::to_holder(&front, headers, request, &principal).await {
        return response;
    }
    let streams = Streams::new(false);
    let session = Session::stateless(
        front.gateway.clone(),
        streams.clone(),
        principal,
        meta,
        Some(front.sessions.requests()),
    );
    let closer = CloseOnDrop(session.clone());
    match session.handle(Message::Request { id, method, params }) {
        Handled::Running(running) => {
            answer_request(&front, &streams, running, closer, answer_status).await
        }
        Handled::Answer(line) => respond::json(line, None),
        Handled::Refused(line) => (
            StatusCode::BAD_REQUEST,
            [(header::CONTENT_TYPE, "application/json")],
            line,
        )
            .into_response(),
        Handled::Nothing | Handled::Batch(_) => respond::accepted(),
    }
}

/// HTTP 400 for an answer that is error -32021 (a capability the request did not
/// declare), as for the other refusals; 200 for the rest.
fn answer_status(line: &str) -> StatusCode {
    #[derive(serde::Deserialize)]
    struct Code {
        code: i64,
    }
    #[derive(serde::Deserialize)]
    struct Answer {
        error: Option<Code>,
    }
    // Most answers are results: spare them a parse.
    if !line.contains("-32021") {
        return StatusCode::OK;
    }
    match serde_json::from_str::<Answer>(line) {
        Ok(Answer { error: Some(e) }) if e.code == modern::MISSING_CLIENT_CAPABILITY => {
            StatusCode::BAD_REQUEST
        }
        _ => StatusCode::OK,
    }
}

/// Ends the transient session when its response is done or dropped: a client that closes
/// the response stream cancels the request (the stateless era's cancellation).
struct CloseOnDrop(Arc<Session>);

impl Drop for CloseOnDrop {
    fn drop(&mut self) {
        self.0.close();
    }
}

/// `Mcp-Method` must equal the body's method, and `Mcp-Name` its `name` or `uri` for the
/// methods that have one (values that are not plain ASCII come base64-encoded).
fn check_mirrors(
    headers: &HeaderMap,
    method: &str,
    params: Option<&Value>,
) -> Result<(), RpcError> {
    match respond::header(headers, METHOD_HEADER) {
        None => {
            return Err(modern::header_mismatch(
                "Header mismatch: the Mcp-Method header is required",
            ));
        }
        Some(sent) if sent != method => {
            return Err(modern::header_mismatch(format!(
                "Header mismatch: Mcp-Method is \"{sent}\" but the body's method is \"{method}\""
            )));
        }
        Some(_) => {}
    }
    let Some(field) = modern::name_field(method) else {
        return Ok(());
    };
    let body = params.and_then(|p| p.get(field)).and_then(Value::as_str);
    let Some(sent) = respond::header(headers, NAME_HEADER) else {
        return Err(modern::header_mismatch(format!(
            "Header mismatch: the Mcp-Name header is required for {method}"
        )));
    };
    let decoded = modern::decode_header(sent).ok_or_else(|| {
        modern::header_mismatch("Header mismatch: Mcp-Name's base64 value does not decode")
    })?;
    if Some(decoded.as_str()) != body {
        return Err(modern::header_mismatch(format!(
            "Header mismatch: Mcp-Name is \"{decoded}\" but the body's {field} is {}",
            body.map_or_else(|| "missing".to_string(), |b| format!("\"{b}\""))
        )));
    }
    Ok(())
}

/// A JSON-RPC error that echoes the request's id, with an HTTP status.
fn refuse(status: StatusCode, id: Value, error: &RpcError) -> Response {
    let body = protocol::error_response(id, error).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}
