//! The gateway's `host` as the middleware world imports it (0.1's, generated in [`super::wit`]):
//! log lines and the middleware's config. Off wasm they go to [`crate::testing`], as the
//! plugin side's do.

pub use crate::host::Level;

/// A line in the gateway's log, tagged with the middleware's name.
pub fn log(level: Level, message: impl AsRef<str>) {
    imp::log(level, message.as_ref());
}

/// A value from the middleware's `config` table in the gateway's config.
pub fn config(key: &str) -> Option<String> {
    imp::config(key)
}

/// [`config`], or `default` when the table does not set `key`.
pub fn config_or(key: &str, default: &str) -> String {
    config(key).unwrap_or_else(|| default.into())
}

#[cfg(target_arch = "wasm32")]
mod imp {
    use crate::middleware::wit::wasmgate::plugin::host;

    pub fn log(level: super::Level, message: &str) {
        let level = match level {
            super::Level::Debug => host::Level::Debug,
            super::Level::Info => host::Level::Info,
            super::Level::Warning => host::Level::Warning,
            super::Level::Error => host::Level::Error,
        };
        host::log(level, message);
    }

    pub fn config(key: &str) -> Option<String> {
        host::config(key)
    }
}

#[cfg(not(target_arch = "wasm32"))]
mod imp {
    pub(super) use crate::testing::{config, log};
}
