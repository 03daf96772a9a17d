//! `Backend`: every kind of MCP server the gateway forwards to, as one closed enum. The
//! gateway, catalog and router hold it and never a kind; where the kinds differ, it
//! `match`es (subprocess servers and remote servers).

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::common::Common;
use super::mcp_client::{Answer, Upstream};
use super::modern;
use super::process::ProcessBackend;
use super::remote::RemoteBackend;
use super::supervisor;
use super::{BackendError, BackendEvent, BackendState, Discovered, ListKind};
use crate::config::{GatewayConfig, ServerConfig, ServerTransport};
use crate::protocol::methods;
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
        cache_dir: Option<&std::path::Path>,
        events: Arc<EventLog>,
        to_gateway: mpsc::UnboundedSender<BackendEvent>,
    ) -> Backend {
        let stdio = matches!(config.transport, ServerTransport::Stdio(_));
        let common = Common::new(config, events, to_gateway);
        match stdio {
            true => Backend::Process(supervisor::start(ProcessBackend::new(
                common, gateway, cache_dir,
            ))),
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

    /// Whether it is spoken to in the stateless era (2026-07-28).
    pub fn is_modern(&self) -> bool {
        modern::is_modern(&self.discovered())
    }
}

/// A request to a server, whatever carries it: `request` gives its result read into a
/// `Value`, `request_raw` as the server wrote it (for a client).
impl Upstream for Backend {
    fn server(&self) -> &str {
        self.name()
    }

    /// A request to a stateless server carries `_meta`: a client's, stamped by the
    /// router, or else the gateway's own.
    async fn request_raw(&self, method: &str, params: Option<Value>, timeout: Duration) -> Answer {
        // The stateless era has no `resources/subscribe`: the URI goes in the listen's filter.
        if matches!(
            method,
            methods::RESOURCES_SUBSCRIBE | methods::RESOURCES_UNSUBSCRIBE
        ) && self.is_modern()
        {
            let common = self.common();
            let discovered = common.discovered();
            return (common.listen)
                .subscription(common.name(), &discovered, method, params.as_ref(), timeout)
                .await;
        }
        let params = match self.is_modern() && !modern::is_stamped(params.as_ref()) {
            true => Some(modern::stamp(params, &modern::gateway_meta())),
            false => params,
        };
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
