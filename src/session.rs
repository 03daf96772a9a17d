//! One client connection, whatever the transport: the MCP lifecycle, version
//! negotiation, requests in flight (for cancellation) and requests the gateway sends
//! to the client. Per-request state lives in `RequestContext`, apart from the session's.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::gateway::Gateway;
use crate::pipe::outbox::Outbox;
use crate::protocol::{self, Incoming, Message, Reply, RpcError};
use crate::telemetry::events::new_trace_id;

/// What a client said about itself at `initialize`.
#[derive(Debug, Clone, Default)]
struct ClientState {
    initialized: bool,
    protocol_version: String,
    capabilities: Value,
    info: Value,
}

/// State of one request: what the stateless protocol versions carry in `_meta` instead of the session.
pub struct RequestContext {
    pub trace_id: String,
    pub session: Arc<Session>,
}

/// A client request in flight: the switch that cancels it, and which request it is (an id
/// may be used again once its request ended, while the task of the old one still winds down).
struct InFlight {
    cancel: oneshot::Sender<()>,
    serial: u64,
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
    Running(Value, tokio::task::JoinHandle<Outcome>),
}

/// A request the gateway forwarded to the client on a server's behalf.
struct Forwarded {
    server: String,
    server_request_id: Value,
    reply: oneshot::Sender<Result<Value, RpcError>>,
}

pub struct Session {
    pub id: u64,
    pub gateway: Arc<Gateway>,
    out: Outbox,
    client: Mutex<ClientState>,
    /// Client requests in flight, by [`request_key`] of their id.
    in_flight: Mutex<HashMap<String, InFlight>>,
    next_serial: AtomicU64,
    forwarded: Mutex<HashMap<u64, Forwarded>>,
    next_request_id: AtomicU64,
    /// Woken whenever a request in flight ends, for the drain after the client left.
    request_ended: tokio::sync::Notify,
    /// The client's `logging/setLevel`, as a rank from debug (0) to emergency (7);
    /// `NO_LOG_LEVEL` until it sets one.
    log_level: AtomicU8,
    /// Which lists the client has asked for ([`list_bit`]): a list change is announced
    /// only to a client that holds a list it makes stale.
    listed: AtomicU8,
}

const NO_LOG_LEVEL: u8 = u8::MAX;

/// The bit of [`Session::listed`] for a list request or its change notification.
fn list_bit(method: &str) -> Option<u8> {
    match method {
        "tools/list" | "notifications/tools/list_changed" => Some(1),
        "prompts/list" | "notifications/prompts/list_changed" => Some(2),
        "resources/list" | "resources/templates/list" | "notifications/resources/list_changed" => {
            Some(4)
        }
        _ => None,
    }
}

static NEXT_SESSION: AtomicU64 = AtomicU64::new(1);

impl Session {
    /// `out` receives every line to send to the client, in order.
    pub fn new(gateway: Arc<Gateway>, out: Outbox) -> Arc<Session> {
        let session = Arc::new(Session {
            id: NEXT_SESSION.fetch_add(1, Ordering::Relaxed),
            gateway,
            out,
            client: Mutex::new(ClientState::default()),
            in_flight: Mutex::new(HashMap::new()),
            next_serial: AtomicU64::new(0),
            forwarded: Mutex::new(HashMap::new()),
            next_request_id: AtomicU64::new(1),
            request_ended: tokio::sync::Notify::new(),
            log_level: AtomicU8::new(NO_LOG_LEVEL),
            listed: AtomicU8::new(0),
        });
        session.gateway.register_session(&session);
        session
    }

    pub fn send(&self, message: Value) {
        // A notification to a client that stopped reading is dropped (and counted); answers
        // and requests always queue, and the reader stops taking requests meanwhile.
        if message.get("id").is_none() {
            self.out.send_or_drop(message.to_string());
        } else {
            self.out.send(message.to_string());
        }
    }

    fn send_line(&self, line: String) {
        self.out.send(line);
    }

    /// Sends a notification once the client is past `initialize`.
    pub fn notify(&self, method: &str, params: Option<Value>) {
        if self.client.lock().unwrap().initialized {
            self.send(protocol::notification(method, params));
        }
    }

    /// Sends `notifications/{tools,prompts,resources}/list_changed`, if the client has
    /// listed what changed. A client that lists later gets the new list anyway; before its
    /// first list (while plugins load at start-up, say) the notice would only make it list twice.
    pub fn notify_list_changed(&self, method: &str) {
        let listed = self.listed.load(Ordering::Acquire);
        if list_bit(method).is_none_or(|bit| listed & bit != 0) {
            self.notify(method, None);
        }
    }

    /// The client is about to read a list (`method`): changes to it are announced from now on.
    pub fn mark_listed(&self, method: &str) {
        if let Some(bit) = list_bit(method) {
            self.listed.fetch_or(bit, Ordering::AcqRel);
        }
    }

    pub fn set_log_level(&self, rank: u8) {
        self.log_level.store(rank, Ordering::Relaxed);
    }

    /// The rank of the client's `logging/setLevel`, if it set one.
    pub fn log_level(&self) -> Option<u8> {
        Some(self.log_level.load(Ordering::Relaxed)).filter(|&r| r != NO_LOG_LEVEL)
    }

    /// Whether the level the client set admits a message at `level`; `unset`: the answer
    /// when it set none.
    pub fn admits_log(&self, level: &str, unset: bool) -> bool {
        let rank = protocol::log_rank(level);
        match self.log_level() {
            Some(min) => rank >= Some(min),
            None => unset,
        }
    }

    /// Sends `notifications/message` if the client's level admits `level`; `unset`: whether
    /// a client that set no level gets it.
    pub fn log(&self, level: &str, logger: &str, data: &str, unset: bool) {
        if self.admits_log(level, unset) {
            self.notify(
                "notifications/message",
                Some(json!({"level": level, "logger": logger, "data": data})),
            );
        }
    }

    /// Whether this client gets a tool's invalid arguments as a tool error result (its
    /// protocol version is 2025-11-25 or later), not as error -32602.
    pub fn argument_errors_are_results(&self) -> bool {
        protocol::argument_errors_are_results(&self.client.lock().unwrap().protocol_version)
    }

    pub fn client_has(&self, capability: &str) -> bool {
        self.client
            .lock()
            .unwrap()
            .capabilities
            .get(capability)
            .is_some_and(|c| !c.is_null())
    }

    /// Resolves when no request is in flight, or at `deadline`.
    pub async fn drained(&self, deadline: tokio::time::Instant) {
        loop {
            let ended = self.request_ended.notified();
            tokio::pin!(ended);
            // Registered before the check, so an end between the check and the wait is not missed.
            ended.as_mut().enable();
            if self.in_flight.lock().unwrap().is_empty() {
                return;
            }
            if tokio::time::timeout_at(deadline, ended).await.is_err() {
                return;
            }
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
            Ok(Incoming::Batch(items)) => match self.batch_refused() {
                Some(error) => self.send(protocol::error_response(Value::Null, &error)),
                None => self.handle_batch(items),
            },
        }
    }

    /// Batches are refused whole in a session at a version without them: one error, id null,
    /// since no single request of the batch is answered.
    fn batch_refused(&self) -> Option<RpcError> {
        let client = self.client.lock().unwrap();
        (client.initialized && !protocol::batching_allowed(&client.protocol_version)).then(|| {
            RpcError::new(
                protocol::INVALID_REQUEST,
                format!(
                    "Invalid Request: JSON-RPC batching was removed in MCP 2025-06-18 and this session uses {}; send each message on its own line",
                    client.protocol_version
                ),
            )
        })
    }

    fn handle_message(self: &Arc<Self>, message: Message) {
        match message {
            Message::Request { id, method, params } if method == "initialize" => {
                let answer = self.initialize(params).map(Reply::from);
                self.send_line(protocol::response_line(&id, answer));
            }
            Message::Request { id, method, params } => match self.begin(&id) {
                Err(error) => self.send(protocol::error_response(id, &error)),
                Ok(started) => {
                    let session = self.clone();
                    run_or_spawn(async move {
                        if let Some(answer) = session.run(started, &method, params).await {
                            session.send_line(protocol::response_line(&id, answer));
                        }
                    });
                }
            },
            Message::Notification { method, params } => self.notification(&method, params),
            Message::Response { id, result } => self.client_answered(&id, result),
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
                Ok(Message::Request { id, method, .. }) if method == "initialize" => {
                    let error = RpcError::new(
                        protocol::INVALID_REQUEST,
                        "Invalid Request: initialize must not be part of a batch (MCP 2025-03-26); send it on its own",
                    );
                    entries.push(BatchEntry::Answered(protocol::response_line(
                        &id,
                        Err(error),
                    )));
                }
                Ok(Message::Request { id, method, params }) => match self.begin(&id) {
                    Err(error) => entries.push(BatchEntry::Answered(protocol::response_line(
                        &id,
                        Err(error),
                    ))),
                    Ok(started) => {
                        let session = self.clone();
                        let task =
                            tokio::spawn(
                                async move { session.run(started, &method, params).await },
                            );
                        entries.push(BatchEntry::Running(id, task));
                    }
                },
                Ok(other) => self.handle_message(other),
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
                    Ok(Some(answer)) => answers.push(protocol::response_line(&id, answer)),
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
        let serial = self.next_serial.fetch_add(1, Ordering::Relaxed);
        let (cancel, cancelled) = oneshot::channel();
        in_flight.insert(key.clone(), InFlight { cancel, serial });
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
            answer = self.request(method, params) => Some(answer),
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
        {
            let mut client = self.client.lock().unwrap();
            // Renegotiating mid-session would change the rules under requests in flight.
            if client.initialized {
                return Err(RpcError::new(
                    protocol::INVALID_REQUEST,
                    format!(
                        "Invalid Request: already initialized (protocol version {}); initialize is sent once per session",
                        client.protocol_version
                    ),
                ));
            }
            client.initialized = true;
            client.protocol_version = version.to_string();
            client.capabilities = capabilities.clone();
            client.info = info.clone();
        }
        tracing::info!(session = self.id, client = %info, version, "client initialized");
        Ok(self.gateway.initialize_result(version))
    }

    async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
    ) -> Result<Reply, RpcError> {
        if method != "ping" && !self.client.lock().unwrap().initialized {
            return Err(RpcError::new(
                protocol::NOT_INITIALIZED,
                format!("Server not initialized: send `initialize` before `{method}`"),
            ));
        }
        check_progress_token(params.as_ref())?;
        let context = RequestContext {
            trace_id: new_trace_id(),
            session: self.clone(),
        };
        self.gateway.dispatch(&context, method, params).await
    }

    fn notification(self: &Arc<Self>, method: &str, params: Option<Value>) {
        match method {
            "notifications/initialized" | "initialized" => {}
            "notifications/cancelled" => {
                let key = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .map(request_key)
                    .unwrap_or_default();
                if let Some(request) = self.in_flight.lock().unwrap().remove(&key) {
                    let _ = request.cancel.send(());
                }
            }
            "notifications/roots/list_changed" => {
                for backend in self.gateway.process_backends() {
                    backend.notify(method, params.clone());
                }
            }
            _ => tracing::debug!(method, "client notification ignored"),
        }
    }

    /// Sends a request to the client on behalf of `server` and waits for the answer.
    pub async fn request_client(
        &self,
        server: &str,
        server_request_id: Value,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, RpcError> {
        let id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        {
            let mut forwarded = self.forwarded.lock().unwrap();
            if forwarded.len() >= MAX_FORWARDED {
                return Err(RpcError::new(
                    protocol::BACKEND_UNAVAILABLE,
                    format!(
                        "the client has {MAX_FORWARDED} requests from servers still unanswered; \
                         {method} was not sent to it"
                    ),
                ));
            }
            forwarded.insert(
                id,
                Forwarded {
                    server: server.to_string(),
                    server_request_id,
                    reply,
                },
            );
        }
        self.send(protocol::request(json!(format!("wg-{id}")), method, params));
        // A client that never answers: the server's call would time out anyway, and the
        // entry would stay for the session's life.
        let limit = self.gateway.config.load().gateway.timeout;
        match tokio::time::timeout(limit, answer).await {
            Ok(answer) => answer.unwrap_or_else(|_| {
                Err(RpcError::new(
                    protocol::INTERNAL_ERROR,
                    "the client went away",
                ))
            }),
            Err(_) => {
                if self.forwarded.lock().unwrap().remove(&id).is_some() {
                    self.send(protocol::notification(
                        "notifications/cancelled",
                        Some(json!({"requestId": format!("wg-{id}"), "reason": "timed out"})),
                    ));
                }
                Err(RpcError::new(
                    protocol::REQUEST_TIMEOUT,
                    format!(
                        "the client did not answer {method} within {} ms",
                        limit.as_millis()
                    ),
                ))
            }
        }
    }

    fn client_answered(&self, id: &Value, result: Result<Value, RpcError>) {
        let Some(n) = id
            .as_str()
            .and_then(|s| s.strip_prefix("wg-"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            tracing::debug!(%id, "answer to no request of ours");
            return;
        };
        if let Some(forwarded) = self.forwarded.lock().unwrap().remove(&n) {
            let _ = forwarded.reply.send(result);
        }
    }

    /// The server `server` cancelled its request `request_id`: pass that on if it came through here.
    pub fn cancel_forwarded(&self, server: &str, request_id: &Value) {
        let mut forwarded = self.forwarded.lock().unwrap();
        let found = forwarded
            .iter()
            .find(|(_, f)| f.server == server && &f.server_request_id == request_id)
            .map(|(id, _)| *id);
        if let Some(id) = found {
            forwarded.remove(&id);
            self.send(protocol::notification(
                "notifications/cancelled",
                Some(json!({"requestId": format!("wg-{id}")})),
            ));
        }
    }
}

/// Requests from servers one client may have unanswered at once.
const MAX_FORWARDED: usize = 64;

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
fn request_key(id: &Value) -> String {
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
