//! `logging/setLevel`: the level the client asks for, kept for its plugins' log lines
//! and forwarded to the servers its view includes.

use std::time::Duration;

use serde_json::{Value, json};

use super::{RequestContext, Router, required_string};
use crate::backend::mcp_client::Upstream;
use crate::protocol::methods;
use crate::protocol::{self, RpcError};

impl Router<'_> {
    /// Forwarded to every ready server that logs; the gateway's own log level is not changed.
    pub(super) async fn set_level(
        &self,
        context: &RequestContext,
        params: Value,
    ) -> Result<Value, RpcError> {
        let level = required_string(&params, methods::LOGGING_SET_LEVEL, "level")?;
        let level = level.as_str();
        let Some(rank) = protocol::log_rank(level) else {
            return Err(RpcError::invalid_params(format!(
                "Unknown log level `{level}`; one of {}",
                protocol::LOG_LEVELS.join(", ")
            )));
        };
        // Plugins log to the session that set a level (see `plugin_log_sink`).
        context.peer.set_log_level(rank);
        // A server logs at the most verbose level of the sessions that see it, and only
        // those: a client cannot change the level of a server outside its view.
        let mut forwards = Vec::new();
        for backend in self.gateway.servers().into_iter().filter(|b| {
            // A stateless server takes the level with each request instead.
            b.discovered().has_capability("logging")
                && !b.is_modern()
                && self.gateway.sees(&context.peer, b.name())
        }) {
            let Some(level) = self.gateway.server_log_level(backend.name()) else {
                continue;
            };
            let params = json!({"level": level});
            forwards.push(tokio::spawn(async move {
                let timeout = backend.timeout_for(None).min(Duration::from_secs(10));
                if let Err(err) = backend
                    .request(methods::LOGGING_SET_LEVEL, Some(params), timeout)
                    .await
                {
                    tracing::debug!(server = %backend.name(), "logging/setLevel: {err}");
                }
            }));
        }
        // Answer once the servers have the new level, so that what the client does next is logged by it.
        for forward in forwards {
            let _ = forward.await;
        }
        Ok(json!({}))
    }
}
