//! A remote MCP server over Streamable HTTP. One supervisor task per server opens a
//! session (handshake and discovery through `mcp_client`), serves until the server is
//! unreachable or ends the session, and then opens a new one with backoff; the tools stay
//! listed meanwhile, and calls fail at once naming the server.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};

use super::common::{Common, stop_requested};
use super::mcp_client::{self, HandshakeError, Upstream};
use super::{BackendError, BackendEvent, BackendState, Discovered, ListKind, Responder};
use crate::config::{HttpEndpoint, HttpTransport, ServerConfig, ServerTransport};
use crate::protocol::{self, Message};
use crate::telemetry::events::{EventLog, Status};

mod client;
mod connection;
mod sse;

use connection::{Closed, Connection};

/// A session this long resets the backoff.
const HEALTHY_RUN: Duration = Duration::from_secs(30);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// For a new TCP (and TLS) connection; a request's own timeout bounds it too.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct RemoteBackend {
    common: Common,
    connection: ArcSwapOption<Connection>,
    init_timeout: Duration,
}

impl std::ops::Deref for RemoteBackend {
    type Target = Common;

    fn deref(&self) -> &Common {
        &self.common
    }
}

impl RemoteBackend {
    pub fn start(
        config: ServerConfig,
        gateway: &crate::config::GatewayConfig,
        events: Arc<EventLog>,
        to_gateway: mpsc::UnboundedSender<BackendEvent>,
    ) -> Arc<Self> {
        let backend = Arc::new(RemoteBackend {
            common: Common::new(config, events, to_gateway),
            connection: ArcSwapOption::empty(),
            init_timeout: gateway.init_timeout,
        });
        tokio::spawn(backend.clone().supervise());
        backend
    }

    /// Forwards a request. Fails at once, saying why, unless the session is live.
    pub async fn request_raw(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Box<RawValue>, BackendError> {
        let started = tokio::time::Instant::now();
        let connection = self.ready_connection()?;
        let result = connection
            .request_raw(method, params.clone(), timeout)
            .await;
        if !(result.is_err() && connection.expired()) {
            return result;
        }
        // The server forgot the session, so the request never ran: it goes once more on
        // the new session (initialized, and what clients asked restored, first).
        let deadline = started + timeout;
        let mut state = self.state.subscribe();
        let renewed = tokio::time::timeout_at(
            deadline,
            state.wait_for(|s| {
                *s == BackendState::Ready
                    && self
                        .connection
                        .load()
                        .as_ref()
                        .is_some_and(|c| !Arc::ptr_eq(c, &connection))
            }),
        )
        .await
        .is_ok_and(|r| r.is_ok());
        if !renewed {
            return result;
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        self.ready_connection()?
            .request_raw(method, params, left)
            .await
    }

    /// The live session; while there is none, an error that says why at once.
    fn ready_connection(&self) -> Result<Arc<Connection>, BackendError> {
        let state = self.state();
        match (state, self.connection.load_full()) {
            (BackendState::Ready, Some(c)) => Ok(c),
            (BackendState::Restarting, _) => Err(BackendError::Unreachable {
                server: self.name.clone(),
                reason: self
                    .last_error()
                    .unwrap_or_else(|| "reconnecting".to_string()),
            }),
            _ => Err(BackendError::Unavailable {
                server: self.name.clone(),
                state: state.as_str(),
            }),
        }
    }

    pub fn notify(&self, method: &str, params: Option<Value>) {
        if let Some(connection) = self.connection.load_full() {
            Upstream::notify(&*connection, method, params);
        }
    }

    /// Re-fetches one list after the server said it changed.
    pub async fn refresh(&self, kind: ListKind) -> Result<(), BackendError> {
        self.common.refresh(self.connection.load_full(), kind).await
    }

    fn endpoint(&self) -> HttpEndpoint {
        match &self.config.load().transport {
            ServerTransport::Http(endpoint) => endpoint.clone(),
            ServerTransport::Stdio(_) => unreachable!("a remote backend has a URL"),
        }
    }

    async fn supervise(self: Arc<Self>) {
        let name = self.name.clone();
        let mut stopping = self.stopping.subscribe();
        let mut failures: u32 = 0;
        loop {
            let started = Instant::now();
            let (outcome, was_ready) = self.run_once(&mut stopping).await;
            self.connection.store(None);
            if *stopping.borrow() {
                self.set_state(BackendState::Stopped);
                self.events
                    .emit("backend.stopped", &name, Status::Success, Value::Null);
                return;
            }
            let reason = outcome.err().unwrap_or_default();
            tracing::warn!(server = %name, "reconnecting: {reason}");
            *self.last_error.lock().unwrap() = Some(format!("reconnecting: {reason}"));
            if was_ready {
                self.events.emit(
                    "backend.disconnected",
                    &name,
                    Status::Failure,
                    json!({"error": reason}),
                );
            }
            if started.elapsed() >= HEALTHY_RUN {
                failures = 0;
            }
            failures += 1;
            self.set_state(BackendState::Restarting);
            // A session the server ended is opened again at once; an unreachable server
            // is tried again less and less often.
            let backoff = Duration::from_millis(100 << (failures - 1).min(12)).min(MAX_BACKOFF);
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

    /// One session: handshake, serve until it breaks or the gateway stops it. Says
    /// whether it got as far as ready.
    async fn run_once(
        self: &Arc<Self>,
        stopping: &mut watch::Receiver<bool>,
    ) -> (Result<(), String>, bool) {
        let name = &self.name;
        let endpoint = self.endpoint();
        let begun = Instant::now();
        let opened = tokio::select! {
            r = self.open_any(&endpoint) => r,
            _ = stop_requested(stopping) => Err("stopped during start-up".to_string()),
        };
        let (connection, discovered) = match opened {
            Ok(opened) => opened,
            Err(reason) => return (Err(reason), false),
        };
        self.discovered.store(Arc::new(discovered));
        self.connection.store(Some(connection.clone()));
        let discovered = self.discovered();
        let url = crate::config::redact_url(&endpoint.url);
        tracing::info!(server = %name, tools = discovered.tools.len(), %url, "remote server ready");
        let restarted = self.restarts() > 0;
        self.events.emit(
            if restarted { "backend.reconnected" } else { "backend.ready" },
            name,
            Status::Success,
            json!({"url": url, "tool_count": discovered.tools.len(), "protocol_version": discovered.protocol_version,
                   "elapsed_ms": begun.elapsed().as_millis() as u64}),
        );
        if let Some(requests) = mcp_client::client_requests(&self.to_gateway, name).await {
            let timeout = self.init_timeout.min(Duration::from_secs(10));
            mcp_client::restore(&*connection, name, &discovered, requests, timeout).await;
        }
        self.set_state(BackendState::Ready);
        let listener = tokio::spawn(connection.clone().listen());
        let outcome = tokio::select! {
            closed = connection.ended() => match closed {
                Closed::Broken(reason) => Err(reason),
                Closed::Stopped => Ok(()),
            },
            _ = stop_requested(stopping) => {
                connection.close(Closed::Stopped);
                connection.delete().await;
                Ok(())
            }
        };
        listener.abort();
        (outcome, true)
    }
}

impl RemoteBackend {
    /// A session over the transport the entry names; with `auto`, Streamable HTTP and then,
    /// when the server refuses its `initialize` with a 4xx, the legacy SSE transport.
    async fn open_any(
        &self,
        endpoint: &HttpEndpoint,
    ) -> Result<(Arc<Connection>, Discovered), String> {
        let opened = match endpoint.transport {
            HttpTransport::Sse => self.open(endpoint, true).await,
            HttpTransport::StreamableHttp => self.open(endpoint, false).await,
            HttpTransport::Auto => match self.open(endpoint, false).await {
                Err((reason, true)) => {
                    tracing::info!(server = %self.name, "Streamable HTTP refused ({reason}); trying the legacy SSE transport");
                    self.open(endpoint, true).await.map_err(|(legacy, _)| {
                        (
                            format!("{reason}; over the legacy SSE transport: {legacy}"),
                            false,
                        )
                    })
                }
                other => other,
            },
        };
        opened.map_err(|(reason, _)| reason)
    }

    /// A connection and its handshake. On failure: why, and whether the server refused
    /// the `initialize` POST itself (a 4xx: it may speak the legacy transport).
    async fn open(
        &self,
        endpoint: &HttpEndpoint,
        legacy: bool,
    ) -> Result<(Arc<Connection>, Discovered), (String, bool)> {
        let connection = Connection::new(&self.name, endpoint, self.to_gateway.clone())
            .map_err(|reason| (reason, false))?;
        if legacy && let Err(err) = connection.open_legacy(self.init_timeout).await {
            connection.close(Closed::Stopped);
            return Err((err.to_string(), false));
        }
        match mcp_client::handshake(&*connection, &self.name, self.init_timeout).await {
            Ok(discovered) => Ok((connection, discovered)),
            Err(err) => {
                let refused = matches!(
                    &err,
                    HandshakeError::Initialize(BackendError::Http {
                        status: 400..=499,
                        ..
                    })
                );
                connection.close(Closed::Stopped);
                connection.delete().await;
                Err((err.to_string(), refused))
            }
        }
    }
}
