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
}

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
        }
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
        let (mcp_level, rank) = match level {
            Level::Debug => {
                tracing::debug!(target: "wasmgate::plugin::log", plugin, "{message}");
                ("debug", 0)
            }
            Level::Info => {
                tracing::info!(target: "wasmgate::plugin::log", plugin, "{message}");
                ("info", 1)
            }
            Level::Warning => {
                tracing::warn!(target: "wasmgate::plugin::log", plugin, "{message}");
                ("warning", 3)
            }
            Level::Error => {
                tracing::error!(target: "wasmgate::plugin::log", plugin, "{message}");
                ("error", 4)
            }
        };
        if let Some(sink) = &self.sinks.log {
            sink(mcp_level, rank, &message);
        }
    }

    fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        if let Some(sink) = &self.sinks.progress {
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
