//! The `host` interface a plugin imports: `log` to tracing under the plugin's
//! name, `progress` to the current call's sink, `config` from the plugin's table.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Instant;

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
    /// Notifications the call may still send its client now (see [`BURST`]).
    budget: f64,
    refilled_at: Instant,
    /// The newest progress held back for want of budget: sent when budget is back, or
    /// before the call's answer, so the client's last progress is the plugin's last.
    held_progress: Option<Progress>,
    /// The last progress value sent: MCP wants progress to increase.
    last_progress: Option<f64>,
    /// Log messages dropped for want of budget.
    dropped_logs: u64,
}

type Progress = (f64, Option<f64>, Option<String>);

/// Notifications a call may send its client at once, and per second after that: a guest
/// that reports in a tight loop would otherwise queue lines faster than the client reads
/// them (16 KiB each at most).
const BURST: f64 = 1000.0;
const PER_SECOND: f64 = 100.0;

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
            budget: BURST,
            refilled_at: Instant::now(),
            held_progress: None,
            last_progress: None,
            dropped_logs: 0,
        }
    }

    /// Takes one notification from the budget, if there is one.
    fn take_budget(&mut self) -> bool {
        let now = Instant::now();
        let earned = now.duration_since(self.refilled_at).as_secs_f64() * PER_SECOND;
        self.budget = (self.budget + earned).min(BURST);
        self.refilled_at = now;
        if self.budget < 1.0 {
            return false;
        }
        self.budget -= 1.0;
        true
    }

    fn send_progress(&mut self, (progress, total, message): Progress) {
        if let Some(sink) = &self.sinks.progress {
            self.last_progress = Some(progress);
            sink(progress, total, message);
        }
    }

    /// The call returned: the progress held back goes out, and the client hears how many
    /// log messages it missed. Both before the answer, which is sent after this.
    pub fn call_ended(&mut self) {
        if let Some(progress) = self.held_progress.take() {
            self.send_progress(progress);
        }
        if self.dropped_logs > 0
            && let Some(sink) = &self.sinks.log
        {
            let note = format!(
                "wasmgate: {} log messages of this call were not sent (over {BURST} at once, then {PER_SECOND} a second)",
                self.dropped_logs
            );
            tracing::warn!(plugin = %self.plugin, "{note}");
            sink("warning", &note);
            self.dropped_logs = 0;
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
        // One line in the gateway's log: a plugin cannot write lines that look like its own.
        let line = message.replace('\r', "\\r").replace('\n', "\\n");
        // The WIT's levels are MCP's, by name.
        let mcp_level = match level {
            Level::Debug => {
                tracing::debug!(target: "wasmgate::plugin::log", plugin, "{line}");
                "debug"
            }
            Level::Info => {
                tracing::info!(target: "wasmgate::plugin::log", plugin, "{line}");
                "info"
            }
            Level::Warning => {
                tracing::warn!(target: "wasmgate::plugin::log", plugin, "{line}");
                "warning"
            }
            Level::Error => {
                tracing::error!(target: "wasmgate::plugin::log", plugin, "{line}");
                "error"
            }
        };
        if self.sinks.log.is_some() {
            if self.take_budget() {
                if let Some(sink) = &self.sinks.log {
                    sink(mcp_level, &message);
                }
            } else {
                self.dropped_logs += 1;
            }
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
        if self.take_budget() {
            self.held_progress = None;
            self.send_progress(report);
        } else {
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
