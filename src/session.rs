//! One client connection, whatever the transport: the MCP lifecycle, version negotiation,
//! and requests in flight (for cancellation). [`Session::handle`] takes every message a
//! client sends and makes every answer; what the gateway holds of the client is its
//! `peer::ClientPeer`, and per-request state lives in `RequestContext`.

mod batch;
mod bounds;
mod lifecycle;
pub mod listen;
mod mrtr;
pub mod stateless;

use std::collections::HashMap;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::sync::{Notify, oneshot};

use crate::backend::mcp_client::Upstream;
use crate::gateway::Gateway;
use crate::peer::{ClientPeer, ClientSink};
use crate::protocol::methods;
use crate::protocol::{self, Incoming, Message, Reply, RpcError};
use crate::router::{RequestContext, Router};
use crate::telemetry::traces;
use bounds::Counted;
pub use bounds::RequestBounds;

/// A client request in flight: the switch that cancels it, and which request it is (an id
/// may be used again once its request ended, while the task of the old one still winds down).
struct InFlight {
    cancel: oneshot::Sender<()>,
    serial: u64,
    /// Its place among all sessions' requests ([`RequestBounds`]), given back when it ends.
    _counted: Option<Counted>,
}

/// A request registered as in flight, ready to run.
struct Started {
    key: Arc<str>,
    serial: u64,
    cancelled: oneshot::Receiver<()>,
}

/// What a request came to: its answer, or `None` when the client cancelled it (and gets none).
type Outcome = Option<Result<Reply, RpcError>>;

/// What [`Session::handle`] made of a message.
pub enum Handled {
    /// A notification, or the client's answer to a request of the gateway's.
    Nothing,
    /// The answer line to a request, ready now.
    Answer(String),
    /// The message was refused whole before anything of it ran (it is invalid, or a batch
    /// the session takes none of): the error line. HTTP answers it with 400.
    Refused(String),
    /// A request running.
    Running(Running),
    /// A batch taken: its array line once every member is answered, or `None` when no
    /// member has an answer (notifications, cancelled requests).
    Batch(RunningAnswer),
}

/// The answer line of a request running, or `None` when the client cancelled it.
pub type RunningAnswer = Pin<Box<dyn Future<Output = Option<String>> + Send>>;

/// A request running: a future of its answer line (`None` when the client cancelled it).
pub struct Running {
    /// The key of its id (see `request_key`): what the request's own stream is named by,
    /// and what the messages its work sends say they belong to.
    pub key: Arc<str>,
    answer: RunningAnswer,
}

impl Running {
    /// Runs the request inside `context`: a trace the transport continues (an HTTP
    /// `traceparent` header), which the request's span then has for its parent.
    pub fn within(mut self, context: Option<opentelemetry::Context>) -> Running {
        if let Some(context) = context {
            use opentelemetry::trace::FutureExt;
            self.answer = Box::pin(self.answer.with_context(context));
        }
        self
    }
}

impl Future for Running {
    type Output = Option<String>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<String>> {
        self.answer.as_mut().poll(cx)
    }
}

pub struct Session {
    pub gateway: Arc<Gateway>,
    /// What the gateway holds of this client.
    pub peer: Arc<ClientPeer>,
    /// Client requests in flight, by [`request_key`] of their id.
    in_flight: Mutex<HashMap<Arc<str>, InFlight>>,
    next_serial: AtomicU64,
    /// Woken whenever a request in flight ends, for the drain after the client left.
    request_ended: Notify,
    /// Set by a transport that serves many clients; stdio bounds its one client by
    /// reading no more while the client's requests are in flight.
    bounds: OnceLock<Arc<RequestBounds>>,
}

impl Session {
    /// `out` receives every line to send to the client, in order.
    pub fn new(gateway: Arc<Gateway>, out: impl ClientSink) -> Arc<Session> {
        let peer = Arc::new(ClientPeer::new(out));
        gateway.register_peer(&peer);
        Session::with_peer(gateway, peer)
    }

    fn with_peer(gateway: Arc<Gateway>, peer: Arc<ClientPeer>) -> Arc<Session> {
        Arc::new(Session {
            gateway,
            peer,
            in_flight: Mutex::new(HashMap::new()),
            next_serial: AtomicU64::new(0),
            request_ended: Notify::new(),
            bounds: OnceLock::new(),
        })
    }

    /// Bounds the session's requests in flight, once, before its first request.
    pub fn bound_requests(&self, bounds: Arc<RequestBounds>) {
        let _ = self.bounds.set(bounds);
    }

    /// Sends a message to the client (answers and requests always; notifications unless it
    /// stopped reading).
    pub fn send(&self, message: Value) {
        self.peer.send(message);
    }

    /// Sends an answer line (never dropped).
    pub fn send_line(&self, line: String) {
        self.peer.send_line(line);
    }

    /// Resolves when no request is in flight, or at `deadline`.
    pub async fn drained(&self, deadline: tokio::time::Instant) {
        let _ = tokio::time::timeout_at(deadline, self.fewer_in_flight_than(1)).await;
    }

    /// Resolves once fewer than `limit` requests are in flight.
    pub async fn fewer_in_flight_than(&self, limit: usize) {
        loop {
            let ended = self.request_ended.notified();
            tokio::pin!(ended);
            // Registered before the check, so an end between the check and the wait is not missed.
            ended.as_mut().enable();
            if self.requests_in_flight() < limit {
                return;
            }
            ended.await;
        }
    }

    /// Requests in flight now.
    pub fn requests_in_flight(&self) -> usize {
        self.in_flight.lock().unwrap().len()
    }

    /// Ends the session: its requests in flight are cancelled (an HTTP client's `DELETE`,
    /// or an idle session expiring).
    pub fn close(&self) {
        let cancelled: Vec<InFlight> = self
            .in_flight
            .lock()
            .unwrap()
            .drain()
            .map(|(_, r)| r)
            .collect();
        for request in cancelled {
            let _ = request.cancel.send(());
        }
        self.request_ended.notify_waiters();
        if let Some(plugins) = self.gateway.plugin_host() {
            plugins.end_session(&self.peer.id);
        }
    }

    /// Takes what one line or body from the client held, whatever the transport: a
    /// notification or the client's answer to a request of the gateway's is acted on, a
    /// request is registered in flight at once (so a cancel finds it) and answered, now or
    /// by the future returned; a batch's members likewise, answered in one array. What the
    /// session sends on its own (progress, log messages, `list_changed`, requests to the
    /// client) goes through its peer, not here.
    pub fn handle(self: &Arc<Self>, incoming: impl Into<Incoming>) -> Handled {
        match incoming.into() {
            Incoming::Single(Ok(message)) => self.take(message),
            Incoming::Single(Err((id, error))) => {
                Handled::Refused(protocol::error_response(id, &error).to_string())
            }
            Incoming::Batch(items) => self.handle_batch(items),
        }
    }

    /// One message, alone or a batch's member.
    fn take(self: &Arc<Self>, message: Message) -> Handled {
        match message {
            Message::Request { id, method, params } if method == methods::INITIALIZE => {
                let traced = traces::request(&method, params.as_ref(), &self.peer);
                let answer = self.initialize(params);
                if let Some(traced) = &traced {
                    traces::end_request(traced, Some(&answer));
                }
                Handled::Answer(protocol::response_line(&id, answer))
            }
            Message::Request { id, method, params } => match self.begin(&id) {
                Err(error) => Handled::Answer(protocol::response_line(&id, Err(error))),
                Ok(started) => {
                    let session = self.clone();
                    let key = started.key.clone();
                    Handled::Running(Running {
                        key,
                        answer: Box::pin(async move {
                            let answer = session.run(started, &method, params).await?;
                            Some(protocol::response_line(&id, answer))
                        }),
                    })
                }
            },
            Message::Notification { method, params } => {
                self.notification(&method, params);
                Handled::Nothing
            }
            Message::Response { id, result } => {
                self.peer.client_answered(&id, result);
                Handled::Nothing
            }
        }
    }

    /// Registers request `id` as in flight; refused while another request with the same
    /// id is (JSON-RPC ids tell a client's answers apart, so both would be lost).
    fn begin(&self, id: &Value) -> Result<Started, RpcError> {
        let key: Arc<str> = Arc::from(request_key(id));
        let mut in_flight = self.in_flight.lock().unwrap();
        if in_flight.contains_key(&key) {
            return Err(RpcError::new(
                protocol::INVALID_REQUEST,
                format!(
                    "Invalid Request: a request with id {id} is still in flight in this session; give each request its own id"
                ),
            ));
        }
        let counted = match self.bounds.get() {
            None => None,
            Some(bounds) => Some(bounds.count(in_flight.len())?),
        };
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        let (cancel, cancelled) = oneshot::channel();
        in_flight.insert(
            key.clone(),
            InFlight {
                cancel,
                serial,
                _counted: counted,
            },
        );
        Ok(Started {
            key,
            serial,
            cancelled,
        })
    }

    /// Runs a request registered by [`Self::begin`] until it is answered or cancelled.
    async fn run(
        self: &Arc<Self>,
        started: Started,
        method: &str,
        params: Option<Value>,
    ) -> Outcome {
        let traced = traces::request(method, params.as_ref(), &self.peer);
        let request = traces::within(traced.as_ref(), self.request(method, params, &started.key));
        let outcome = tokio::select! {
            answer = request => Some(answer),
            // A cancelled request gets no answer (the specification says so).
            _ = started.cancelled => None,
        };
        if let Some(traced) = &traced {
            traces::end_request(traced, outcome.as_ref());
        }
        {
            let mut in_flight = self.in_flight.lock().unwrap();
            // A cancel already removed it, and the id may be in use again by now.
            if in_flight
                .get(&started.key)
                .is_some_and(|r| r.serial == started.serial)
            {
                in_flight.remove(&started.key);
            }
        }
        self.request_ended.notify_waiters();
        outcome
    }

    async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
        key: &Arc<str>,
    ) -> Result<Reply, RpcError> {
        if method != methods::PING && !self.peer.is_initialized() {
            return Err(RpcError::new(
                protocol::NOT_INITIALIZED,
                format!("Server not initialized: send `initialize` before `{method}`"),
            ));
        }
        check_progress_token(params.as_ref())?;
        let stateless = self.peer.is_stateless();
        if stateless && method == protocol::modern::DISCOVER {
            let answer = Ok(lifecycle::discover(&self.gateway, &self.peer));
            return stateless::finish(&self.gateway, self.peer.principal(), method, None, answer);
        }
        if stateless && method == protocol::modern::LISTEN {
            return self.listen(params, key).await;
        }
        if method == methods::PING && !stateless {
            return Ok(lifecycle::pong());
        }
        // What a stateless not-found error names (the params go to the router).
        let uri = stateless
            .then(|| params.as_ref()?.get("uri")?.as_str().map(str::to_string))
            .flatten();
        if stateless && let Some(method) = mrtr::may_need_input(method) {
            return self.exchange(key, method, params, uri).await;
        }
        let context = RequestContext::new(&self.gateway, self.peer.clone(), Some(key.clone()));
        let answer = Router::new(&self.gateway)
            .dispatch(&context, method, params)
            .await;
        if !stateless {
            return answer;
        }
        if let Some(missing) = self.peer.take_missing_capability() {
            return Err(missing);
        }
        stateless::finish(&self.gateway, &context.principal, method, uri, answer)
    }

    fn notification(self: &Arc<Self>, method: &str, params: Option<Value>) {
        match method {
            methods::INITIALIZED | "initialized" => {}
            methods::CANCELLED => {
                let key = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .map(request_key)
                    .unwrap_or_default();
                if let Some(request) = self.in_flight.lock().unwrap().remove(key.as_str()) {
                    let _ = request.cancel.send(());
                }
            }
            methods::ROOTS_LIST_CHANGED => {
                // Only servers that may ask this client for its roots hear of a change, and
                // without the client's params: the notice carries nothing else they need.
                for backend in self.gateway.servers() {
                    if self.gateway.sees(&self.peer, backend.name()) {
                        backend.notify(method, None);
                    }
                }
            }
            _ => tracing::debug!(method, "client notification ignored"),
        }
    }
}

/// `_meta.progressToken` is a string or a number (MCP); a token of another type could not be
/// told apart in the `notifications/progress` the request would get.
fn check_progress_token(params: Option<&Value>) -> Result<(), RpcError> {
    let token = params
        .and_then(|p| p.get("_meta"))
        .and_then(|m| m.get("progressToken"));
    match token {
        Some(Value::Bool(_) | Value::Array(_) | Value::Object(_)) => Err(RpcError::invalid_params(
            "Invalid params: _meta.progressToken must be a string or a number",
        )),
        _ => Ok(()),
    }
}

/// An id as a key for requests in flight: numbers by value (a cancel for `7.0` finds the
/// request `7`), strings as JSON text (so `"7"` stays apart from `7`).
fn request_key(id: &Value) -> String {
    match id.as_f64() {
        Some(n) if n.fract() == 0.0 && n.abs() < protocol::EXACT_FLOAT_INTEGERS => {
            format!("{}", n as i64)
        }
        _ => id.to_string(),
    }
}
