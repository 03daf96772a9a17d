//! One client connection, whatever the transport: the MCP lifecycle, version negotiation,
//! and requests in flight (for cancellation). What the gateway holds of the client is its
//! `peer::ClientPeer`; per-request state lives in `RequestContext`.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio::sync::oneshot;

use crate::backend::mcp_client::Upstream;
use crate::gateway::Gateway;
use crate::peer::{ClientPeer, ClientSink};
use crate::protocol::methods;
use crate::protocol::{self, Incoming, Message, Reply, RpcError};
use crate::router::{RequestContext, Router};
use crate::telemetry::events::new_trace_id;

/// A client request in flight: the switch that cancels it, and which request it is (an id
/// may be used again once its request ended, while the task of the old one still winds down).
struct InFlight {
    cancel: oneshot::Sender<()>,
    serial: u64,
    /// Its place among all sessions' requests ([`RequestBounds`]), given back when it ends.
    _counted: Option<Counted>,
}

/// Bounds on client requests in flight that a transport serving many clients sets: per
/// session, and over all its sessions (a batch's members and a legacy `POST` count as
/// requests too).
pub struct RequestBounds {
    per_session: usize,
    total: usize,
    running: Arc<std::sync::atomic::AtomicUsize>,
}

impl RequestBounds {
    pub fn new(per_session: usize, total: usize) -> Arc<RequestBounds> {
        Arc::new(RequestBounds {
            per_session,
            total,
            running: Arc::default(),
        })
    }

    /// Requests in flight over all sessions now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }
}

impl RequestBounds {
    /// Counts one more request of a session that has `session_running` in flight, or
    /// says which bound it would pass.
    fn count(&self, session_running: usize) -> Result<Counted, RpcError> {
        if session_running >= self.per_session {
            return Err(RpcError::new(
                protocol::BACKEND_UNAVAILABLE,
                format!(
                    "Too Many Requests: this session has {} requests in flight (max_requests_per_session)",
                    self.per_session
                ),
            ));
        }
        let before = self.running.fetch_add(1, Ordering::Relaxed);
        let counted = Counted(self.running.clone());
        if before >= self.total {
            return Err(RpcError::new(
                protocol::BACKEND_UNAVAILABLE,
                format!(
                    "Too Many Requests: the gateway has {} requests in flight from all its \
                     clients (max_requests); retry shortly",
                    self.total
                ),
            ));
        }
        Ok(counted)
    }
}

/// One request counted in [`RequestBounds::running`].
struct Counted(Arc<std::sync::atomic::AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// A request registered as in flight, ready to run.
struct Started {
    key: String,
    serial: u64,
    cancelled: oneshot::Receiver<()>,
}

/// What a request came to: its answer, or `None` when the client cancelled it (and gets none).
type Outcome = Option<Result<Reply, RpcError>>;

/// A member of a batch: answered at once, or running.
enum BatchEntry {
    Answered(String),
    Running(Value, tokio::task::JoinHandle<Option<String>>),
}

/// What [`Session::handle`] made of a message.
pub enum Handled {
    /// A notification, or the client's answer to a request of the gateway's.
    Nothing,
    /// The answer line to a request, ready now.
    Answer(String),
    /// A request running: its answer line, or `None` when the client cancelled it.
    Running(RunningAnswer),
}

/// The answer line of a request running, or `None` when the client cancelled it.
pub type RunningAnswer = std::pin::Pin<Box<dyn Future<Output = Option<String>> + Send>>;

pub struct Session {
    pub gateway: Arc<Gateway>,
    /// What the gateway holds of this client.
    pub peer: Arc<ClientPeer>,
    /// Client requests in flight, by [`request_key`] of their id.
    in_flight: Mutex<HashMap<String, InFlight>>,
    next_serial: AtomicU64,
    /// Woken whenever a request in flight ends, for the drain after the client left.
    request_ended: tokio::sync::Notify,
    /// Set by a transport that serves many clients; stdio bounds its one client by
    /// reading no more while the client's requests are in flight.
    bounds: std::sync::OnceLock<Arc<RequestBounds>>,
}

impl Session {
    /// `out` receives every line to send to the client, in order.
    pub fn new(gateway: Arc<Gateway>, out: impl ClientSink) -> Arc<Session> {
        let peer = Arc::new(ClientPeer::new(out));
        gateway.register_peer(&peer);
        Arc::new(Session {
            gateway,
            peer,
            in_flight: Mutex::new(HashMap::new()),
            next_serial: AtomicU64::new(0),
            request_ended: tokio::sync::Notify::new(),
            bounds: std::sync::OnceLock::new(),
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

    fn send_line(&self, line: String) {
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

    /// Handles one line from the client. Requests run concurrently; answers are sent as they complete.
    pub fn handle_line(self: &Arc<Self>, line: &str) {
        if line.trim().is_empty() {
            return;
        }
        crate::memory::note_activity();
        match protocol::parse_line(line) {
            Err(answer) => self.send(answer),
            Ok(Incoming::Single(Err((id, error)))) => {
                self.send(protocol::error_response(id, &error))
            }
            Ok(Incoming::Single(Ok(message))) => self.handle_message(message),
            Ok(Incoming::Batch(items)) => match self.batch_refused(items.len()) {
                Some(error) => self.send(protocol::error_response(Value::Null, &error)),
                None => self.handle_batch(items),
            },
        }
    }

    /// Batches are refused whole in a session at a version without them, and when longer
    /// than the session may have requests in flight: one error, id null, since no single
    /// request of the batch is answered.
    pub fn batch_refused(&self, len: usize) -> Option<RpcError> {
        let version = self.peer.protocol_version();
        if self.peer.is_initialized() && !protocol::batching_allowed(&version) {
            return Some(RpcError::new(
                protocol::INVALID_REQUEST,
                format!(
                    "Invalid Request: JSON-RPC batching was removed in MCP 2025-06-18 and this session uses {version}; send each message on its own"
                ),
            ));
        }
        let most = self.bounds.get()?.per_session;
        (len > most).then(|| {
            RpcError::new(
                protocol::INVALID_REQUEST,
                format!(
                    "Invalid Request: a batch of {len} messages; at most {most} \
                     (max_requests_per_session) are taken in one"
                ),
            )
        })
    }

    /// Takes one message from the client, whatever the transport: a notification or the
    /// client's answer to a request of the gateway's is acted on, a request is registered in
    /// flight at once (so a cancel finds it) and answered, now or by the future returned.
    /// What the session sends on its own (progress, log messages, `list_changed`, requests
    /// to the client) goes through its peer, not here.
    pub fn handle(self: &Arc<Self>, message: Message) -> Handled {
        match message {
            Message::Request { id, method, params } if method == methods::INITIALIZE => {
                let answer = self.initialize(params).map(Reply::from);
                Handled::Answer(protocol::response_line(&id, answer))
            }
            Message::Request { id, method, params } => match self.begin(&id) {
                Err(error) => Handled::Answer(protocol::response_line(&id, Err(error))),
                Ok(started) => {
                    let session = self.clone();
                    Handled::Running(Box::pin(async move {
                        let answer = session.run(started, &method, params).await?;
                        Some(protocol::response_line(&id, answer))
                    }))
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

    /// [`Self::handle`] for a transport with one stream back (stdio): answers go to the peer's
    /// queue as they come.
    fn handle_message(self: &Arc<Self>, message: Message) {
        match self.handle(message) {
            Handled::Nothing => {}
            Handled::Answer(line) => self.send_line(line),
            Handled::Running(answer) => {
                let session = self.clone();
                run_or_spawn(async move {
                    if let Some(line) = answer.await {
                        session.send_line(line);
                    }
                });
            }
        }
    }

    /// Runs a batch's requests concurrently, each in flight (cancellable, waited for at
    /// shutdown) from the moment the line is read, as a single request is; answers with
    /// one array in the batch's order, where a cancelled member has no entry.
    fn handle_batch(self: &Arc<Self>, items: Vec<Result<Message, (Value, RpcError)>>) {
        let mut entries = Vec::new();
        for item in items {
            match item {
                Err((id, error)) => entries.push(BatchEntry::Answered(
                    protocol::error_response(id, &error).to_string(),
                )),
                Ok(Message::Request { id, method, .. }) if method == methods::INITIALIZE => {
                    let error = RpcError::new(
                        protocol::INVALID_REQUEST,
                        "Invalid Request: initialize must not be part of a batch (MCP 2025-03-26); send it on its own",
                    );
                    entries.push(BatchEntry::Answered(protocol::response_line(
                        &id,
                        Err(error),
                    )));
                }
                Ok(message) => {
                    let id = match &message {
                        Message::Request { id, .. } => id.clone(),
                        _ => Value::Null,
                    };
                    match self.handle(message) {
                        Handled::Nothing => {}
                        Handled::Answer(line) => entries.push(BatchEntry::Answered(line)),
                        Handled::Running(answer) => {
                            entries.push(BatchEntry::Running(id, tokio::spawn(answer)))
                        }
                    }
                }
            }
        }
        let session = self.clone();
        tokio::spawn(async move { session.answer_batch(entries).await });
    }

    async fn answer_batch(&self, entries: Vec<BatchEntry>) {
        let mut answers = Vec::new();
        for entry in entries {
            match entry {
                BatchEntry::Answered(line) => answers.push(line),
                BatchEntry::Running(id, task) => match task.await {
                    Ok(Some(line)) => answers.push(line),
                    Ok(None) => {}
                    Err(_) => answers.push(protocol::response_line(
                        &id,
                        Err(RpcError::new(
                            protocol::INTERNAL_ERROR,
                            "Internal error: the request's task ended without an answer",
                        )),
                    )),
                },
            }
        }
        if !answers.is_empty() {
            self.send_line(format!("[{}]", answers.join(",")));
        }
    }

    /// Registers request `id` as in flight; refused while another request with the same
    /// id is (JSON-RPC ids tell a client's answers apart, so both would be lost).
    fn begin(&self, id: &Value) -> Result<Started, RpcError> {
        let key = request_key(id);
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
        let outcome = tokio::select! {
            answer = self.request(method, params, &started.key) => Some(answer),
            // A cancelled request gets no answer (the specification says so).
            _ = started.cancelled => None,
        };
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

    fn initialize(&self, params: Option<Value>) -> Result<Value, RpcError> {
        let (requested, capabilities, info) = initialize_params(params.as_ref())?;
        let version = protocol::negotiate_version(Some(requested));
        if let Err(before) = self
            .peer
            .initialized(version, capabilities.clone(), info.clone())
        {
            return Err(RpcError::new(
                protocol::INVALID_REQUEST,
                format!(
                    "Invalid Request: already initialized (protocol version {before}); initialize is sent once per session"
                ),
            ));
        }
        tracing::info!(session = %self.peer.id, client = %info, version, "client initialized");
        Ok(Router::new(&self.gateway).initialize_result(&self.peer, version))
    }

    async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
        key: &str,
    ) -> Result<Reply, RpcError> {
        if method != methods::PING && !self.peer.is_initialized() {
            return Err(RpcError::new(
                protocol::NOT_INITIALIZED,
                format!("Server not initialized: send `initialize` before `{method}`"),
            ));
        }
        check_progress_token(params.as_ref())?;
        let context = RequestContext {
            trace_id: new_trace_id(),
            peer: self.peer.clone(),
            request: Some(Arc::from(key)),
        };
        Router::new(&self.gateway)
            .dispatch(&context, method, params)
            .await
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
                if let Some(request) = self.in_flight.lock().unwrap().remove(&key) {
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

/// Polls a request's future once here, on the reader's turn, and spawns a task for it only
/// if it waits. Most requests end in that poll (a plugin call on a ready instance, a list
/// from the catalog): no task to allocate and schedule, and the answer is queued before the
/// next line is read. A future that waits is polled again by its task, which registers the
/// task's waker in place of the no-op one of this poll (every future wakes the waker of its
/// latest poll). A panic in that poll ends the request alone, as it would in a task: the
/// reader goes on.
fn run_or_spawn(request: impl Future<Output = ()> + Send + 'static) {
    let mut request = Box::pin(request);
    let mut here = std::task::Context::from_waker(std::task::Waker::noop());
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        request.as_mut().poll(&mut here)
    }));
    match first {
        Ok(std::task::Poll::Ready(())) => {}
        Ok(std::task::Poll::Pending) => {
            tokio::spawn(request);
        }
        Err(_) => tracing::error!("a request's handler panicked; it gets no answer"),
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
pub fn request_key(id: &Value) -> String {
    match id.as_f64() {
        Some(n) if n.fract() == 0.0 && n.abs() < protocol::EXACT_FLOAT_INTEGERS => {
            format!("{}", n as i64)
        }
        _ => id.to_string(),
    }
}

/// The `initialize` params the schema requires: `protocolVersion` (a string),
/// `capabilities` (an object) and `clientInfo` (an object with string `name` and `version`).
/// Not lenient about their absence: the official TypeScript and Python SDK servers refuse
/// such an `initialize` too, so clients in the field send them. Lenient where the
/// specification is: a version the gateway does not speak is negotiated, not refused, and
/// fields it does not know (in the capabilities too) are accepted.
fn initialize_params(params: Option<&Value>) -> Result<(&str, &Value, &Value), RpcError> {
    let invalid =
        |problem: &str| RpcError::invalid_params(format!("Invalid params: initialize: {problem}"));
    let params = params.ok_or_else(|| {
        invalid("params are required: {\"protocolVersion\", \"capabilities\", \"clientInfo\"}")
    })?;
    let version = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            invalid("protocolVersion is required and must be a string, e.g. \"2025-06-18\"")
        })?;
    let capabilities = params
        .get("capabilities")
        .filter(|c| c.is_object())
        .ok_or_else(|| invalid("capabilities is required and must be an object ({} for none)"))?;
    let info = params
        .get("clientInfo")
        .filter(|i| ["name", "version"].iter().all(|key| i[key].is_string()))
        .ok_or_else(|| invalid("clientInfo is required: an object with string name and version"))?;
    Ok((version, capabilities, info))
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::run_or_spawn;

    /// A request that needs no wait has run when `run_or_spawn` returns; one that waits is
    /// finished by its task once woken, though its first poll saw a no-op waker.
    #[tokio::test]
    async fn requests_run_at_once_or_in_a_task_once_woken() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        run_or_spawn(async move { flag.store(true, Ordering::SeqCst) });
        assert!(done.load(Ordering::SeqCst), "ran in the first poll");

        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let (result_tx, result_rx) = tokio::sync::oneshot::channel();
        run_or_spawn(async move {
            let value = rx.await.unwrap();
            result_tx.send(value + 1).unwrap();
        });
        tokio::task::yield_now().await;
        tx.send(41).unwrap();
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), result_rx)
            .await
            .expect("the task was woken")
            .unwrap();
        assert_eq!(answer, 42);

        // A request that panics ends alone; the next one runs.
        run_or_spawn(async { panic!("a bug in one request") });
        let after = Arc::new(AtomicBool::new(false));
        let flag = after.clone();
        run_or_spawn(async move { flag.store(true, Ordering::SeqCst) });
        assert!(after.load(Ordering::SeqCst));
    }
}
