//! The HTTP front's responses: JSON-RPC errors with the status the transport rules ask
//! for, single JSON answers, and event streams. Both transports use them.

use std::time::Duration;

use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures_util::StreamExt as _;
use futures_util::stream::{self, Stream};
use serde_json::Value;
use tokio::sync::mpsc;

use super::Front;
use super::sessions::Full;
use super::streams::Event;
use crate::protocol::{self, RpcError};

pub const SESSION_HEADER: &str = "mcp-session-id";
pub const VERSION_HEADER: &str = "mcp-protocol-version";

/// A JSON-RPC error (id null) as the body of an HTTP error status.
pub fn rpc_error(status: StatusCode, code: i64, message: impl Into<String>) -> Response {
    let body = protocol::error_response(Value::Null, &RpcError::new(code, message)).to_string();
    (status, [(header::CONTENT_TYPE, "application/json")], body).into_response()
}

/// 503 when no session can be opened: which bound is reached, and when to retry.
pub fn too_many_sessions(front: &Front, full: Full) -> Response {
    let message = match full {
        Full::Gateway => format!(
            "Service Unavailable: {} sessions are open, the most this gateway serves (max_sessions); retry later",
            front.sessions.len()
        ),
        Full::Token(token) => format!(
            "Service Unavailable: token `{token}` has {} sessions open, the most one token may \
             (max_sessions_per_token); end one (DELETE) or retry later",
            front.config.max_sessions_per_token
        ),
    };
    let mut response = rpc_error(
        StatusCode::SERVICE_UNAVAILABLE,
        protocol::BACKEND_UNAVAILABLE,
        message,
    );
    response
        .headers_mut()
        .insert(header::RETRY_AFTER, HeaderValue::from_static("5"));
    response
}

/// A plain-text refusal (for what is not JSON-RPC: health, legacy endpoints).
pub fn text(status: StatusCode, body: impl Into<String>) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/plain; charset=utf-8")],
        body.into(),
    )
        .into_response()
}

/// One JSON answer.
pub fn json(line: String, session: Option<&str>) -> Response {
    let mut response = (
        StatusCode::OK,
        [(header::CONTENT_TYPE, "application/json")],
        line,
    )
        .into_response();
    add_session(response.headers_mut(), session);
    response
}

pub fn accepted() -> Response {
    StatusCode::ACCEPTED.into_response()
}

fn add_session(headers: &mut HeaderMap, session: Option<&str>) {
    if let Some(id) = session.and_then(|id| HeaderValue::from_str(id).ok()) {
        headers.insert(SESSION_HEADER, id);
    }
}

/// An event stream of what `events` yields, after `first` (already taken from it); ends
/// when `events` does. `keep_alive`: between comments on an idle stream. `guard` lives as
/// long as the stream (a legacy session ends with its stream).
pub fn sse<G: Send + 'static>(
    first: Vec<SseEvent>,
    events: mpsc::Receiver<Event>,
    keep_alive: Duration,
    session: Option<&str>,
    guard: G,
) -> Response {
    let body = stream::iter(first.into_iter().map(Ok)).chain(live(events, guard));
    let mut response = Sse::new(body)
        .keep_alive(KeepAlive::new().interval(keep_alive))
        .into_response();
    add_session(response.headers_mut(), session);
    // Proxies (nginx) buffer responses unless told not to, which would hold events back.
    response
        .headers_mut()
        .insert("x-accel-buffering", HeaderValue::from_static("no"));
    response
}

pub fn event((id, line): Event) -> SseEvent {
    SseEvent::default().id(id).data(&*line)
}

fn live<G: Send + 'static>(
    events: mpsc::Receiver<Event>,
    guard: G,
) -> impl Stream<Item = Result<SseEvent, std::convert::Infallible>> + Send {
    stream::unfold((events, guard), |(mut events, guard)| async move {
        let next = events.recv().await?;
        Some((Ok(event(next)), (events, guard)))
    })
}

/// Whether an `Accept` header lists `wanted` (or a wildcard that covers it).
pub fn accepts(headers: &HeaderMap, wanted: &str) -> bool {
    let family = wanted.split('/').next().unwrap_or_default();
    headers
        .get_all(header::ACCEPT)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .map(|item| item.split(';').next().unwrap_or_default().trim())
        .any(|item| {
            item.eq_ignore_ascii_case(wanted)
                || item == "*/*"
                || item
                    .strip_suffix("/*")
                    .is_some_and(|f| f.eq_ignore_ascii_case(family))
        })
}

/// Whether the body is declared JSON.
pub fn is_json(headers: &HeaderMap) -> bool {
    headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

pub fn header<'h>(headers: &'h HeaderMap, name: &str) -> Option<&'h str> {
    headers.get(name).and_then(|v| v.to_str().ok())
}
