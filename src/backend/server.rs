//! `Backend`: every kind of MCP server the gateway forwards to, as one closed enum. The
//! gateway, catalog and router hold it and never a kind; where the kinds differ, it
//! `match`es (subprocess servers and remote servers).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::common::Common;
use super::mcp_client::{Answer, Upstream};
use super::process::ProcessBackend;
use super::remote::RemoteBackend;
use super::supervisor;
use super::{BackendError, BackendEvent, BackendState, Discovered, ListKind};
use crate::config::{GatewayConfig, ServerConfig, ServerTransport};
use crate::telemetry::events::EventLog;
use tokio::sync::mpsc;

#[derive(Clone)]
pub enum Backend {
    Process(Arc<ProcessBackend>),
    Remote(Arc<RemoteBackend>),
}

impl Backend {
    /// What every kind keeps alike: its entry, state, lists and errors.
    fn common(&self) -> &Common {
        match self {
            Backend::Process(p) => p,
            Backend::Remote(r) => r,
        }
    }

    /// Starts the backend an entry describes; it reports to the gateway on `to_gateway`.
    pub fn start(
        config: ServerConfig,
        gateway: &GatewayConfig,
        events: Arc<EventLog>,
        to_gateway: mpsc::UnboundedSender<BackendEvent>,
    ) -> Backend {
        let stdio = matches!(config.transport, ServerTransport::Stdio(_));
        let common = Common::new(config, events, to_gateway);
        match stdio {
            true => Backend::Process(supervisor::start(ProcessBackend::new(common, gateway))),
            false => Backend::Remote(supervisor::start(RemoteBackend::new(common, gateway))),
        }
    }

    pub fn name(&self) -> &str {
        self.common().name()
    }

    /// The config entry it runs with now.
    pub fn config(&self) -> Arc<ServerConfig> {
        self.common().config()
    }

    /// Takes an edit that needs no restart (filters, timeouts, namespace).
    pub fn update_config(&self, config: ServerConfig) {
        self.common().update_config(config)
    }

    pub fn state(&self) -> BackendState {
        self.common().state()
    }

    /// What it told of itself, and its lists.
    pub fn discovered(&self) -> Arc<Discovered> {
        self.common().discovered()
    }

    pub fn restarts(&self) -> u32 {
        self.common().restarts()
    }

    /// The process id, for a server the gateway runs.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Backend::Process(p) => p.pid(),
            Backend::Remote(_) => None,
        }
    }

    pub fn last_error(&self) -> Option<String> {
        self.common().last_error()
    }

    /// Resolves once it has started (or failed), or at `deadline`.
    pub async fn wait_started(&self, deadline: tokio::time::Instant) {
        self.common().wait_started(deadline).await
    }

    /// The timeout of a call to `tool` (or of any other request, with `None`).
    pub fn timeout_for(&self, tool: Option<&str>) -> Duration {
        self.common().timeout_for(tool)
    }

    /// Fetches a list again after the server said it changed.
    pub async fn refresh(&self, kind: ListKind) -> Result<(), BackendError> {
        match self {
            Backend::Process(p) => p.refresh(kind).await,
            Backend::Remote(p) => p.refresh(kind).await,
        }
    }

    pub async fn stop(&self) {
        self.common().stop().await
    }
}

/// A request to a server, whatever carries it: `request` gives its result read into a
/// `Value`, `request_raw` as the server wrote it (for a client).
impl Upstream for Backend {
    fn server(&self) -> &str {
        self.name()
    }

    async fn request_raw(&self, method: &str, params: Option<Value>, timeout: Duration) -> Answer {
        match self {
            Backend::Process(p) => p.request_raw(method, params, timeout).await,
            Backend::Remote(r) => r.request_raw(method, params, timeout).await,
        }
    }

    fn notify(&self, method: &str, params: Option<Value>) {
        match self {
            Backend::Process(p) => p.notify(method, params),
            Backend::Remote(r) => r.notify(method, params),
        }
    }
}
