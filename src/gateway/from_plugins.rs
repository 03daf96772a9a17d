//! What 0.2 plugins announce on their own (`notify`): a changed list is read again and the
//! catalog rebuilt (clients hear `list_changed` when their view changed); an updated
//! resource reaches the sessions subscribed to it through that plugin.

use std::sync::Arc;

use serde_json::json;

use super::Gateway;
use crate::plugin::PluginNotice;
use crate::protocol::methods;

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
