//! A subprocess MCP server: newline-delimited JSON-RPC over its stdin/stdout.
//! One supervisor task per server starts it, performs the handshake and discovery,
//! restarts it with backoff after a crash and stops it on shutdown; one `Connection`
//! per child correlates many requests in flight by rewritten ids.

use std::collections::HashMap;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::io::BufReader;
use tokio::process::{Child, Command};
use tokio::sync::{mpsc, oneshot, watch};

use super::common::{Common, stop_requested};
use super::mcp_client::{self, Upstream};
use super::{BackendError, BackendEvent, BackendState, ListKind};
use crate::config::ServerConfig;
use crate::pipe::lines::{self, Line};
use crate::pipe::outbox::{Outbox, outbox, write_lines};
use crate::protocol::{self, Message, RpcError};
use crate::telemetry::events::{EventLog, Status};

mod child;
mod connection;

use child::*;
use connection::*;

/// A run of this long resets the count of consecutive failures. A shorter one counts as a
/// failure even after a good start: a server that crashes soon after each `initialize` is
/// in a crash loop as surely as one that never starts.
const HEALTHY_RUN: Duration = Duration::from_secs(30);
const MAX_BACKOFF: Duration = Duration::from_secs(30);

pub struct ProcessBackend {
    common: Common,
    connection: ArcSwapOption<Connection>,
    pid: AtomicU32,
    max_restarts: u32,
    /// For `initialize` and the first lists of each start.
    init_timeout: Duration,
    shutdown_grace: Duration,
}

impl std::ops::Deref for ProcessBackend {
    type Target = Common;

    fn deref(&self) -> &Common {
        &self.common
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
            common: Common::new(config, events, to_gateway),
            connection: ArcSwapOption::empty(),
            pid: AtomicU32::new(0),
            max_restarts: gateway.max_restarts,
            init_timeout: gateway.init_timeout,
            shutdown_grace: gateway.shutdown_grace,
        });
        tokio::spawn(backend.clone().supervise());
        backend
    }

    pub fn pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::Relaxed)).filter(|p| *p != 0)
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
        self.common.refresh(self.connection.load_full(), kind).await
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
        let mut child = spawn(&config)
            .map_err(|e| format!("cannot start `{}`: {e}", config.stdio().command))?;
        let pid = child.id().unwrap_or(0);
        self.pid.store(pid, Ordering::Relaxed);
        let restarted = self.restarts() > 0;
        self.events.emit(
            "backend.started",
            name,
            Status::Pending,
            json!({"pid": pid, "command": config.stdio().command}),
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
            r = mcp_client::handshake(&*connection, name, self.init_timeout) => match r {
                Ok(discovered) => {
                    self.discovered.store(Arc::new(discovered));
                    Ok(())
                }
                // A request fails when the process exits under it: say how it exited.
                Err(_) if let Some(exit) = exit_soon(&mut child).await => {
                    Err(format!("exited during start-up ({exit})"))
                }
                Err(err) => Err(err.to_string()),
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
        if let Some(requests) = mcp_client::client_requests(&self.to_gateway, name).await {
            let timeout = self.init_timeout.min(Duration::from_secs(10));
            mcp_client::restore(&*connection, name, &self.discovered(), requests, timeout).await;
        }
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
}
