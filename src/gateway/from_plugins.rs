//! What 0.2 plugins announce on their own (`notify`): a changed list is read again and the
//! catalog rebuilt (clients hear `list_changed` when their view changed); an updated
//! resource reaches the sessions subscribed to it through that plugin.

use std::sync::Arc;

use serde_json::{Value, json};

use super::Gateway;
use super::from_servers::capability_for;
use crate::peer::ClientPeer;
use crate::plugin::PluginNotice;
use crate::protocol::{RpcError, methods};

impl Gateway {
    pub(super) fn on_plugin_notice(self: &Arc<Self>, plugin: String, notice: PluginNotice) {
        match notice {
            PluginNotice::ResourceUpdated(uri) => {
                if self.relay.subscriptions.through(&uri).as_deref() != Some(plugin.as_str()) {
                    tracing::debug!(
                        plugin,
                        uri,
                        "resources/updated for a URI not subscribed to through it dropped"
                    );
                    return;
                }
                let params = json!({"uri": uri});
                for session in self.relay.subscriptions.subscribers(&uri) {
                    if self.sees(&session, &plugin) {
                        session.notify(methods::RESOURCES_UPDATED, Some(params.clone()));
                    }
                }
            }
            // Read again off the event loop: the plugin's lists come from a fresh instance.
            PluginNotice::ToolsChanged
            | PluginNotice::ResourcesChanged
            | PluginNotice::PromptsChanged => {
                let Some(host) = self.plugin_host() else {
                    return;
                };
                tokio::spawn(async move {
                    if let Err(why) = host.relist(&plugin).await {
                        tracing::warn!(plugin, "reading its changed lists failed: {why}");
                    }
                });
            }
        }
    }
}

impl Gateway {
    /// A 0.2 plugin's request to the client whose call it runs in, through the chain's
    /// to-client hooks, as a server's request is relayed (in the client's era).
    pub async fn ask_for_plugin(
        &self,
        peer: &Arc<ClientPeer>,
        plugin: &str,
        method: &str,
        params: Option<Value>,
        related: Option<&Arc<str>>,
    ) -> Result<Value, RpcError> {
        let capability = capability_for(method, params.as_ref())?;
        if !peer.client_has(capability) {
            return Err(peer.lacks_capability(plugin, capability));
        }
        let timeout = self.config.load().gateway.timeout;
        self.ask_through_chain(peer, plugin, method, params, |params| {
            peer.request_client(plugin, Value::Null, method, params, timeout, related)
        })
        .await
    }
}
