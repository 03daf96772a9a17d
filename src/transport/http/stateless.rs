//! Streamable HTTP for the stateless era (MCP 2026-07-28) on the same `/mcp` endpoint:
//! which POSTs are of it, the checks of their headers against the body (`Mcp-Param-*` in
//! param_headers.rs), and one transient session per request whose answer (and its own
//! progress and log lines) is the response.

use std::sync::{Arc, Mutex};

use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use serde_json::Value;
use tokio::sync::mpsc;

use super::forward;
use super::param_headers;
use super::respond::{self, VERSION_HEADER};
use super::streamable::answer_request;
use super::streams::{Event, LIVE_QUEUE, RequestStreams, event_id};
use super::{Caller, Front};
use crate::peer::{ClientSink, Principal};
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
    let stream = Arc::new(OneStream::default());
    let session = Session::stateless(
        front.gateway.clone(),
        stream.clone(),
        principal,
        meta,
        Some(front.sessions.requests()),
    );
    let closer = CloseOnDrop(session.clone());
    match session.handle(Message::Request { id, method, params }) {
        Handled::Running(running) => {
            let running = running.within(super::streamable::trace_parent(headers));
            answer_request(&front, &stream, running, closer, answer_status).await
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

/// A stateless request's one stream: its own lines (progress, log lines), then its
/// answer, on the connection that sent it. A session's `Streams` keep other streams and
/// events for a resume; this era has neither, so a request needs no more than this.
#[derive(Default)]
struct OneStream(Mutex<Lines>);

#[derive(Default)]
struct Lines {
    /// The request's key, once its stream is open: the lines of other requests (none
    /// come) and of none would go to a session's own stream, which no one reads here.
    key: Option<Arc<str>>,
    /// Events pushed, sent or not (numbered as a session's first request stream's are).
    pushed: u64,
    /// The connection, until the answer is in or it stops reading.
    live: Option<mpsc::Sender<Event>>,
}

/// The stream's id in its events' ids: a session's first request stream's.
const STREAM_ID: u64 = 1;

impl Lines {
    fn push(&mut self, line: String) {
        self.pushed += 1;
        if let Some(live) = &self.live
            && live
                .try_send((event_id(STREAM_ID, self.pushed), line.into()))
                .is_err()
        {
            // A connection that does not read (or left) is ended; nothing waits for a resume.
            self.live = None;
        }
    }
}

impl RequestStreams for OneStream {
    fn open_request(&self, key: &Arc<str>) -> mpsc::Receiver<Event> {
        let (live, events) = mpsc::channel(LIVE_QUEUE);
        let mut lines = self.0.lock().unwrap();
        lines.key = Some(key.clone());
        lines.live = Some(live);
        events
    }

    fn finish_request(&self, _key: &Arc<str>, answer: Option<String>) {
        let mut lines = self.0.lock().unwrap();
        if let Some(answer) = answer {
            lines.push(answer);
        }
        lines.live = None;
    }

    fn close_request_if_empty(&self, _key: &Arc<str>) -> bool {
        let mut lines = self.0.lock().unwrap();
        if lines.pushed > 0 {
            return false;
        }
        lines.live = None;
        true
    }
}

impl ClientSink for Arc<OneStream> {
    fn deliver(&self, line: String, related: Option<&Arc<str>>, _droppable: bool) {
        let mut lines = self.0.lock().unwrap();
        if related.is_some() && related == lines.key.as_ref() {
            lines.push(line);
        }
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

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{ClientSink, OneStream, RequestStreams};

    /// The request's lines, then its answer, in order on its connection; lines of no
    /// request go nowhere; the stream ends with the answer.
    #[tokio::test]
    async fn one_stream_carries_the_requests_lines_then_its_answer() {
        let stream = Arc::new(OneStream::default());
        let key: Arc<str> = Arc::from("7");
        let mut events = stream.open_request(&key);
        stream.deliver("progress".into(), Some(&key), true);
        stream.deliver("unrelated".into(), None, true);
        stream.deliver("other".into(), Some(&Arc::from("8")), true);
        assert!(!stream.close_request_if_empty(&key), "it holds a line");
        stream.finish_request(&key, Some("answer".into()));
        let (id, line) = events.recv().await.unwrap();
        assert_eq!((id.as_str(), &*line), ("1-1", "progress"));
        let (id, line) = events.recv().await.unwrap();
        assert_eq!((id.as_str(), &*line), ("1-2", "answer"));
        assert!(events.recv().await.is_none());
    }

    /// Nothing sent before the answer: the answer goes out as plain JSON.
    #[test]
    fn a_quiet_request_is_answered_as_json() {
        let stream = OneStream::default();
        let key: Arc<str> = Arc::from("1");
        let _events = stream.open_request(&key);
        assert!(stream.close_request_if_empty(&key));
    }
}
