//! `Backend`: every kind of MCP server the gateway forwards to, as one closed enum. The
//! gateway, catalog and router hold it and never a kind; where the kinds differ, it
//! `match`es (subprocess servers now, remote servers next).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;

use super::process::ProcessBackend;
use super::{BackendError, BackendState, Discovered, ListKind};
use crate::config::ServerConfig;

#[derive(Clone)]
pub enum Backend {
    Process(Arc<ProcessBackend>),
}

impl Backend {
    pub fn name(&self) -> &str {
        match self {
            Backend::Process(p) => p.name(),
        }
    }

    /// The config entry it runs with now.
    pub fn config(&self) -> Arc<ServerConfig> {
        match self {
            Backend::Process(p) => p.config(),
        }
    }

    /// Takes an edit that needs no restart (filters, timeouts, namespace).
    pub fn update_config(&self, config: ServerConfig) {
        match self {
            Backend::Process(p) => p.update_config(config),
        }
    }

    pub fn state(&self) -> BackendState {
        match self {
            Backend::Process(p) => p.state(),
        }
    }

    /// What it told of itself, and its lists.
    pub fn discovered(&self) -> Arc<Discovered> {
        match self {
            Backend::Process(p) => p.discovered(),
        }
    }

    pub fn restarts(&self) -> u32 {
        match self {
            Backend::Process(p) => p.restarts(),
        }
    }

    /// The process id, for a server the gateway runs.
    pub fn pid(&self) -> Option<u32> {
        match self {
            Backend::Process(p) => p.pid(),
        }
    }

    pub fn last_error(&self) -> Option<String> {
        match self {
            Backend::Process(p) => p.last_error(),
        }
    }

    /// Resolves once it has started (or failed), or at `deadline`.
    pub async fn wait_started(&self, deadline: tokio::time::Instant) {
        match self {
            Backend::Process(p) => p.wait_started(deadline).await,
        }
    }

    /// The timeout of a call to `tool` (or of any other request, with `None`).
    pub fn timeout_for(&self, tool: Option<&str>) -> Duration {
        match self {
            Backend::Process(p) => p.timeout_for(tool),
        }
    }

    /// Forwards a request; its result read into a `Value`.
    pub async fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> Result<Value, BackendError> {
        match self {
            Backend::Process(p) => p.request(method, params, timeout).await,
        }
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
        }
    }

    pub fn notify(&self, method: &str, params: Option<Value>) {
        match self {
            Backend::Process(p) => p.notify(method, params),
        }
    }

    /// Fetches a list again after the server said it changed.
    pub async fn refresh(&self, kind: ListKind) -> Result<(), BackendError> {
        match self {
            Backend::Process(p) => p.refresh(kind).await,
        }
    }

    pub async fn stop(&self) {
        match self {
            Backend::Process(p) => p.stop().await,
        }
    }
}
