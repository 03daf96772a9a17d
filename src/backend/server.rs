//! `Backend`: every kind of MCP server the gateway forwards to, as one closed enum. The
//! gateway, catalog and router hold it and never a kind; where the kinds differ, it
//! `match`es (subprocess servers and remote servers).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;

use super::common::{Common, read_result};
use super::process::ProcessBackend;
use super::remote::RemoteBackend;
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
        match config.transport {
            ServerTransport::Stdio(_) => {
                Backend::Process(ProcessBackend::start(config, gateway, events, to_gateway))
            }
            ServerTransport::Http(_) => {
                Backend::Remote(RemoteBackend::start(config, gateway, events, to_gateway))
            }
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

    /// Forwards a request; its result read into a `Value`.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, BackendError> {
        let raw = self.request_raw(method, params, timeout).await?;
        read_result(self.name(), &raw)
    }

    /// Forwards a request whose result goes back to a client as the server wrote it.
    pub async fn request_raw(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Box<RawValue>, BackendError> {
        match self {
            Backend::Process(p) => p.request_raw(method, params, timeout).await,
            Backend::Remote(p) => p.request_raw(method, params, timeout).await,
        }
    }

    pub fn notify(&self, method: &str, params: Option<Value>) {
        match self {
            Backend::Process(p) => p.notify(method, params),
            Backend::Remote(p) => p.notify(method, params),
        }
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
