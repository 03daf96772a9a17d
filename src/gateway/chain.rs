//! The middleware chain the gateway runs requests through: rebuilt when the config or a
//! middleware's loaded version changes, waited for while the middleware first load.

use std::future::Future;
use std::sync::Arc;

use serde_json::{Value, json};

use super::Gateway;
use crate::config::Config;
use crate::middleware::{Chain, Facts, Route};
use crate::peer::ClientPeer;
use crate::plugin::Direction;
use crate::protocol::{Reply, RpcError};
use crate::telemetry::events::{Status, new_trace_id};

/// What the chain in force was built from: the config, and each link's loaded version.
#[derive(Default)]
pub(super) struct ChainBuilt {
    config: Option<Arc<Config>>,
    versions: Vec<Option<String>>,
}

impl Gateway {
    /// The chain a request starts with. While the plugins configured at start still load,
    /// a request that a not yet loaded middleware would see waits for them (bounded by
    /// `startup_timeout`) rather than being refused.
    pub async fn chain(&self) -> Arc<Chain> {
        let chain = self.middleware.load_full();
        if !chain.has_unloaded() || !self.plugins_loading() {
            return chain;
        }
        let deadline = tokio::time::Instant::from_std(
            self.started + self.config.load().gateway.startup_timeout,
        );
        let _ = tokio::time::timeout_at(deadline, self.wait_for_plugins()).await;
        self.rebuild_chain();
        self.middleware.load_full()
    }

    /// The chain in force as `gateway_status` shows it.
    pub fn middleware_status(&self) -> Value {
        self.middleware.load().status()
    }

    /// Builds the chain again when the config or a middleware's version changed since.
    pub(super) fn rebuild_chain(&self) {
        let config = self.config.load_full();
        let host = self.plugin_host();
        let versions: Vec<Option<String>> = (config.middleware.iter())
            .map(|entry| {
                let middleware = host.as_ref()?.middleware(&entry.name).ok()?;
                Some(middleware.digest().to_string())
            })
            .collect();
        let mut built = self.chain_built.lock().unwrap();
        let same_config = built
            .config
            .as_ref()
            .is_some_and(|c| Arc::ptr_eq(c, &config));
        if same_config && built.versions == versions {
            return;
        }
        let chain = Chain::build(&config, host.as_deref(), &self.events);
        if !chain.is_empty() || !built.versions.is_empty() {
            let links = chain.status();
            (self.events).emit(
                "middleware.chain",
                "wasmgate",
                Status::Success,
                json!({"links": links}),
            );
        }
        self.middleware.store(Arc::new(chain));
        *built = ChainBuilt {
            config: Some(config),
            versions,
        };
    }
}

impl Gateway {
    /// A server's request to a client (sampling, elicitation, roots) through the chain's
    /// to-client hooks; `ask` sends what they let through.
    pub async fn ask_through_chain<F, Fut>(
        &self,
        peer: &Arc<ClientPeer>,
        server: &str,
        method: &str,
        params: Option<Value>,
        ask: F,
    ) -> Result<Value, RpcError>
    where
        F: FnOnce(Option<Value>) -> Fut,
        Fut: Future<Output = Result<Value, RpcError>>,
    {
        let chain = self.chain().await;
        if chain.is_empty() {
            return ask(params).await;
        }
        let principal = peer.principal().clone();
        let client = || peer.client_info();
        let era = || peer.protocol_version();
        let trace_id = new_trace_id();
        let facts = Facts {
            method,
            direction: Direction::ToClient,
            target: None,
            route: Route::Server(server),
            principal: principal.token.as_deref(),
            profile: principal.profile.as_deref(),
            client: &client,
            era: &era,
            trace_id: &trace_id,
            session: Some(Arc::from(peer.id.as_str())),
            timeout: self.config.load().gateway.timeout,
        };
        let asked = chain.around(&facts, params, |params| async move {
            ask(params).await.map(Reply::Built)
        });
        let outcome = asked.await;
        self.record_refusal(&trace_id, method, Some(server), &outcome);
        outcome.map(Reply::into_value)
    }

    /// A request the chain refused (a middleware's denial, or its failure under
    /// `on_error = "deny"`), as a `middleware.denied` event from that middleware.
    pub fn record_refusal(
        &self,
        trace_id: &str,
        method: &str,
        target: Option<&str>,
        outcome: &Result<Reply, RpcError>,
    ) {
        let Err(error) = outcome else {
            return;
        };
        let Some(middleware) = (error.data.as_deref())
            .and_then(|d| d.get("middleware"))
            .and_then(Value::as_str)
        else {
            return;
        };
        let fields = json!({"method": method, "target": target, "error": error.message});
        (self.events).emit_traced(
            trace_id,
            "middleware.denied",
            middleware,
            Status::Failure,
            fields,
        );
    }
}
