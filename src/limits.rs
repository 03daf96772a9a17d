//! Limits on what clients ask and on what reaches a server: rate limits per principal,
//! profile and tool, a cap on calls at once per server, a retry budget for list calls,
//! and a circuit breaker per server. A refusal is a [`Refusal`], told once per second
//! per limit in the event log and counted in `/metrics` each time.

mod breaker;
mod concurrency;
mod rate;
mod retry;

pub use breaker::{BreakerState, Outcome};
pub use concurrency::Permit;
pub use rate::LOCAL_PRINCIPAL;
pub use retry::{RetryBudget, list_retries};

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use serde_json::{Value, json};

use crate::config::{Config, LimitsConfig, RatePer, ServerConfig};
use crate::protocol::{self, RpcError};
use crate::telemetry::events::{EventLog, Status};
use crate::telemetry::metrics;

/// A request refused by a limit, and when to try again.
#[derive(Debug, Clone)]
pub struct Refusal {
    /// The limit's name: `principal:*`, `tool:time__*`, `server:NAME`.
    pub limit: String,
    /// "rate", "concurrency" or "breaker".
    pub kind: &'static str,
    /// What was counted: the principal, profile, tool or server.
    pub key: String,
    pub retry_after: Duration,
    pub message: String,
}

impl Refusal {
    /// `Retry-After`: whole seconds, rounded up, at least 1.
    pub fn retry_after_secs(&self) -> u64 {
        self.retry_after.as_nanos().div_ceil(1_000_000_000).max(1) as u64
    }

    pub fn retry_after_ms(&self) -> u64 {
        ceil_ms(self.retry_after)
    }

    /// -32000 with `data.retryAfterMs` and `data.limit`.
    pub fn to_rpc(&self) -> RpcError {
        RpcError::new(protocol::BACKEND_UNAVAILABLE, self.message.clone()).with_data(json!({
            "limit": self.limit,
            "kind": self.kind,
            "key": self.key,
            "retryAfterMs": self.retry_after_ms(),
        }))
    }
}

/// `wait` in whole milliseconds, rounded up and at least 1: a client that waits what it
/// is told is then served (rounded down, 1.6 ms would read 1, and a retry after 1 ms be
/// refused again).
pub fn ceil_ms(wait: Duration) -> u64 {
    wait.as_nanos().div_ceil(1_000_000).max(1) as u64
}

/// The gateway's limiters; rebuilt in part when the config changes.
pub struct Limits {
    events: Arc<EventLog>,
    rate: ArcSwap<rate::RateLimits>,
    breakers: breaker::Breakers,
    caps: concurrency::Caps,
    /// When each limit's refusal was last told in the event log, and how many since.
    told: Mutex<HashMap<String, (Instant, u64)>>,
}

impl Limits {
    pub fn new(events: Arc<EventLog>, config: &Config) -> Limits {
        Limits {
            events,
            rate: ArcSwap::from_pointee(rate::RateLimits::new(&config.limits)),
            breakers: Default::default(),
            caps: Default::default(),
            told: Mutex::default(),
        }
    }

    /// Takes new rules; the buckets start full again only when the rules changed.
    pub fn reconfigure(&self, config: &LimitsConfig) {
        if self.rate.load().config() != config {
            self.rate.store(Arc::new(rate::RateLimits::new(config)));
        }
    }

    /// Whether any rule counts by `per` (requests skip the look-up when none does).
    pub fn counts(&self, per: RatePer) -> bool {
        self.rate.load().counts(per)
    }

    /// A request of `principal` (on `profile`, if any): refused over a principal or
    /// profile rate limit.
    pub fn admit_request(&self, principal: &str, profile: Option<&str>) -> Result<(), Refusal> {
        let rate = self.rate.load();
        let result = rate
            .check(RatePer::Principal, principal)
            .and_then(|()| match profile {
                Some(profile) => rate.check(RatePer::Profile, profile),
                None => Ok(()),
            });
        result.map_err(|refusal| self.refused(refusal))
    }

    /// A call of `tool` (the name clients see): refused over a tool rate limit.
    pub fn admit_tool(&self, tool: &str) -> Result<(), Refusal> {
        (self.rate.load().check(RatePer::Tool, tool)).map_err(|refusal| self.refused(refusal))
    }

    /// Refused at once while `server`'s breaker is open; else the call may go (as the
    /// probe, when half-open), and its outcome is told with [`Limits::record`].
    pub fn admit_server(&self, server: &ServerConfig) -> Result<(), Refusal> {
        match self.breakers.admit(&server.name, &server.breaker) {
            Ok(change) => {
                self.tell_change(&server.name, change);
                Ok(())
            }
            Err(refusal) => Err(self.refused(refusal)),
        }
    }

    /// What a call to `server` came to, for its breaker.
    pub fn record(&self, server: &ServerConfig, outcome: Outcome) {
        let change = self.breakers.record(&server.name, &server.breaker, outcome);
        self.tell_change(&server.name, change);
    }

    /// A place among `server`'s `max_concurrent` calls, waited for up to `wait`.
    pub async fn take_turn(
        &self,
        server: &ServerConfig,
        wait: Duration,
    ) -> Result<Option<Permit>, Refusal> {
        let Some(cap) = server.max_concurrent else {
            return Ok(None);
        };
        (self.caps.acquire(&server.name, cap, wait).await)
            .map(Some)
            .map_err(|refusal| self.refused(refusal))
    }

    /// A server's breaker and cap, for its entry in `gateway_status`.
    pub fn server_status(&self, server: &ServerConfig) -> Value {
        json!({
            "state": self.breakers.state(&server.name).as_str(),
            "failures": server.breaker.failures,
            "open_for_ms": server.breaker.open_for.as_millis() as u64,
        })
    }

    /// What `gateway_status` shows: the rate rules and the retry budget (each server's
    /// breaker is shown with the server).
    pub fn status(&self, config: &Config) -> Value {
        let rules: Vec<Value> = (config.limits.rate.iter())
            .map(|rule| {
                json!({"limit": rule.label(), "per": rule.per.as_str(), "match": rule.pattern,
                       "rate": rule.rate, "burst": rule.burst.get()})
            })
            .collect();
        json!({"rate": rules, "list_retries": list_retries().status()})
    }

    /// Sets the breaker gauges of `servers` (a server never called shows closed).
    pub fn publish(&self, servers: impl Iterator<Item = String>) {
        for server in servers {
            metrics::breaker_state(&server, self.breakers.state(&server).gauge());
        }
    }

    /// Counts a refusal, and tells it in the event log at most once a second per limit.
    fn refused(&self, refusal: Refusal) -> Refusal {
        metrics::limited(&refusal.limit, refusal.kind);
        let now = Instant::now();
        let suppressed = {
            let mut told = self.told.lock().unwrap();
            let entry = told
                .entry(refusal.limit.clone())
                .or_insert((now - Duration::from_secs(2), 0));
            if now.duration_since(entry.0) < Duration::from_secs(1) {
                entry.1 += 1;
                None
            } else {
                let suppressed = entry.1;
                *entry = (now, 0);
                Some(suppressed)
            }
        };
        if let Some(suppressed) = suppressed {
            let source = match refusal.kind {
                "rate" => "wasmgate",
                _ => refusal.key.as_str(),
            };
            self.events.emit(
                "limit.refused",
                source,
                Status::Failure,
                json!({"limit": refusal.limit, "kind": refusal.kind, "key": refusal.key,
                       "retry_after_ms": refusal.retry_after_ms(), "refused_since_last_told": suppressed}),
            );
        }
        refusal
    }

    fn tell_change(&self, server: &str, change: Option<BreakerState>) {
        let Some(state) = change else { return };
        metrics::breaker_state(server, state.gauge());
        let (kind, status) = match state {
            BreakerState::Open => ("breaker.opened", Status::Failure),
            BreakerState::HalfOpen => ("breaker.half_open", Status::Success),
            BreakerState::Closed => ("breaker.closed", Status::Success),
        };
        self.events
            .emit(kind, server, status, json!({"state": state.as_str()}));
    }
}
