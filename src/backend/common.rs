//! What every server backend keeps and reports alike, whatever carries its messages: its
//! entry, lifecycle state, lists, restarts and last error. `ProcessBackend` and
//! `RemoteBackend` deref to it.

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use arc_swap::{ArcSwap, ArcSwapOption};
use serde_json::Value;
use serde_json::value::RawValue;
use tokio::sync::{mpsc, watch};

use super::listen::Listen;
use super::mcp_client::{self, Upstream};
use super::{BackendError, BackendEvent, BackendState, Discovered, ListKind};
use crate::config::ServerConfig;
use crate::protocol::{self, RpcError};
use crate::telemetry::events::EventLog;

pub struct Common {
    pub(super) name: String,
    /// Swapped by a config reload that changes only what needs no new process or session
    /// (filters, timeouts, namespace); any other change replaces the whole backend.
    pub(super) config: ArcSwap<ServerConfig>,
    pub(super) state: watch::Sender<BackendState>,
    pub(super) discovered: ArcSwap<Discovered>,
    pub(super) restarts: AtomicU32,
    pub(super) last_error: Mutex<Option<String>>,
    pub(super) stopping: watch::Sender<bool>,
    pub(super) events: Arc<EventLog>,
    pub(super) to_gateway: mpsc::UnboundedSender<BackendEvent>,
    /// The `subscriptions/listen` kept open to a stateless-era server, across its runs.
    pub(super) listen: Arc<Listen>,
    /// Held while a list is fetched again and kept: a refresh asked for later fetches
    /// later, so an older list is never kept over a newer one.
    refreshing: tokio::sync::Mutex<()>,
}

impl Common {
    pub(super) fn new(
        config: ServerConfig,
        events: Arc<EventLog>,
        to_gateway: mpsc::UnboundedSender<BackendEvent>,
    ) -> Self {
        Common {
            name: config.name.clone(),
            config: ArcSwap::from_pointee(config),
            state: watch::channel(BackendState::Starting).0,
            discovered: ArcSwap::from_pointee(Discovered::default()),
            restarts: AtomicU32::new(0),
            last_error: Mutex::new(None),
            stopping: watch::channel(false).0,
            events,
            to_gateway,
            listen: Arc::default(),
            refreshing: tokio::sync::Mutex::new(()),
        }
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    pub fn config(&self) -> Arc<ServerConfig> {
        self.config.load_full()
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

    /// Asks the supervisor to stop the server and waits until it has.
    pub async fn stop(&self) {
        self.stopping.send_replace(true);
        let mut rx = self.state.subscribe();
        let _ = rx
            .wait_for(|s| matches!(s, BackendState::Stopped | BackendState::Failed))
            .await;
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
    pub(super) fn warn_unmatched_filter(&self) {
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

    /// Fetches one list again through `upstream`, after the server said it changed.
    pub(super) async fn refresh(
        &self,
        upstream: Option<Arc<impl Upstream>>,
        kind: ListKind,
    ) -> Result<(), BackendError> {
        let Some(upstream) = upstream else {
            return Ok(());
        };
        let _turn = self.refreshing.lock().await;
        let timeout = self.config.load().timeout;
        let current = self.discovered.load_full();
        let next = match super::modern::is_modern(&current) {
            true => {
                let stamped = super::modern::Stamped::gateway(&*upstream);
                mcp_client::refresh_list(&stamped, &self.name, &current, kind, timeout).await?
            }
            false => {
                mcp_client::refresh_list(&*upstream, &self.name, &current, kind, timeout).await?
            }
        };
        self.discovered.store(Arc::new(next));
        Ok(())
    }

    pub(super) fn set_state(&self, state: BackendState) {
        self.state.send_replace(state);
        let _ = self.to_gateway.send(BackendEvent::Changed {
            server: self.name.clone(),
        });
    }
}

/// Resolves once the gateway asks the backend to stop.
pub(super) async fn stop_requested(stopping: &mut watch::Receiver<bool>) {
    let _ = stopping.wait_for(|s| *s).await;
}

/// Sends a notification over the live connection of a server, when a run has one.
pub(super) fn notify_live(
    live: &ArcSwapOption<impl Upstream>,
    method: &str,
    params: Option<Value>,
) {
    if let Some(connection) = live.load_full() {
        connection.notify(method, params);
    }
}

/// A result kept as the server's text, read into a `Value`.
pub(super) fn read_result(server: &str, raw: &RawValue) -> Result<Value, BackendError> {
    serde_json::from_str(raw.get()).map_err(|e| BackendError::Rpc {
        server: server.to_string(),
        error: RpcError::new(protocol::INTERNAL_ERROR, format!("unreadable result: {e}")),
    })
}

/// A server kind reads the state every server has (`Common`, its field `common`) as its
/// own, which the supervisor and `Backend` rely on.
macro_rules! shares_common {
    ($kind:ty) => {
        impl std::ops::Deref for $kind {
            type Target = Common;

            fn deref(&self) -> &Common {
                &self.common
            }
        }
    };
}
pub(super) use shares_common;
