//! The `host` interface a plugin imports: `log` to tracing under the plugin's
//! name, `progress` to the current call's sink, `config` from the plugin's table.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use wasmtime::component::HasData;

use super::bindings::Level;
use super::bindings::wasmgate::plugin::host;
use super::cancel::Cancel;
use super::kv::KvHandle;
use super::{AskSink, LogSink, PluginEvent, ProgressSink, lock};
use crate::telemetry::budget::{self, Budget};

/// Per-instance state behind the `host` interface.
pub struct HostCtx {
    plugin: Arc<str>,
    config: Arc<BTreeMap<String, String>>,
    /// Filled at call time, so that an instance made ahead of its call still
    /// reports to the right client.
    pub sinks: Sinks,
    /// What the call may still send its client.
    client_budget: Budget,
    /// What the call may still write to the gateway's log: `host.log` lines here, and the
    /// instance's stdout and stderr lines (shared with its streams).
    log_budget: Arc<Mutex<Budget>>,
    /// The newest progress held back for want of budget: sent when budget is back, or
    /// before the call's answer, so the client's last progress is the plugin's last.
    held_progress: Option<Progress>,
    /// The last progress value sent: MCP wants progress to increase.
    last_progress: Option<f64>,
    /// Requests the call made to its client, and notifications it sent (0.2).
    pub asks: u32,
    pub notices: u32,
    /// Where a 0.2 plugin's notifications go (the plugin host's events).
    pub events: Option<tokio::sync::mpsc::UnboundedSender<PluginEvent>>,
}

type Progress = (f64, Option<f64>, Option<String>);

/// Where a call's reports go besides the gateway's log: its client's progress token,
/// and its session when the client asked for log messages.
#[derive(Default)]
pub struct Sinks {
    pub progress: Option<ProgressSink>,
    pub log: Option<LogSink>,
    /// Where a 0.2 plugin's requests to its client go; `None` outside a client's call.
    pub ask: Option<AskRoute>,
    /// Set when the call is cancelled.
    pub cancel: Option<Arc<Cancel>>,
    /// The store of the call's plugin and principal.
    pub kv: Option<KvHandle>,
    /// The call's `traceparent`, when the request is traced.
    pub traceparent: Option<Arc<str>>,
}

/// The route of a call's requests to its client, and their bounds.
#[derive(Clone)]
pub struct AskRoute {
    pub sink: AskSink,
    /// Permits for the plugin's calls that wait for their clients at once.
    pub waiting: Arc<tokio::sync::Semaphore>,
    pub max_waiting: usize,
    /// How long one request waits for its answer (`ask_timeout`).
    pub timeout: std::time::Duration,
}

impl HostCtx {
    pub fn new(
        plugin: Arc<str>,
        config: Arc<BTreeMap<String, String>>,
        log_budget: Arc<Mutex<Budget>>,
    ) -> Self {
        HostCtx {
            plugin,
            config,
            sinks: Sinks::default(),
            client_budget: Budget::default(),
            log_budget,
            held_progress: None,
            last_progress: None,
            asks: 0,
            notices: 0,
            events: None,
        }
    }

    pub fn plugin(&self) -> &str {
        &self.plugin
    }

    /// A call starts with the whole budget, whatever an earlier call in the same (kept)
    /// instance spent.
    pub fn begin_call(&mut self, sinks: Sinks) {
        self.sinks = sinks;
        self.client_budget = Budget::default();
        self.held_progress = None;
        self.last_progress = None;
        self.asks = 0;
        self.notices = 0;
    }

    fn send_progress(&mut self, (progress, total, message): Progress) {
        if let Some(sink) = &self.sinks.progress {
            self.last_progress = Some(progress);
            sink(progress, total, message);
        }
    }

    /// The call returned: the progress held back goes out, the client hears how many log
    /// messages it missed (both before the answer, which is sent after this), and the
    /// gateway's log how many lines it did not get.
    pub fn call_ended(&mut self) {
        if let Some(progress) = self.held_progress.take() {
            self.send_progress(progress);
        }
        let dropped = self.client_budget.take_dropped();
        if dropped > 0
            && let Some(sink) = &self.sinks.log
        {
            let note = format!(
                "wasmgate: {dropped} log messages of this call were not sent ({})",
                budget::rule()
            );
            sink("warning", &note);
        }
        let unlogged = lock(&self.log_budget).take_dropped();
        if unlogged > 0 {
            tracing::warn!(
                plugin = %self.plugin,
                "{unlogged} lines the call logged or printed were left out of this log ({})",
                budget::rule()
            );
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
        let line = crate::telemetry::one_line(&message);
        let to_log = lock(&self.log_budget).take_or_drop();
        // The WIT's levels are MCP's, by name.
        let mcp_level = match level {
            Level::Debug => {
                if to_log {
                    tracing::debug!(target: "wasmgate::plugin::log", plugin, "{line}");
                }
                "debug"
            }
            Level::Info => {
                if to_log {
                    tracing::info!(target: "wasmgate::plugin::log", plugin, "{line}");
                }
                "info"
            }
            Level::Warning => {
                if to_log {
                    tracing::warn!(target: "wasmgate::plugin::log", plugin, "{line}");
                }
                "warning"
            }
            Level::Error => {
                if to_log {
                    tracing::error!(target: "wasmgate::plugin::log", plugin, "{line}");
                }
                "error"
            }
        };
        if self.sinks.log.is_some()
            && self.client_budget.take_or_drop()
            && let Some(sink) = &self.sinks.log
        {
            sink(mcp_level, &message);
        }
    }

    fn progress(&mut self, progress: f64, total: Option<f64>, message: Option<String>) {
        if self.sinks.progress.is_none() {
            return;
        }
        // MCP's progress is a number that increases; JSON has no NaN or infinity.
        let increases = self
            .held_progress
            .as_ref()
            .map(|held| held.0)
            .or(self.last_progress)
            .is_none_or(|last| progress > last);
        if !progress.is_finite() || !increases {
            tracing::debug!(plugin = %self.plugin, progress, "progress not sent: not finite, or not above the last");
            return;
        }
        let report = (progress, total.filter(|t| t.is_finite()), message.map(clip));
        if self.client_budget.take() {
            self.held_progress = None;
            self.send_progress(report);
        } else {
            // Held, and replaced by a newer one: the newest is sent later.
            self.held_progress = Some(report);
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
