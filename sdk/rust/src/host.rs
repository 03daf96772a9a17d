//! What the gateway offers a running tool (the WIT `host` interface): log lines, progress,
//! the plugin's config, whether the call was cancelled, the call's trace context. Off wasm (`cargo test` on the host) they go to [`crate::testing`]
//! instead, so tools that use them can be unit-tested.

pub use crate::wit::Level;

/// A line in the gateway's log, tagged with the plugin's name; also sent to the calling
/// client as an MCP log message when it asked for that level.
pub fn log(level: Level, message: impl AsRef<str>) {
    imp::log(level, message.as_ref());
}

/// Progress of the current call, sent to the client as `notifications/progress` if it
/// asked for progress. It must go up: a value not above the last one is not sent.
pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
    imp::progress(progress, total, message);
}

/// A value from the plugin's `[plugins.NAME.config]` table in the gateway's config.
pub fn config(key: &str) -> Option<String> {
    imp::config(key)
}

/// [`config`], or `default` when the table does not set `key`.
pub fn config_or(key: &str, default: &str) -> String {
    config(key).unwrap_or_else(|| default.into())
}

/// Whether the client cancelled the current call (or went away). A long call checks it
/// between steps and stops early; what it answers then is not sent.
pub fn cancelled() -> bool {
    imp::cancelled()
}

/// The W3C `traceparent` of the current call when the gateway traces it, to pass on.
pub fn traceparent() -> Option<String> {
    imp::traceparent()
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use crate::wit::wasmgate::plugin::host;

    pub fn log(level: super::Level, message: &str) {
        host::log(level, message);
    }

    pub fn progress(progress: f64, total: Option<f64>, message: Option<&str>) {
        host::progress(progress, total, message);
    }

    pub fn config(key: &str) -> Option<String> {
        host::config(key)
    }

    pub fn cancelled() -> bool {
        host::cancelled()
    }

    pub fn traceparent() -> Option<String> {
        host::traceparent()
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    pub(super) use crate::testing::{cancelled, config, log, progress};

    pub fn traceparent() -> Option<String> {
        None
    }
}
