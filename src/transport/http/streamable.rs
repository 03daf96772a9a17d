//! Streamable HTTP (MCP 2025-03-26 and later) at `/mcp` and `/mcp/{profile}`: `POST`
//! carries a message, `GET` opens the session's own stream, `DELETE` ends the session.
// A refusal is the response itself, built once on a path that ends the request: boxing
// it (what `result_large_err` asks) would add an allocation and change nothing.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures_util::FutureExt as _;

use super::respond::{self, SESSION_HEADER, VERSION_HEADER, rpc_error};
use super::sessions::HttpSession;
use super::streams::{Refused, RequestStreams, parse_event_id};
use super::{Caller, Front};
use crate::protocol::{self, Incoming, Message, methods};
use crate::session::{Handled, Running};
use crate::telemetry::traces;

/// The version a request without `MCP-Protocol-Version` is taken to speak (the spec says so).
const VERSION_WITHOUT_HEADER: &str = "2025-03-26";

pub async fn post(front: Arc<Front>, caller: Caller, headers: HeaderMap, body: Bytes) -> Response {
    if !respond::is_json(&headers) {
        return rpc_error(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            protocol::INVALID_REQUEST,
            "Unsupported Media Type: Content-Type must be application/json",
        );
    }
    if !(respond::accepts(&headers, "application/json")
        && respond::accepts(&headers, "text/event-stream"))
    {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            protocol::INVALID_REQUEST,
            "Not Acceptable: Accept must list both application/json and text/event-stream",
        );
    }
    let Ok(text) = std::str::from_utf8(&body) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            protocol::PARSE_ERROR,
            "Parse error: the body is not UTF-8",
        );
    };
    let incoming = match protocol::parse_line(text) {
        Ok(incoming) => incoming,
        Err(answer) => return bad_request(answer.to_string()),
    };
    if super::stateless::is_stateless(&headers, &incoming) {
        return super::stateless::post(front, caller, &headers, incoming).await;
    }
    // `initialize` without a session opens one, kept only if the client initialized.
    let existing = match respond::header(&headers, SESSION_HEADER) {
        None if opens_session(&incoming) => None,
        None => {
            return rpc_error(
                StatusCode::BAD_REQUEST,
                protocol::INVALID_REQUEST,
                "Bad Request: Mcp-Session-Id header is required (send initialize first)",
            );
        }
        Some(id) => Some(id),
    };
    let session = match existing {
        None => match front.sessions.create(&front.gateway, caller, false) {
            Ok(session) => session,
            Err(full) => return respond::too_many_sessions(&front, full),
        },
        Some(id) => {
            let session = match find(&front, &caller, id) {
                Ok(session) => session,
                Err(response) => return response,
            };
            if let Err(response) = check_version(&headers) {
                return response;
            }
            if let Some(refusal) = refuse_past_bound(&front, &session, &incoming) {
                return refusal;
            }
            session
        }
    };
    // A batch's members and an `initialize` are traced inside the header's trace too.
    let parent = trace_parent(&headers);
    let handled = {
        let _entered = parent.clone().map(opentelemetry::Context::attach);
        session.session.handle(incoming)
    };
    let opened = existing.is_none() && session.session.peer.is_initialized();
    if opened {
        front.sessions.insert(&session);
    }
    match handled {
        Handled::Nothing => respond::accepted(),
        Handled::Answer(line) => respond::json(line, opened.then(|| session.id())),
        Handled::Refused(line) => bad_request(line),
        Handled::Running(running) => {
            let running = running.within(parent);
            answer_request(&front, &session.streams, running, (), |_| StatusCode::OK).await
        }
        // A batch (versions before 2025-06-18): one JSON array once every request is answered.
        Handled::Batch(answer) => match answer.await {
            Some(line) => respond::json(line, None),
            None => respond::accepted(),
        },
    }
}

/// The trace a request's `traceparent` header continues, when requests are traced.
pub(super) fn trace_parent(headers: &HeaderMap) -> Option<opentelemetry::Context> {
    if !traces::enabled() {
        return None;
    }
    let value = headers.get("traceparent")?.to_str().ok()?;
    traces::remote_parent(value)
}

/// Whether the message is an `initialize`, which opens a session.
fn opens_session(incoming: &Incoming) -> bool {
    matches!(incoming, Incoming::Single(Ok(Message::Request { method, .. })) if method == methods::INITIALIZE)
}

fn bad_request(answer: String) -> Response {
    (
        StatusCode::BAD_REQUEST,
        [(header::CONTENT_TYPE, "application/json")],
        answer,
    )
        .into_response()
}

/// Counts a lone request, and refuses it with HTTP's own 429 past the session's bound
/// (the session refuses it too, as a JSON-RPC error, as it does a batch's members).
fn refuse_past_bound(
    front: &Front,
    session: &HttpSession,
    incoming: &Incoming,
) -> Option<Response> {
    let Incoming::Single(Ok(Message::Request { method, .. })) = incoming else {
        return None;
    };
    crate::telemetry::metrics::mcp_request(method);
    let limit = front.config.max_requests_per_session;
    if session.session.requests_in_flight() < limit {
        return None;
    }
    Some(rpc_error(
        StatusCode::TOO_MANY_REQUESTS,
        protocol::BACKEND_UNAVAILABLE,
        format!(
            "Too Many Requests: this session has {limit} requests in flight (max_requests_per_session)"
        ),
    ))
}

/// The session `id` of this profile (a session is bound to the path it was opened on).
fn find(front: &Front, caller: &Caller, id: &str) -> Result<Arc<HttpSession>, Response> {
    match front.sessions.get(id, caller, false) {
        Some(session) => Ok(session),
        _ => Err(rpc_error(
            StatusCode::NOT_FOUND,
            protocol::INVALID_REQUEST,
            "Not Found: no such session (it ended, expired, or never was); send initialize for a new one",
        )),
    }
}

/// `MCP-Protocol-Version`, when sent, must be one the gateway speaks.
fn check_version(headers: &HeaderMap) -> Result<(), Response> {
    let version = respond::header(headers, VERSION_HEADER).unwrap_or(VERSION_WITHOUT_HEADER);
    if protocol::SUPPORTED_VERSIONS.contains(&version) {
        return Ok(());
    }
    Err(rpc_error(
        StatusCode::BAD_REQUEST,
        protocol::INVALID_REQUEST,
        format!(
            "Bad Request: unsupported MCP-Protocol-Version \"{version}\"; supported: {}",
            protocol::SUPPORTED_VERSIONS.join(", ")
        ),
    ))
}

/// The answer as plain JSON when the request sent nothing before it, else an event
/// stream: what the request sent (progress, log lines, requests to the client), then
/// the answer. In a session, a client that drops the connection does not cancel the
/// request (the specification says so); its events wait for a resume. `guard` lives as
/// long as the response (a stateless request's cancels it when dropped); `status` is that
/// of a plain JSON answer (an event stream's is 200).
pub(super) async fn answer_request<G: Send + 'static, S: RequestStreams>(
    front: &Arc<Front>,
    streams: &Arc<S>,
    answer: Running,
    guard: G,
    status: fn(&str) -> StatusCode,
) -> Response {
    let key = answer.key.clone();
    let mut events = streams.open_request(&key);
    let mut answer = answer;
    // Most requests end here (a ready plugin, a list): no task to spawn.
    if let Some(line) = (&mut answer).now_or_never() {
        return finished(front, streams.as_ref(), &key, line, events, (guard, status));
    }
    let (done_tx, mut done) = tokio::sync::oneshot::channel();
    let (task_streams, task_key) = (streams.clone(), key.clone());
    tokio::spawn(async move {
        let line = answer.await;
        // The connection is gone: the answer waits on the request's stream for a resume.
        if let Err(line) = done_tx.send(line) {
            task_streams.finish_request(&task_key, line);
        }
    });
    tokio::select! {
        biased;
        line = &mut done => {
            finished(front, streams.as_ref(), &key, line.ok().flatten(), events, (guard, status))
        }
        first = events.recv() => {
            let Some(first) = first else {
                return StatusCode::ACCEPTED.into_response();
            };
            let streams = streams.clone();
            let key = key.clone();
            tokio::spawn(async move {
                let line = done.await.ok().flatten();
                streams.finish_request(&key, line);
            });
            respond::sse(vec![respond::event(first)], events, front.config.keep_alive, None, guard)
        }
    }
}

fn finished<G: Send + 'static, S: RequestStreams>(
    front: &Front,
    streams: &S,
    key: &Arc<str>,
    line: Option<String>,
    events: tokio::sync::mpsc::Receiver<super::streams::Event>,
    (guard, status): (G, fn(&str) -> StatusCode),
) -> Response {
    if streams.close_request_if_empty(key) {
        return match line {
            Some(line) => {
                let code = status(&line);
                let mut response = respond::json(line, None);
                *response.status_mut() = code;
                response
            }
            // Cancelled by the client: it gets no answer.
            None => StatusCode::ACCEPTED.into_response(),
        };
    }
    streams.finish_request(key, line);
    respond::sse(Vec::new(), events, front.config.keep_alive, None, guard)
}

/// `GET`: the session's own stream, or a stream resumed after `Last-Event-ID`. Without a
/// session id it opens a legacy HTTP+SSE session (clients of the gateway reference do that).
pub async fn get(front: Arc<Front>, caller: Caller, headers: HeaderMap) -> Response {
    if super::stateless::names_stateless(&headers) {
        return super::stateless::method_not_allowed();
    }
    if !respond::accepts(&headers, "text/event-stream") {
        return rpc_error(
            StatusCode::NOT_ACCEPTABLE,
            protocol::INVALID_REQUEST,
            "Not Acceptable: Accept must list text/event-stream",
        );
    }
    let Some(id) = respond::header(&headers, SESSION_HEADER) else {
        return super::legacy::open(front, caller, "/messages").await;
    };
    let session = match find(&front, &caller, id) {
        Ok(session) => session,
        Err(response) => return response,
    };
    if let Err(response) = check_version(&headers) {
        return response;
    }
    let resume = respond::header(&headers, "last-event-id").and_then(parse_event_id);
    let events = match attach_when_free(&session, resume).await {
        Ok(events) => events,
        Err(Refused::Unknown) => match session.streams.attach(None) {
            Ok(events) => events,
            Err(_) => return conflict(),
        },
        Err(Refused::Busy) => return conflict(),
    };
    respond::sse(Vec::new(), events, front.config.keep_alive, None, ())
}

/// How long a resume waits for the connection that read the stream to be seen gone: a
/// client that lost its connection resumes at once, before the front noticed.
const RESUME_WAIT: std::time::Duration = std::time::Duration::from_secs(2);

/// [`super::streams::Streams::attach`], waiting up to [`RESUME_WAIT`] while another
/// connection still reads the stream to resume (it never takes a stream from a reader).
async fn attach_when_free(
    session: &HttpSession,
    resume: Option<(u64, u64)>,
) -> Result<tokio::sync::mpsc::Receiver<super::streams::Event>, Refused> {
    let deadline = tokio::time::Instant::now() + RESUME_WAIT;
    loop {
        match session.streams.attach(resume) {
            Err(Refused::Busy) if resume.is_some() && tokio::time::Instant::now() < deadline => {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
            other => return other,
        }
    }
}

fn conflict() -> Response {
    rpc_error(
        StatusCode::CONFLICT,
        protocol::INVALID_REQUEST,
        "Conflict: this session's stream is open on another connection",
    )
}

/// `DELETE`: ends the session and cancels its requests in flight.
pub async fn delete(front: Arc<Front>, caller: Caller, headers: HeaderMap) -> Response {
    if super::stateless::names_stateless(&headers) {
        return super::stateless::method_not_allowed();
    }
    let Some(id) = respond::header(&headers, SESSION_HEADER) else {
        return rpc_error(
            StatusCode::BAD_REQUEST,
            protocol::INVALID_REQUEST,
            "Bad Request: Mcp-Session-Id header is required",
        );
    };
    if let Err(response) = find(&front, &caller, id) {
        return response;
    }
    front.sessions.remove(id, "deleted by the client");
    StatusCode::OK.into_response()
}
