//! A circuit breaker per server: open after `failures` failures in a row (timeouts,
//! transport errors, 5xx; not a tool's own errors), calls refused at once while open,
//! one probe let through after `open_for`, closed again by a success.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use super::Refusal;
use crate::config::BreakerConfig;
use crate::protocol::{self, RpcError};

/// What a call to a server came to, as its breaker counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Success,
    /// The server did not answer: unreachable, crashed, timed out, a 5xx.
    Failure,
    /// Neither (the call was cancelled, or refused before it reached the server).
    Neither,
}

impl Outcome {
    /// A server's own JSON-RPC error (it answered) is a success here; the gateway's
    /// -32000 and -32001 without an `originalError` mean no answer came.
    pub fn of<T>(result: &Result<T, RpcError>) -> Outcome {
        match result {
            Ok(_) => Outcome::Success,
            Err(e)
                if e.code == protocol::BACKEND_UNAVAILABLE
                    || e.code == protocol::REQUEST_TIMEOUT =>
            {
                let answered = (e.data.as_deref())
                    .is_some_and(|d| d.get("originalError").is_some() || d.get("limit").is_some());
                match answered {
                    true => Outcome::Neither,
                    false => Outcome::Failure,
                }
            }
            Err(_) => Outcome::Success,
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BreakerState {
    Closed,
    HalfOpen,
    Open,
}

impl BreakerState {
    pub fn as_str(self) -> &'static str {
        match self {
            BreakerState::Closed => "closed",
            BreakerState::HalfOpen => "half-open",
            BreakerState::Open => "open",
        }
    }

    /// `wasmgate_breaker_state`: 0 closed, 1 half-open, 2 open.
    pub fn gauge(self) -> f64 {
        match self {
            BreakerState::Closed => 0.0,
            BreakerState::HalfOpen => 1.0,
            BreakerState::Open => 2.0,
        }
    }
}

#[derive(Debug, Clone, Copy)]
enum State {
    Closed {
        failures: u32,
    },
    Open {
        until: Instant,
    },
    /// The probe went at `since`; a probe that never ends (cancelled) lets another go
    /// after `open_for`.
    HalfOpen {
        since: Instant,
    },
}

#[derive(Default)]
pub struct Breakers {
    states: Mutex<HashMap<String, State>>,
}

impl Breakers {
    pub fn state(&self, server: &str) -> BreakerState {
        match self.states.lock().unwrap().get(server) {
            None | Some(State::Closed { .. }) => BreakerState::Closed,
            Some(State::Open { .. }) => BreakerState::Open,
            Some(State::HalfOpen { .. }) => BreakerState::HalfOpen,
        }
    }

    /// Lets a call go (returning the state it moved to, if it moved) or refuses it.
    pub fn admit(
        &self,
        server: &str,
        config: &BreakerConfig,
    ) -> Result<Option<BreakerState>, Refusal> {
        if config.failures == 0 {
            return Ok(None);
        }
        let now = Instant::now();
        let mut states = self.states.lock().unwrap();
        let Some(state) = states.get_mut(server) else {
            return Ok(None);
        };
        let wait = match *state {
            State::Closed { .. } => return Ok(None),
            State::Open { until } if now >= until => {
                *state = State::HalfOpen { since: now };
                return Ok(Some(BreakerState::HalfOpen));
            }
            State::Open { until } => until - now,
            State::HalfOpen { since } if now.duration_since(since) >= config.open_for => {
                *state = State::HalfOpen { since: now };
                return Ok(None);
            }
            // The probe is out: the next call may go once it is back.
            State::HalfOpen { since } => (since + config.open_for)
                .saturating_duration_since(now)
                .min(Duration::from_secs(1)),
        };
        Err(Refusal {
            limit: format!("server:{server}"),
            kind: "breaker",
            key: server.to_string(),
            retry_after: wait,
            message: format!(
                "Server `{server}` is not called for now: its last {} calls failed (circuit breaker open); retry in {} ms",
                config.failures,
                wait.as_millis().max(1)
            ),
        })
    }

    /// Counts a call's outcome; returns the state the breaker moved to, if it moved.
    pub fn record(
        &self,
        server: &str,
        config: &BreakerConfig,
        outcome: Outcome,
    ) -> Option<BreakerState> {
        if config.failures == 0 || outcome == Outcome::Neither {
            return None;
        }
        let mut states = self.states.lock().unwrap();
        let state = states
            .entry(server.to_string())
            .or_insert(State::Closed { failures: 0 });
        match (outcome, *state) {
            (Outcome::Success, State::Closed { .. }) => {
                *state = State::Closed { failures: 0 };
                None
            }
            (Outcome::Success, _) => {
                *state = State::Closed { failures: 0 };
                Some(BreakerState::Closed)
            }
            (_, State::Closed { failures }) if failures + 1 >= config.failures => {
                *state = State::Open {
                    until: Instant::now() + config.open_for,
                };
                Some(BreakerState::Open)
            }
            (_, State::Closed { failures }) => {
                *state = State::Closed {
                    failures: failures + 1,
                };
                None
            }
            (_, State::HalfOpen { .. }) => {
                *state = State::Open {
                    until: Instant::now() + config.open_for,
                };
                Some(BreakerState::Open)
            }
            // A call let through before the breaker opened, failing late.
            (_, State::Open { .. }) => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::{BreakerState, Breakers, Outcome};
    use crate::config::BreakerConfig;

    #[test]
    fn opens_after_failures_in_a_row_probes_once_and_closes_on_success() {
        let config = BreakerConfig {
            failures: 2,
            open_for: Duration::from_millis(50),
        };
        let breakers = Breakers::default();
        assert_eq!(breakers.admit("s", &config).unwrap(), None);
        assert_eq!(breakers.record("s", &config, Outcome::Failure), None);
        assert_eq!(breakers.record("s", &config, Outcome::Success), None);
        assert_eq!(breakers.record("s", &config, Outcome::Failure), None);
        assert_eq!(
            breakers.record("s", &config, Outcome::Failure),
            Some(BreakerState::Open)
        );
        let refused = breakers.admit("s", &config).unwrap_err();
        assert_eq!(
            (refused.kind, refused.limit.as_str()),
            ("breaker", "server:s")
        );
        // Other servers are not affected.
        assert!(breakers.admit("t", &config).is_ok());
        std::thread::sleep(Duration::from_millis(60));
        assert_eq!(
            breakers.admit("s", &config).unwrap(),
            Some(BreakerState::HalfOpen)
        );
        assert!(breakers.admit("s", &config).is_err(), "one probe at a time");
        assert_eq!(
            breakers.record("s", &config, Outcome::Success),
            Some(BreakerState::Closed)
        );
        assert_eq!(breakers.state("s"), BreakerState::Closed);
    }
}
