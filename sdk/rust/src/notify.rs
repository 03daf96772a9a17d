//! Announcements to the clients that see this plugin (the WIT `notify` interface): its
//! lists changed, or a resource did. Off wasm they are recorded by [`crate::testing`].

/// The plugin's tools changed: the gateway lists them again and tells the clients.
pub fn tools_changed() {
    imp::notify(Notification::ToolsChanged);
}

/// The plugin's resources or templates changed.
pub fn resources_changed() {
    imp::notify(Notification::ResourcesChanged);
}

/// The plugin's prompts changed.
pub fn prompts_changed() {
    imp::notify(Notification::PromptsChanged);
}

/// The resource `uri` changed: clients subscribed to it hear so.
pub fn resource_updated(uri: &str) {
    imp::notify(Notification::ResourceUpdated(uri.into()));
}

/// One announcement, as [`crate::testing::take_notifications`] gives them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Notification {
    ToolsChanged,
    ResourcesChanged,
    PromptsChanged,
    ResourceUpdated(String),
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use super::Notification;
    use crate::wit::wasmgate::plugin::notify;

    pub fn notify(what: Notification) {
        match what {
            Notification::ToolsChanged => notify::tools_changed(),
            Notification::ResourcesChanged => notify::resources_changed(),
            Notification::PromptsChanged => notify::prompts_changed(),
            Notification::ResourceUpdated(uri) => notify::resource_updated(&uri),
        }
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    pub(super) use crate::testing::notify;
}
