//! The legacy HTTP+SSE transport (MCP 2024-11-05): `GET /sse` opens a session's stream
//! and names, in its `endpoint` event, where to `POST` messages; answers travel on the
//! stream. The session ends when the client closes the stream.

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode};
use axum::response::Response;
use axum::response::sse::Event as SseEvent;

use super::respond;
use super::sessions::Sessions;
use super::{Caller, Front};
use crate::transport::stdio::handle_line;

/// Ends a legacy session when its stream is dropped (the client went away).
struct EndsSession {
    sessions: Arc<Sessions>,
    id: String,
}

impl Drop for EndsSession {
    fn drop(&mut self) {
        self.sessions
            .remove(&self.id, "the client closed its stream");
    }
}

/// `GET /sse`: a new session whose messages are `POST`ed to `endpoint?sessionId=...`.
pub async fn open(front: Arc<Front>, caller: Caller, endpoint: &str) -> Response {
    let session = match front.sessions.create(&front.gateway, caller, true) {
        Ok(session) => session,
        Err(full) => return respond::too_many_sessions(&front, full),
    };
    front.sessions.insert(&session);
    let id = session.id().to_string();
    let Ok(events) = session.streams.attach(None) else {
        return respond::text(
            StatusCode::INTERNAL_SERVER_ERROR,
            "the new session's stream is taken",
        );
    };
    let first = SseEvent::default()
        .event("endpoint")
        .data(format!("{endpoint}?sessionId={id}"));
    let guard = EndsSession {
        sessions: front.sessions.clone(),
        id,
    };
    respond::sse(vec![first], events, front.config.keep_alive, None, guard)
}

/// `POST /messages?sessionId=...`: the message is taken (202); its answer goes on the stream.
pub async fn post(
    front: Arc<Front>,
    caller: Caller,
    session_id: Option<String>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let Some(id) = session_id else {
        return respond::text(
            StatusCode::BAD_REQUEST,
            "sessionId is required in the query",
        );
    };
    let session = match front.sessions.get(&id, &caller, true) {
        Some(session) => session,
        _ => {
            return respond::text(
                StatusCode::NOT_FOUND,
                "no such session (it ended, or never was)",
            );
        }
    };
    if !respond::is_json(&headers) {
        return respond::text(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "Content-Type must be application/json",
        );
    }
    let Ok(text) = std::str::from_utf8(&body) else {
        return respond::text(StatusCode::BAD_REQUEST, "the body is not UTF-8");
    };
    handle_line(&session.session, text);
    respond::text(StatusCode::ACCEPTED, "Accepted")
}
