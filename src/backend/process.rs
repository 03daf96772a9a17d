//! A subprocess MCP server: newline-delimited JSON-RPC over its stdin/stdout.
//! One supervisor task per server starts it, performs the handshake and discovery,
//! restarts it with backoff after a crash and stops it on shutdown; one `Connection`
//! per child correlates many requests in flight by rewritten ids.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::{ArcSwap, ArcSwapOption};
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};

use super::{BackendError, BackendEvent, BackendState, Discovered, ListKind};
use crate::config::ServerConfig;
use crate::pipe::lines::{self, Line};
use crate::pipe::outbox::{Outbox, outbox, write_lines};
use crate::protocol::{self, Message, RpcError};
use crate::telemetry::events::{EventLog, Status};

/// What the gateway offers to forward to its servers. Servers are shared and start
/// before any client connects, so this is what the gateway can do, not what a client can.
fn client_capabilities() -> Value {
    json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}})
}

/// A run of this long resets the count of consecutive failures. A shorter one counts as a
/// failure even after a good start: a server that crashes soon after each `initialize` is
/// in a crash loop as surely as one that never starts.
const HEALTHY_RUN: Duration = Duration::from_secs(30);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub struct ProcessBackend {
    name: String,
    /// Swapped by a config reload that changes only what needs no new process (filters,
    /// timeouts, namespace); a change to the process itself replaces the whole backend.
    config: ArcSwap<ServerConfig>,
    state: watch::Sender<BackendState>,
    connection: ArcSwapOption<Connection>,
    discovered: ArcSwap<Discovered>,
    restarts: AtomicU32,
    pid: AtomicU32,
    last_error: Mutex<Option<String>>,
    stopping: watch::Sender<bool>,
    events: Arc<EventLog>,
    to_gateway: mpsc::UnboundedSender<BackendEvent>,
    max_restarts: u32,
    /// For `initialize` and the first lists of each start.
    init_timeout: Duration,
    shutdown_grace: Duration,
}

/// Answers one request that a server sent to the client.
#[derive(Debug)]
pub struct Responder {
    connection: Arc<Connection>,
    id: Value,
}

impl Responder {
    /// The server's id for its request.
    pub fn id(&self) -> &Value {
        &self.id
    }

    pub fn send(self, result: Result<Value, RpcError>) {
        self.connection.send(protocol::response(self.id, result));
    }
}

/// How long a server may take no line from a full queue before it counts as not reading.
const STDIN_STALL: Duration = Duration::from_secs(2);

/// Where the answer to a request in flight goes: the result as JSON text, or the error.
type AnswerSender = oneshot::Sender<Result<Box<RawValue>, RpcError>>;

/// The live pipes of one child process.
#[derive(Debug)]
struct Connection {
    server: String,
    writer: Outbox,
    pending: Mutex<HashMap<u64, AnswerSender>>,
    next_id: AtomicU64,
    closed: AtomicBool,
    /// Set before the gateway stops the process, so that requests it cuts short say so.
    stopped: AtomicBool,
}

impl Connection {
    /// Sends a notification; dropped (and counted) when the server stopped reading.
    fn send(&self, message: Value) {
        self.writer.send_or_drop(message.to_string());
    }

    /// Sends a request and waits for its answer, read into a `Value`.
    async fn request(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, BackendError> {
        let raw = self.request_raw(method, params, timeout).await?;
        serde_json::from_str(raw.get()).map_err(|e| BackendError::Rpc {
            server: self.server.clone(),
            error: RpcError::new(protocol::INTERNAL_ERROR, format!("unreadable result: {e}")),
        })
    }

    /// Sends a request and waits for its answer, kept as the server's JSON text. Dropping
    /// the future (timeout, client cancellation) tells the server with `notifications/cancelled`.
    async fn request_raw(
        self: &Arc<Self>,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Box<RawValue>, BackendError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        if self.closed.load(Ordering::Acquire) {
            self.pending.lock().unwrap().remove(&id);
            // Gone before this request was sent: it never reached the process.
            return Err(match self.gone() {
                BackendError::Crashed { server } => BackendError::Unavailable {
                    server,
                    state: "not running (its process exited)",
                },
                stopped => stopped,
            });
        }
        // Over budget: wait while the server reads, slowly or not; fail at once when it
        // stopped reading.
        let started = tokio::time::Instant::now();
        while self.writer.is_full() {
            if self.writer.stalled_for() >= STDIN_STALL || started.elapsed() >= timeout {
                self.pending.lock().unwrap().remove(&id);
                return Err(BackendError::NotReading {
                    server: self.server.clone(),
                    backlog: self.writer.backlog(),
                });
            }
            let _ = tokio::time::timeout(STDIN_STALL / 4, self.writer.room()).await;
        }
        let mut guard = PendingGuard {
            connection: self,
            id,
            done: false,
        };
        self.writer
            .send(protocol::request(id.into(), method, params).to_string());
        let outcome = tokio::time::timeout(timeout, rx).await;
        guard.done = outcome.is_ok();
        match outcome {
            // Every MCP result is a JSON object; anything else would reach the client as it
            // is, and clients drop such an answer (the call then hangs until their timeout).
            Ok(Ok(Ok(result))) if !result.get().trim_start().starts_with('{') => {
                Err(BackendError::NotAnObject {
                    server: self.server.clone(),
                    result: result.get().chars().take(100).collect(),
                })
            }
            Ok(Ok(Ok(result))) => Ok(result),
            Ok(Ok(Err(error))) => Err(BackendError::Rpc {
                server: self.server.clone(),
                error,
            }),
            Ok(Err(_)) => Err(self.gone()),
            Err(_) => Err(BackendError::Timeout {
                server: self.server.clone(),
                timeout,
            }),
        }
    }

    fn complete(&self, id: u64, result: Result<Box<RawValue>, RpcError>) {
        match self.pending.lock().unwrap().remove(&id) {
            Some(tx) => {
                let _ = tx.send(result);
            }
            // The answer to a request the stop cut short (`initialize`, when a one-shot
            // command is done before a slow server is up): expected, no warning.
            None if self.stopped.load(Ordering::Acquire) => {
                tracing::debug!(server = %self.server, id, "an answer after the stop; ignored")
            }
            None => tracing::warn!(
                server = %self.server,
                id,
                "an answer to no request waiting for one (a wrong id, a second answer, or after the request timed out); ignored"
            ),
        }
    }

    /// Why a request ended without an answer: the gateway stopped the server, or it died.
    fn gone(&self) -> BackendError {
        let server = self.server.clone();
        if self.stopped.load(Ordering::Acquire) {
            BackendError::Stopped { server }
        } else {
            BackendError::Crashed { server }
        }
    }

    /// Fails every request in flight at once: their senders drop.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pending.lock().unwrap().clear();
    }
}

struct PendingGuard<'a> {
    connection: &'a Arc<Connection>,
    id: u64,
    done: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if self
            .connection
            .pending
            .lock()
            .unwrap()
            .remove(&self.id)
            .is_some()
        {
            self.connection.send(protocol::notification(
                "notifications/cancelled",
                Some(json!({"requestId": self.id, "reason": "cancelled by the gateway (timeout or client cancellation)"})),
            ));
        }
    }
}

impl ProcessBackend {
    pub fn start(
        config: ServerConfig,
        gateway: &crate::config::GatewayConfig,
        events: Arc<EventLog>,
        to_gateway: mpsc::UnboundedSender<BackendEvent>,
    ) -> Arc<Self> {
        let backend = Arc::new(ProcessBackend {
            name: config.name.clone(),
            config: ArcSwap::from_pointee(config),
            state: watch::channel(BackendState::Starting).0,
            connection: ArcSwapOption::empty(),
            discovered: ArcSwap::from_pointee(Discovered::default()),
            restarts: AtomicU32::new(0),
            pid: AtomicU32::new(0),
            last_error: Mutex::new(None),
            stopping: watch::channel(false).0,
            events,
            to_gateway,
            max_restarts: gateway.max_restarts,
            init_timeout: gateway.init_timeout,
            shutdown_grace: gateway.shutdown_grace,
        });
        tokio::spawn(backend.clone().supervise());
        backend
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.load_full()
    }

    /// Takes a reloaded entry whose process settings are unchanged (`reload::same_process`):
    /// calls in flight go on, the next catalog build and calls use the new settings.
    pub fn update_config(&self, config: ServerConfig) {
        let filter_changed = !config.tool_filter.same_as(&self.config.load().tool_filter);
        self.config.store(Arc::new(config));
        if filter_changed && self.state() == BackendState::Ready {
            self.warn_unmatched_filter();
        }
    }

    /// Says which `tools` / `disabled_tools` patterns match none of the server's tools.
    fn warn_unmatched_filter(&self) {
        let config = self.config.load();
        let discovered = self.discovered.load();
        let names: Vec<&str> = discovered
            .tools
            .iter()
            .filter_map(|tool| tool["name"].as_str())
            .collect();
        let unmatched = config.tool_filter.unmatched(&names);
        if !unmatched.is_empty() {
            tracing::warn!(
                server = %self.name,
                "tool filter patterns that match none of its {} tools: {} (a typo, or a tool the server renamed)",
                names.len(),
                unmatched.join(", ")
            );
        }
    }

    pub fn state(&self) -> BackendState {
        *self.state.borrow()
    }

    pub fn discovered(&self) -> Arc<Discovered> {
        self.discovered.load_full()
    }

    pub fn restarts(&self) -> u32 {
        self.restarts.load(Ordering::Relaxed)
    }

    pub fn pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::Relaxed)).filter(|p| *p != 0)
    }

    pub fn last_error(&self) -> Option<String> {
        self.last_error.lock().unwrap().clone()
    }

    /// Resolves once the server has left `Starting` (ready, failed, ...) or `deadline` passed.
    pub async fn wait_started(&self, deadline: tokio::time::Instant) {
        let mut rx = self.state.subscribe();
        let _ =
            tokio::time::timeout_at(deadline, rx.wait_for(|s| *s != BackendState::Starting)).await;
    }

    /// Timeout for one call of `tool` (per-tool override, else the server's).
    pub fn timeout_for(&self, tool: Option<&str>) -> Duration {
        let config = self.config.load();
        tool.and_then(|t| config.tool_timeouts.get(t))
            .copied()
            .unwrap_or(config.timeout)
    }

    /// Forwards a request. Fails at once unless the server is ready.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, BackendError> {
        self.ready_connection()?
            .request(method, params, timeout)
            .await
    }

    /// Forwards a request whose result goes back to a client as the server wrote it.
    pub async fn request_raw(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Box<RawValue>, BackendError> {
        self.ready_connection()?
            .request_raw(method, params, timeout)
            .await
    }

    fn ready_connection(&self) -> Result<Arc<Connection>, BackendError> {
        let state = self.state();
        match (state, self.connection.load_full()) {
            (BackendState::Ready, Some(c)) => Ok(c),
            _ => Err(BackendError::Unavailable {
                server: self.name.clone(),
                state: state.as_str(),
            }),
        }
    }

    pub fn notify(&self, method: &str, params: Option<Value>) {
        if let Some(connection) = self.connection.load_full() {
            connection.send(protocol::notification(method, params));
        }
    }

    /// Re-fetches one list after the server said it changed.
    pub async fn refresh(&self, kind: ListKind) -> Result<(), BackendError> {
        let Some(connection) = self.connection.load_full() else {
            return Ok(());
        };
        let mut next = (*self.discovered.load_full()).clone();
        let timeout = self.config.load().timeout;
        match kind {
            ListKind::Tools => {
                next.tools = usable_tools(
                    &self.name,
                    list_all(&connection, "tools/list", "tools", timeout).await?,
                )
            }
            ListKind::Prompts => {
                next.prompts = list_all(&connection, "prompts/list", "prompts", timeout).await?
            }
            ListKind::Resources => {
                next.resources =
                    list_all(&connection, "resources/list", "resources", timeout).await?;
                next.resource_templates = list_all(
                    &connection,
                    "resources/templates/list",
                    "resourceTemplates",
                    timeout,
                )
                .await?;
            }
        }
        self.discovered.store(Arc::new(next));
        Ok(())
    }

    /// Stops the server: stdin closed, then SIGTERM, then SIGKILL, each after the grace period.
    pub async fn stop(&self) {
        self.stopping.send_replace(true);
        let mut rx = self.state.subscribe();
        let _ = rx
            .wait_for(|s| matches!(s, BackendState::Stopped | BackendState::Failed))
            .await;
    }

    fn set_state(&self, state: BackendState) {
        self.state.send_replace(state);
        let _ = self.to_gateway.send(BackendEvent::Changed {
            server: self.name.clone(),
        });
    }

    fn fail(&self, message: String) {
        tracing::warn!(server = %self.name, "{message}");
        *self.last_error.lock().unwrap() = Some(message);
    }

    async fn supervise(self: Arc<Self>) {
        let name = self.name.clone();
        let mut stopping = self.stopping.subscribe();
        let mut failures: u32 = 0;
        loop {
            let started = Instant::now();
            let outcome = self.run_once(&mut stopping).await;
            self.connection.store(None);
            self.pid.store(0, Ordering::Relaxed);
            if *stopping.borrow() {
                self.set_state(BackendState::Stopped);
                self.events
                    .emit("backend.stopped", &name, Status::Success, Value::Null);
                return;
            }
            if let Err(message) = outcome {
                self.fail(message);
            }
            if started.elapsed() >= HEALTHY_RUN {
                failures = 0;
            }
            failures += 1;
            let last_error = self.last_error();
            if failures > self.max_restarts {
                self.events.emit(
                    "backend.failed",
                    &name,
                    Status::Failure,
                    json!({"error": last_error, "failures": failures}),
                );
                tracing::error!(
                    server = %name,
                    failures,
                    "giving up on the server: {failures} crashes or failed starts in a row, each within {} s of starting (max_restarts = {})",
                    HEALTHY_RUN.as_secs(),
                    self.max_restarts
                );
                self.set_state(BackendState::Failed);
                return;
            }
            self.events.emit(
                "backend.crashed",
                &name,
                Status::Failure,
                json!({"error": last_error}),
            );
            self.set_state(BackendState::Restarting);
            let backoff = Duration::from_millis(100 << (failures - 1).min(12)).min(MAX_BACKOFF);
            tracing::info!(server = %name, backoff_ms = backoff.as_millis() as u64, "restarting");
            tokio::select! {
                _ = tokio::time::sleep(backoff) => {}
                _ = stop_requested(&mut stopping) => {}
            }
            if *stopping.borrow() {
                self.set_state(BackendState::Stopped);
                return;
            }
            self.restarts.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// One life of the child: spawn, handshake, serve until it exits or we stop it.
    async fn run_once(
        self: &Arc<Self>,
        stopping: &mut watch::Receiver<bool>,
    ) -> Result<(), String> {
        let name = &self.name;
        let config = self.config.load_full();
        let mut child =
            spawn(&config).map_err(|e| format!("cannot start `{}`: {e}", config.command))?;
        let pid = child.id().unwrap_or(0);
        self.pid.store(pid, Ordering::Relaxed);
        let restarted = self.restarts() > 0;
        self.events.emit(
            "backend.started",
            name,
            Status::Pending,
            json!({"pid": pid, "command": config.command}),
        );

        let (writer_tx, writer_rx) = outbox(format!("server `{name}`"));
        let connection = Arc::new(Connection {
            server: name.clone(),
            writer: writer_tx,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
        });
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        tokio::spawn(write_lines(stdin, writer_rx));
        let last_stderr = Arc::new(Mutex::new(String::new()));
        let stderr_logger = tokio::spawn(super::stderr::log_stderr(
            name.clone(),
            stderr,
            last_stderr.clone(),
        ));
        let reader = tokio::spawn(read_lines(
            connection.clone(),
            stdout,
            self.to_gateway.clone(),
        ));

        let begun = Instant::now();
        let handshake = tokio::select! {
            r = self.handshake(&connection) => match r {
                // A request fails when the process exits under it: say how it exited.
                Err(_) if let Some(exit) = exit_soon(&mut child).await => {
                    Err(format!("exited during start-up ({exit})"))
                }
                other => other,
            },
            _ = stop_requested(stopping) => {
                connection.stopped.store(true, Ordering::Release);
                Err("stopped during start-up".to_string())
            }
            status = child.wait() => Err(format!("exited during start-up ({})", describe_exit(status))),
        };
        if let Err(mut message) = handshake {
            // The reason is often the last thing it wrote to stderr ("command not found").
            let _ = tokio::time::timeout(Duration::from_millis(100), stderr_logger).await;
            let last = last_stderr.lock().unwrap().clone();
            if !last.is_empty() {
                message = format!("{message}; its stderr: {last}");
            }
            connection.close();
            self.terminate(child, &connection).await;
            self.reap_group(pid, reader).await;
            return Err(message);
        }
        self.connection.store(Some(connection.clone()));
        let discovered = self.discovered();
        tracing::info!(server = %name, tools = discovered.tools.len(), elapsed_ms = begun.elapsed().as_millis() as u64, "server ready");
        self.warn_unmatched_filter();
        self.events.emit(
            if restarted { "backend.restarted" } else { "backend.ready" },
            name,
            Status::Success,
            json!({"pid": pid, "tool_count": discovered.tools.len(), "protocol_version": discovered.protocol_version,
                   "elapsed_ms": begun.elapsed().as_millis() as u64}),
        );
        self.restore_client_requests(&connection).await;
        self.set_state(BackendState::Ready);

        let mut reader = reader;
        let result = tokio::select! {
            status = child.wait() => Err(format!("exited unexpectedly ({})", describe_exit(status))),
            _ = stop_requested(stopping) => {
                connection.stopped.store(true, Ordering::Release);
                self.terminate(child, &connection).await;
                Ok(())
            }
            // Its stdout ended: it is exiting, or it closed stdout and runs on, and then
            // nothing it says can reach the gateway any more (as good as a crash).
            _ = &mut reader => match exit_soon(&mut child).await {
                Some(exit) => Err(format!("exited unexpectedly ({exit})")),
                None => {
                    self.terminate(child, &connection).await;
                    Err("closed its stdout while running".to_string())
                }
            },
        };
        connection.close();
        self.reap_group(pid, reader).await;
        result
    }

    async fn handshake(&self, connection: &Arc<Connection>) -> Result<(), String> {
        let timeout = self.init_timeout;
        let init = connection
            .request(
                "initialize",
                Some(json!({
                    "protocolVersion": protocol::LATEST_VERSION,
                    "capabilities": client_capabilities(),
                    "clientInfo": {"name": "wasmgate", "version": env!("CARGO_PKG_VERSION")},
                })),
                timeout,
            )
            .await
            .map_err(|e| format!("initialize failed: {e}"))?;
        connection.send(protocol::notification("notifications/initialized", None));
        let version = init.get("protocolVersion").and_then(Value::as_str);
        if !version.is_some_and(|v| protocol::SUPPORTED_VERSIONS.contains(&v)) {
            tracing::warn!(server = %self.name, version, "the server answered initialize with a protocol version the gateway does not speak; going on as if it spoke the latest");
        }
        let mut discovered = Discovered {
            protocol_version: init
                .get("protocolVersion")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_string(),
            server_info: init.get("serverInfo").cloned().unwrap_or(Value::Null),
            capabilities: init
                .get("capabilities")
                .cloned()
                .unwrap_or_else(|| json!({})),
            instructions: init
                .get("instructions")
                .and_then(Value::as_str)
                .map(str::to_string),
            ..Default::default()
        };
        let err = |e: BackendError| format!("discovery failed: {e}");
        if discovered.has_capability("tools") {
            discovered.tools = usable_tools(
                &self.name,
                list_all(connection, "tools/list", "tools", timeout)
                    .await
                    .map_err(err)?,
            );
        }
        if discovered.has_capability("resources") {
            discovered.resources = list_all(connection, "resources/list", "resources", timeout)
                .await
                .map_err(err)?;
            // Templates are optional even for servers with resources.
            discovered.resource_templates = list_all(
                connection,
                "resources/templates/list",
                "resourceTemplates",
                timeout,
            )
            .await
            .unwrap_or_default();
        }
        if discovered.has_capability("prompts") {
            discovered.prompts = list_all(connection, "prompts/list", "prompts", timeout)
                .await
                .map_err(err)?;
        }
        self.discovered.store(Arc::new(discovered));
        Ok(())
    }

    /// A new process knows nothing of what the clients asked before: it gets the last log
    /// level and the subscriptions again, before any call reaches it. A failure is logged,
    /// and the server serves anyway.
    async fn restore_client_requests(&self, connection: &Arc<Connection>) {
        let (reply, requests) = tokio::sync::oneshot::channel();
        let event = BackendEvent::Handshaken {
            server: self.name.clone(),
            reply,
        };
        if self.to_gateway.send(event).is_err() {
            return;
        }
        let Ok(Ok(requests)) = tokio::time::timeout(Duration::from_secs(5), requests).await else {
            return;
        };
        let discovered = self.discovered();
        let mut messages = Vec::new();
        if let Some(level) = requests.log_level
            && discovered.has_capability("logging")
        {
            messages.push(("logging/setLevel", json!({ "level": level })));
        }
        if discovered.capabilities["resources"]["subscribe"] == true {
            for uri in requests.subscriptions {
                messages.push(("resources/subscribe", json!({ "uri": uri })));
            }
        }
        let timeout = self.init_timeout.min(Duration::from_secs(10));
        for (method, params) in messages {
            match connection
                .request(method, Some(params.clone()), timeout)
                .await
            {
                Ok(_) => {
                    tracing::debug!(server = %self.name, %params, "{method} again after a start")
                }
                Err(err) => {
                    tracing::warn!(server = %self.name, %params, "{method} again after a start failed: {err}")
                }
            }
        }
    }

    /// After the server's process is gone: processes it started that still hold its stdout
    /// (a wrapper's child, a helper left behind) would keep the reader, and the gateway's
    /// exit, waiting for ever. They get `shutdown_grace` to go, then its process group
    /// gets SIGKILL.
    async fn reap_group(&self, pid: u32, mut reader: tokio::task::JoinHandle<()>) {
        // (A finished handle must not be awaited again.)
        if reader.is_finished()
            || tokio::time::timeout(self.shutdown_grace, &mut reader)
                .await
                .is_ok()
        {
            return;
        }
        tracing::warn!(server = %self.name, pid, "processes it started still hold its output; sending SIGKILL to its process group");
        if pid != 0 {
            signal_group(pid, libc::SIGKILL);
        }
        if tokio::time::timeout(Duration::from_secs(1), &mut reader)
            .await
            .is_err()
        {
            reader.abort();
        }
    }

    async fn terminate(&self, mut child: Child, connection: &Arc<Connection>) {
        let name = &self.name;
        let grace = self.shutdown_grace;
        // Closing stdin is the polite way to ask an MCP server to leave.
        connection.close();
        connection.writer.close();
        drop(child.stdin.take());
        if tokio::time::timeout(grace, child.wait()).await.is_ok() {
            return;
        }
        if let Some(pid) = child.id() {
            tracing::info!(server = %name, pid, "did not exit on stdin close; sending SIGTERM");
            signal_group(pid, libc::SIGTERM);
            if tokio::time::timeout(grace, child.wait()).await.is_ok() {
                return;
            }
            tracing::warn!(server = %name, pid, "did not exit on SIGTERM; sending SIGKILL");
            signal_group(pid, libc::SIGKILL);
        }
        let _ = child.kill().await;
    }
}

fn spawn(config: &ServerConfig) -> std::io::Result<Child> {
    let mut command = Command::new(&config.command);
    if !config.inherit_env {
        command.env_clear();
        for name in crate::config::BASE_ENV {
            // A value that starts with `()` is an exported shell function: never passed on.
            if let Some(value) = std::env::var_os(name)
                && !value.as_encoded_bytes().starts_with(b"()")
            {
                command.env(name, value);
            }
        }
    }
    command
        .args(&config.args)
        .envs(&config.env)
        .envs(crate::nesting::chain().map(|chain| (crate::nesting::VAR, chain)))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true)
        // Its own process group, so that stopping it reaches what it spawned (npx, uvx wrappers).
        .process_group(0);
    if let Some(cwd) = &config.cwd {
        command.current_dir(cwd);
    }
    // A server gets the open-file limit the gateway was started with, not the one it raised
    // for itself: some programs still use select(), which breaks past descriptor 1023.
    if let Some(soft) = crate::descriptors::original_soft_limit() {
        // SAFETY: between fork and exec only async-signal-safe calls: getrlimit, setrlimit.
        unsafe {
            command.pre_exec(move || {
                let mut limit = libc::rlimit {
                    rlim_cur: 0,
                    rlim_max: 0,
                };
                if libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) == 0 && limit.rlim_cur != soft {
                    limit.rlim_cur = soft;
                    libc::setrlimit(libc::RLIMIT_NOFILE, &limit);
                }
                Ok(())
            });
        }
    }
    command.spawn()
}

/// Resolves when a stop was asked for; the borrow of the flag ends here, before any await of the caller.
async fn stop_requested(stopping: &mut watch::Receiver<bool>) {
    let _ = stopping.wait_for(|s| *s).await;
}

fn signal_group(pid: u32, signal: i32) {
    // SAFETY: kill(2) with a negative pid signals the process group we created for the child.
    unsafe {
        libc::kill(-(pid as i32), signal);
    }
}

/// How the process exited, if it does within moments: its pipes end just before it exits.
async fn exit_soon(child: &mut Child) -> Option<String> {
    tokio::time::timeout(Duration::from_millis(200), child.wait())
        .await
        .ok()
        .map(describe_exit)
}

fn describe_exit(status: std::io::Result<std::process::ExitStatus>) -> String {
    match status {
        Ok(s) => s.to_string(),
        Err(e) => e.to_string(),
    }
}

/// The tools a client can take. MCP requires a string `name` and an `inputSchema` that is
/// an object schema; clients built on the official SDKs refuse a whole `tools/list` with
/// one tool that breaks this, so it would hide every other server's tools too. Such a
/// tool is left out, with a warning; so is a second tool of the same name.
fn usable_tools(server: &str, tools: Vec<Value>) -> Vec<Value> {
    let mut names = std::collections::HashSet::new();
    tools
        .into_iter()
        .filter(|tool| {
            let name = tool.get("name").and_then(Value::as_str);
            let problem = match (name, tool.get("inputSchema")) {
                (None | Some(""), _) => Some("it has no name"),
                (Some(name), _) if !names.insert(name.to_string()) => {
                    Some("a tool of that name came before it")
                }
                (_, Some(schema))
                    if schema.get("type").and_then(Value::as_str) == Some("object") =>
                {
                    None
                }
                (_, None) => Some("it has no inputSchema"),
                (_, Some(_)) => {
                    Some("its inputSchema is not an object schema ({\"type\": \"object\", ...})")
                }
            };
            if let Some(problem) = problem {
                let shown: String = tool.to_string().chars().take(200).collect();
                tracing::warn!(server, "tool left out: {problem}: {shown}");
            } else if let Some(name) = name.filter(|n| !is_portable_tool_name(n)) {
                // Served: the specification only advises, but some clients refuse such names.
                tracing::warn!(server, "tool `{name}` has a name some clients refuse (MCP advises 1-128 of A-Z a-z 0-9 _ - .)");
            }
            problem.is_none()
        })
        .collect()
}

/// A tool name as MCP 2025-11-25 advises: 1 to 128 ASCII letters, digits, `_`, `-` or `.`.
fn is_portable_tool_name(name: &str) -> bool {
    (1..=128).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"_-.".contains(&b))
}

/// Fetches every page of a list, following `nextCursor`.
async fn list_all(
    connection: &Arc<Connection>,
    method: &str,
    key: &str,
    timeout: Duration,
) -> Result<Vec<Value>, BackendError> {
    let server = &connection.server;
    let mut items = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut seen = std::collections::HashSet::new();
    // Bounded, so that a server that always answers with a cursor cannot hold start-up forever.
    for _ in 0..1000 {
        let params = cursor.take().map(|c| json!({"cursor": c}));
        let page = connection.request(method, params, timeout).await?;
        match page.get(key) {
            Some(Value::Array(list)) => items.extend(list.iter().cloned()),
            None => {}
            Some(other) => {
                let shown: String = other.to_string().chars().take(100).collect();
                tracing::warn!(server = %server, "{method}: `{key}` is not an array, nothing taken from it: {shown}");
            }
        }
        match page.get("nextCursor") {
            Some(c) if !c.is_null() => {
                if !seen.insert(c.to_string()) {
                    tracing::warn!(server = %server, cursor = %c, "{method}: the server gave a cursor it gave before; stopping there");
                    break;
                }
                cursor = Some(c.clone());
            }
            _ => break,
        }
    }
    Ok(items)
}

/// Owns the child's stdin; an empty string means "close".
async fn read_lines(
    connection: Arc<Connection>,
    stdout: tokio::process::ChildStdout,
    to_gateway: mpsc::UnboundedSender<BackendEvent>,
) {
    let server = connection.server.clone();
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut buffer = Vec::new();
    loop {
        lines::reuse(&mut buffer);
        match lines::read_line(&mut reader, &mut buffer, lines::MAX_MESSAGE).await {
            Ok(Line::Read) => {}
            Ok(Line::End) => break,
            Ok(Line::TooLong(len)) => {
                tracing::warn!(server = %server, "skipped a line of {len} bytes or more (the limit is {} MiB); a request it answered will time out", lines::MAX_MESSAGE >> 20);
                continue;
            }
            Err(err) => {
                tracing::warn!(server = %server, "unreadable output: {err}");
                break;
            }
        }
        let line = String::from_utf8_lossy(&buffer);
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        if let Some((id, result)) = protocol::RawEnvelope::fast_response(line) {
            connection.complete(id, Ok(result));
            continue;
        }
        let message = serde_json::from_str::<Value>(line)
            .map_err(|e| e.to_string())
            .and_then(|v| protocol::parse_message(v).map_err(|e| e.message));
        match message {
            Ok(Message::Response { id, result }) => {
                let Some(id) = id.as_u64() else { continue };
                let result = result.and_then(|value| {
                    serde_json::value::to_raw_value(&value)
                        .map_err(|e| RpcError::new(protocol::INTERNAL_ERROR, e.to_string()))
                });
                connection.complete(id, result);
            }
            Ok(Message::Notification { method, params }) => {
                let _ = to_gateway.send(BackendEvent::Notification {
                    server: server.clone(),
                    method,
                    params,
                });
            }
            Ok(Message::Request { id, method, params }) => {
                let reply = Responder {
                    connection: connection.clone(),
                    id,
                };
                let _ = to_gateway.send(BackendEvent::Request {
                    server: server.clone(),
                    method,
                    params,
                    reply,
                });
            }
            Err(reason) => {
                let shown: String = line.chars().take(200).collect();
                tracing::warn!(server = %server, "ignored a line that is not JSON-RPC ({reason}): {shown}");
            }
        }
    }
    connection.close();
}
