//! The `host` interface a plugin imports: `log` to tracing under the plugin's
//! name, `progress` to the current call's sink, `config` from the plugin's table.

use std::collections::BTreeMap;
use std::sync::Arc;

use wasmtime::component::HasData;

use super::bindings::Level;
use super::bindings::wasmgate::plugin::host;
use super::{LogSink, ProgressSink};

/// Per-instance state behind the `host` interface.
pub struct HostCtx {
    plugin: Arc<str>,
    config: Arc<BTreeMap<String, String>>,
    /// Filled at call time, so that an instance made ahead of its call still
    /// reports to the right client.
    pub sinks: Sinks,
    /// Progress and log notifications passed to the client in this call so far.
    forwarded: u32,
}

/// Notifications one call may send its client: a guest that reports in a tight loop
/// would otherwise queue lines faster than the client reads them (16 KiB each at most).
const MAX_FORWARDED: u32 = 1000;

/// Where a call's reports go besides the gateway's log: its client's progress token,
/// and its session when the client asked for log messages.
#[derive(Default)]
pub struct Sinks {
    pub progress: Option<ProgressSink>,
    pub log: Option<LogSink>,
}

impl HostCtx {
    pub fn new(plugin: Arc<str>, config: Arc<BTreeMap<String, String>>) -> Self {
        HostCtx {
            plugin,
            config,
            sinks: Sinks::default(),
            forwarded: 0,
        }
    }
}

impl HostCtx {
    /// Counts one more notification for the client; past [`MAX_FORWARDED`], drops it.
    fn may_forward(&mut self) -> bool {
        self.forwarded = self.forwarded.saturating_add(1);
        if self.forwarded == MAX_FORWARDED + 1 {
            tracing::warn!(plugin = %self.plugin, "the call sent {MAX_FORWARDED} progress and log notifications; the rest are dropped");
        }
        self.forwarded <= MAX_FORWARDED
    }
}

/// Longest log message or progress text passed on; the rest is cut.
const MAX_MESSAGE: usize = 16 * 1024;

fn clip(mut s: String) -> String {
    if s.len() > MAX_MESSAGE {
        let mut end = MAX_MESSAGE;
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push('…');
    }
    s
}

impl host::Host for HostCtx {
    fn log(&mut self, level: Level, message: String) {
        let plugin = &*self.plugin;
        let message = clip(message);
        // The WIT's levels are MCP's, by name.
        let mcp_level = match level {
            Level::Debug => {
                tracing::debug!(target: "wasmgate::plugin::log", plugin, "{message}");
                "debug"
            }
            Level::Info => {
                tracing::info!(target: "wasmgate::plugin::log", plugin, "{message}");
                "info"
            }
            Level::Warning => {
                tracing::warn!(target: "wasmgate::plugin::log", plugin, "{message}");
                "warning"
            }
            Level::Error => {
                tracing::error!(target: "wasmgate::plugin::log", plugin, "{message}");
                "error"
            }
        };
        if self.sinks.log.is_some()
            && self.may_forward()
            && let Some(sink) = &self.sinks.log
        {
            sink(mcp_level, &message);
        }
    }

    fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        if self.sinks.progress.is_some()
            && self.may_forward()
            && let Some(sink) = &self.sinks.progress
        {
            sink(progress, total, message.map(clip));
        }
    }

    fn config(&mut self, key: String) -> Option<String> {
        self.config.get(&key).cloned()
    }
}

/// Selects the `host` state out of the store data for the generated linker glue.
pub struct HostData;

impl HasData for HostData {
    type Data<'a> = &'a mut HostCtx;
}
