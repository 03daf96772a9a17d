//! How much a plugin call or a server may report: to a client (progress, log messages) and
//! to the gateway's log (`host.log` lines, stdout and stderr lines). One that reports in a
//! tight loop would otherwise queue lines faster than a client reads them, or write
//! hundreds of megabytes to the log an MCP client keeps of the gateway's stderr.

use std::time::Instant;

/// Reports one call may make at once, and per second after that.
pub const BURST: f64 = 1000.0;
pub const PER_SECOND: f64 = 100.0;

/// A token bucket: [`BURST`] tokens, refilled at [`PER_SECOND`].
pub struct Budget {
    tokens: f64,
    refilled_at: Instant,
    /// Reports refused since the last [`Budget::take_dropped`].
    dropped: u64,
}

impl Default for Budget {
    fn default() -> Self {
        Budget {
            tokens: BURST,
            refilled_at: Instant::now(),
            dropped: 0,
        }
    }
}

impl Budget {
    /// Spends one report, if there is budget for it.
    pub fn take(&mut self) -> bool {
        let now = Instant::now();
        let earned = now.duration_since(self.refilled_at).as_secs_f64() * PER_SECOND;
        self.tokens = (self.tokens + earned).min(BURST);
        self.refilled_at = now;
        if self.tokens < 1.0 {
            return false;
        }
        self.tokens -= 1.0;
        true
    }

    /// [`Budget::take`], counting a report refused as dropped.
    pub fn take_or_drop(&mut self) -> bool {
        let taken = self.take();
        if !taken {
            self.dropped += 1;
        }
        taken
    }

    /// How many reports were refused since the last call.
    pub fn take_dropped(&mut self) -> u64 {
        std::mem::take(&mut self.dropped)
    }
}

/// What [`Budget`] allows, in words, for messages about what it dropped.
pub fn rule() -> String {
    format!("over {BURST} at once, then {PER_SECOND} a second")
}
