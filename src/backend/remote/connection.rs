//! One MCP session with a remote server over Streamable HTTP: each request a `POST`
//! answered with JSON or an event stream, the session id and protocol version sent back,
//! the server's own messages passed to the gateway, and the `GET` stream.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;

use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, watch};

use super::CONNECT_TIMEOUT;
use super::client::{Body, Hold, HttpClient, Lease};
use super::param_mirrors::ParamMirrors;
use super::sse::{self, SseError, SseReader};
use crate::backend::listen::Listen;
use crate::backend::mcp_client::{self, Answer, CancelOnDrop, Upstream};
use crate::backend::modern;
use crate::backend::supervisor::MAX_BACKOFF;
use crate::backend::{BackendError, BackendEvent, Responder};
use crate::oauth_client::OAuthClient;
use crate::oauth_client::challenge::Challenge;
use crate::protocol::{self, methods};
use crate::telemetry::traces;

mod legacy;
mod notes;

/// Longest error page text quoted in an error.
const SHOWN: usize = 200;

/// Why a session ended when the server forgot it.
pub(super) const SESSION_ENDED: &str = "the server ended the session (404); starting a new one";

/// Why a session ended, for the supervisor and for requests in flight.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Closed {
    /// Unreachable, or the session expired: the supervisor connects again.
    Broken(String),
    /// The gateway is stopping it.
    Stopped,
}

pub(super) struct Connection {
    pub(super) server: String,
    me: Weak<Connection>,
    client: Arc<HttpClient>,
    uri: http::Uri,
    headers: http::HeaderMap,
    /// Set once the legacy transport's stream named its endpoint.
    legacy: Mutex<Option<legacy::Legacy>>,
    token_file: Option<TokenFile>,
    /// The server asks for OAuth: its tokens, kept across sessions by the backend.
    oauth: Option<Arc<OAuthClient>>,
    session: Mutex<Option<String>>,
    /// The protocol version the server chose, as the header that carries it.
    version: Mutex<Option<http::HeaderValue>>,
    /// Spoken to in the stateless era: no session, and each POST names its method (and
    /// tool, prompt or resource) in headers.
    modern: AtomicBool,
    /// The `Mcp-Param-*` headers its tools ask for (stateless era).
    mirrors: ParamMirrors,
    next_id: AtomicU64,
    in_flight: tokio::sync::Semaphore,
    /// Bytes of the largest message read: a JSON answer, or one event.
    max_message: usize,
    to_gateway: mpsc::UnboundedSender<BackendEvent>,
    /// What the server sends on its listen stream is screened by it first.
    listen: Arc<Listen>,
    closed: watch::Sender<Option<Closed>>,
    notes: notes::Notes,
}

impl Connection {
    pub(super) fn new(
        server: &str,
        endpoint: &crate::config::HttpEndpoint,
        to_gateway: mpsc::UnboundedSender<BackendEvent>,
        listen: Arc<Listen>,
        oauth: Option<Arc<OAuthClient>>,
    ) -> Result<Arc<Self>, String> {
        let uri: http::Uri = endpoint.url.parse().map_err(|e| format!("{e}"))?;
        let client = HttpClient::new(&uri, endpoint.ca_file.as_deref(), endpoint.max_connections)?;
        let mut headers = http::HeaderMap::new();
        for (name, value) in &endpoint.headers {
            let name = http::HeaderName::from_bytes(name.as_bytes()).map_err(|e| e.to_string())?;
            let mut value = http::HeaderValue::from_str(value)
                .map_err(|_| format!("header `{name}` has a value HTTP cannot carry"))?;
            value.set_sensitive(true);
            headers.insert(name, value);
        }
        let (notes, rung) = notes::Notes::new();
        let connection = Arc::new_cyclic(|me| Connection {
            server: server.to_string(),
            me: me.clone(),
            client,
            uri,
            headers,
            legacy: Mutex::new(None),
            token_file: endpoint.bearer_token_file.clone().map(TokenFile::new),
            oauth,
            session: Mutex::new(None),
            version: Mutex::new(None),
            mirrors: ParamMirrors::default(),
            modern: AtomicBool::new(false),
            next_id: AtomicU64::new(1),
            in_flight: tokio::sync::Semaphore::new(endpoint.max_in_flight),
            max_message: endpoint.max_message,
            to_gateway,
            listen,
            closed: watch::channel(None).0,
            notes,
        });
        tokio::spawn(notes::send_notes(Arc::downgrade(&connection), rung));
        Ok(connection)
    }

    /// Resolves when the session ended, with why.
    pub(super) async fn ended(&self) -> Closed {
        let mut rx = self.closed.subscribe();
        let closed = rx.wait_for(Option::is_some).await;
        closed.map_or(Closed::Stopped, |c| c.clone().unwrap_or(Closed::Stopped))
    }

    /// Ends the session (the first reason wins); requests in flight fail at once.
    pub(super) fn close(&self, why: Closed) {
        self.closed.send_if_modified(|closed| {
            if closed.is_none() {
                *closed = Some(why);
                true
            } else {
                false
            }
        });
    }

    fn broken(&self, reason: String) -> BackendError {
        self.close(Closed::Broken(reason.clone()));
        BackendError::Unreachable {
            server: self.server.clone(),
            reason,
        }
    }

    /// Whether the server forgot this session (a request it answered 404 never ran).
    pub(super) fn expired(&self) -> bool {
        *self.closed.borrow() == Some(Closed::Broken(SESSION_ENDED.into()))
    }

    fn gone(&self) -> BackendError {
        match self.closed.borrow().clone() {
            Some(Closed::Broken(reason)) => BackendError::Unreachable {
                server: self.server.clone(),
                reason,
            },
            _ => BackendError::Stopped {
                server: self.server.clone(),
            },
        }
    }

    /// A request with the session's headers.
    fn build(&self, method: http::Method, body: Option<String>) -> http::Request<Body> {
        let path = match self.legacy_path() {
            Some(path) if method == http::Method::POST => path,
            _ => self
                .uri
                .path_and_query()
                .map_or("/", |p| p.as_str())
                .to_string(),
        };
        let mut request = http::Request::builder()
            .method(method)
            .uri(path)
            .header(
                http::header::HOST,
                self.uri.authority().map_or("", |a| a.as_str()),
            )
            .header(http::header::ACCEPT, "application/json, text/event-stream");
        if body.is_some() {
            request = request.header(http::header::CONTENT_TYPE, "application/json");
        }
        if let Some(session) = &*self.session.lock().unwrap() {
            request = request.header("mcp-session-id", session);
        }
        if let Some(version) = &*self.version.lock().unwrap() {
            request = request.header("mcp-protocol-version", version.clone());
        }
        // Every part is valid by construction: the URL and the legacy path were parsed,
        // the session id and version checked, before they were kept.
        let mut request = request
            .body(Body::new(body.unwrap_or_default().into()))
            .expect("valid parts");
        request.headers_mut().extend(self.headers.clone());
        if let Some(token) = self.token_file.as_ref().and_then(TokenFile::header) {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, token);
        }
        if let Some(token) = self.oauth.as_ref().and_then(|o| o.header()) {
            request
                .headers_mut()
                .insert(http::header::AUTHORIZATION, token);
        }
        request
    }

    async fn send(
        &self,
        request: http::Request<Body>,
        hold: Hold,
    ) -> Result<(http::Response<Incoming>, Lease), BackendError> {
        match self.client.send(request, CONNECT_TIMEOUT, hold).await {
            Ok(sent) => Ok(sent),
            Err(reason) => Err(self.broken(reason)),
        }
    }

    /// The `MCP-Protocol-Version` header for the version the server chose; an error when
    /// the version is not text a header can carry (a control character, say).
    fn version_header(&self, version: &str) -> Result<http::HeaderValue, BackendError> {
        match http::HeaderValue::from_str(version) {
            Ok(header) if version.bytes().all(|b| b.is_ascii_graphic()) => Ok(header),
            _ => {
                let shown: String = format!("{version:?}").chars().take(SHOWN).collect();
                Err(self.http_error(
                    0,
                    format!(
                        "an initialize result whose protocolVersion {shown} is not a version \
                         (only visible ASCII can go back in the MCP-Protocol-Version header)"
                    ),
                ))
            }
        }
    }

    /// One `POST` of a request, and its answer out of JSON or an event stream.
    async fn exchange(
        &self,
        id: u64,
        method: &str,
        params: Option<Value>,
    ) -> Result<Box<RawValue>, BackendError> {
        // The notifications queued before this request reach the server before it.
        self.notes.flushed().await;
        let params_name = crate::protocol::modern::name_field(method)
            .and_then(|field| params.as_ref()?.get(field)?.as_str().map(str::to_string));
        let mut mirrored = http::HeaderMap::new();
        if method == methods::TOOLS_CALL && self.is_modern() {
            self.mirrors.write(&mut mirrored, params.as_ref());
        }
        // A traced request carries its span in `_meta.traceparent`; the header says it
        // to the HTTP side (proxies, the server's own HTTP tracing).
        let traceparent = traces::header_of(params.as_ref());
        let body = protocol::request(id.into(), method, params).to_string();
        if self.legacy.lock().unwrap().is_some() {
            return self.exchange_legacy(id, body, traceparent).await;
        }
        let mut challenges = 0;
        // Kept for a second try only where OAuth may ask for one: no copy otherwise.
        let (mut body, mut mirrored) = (Some(body), Some(mirrored));
        let retry = self.oauth.is_some();
        let (response, lease) = loop {
            if let Some(oauth) = &self.oauth {
                oauth.fresh().await;
            }
            let mut request = self.build(http::Method::POST, once_more(&mut body, retry));
            if self.is_modern() {
                modern::mirror_headers(request.headers_mut(), method, params_name.as_deref());
                request
                    .headers_mut()
                    .extend(once_more(&mut mirrored, retry).unwrap_or_default());
            }
            if let Some(traceparent) = &traceparent {
                request
                    .headers_mut()
                    .insert("traceparent", traceparent.clone());
            }
            let sent = request.headers().get(http::header::AUTHORIZATION).cloned();
            let (response, lease) = self.send(request, hold(method)).await?;
            let Some(oauth) = &self.oauth else {
                break (response, lease);
            };
            let Some(challenge) = oauth_challenge(&response) else {
                break (response, lease);
            };
            challenges += 1;
            let status = response.status().as_u16();
            if challenges > MAX_CHALLENGES {
                return Err(self.http_error(
                    0,
                    format!(
                        "status {status} again after {MAX_CHALLENGES} authorizations \
                         (its scopes may never be granted)"
                    ),
                ));
            }
            drop(response);
            if let Err(err) = oauth.challenged(challenge.as_deref(), sent.as_ref()).await {
                // Not a transport the server refuses: 0, so that no other transport is tried.
                return Err(self.http_error(0, format!("status {status}: {err}")));
            }
        };
        if method == methods::INITIALIZE
            && let Some(session) = response.headers().get("mcp-session-id")
            && let Ok(session) = session.to_str()
        {
            *self.session.lock().unwrap() = Some(session.to_string());
        }
        let status = response.status();
        if status == http::StatusCode::NOT_FOUND && self.session.lock().unwrap().is_some() {
            return Err(self.broken(SESSION_ENDED.into()));
        }
        let content_type = content_type(&response);
        if !status.is_success() {
            let text = read_text(response.into_body()).await;
            return Err(self.http_error(
                status.as_u16(),
                format!("status {status}: {}", shown(&text)),
            ));
        }
        if content_type == "text/event-stream" {
            let mut events = SseReader::new(response.into_body(), self.max_message);
            loop {
                match events.next().await {
                    Ok(Some(event)) => {
                        if let Some(answer) = self.incoming(&event.data, Some(id)) {
                            // The rest of the stream is of no use: the connection is dropped.
                            return answer;
                        }
                    }
                    // A cut stream fails this request alone: the session may well live on,
                    // and a server that is gone shows at the next request or on the GET stream.
                    Ok(None) => {
                        lease.done();
                        return Err(self.http_error(
                            0,
                            "an event stream that broke off before the answer".into(),
                        ));
                    }
                    // Dropping the stream (and its connection) reads no more of it.
                    Err(SseError::TooLarge(_)) => return Err(self.too_large("an event")),
                    Err(reason) => {
                        return Err(self.http_error(
                            0,
                            format!("an event stream that broke off before the answer: {reason}"),
                        ));
                    }
                }
            }
        }
        // Within the limit as it is read: a larger body is left unread, its connection closed.
        let body = http_body_util::Limited::new(response.into_body(), self.max_message);
        let text = match body.collect().await {
            Ok(body) => {
                lease.done();
                String::from_utf8_lossy(&body.to_bytes()).into_owned()
            }
            Err(err) if err.is::<http_body_util::LengthLimitError>() => {
                return Err(self.too_large("a body"));
            }
            Err(err) => {
                return Err(self.http_error(0, format!("an answer that broke off: {err}")));
            }
        };
        if content_type != "application/json" {
            return Err(self.http_error(
                0,
                format!(
                    "status {status} and content type `{content_type}`, not JSON-RPC: {}",
                    shown(&text)
                ),
            ));
        }
        self.incoming(&text, Some(id)).unwrap_or_else(|| {
            Err(self.http_error(
                0,
                format!("JSON that holds no answer to the request: {}", shown(&text)),
            ))
        })
    }

    /// An answer past `max_message`: that request fails, the session goes on.
    fn too_large(&self, what: &str) -> BackendError {
        self.http_error(
            0,
            format!(
                "{what} larger than the limit of {} (the server's `max_message`); the rest \
                 was not read",
                sse::size(self.max_message),
            ),
        )
    }

    /// `status` is 0 when the fault is not the HTTP status.
    fn http_error(&self, status: u16, detail: String) -> BackendError {
        BackendError::Http {
            server: self.server.clone(),
            status,
            detail,
        }
    }

    /// Handles one message (or batch) from the server: the answer to `waiting` is
    /// returned, the server's notifications and requests go to the gateway.
    fn incoming(
        &self,
        text: &str,
        waiting: Option<u64>,
    ) -> Option<Result<Box<RawValue>, BackendError>> {
        if text.trim().is_empty() {
            return None;
        }
        // The common case, a plain answer to the request waiting: its result is kept as the
        // server's text, as a subprocess server's is.
        if let Some(waiting) = waiting
            && let Some((id, result)) = protocol::RawEnvelope::fast_response(text)
            && id == waiting
        {
            return Some(Ok(result));
        }
        let value = match serde_json::from_str::<Value>(text) {
            Ok(value) => value,
            Err(err) => {
                return waiting.map(|_| {
                    Err(self.http_error(
                        0,
                        format!("a message that is not JSON ({err}): {}", shown(text)),
                    ))
                });
            }
        };
        let messages = match value {
            Value::Array(messages) => messages,
            single => vec![single],
        };
        // What comes on a request's own stream belongs to the client call that made it.
        let call = waiting.and_then(|_| crate::backend::current_call());
        let mut answer = None;
        for message in messages {
            let message = match protocol::parse_message(message) {
                Ok(message) => message,
                Err(err) => {
                    tracing::warn!(server = %self.server, "ignored a message that is not JSON-RPC ({}): {}", err.message, shown(text));
                    continue;
                }
            };
            let Some(message) = self.listen.screen(&self.server, message) else {
                continue;
            };
            let responder = |id| {
                let me = self.me.clone();
                Responder::new(id, move |response| {
                    if let Some(connection) = me.upgrade() {
                        tokio::spawn(async move { connection.post_message(response).await });
                    }
                })
            };
            let responded =
                mcp_client::dispatch(&self.to_gateway, &self.server, call, message, responder);
            let Some((id, result)) = responded else {
                continue;
            };
            let result = match result {
                Ok(value) => serde_json::value::to_raw_value(&value)
                    .map_err(|e| self.http_error(0, format!("an unreadable result: {e}"))),
                Err(error) => Err(BackendError::Rpc {
                    server: self.server.clone(),
                    error,
                }),
            };
            if id.as_u64().is_some() && id.as_u64() == waiting {
                answer = Some(result);
            } else if !self.complete_legacy(&id, result) {
                tracing::debug!(server = %self.server, %id, "an answer to no request waiting for one; ignored")
            }
        }
        answer
    }

    /// `POST`s a notification or a response, which the server acknowledges with 202.
    async fn post_message(&self, message: Value) {
        let request = self.build(http::Method::POST, Some(message.to_string()));
        match self.send(request, Hold::Aside).await {
            Ok((response, lease)) => {
                let status = response.status();
                let text = read_text(response.into_body()).await;
                lease.done();
                if !status.is_success() {
                    tracing::warn!(server = %self.server, "refused a message with status {status}: {}", shown(&text));
                }
            }
            Err(err) => {
                tracing::debug!(server = %self.server, "a message was not delivered: {err}")
            }
        }
    }

    /// Reads the server's own stream (`GET`), for messages outside any request, until the
    /// session ends; reopened after a drop, resumed from the last event seen. Returns at
    /// once when the server offers none (405).
    pub(super) async fn listen(self: Arc<Self>) {
        // The legacy transport's one stream is read already.
        if self.legacy_path().is_some() {
            return;
        }
        let mut last_id: Option<String> = None;
        let mut backoff = Duration::from_millis(100);
        while self.closed.borrow().is_none() {
            let mut request = self.build(http::Method::GET, None);
            request.headers_mut().insert(
                http::header::ACCEPT,
                http::HeaderValue::from_static("text/event-stream"),
            );
            if let Some(id) = last_id
                .as_deref()
                .and_then(|id| http::HeaderValue::from_str(id).ok())
            {
                request.headers_mut().insert("last-event-id", id);
            }
            let Ok((response, _lease)) = self.send(request, Hold::Aside).await else {
                return;
            };
            let status = response.status();
            if status == http::StatusCode::NOT_FOUND && self.session.lock().unwrap().is_some() {
                self.close(Closed::Broken(SESSION_ENDED.into()));
                return;
            }
            if !status.is_success() || content_type(&response) != "text/event-stream" {
                tracing::debug!(server = %self.server, %status, "no GET stream");
                return;
            }
            let mut events = SseReader::new(response.into_body(), self.max_message);
            loop {
                match events.next().await {
                    Ok(Some(event)) => {
                        backoff = Duration::from_millis(100);
                        self.incoming(&event.data, None);
                    }
                    Err(SseError::TooLarge(_)) => self.skipped_event(),
                    Ok(None) | Err(SseError::Broken(_)) => break,
                }
            }
            last_id = events.last_id().map(str::to_string).or(last_id);
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// An event past `max_message` on a stream of the server's own messages: passed over.
    fn skipped_event(&self) {
        tracing::warn!(server = %self.server, "skipped an event larger than the limit of {} (`max_message`)", sse::size(self.max_message));
    }

    /// From now on, speaks the stateless era (2026-07-28) to the server.
    pub(super) fn speak_modern(&self) {
        self.modern.store(true, Ordering::Release);
        *self.version.lock().unwrap() = Some(http::HeaderValue::from_static(
            crate::protocol::modern::MODERN_VERSION,
        ));
    }

    pub(super) fn is_modern(&self) -> bool {
        self.modern.load(Ordering::Acquire)
    }

    /// Ends the session on the server (`DELETE`); a failure is of no consequence.
    pub(super) async fn delete(&self) {
        if self.session.lock().unwrap().is_none() {
            return;
        }
        let request = self.build(http::Method::DELETE, None);
        let _ = tokio::time::timeout(
            Duration::from_secs(2),
            self.client.send(request, CONNECT_TIMEOUT, Hold::Request),
        )
        .await;
    }
}

impl Upstream for Connection {
    fn server(&self) -> &str {
        &self.server
    }

    /// Sends a request and waits for its answer, kept as the server's JSON text. Dropping
    /// the future (timeout, client cancellation) tells the server with `notifications/cancelled`.
    async fn request_raw(&self, method: &str, params: Option<Value>, timeout: Duration) -> Answer {
        if self.closed.borrow().is_some() {
            return Err(self.gone());
        }
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let mut cancel = CancelOnDrop::new(self, id);
        if method == methods::INITIALIZE {
            cancel.answered();
        }
        let mut closed = self.closed.subscribe();
        let listing = (method == methods::TOOLS_LIST && self.is_modern()).then(|| params.clone());
        let outcome = tokio::time::timeout(timeout, async {
            let _turn = match hold(method) {
                Hold::Request => Some(self.in_flight.acquire().await),
                Hold::Aside => None,
            };
            tokio::select! {
                result = self.exchange(id, method, params) => result,
                _ = closed.wait_for(Option::is_some) => Err(self.gone()),
            }
        })
        .await;
        let result = match outcome {
            Ok(result) => {
                cancel.answered();
                result?
            }
            Err(_) => {
                return Err(BackendError::Timeout {
                    server: self.server.clone(),
                    timeout,
                });
            }
        };
        let result = mcp_client::checked(&self.server, result)?;
        if let Some(params) = listing {
            self.mirrors.learn(params.as_ref(), &result);
        }
        if method == methods::INITIALIZE
            && let Ok(init) = serde_json::from_str::<Value>(result.get())
            && let Some(version) = init["protocolVersion"].as_str()
        {
            *self.version.lock().unwrap() = Some(self.version_header(version)?);
        }
        Ok(result)
    }

    fn notify(&self, method: &str, params: Option<Value>) {
        // The stateless era has no notification to a server over HTTP: a request is
        // cancelled by closing its response, which dropping it does.
        if self.is_modern() {
            return;
        }
        let note = protocol::notification(method, params);
        if let Some(dropped) = self.notes.push(method, note) {
            crate::telemetry::metrics::server_notifications_dropped(&self.server);
            if dropped.is_power_of_two() {
                tracing::warn!(server = %self.server, dropped, "{} notifications wait to be sent already; the oldest was dropped", notes::MAX_WAITING);
            }
        }
    }

    fn forget(&self, _id: u64) -> bool {
        self.closed.borrow().is_none() && !self.is_modern()
    }
}

/// A bearer token kept in a file: read again when its modification time changes.
struct TokenFile {
    path: std::path::PathBuf,
    read: Mutex<Option<(std::time::SystemTime, http::HeaderValue)>>,
}

impl TokenFile {
    fn new(path: std::path::PathBuf) -> Self {
        TokenFile {
            path,
            read: Mutex::new(None),
        }
    }

    fn header(&self) -> Option<http::HeaderValue> {
        let modified = std::fs::metadata(&self.path).and_then(|m| m.modified());
        let mut read = self.read.lock().unwrap();
        match (&*read, &modified) {
            (Some((at, value)), Ok(now)) if at == now => return Some(value.clone()),
            (_, Err(err)) => {
                tracing::warn!(path = %self.path.display(), "cannot read the bearer token file: {err}");
                return read.as_ref().map(|(_, value)| value.clone());
            }
            _ => {}
        }
        let token = std::fs::read_to_string(&self.path).ok()?;
        let mut value = http::HeaderValue::from_str(&format!("Bearer {}", token.trim())).ok()?;
        value.set_sensitive(true);
        *read = Some((modified.ok()?, value.clone()));
        Some(value)
    }
}

/// What a request is built of: a copy when it may go again (`retry`), else the thing itself.
fn once_more<T: Clone>(kept: &mut Option<T>, retry: bool) -> Option<T> {
    match retry {
        true => kept.clone(),
        false => kept.take(),
    }
}

/// Authorizations a request may go through before it fails: a first token, then step-ups
/// a server keeps refusing stop here.
const MAX_CHALLENGES: u32 = 3;

/// The `WWW-Authenticate` of a response the OAuth client answers (`Some(None)` for a 401
/// without one): a 401, or a 403 for `insufficient_scope`.
fn oauth_challenge(response: &http::Response<Incoming>) -> Option<Option<String>> {
    let header = response
        .headers()
        .get(http::header::WWW_AUTHENTICATE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_string);
    match response.status() {
        http::StatusCode::UNAUTHORIZED => Some(header),
        http::StatusCode::FORBIDDEN
            if header
                .as_deref()
                .and_then(Challenge::parse)
                .is_some_and(|c| c.insufficient_scope()) =>
        {
            Some(header)
        }
        _ => None,
    }
}

/// Whether a request counts against `max_connections` and `max_in_flight`: a listen is a
/// stream held open, as the `GET` stream is, and must not starve the requests.
fn hold(method: &str) -> Hold {
    match method {
        crate::protocol::modern::LISTEN => Hold::Aside,
        _ => Hold::Request,
    }
}

fn content_type(response: &http::Response<Incoming>) -> String {
    let value = response.headers().get(http::header::CONTENT_TYPE);
    let value = value.and_then(|v| v.to_str().ok()).unwrap_or("");
    value
        .split(';')
        .next()
        .unwrap_or("")
        .trim()
        .to_ascii_lowercase()
}

/// The start of an error body, for a message.
async fn read_text(body: Incoming) -> String {
    let limited = http_body_util::Limited::new(body, 64 << 10);
    match limited.collect().await {
        Ok(body) => String::from_utf8_lossy(&body.to_bytes()).into_owned(),
        Err(_) => String::new(),
    }
}

fn shown(text: &str) -> String {
    let text = text.trim();
    if text.is_empty() {
        return "(no body)".into();
    }
    protocol::cut_short(text, SHOWN).into_owned()
}
