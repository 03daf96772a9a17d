//! A retry budget for idempotent list calls to servers: each call earns a tenth of a
//! retry, on top of a small floor, so retries never multiply an outage.

use std::sync::{Mutex, OnceLock};

use serde_json::{Value, json};

/// Retries allowed before any call has earned one, in tenths of a retry.
const FLOOR: u64 = 30;
/// The most that can be saved up, in tenths: a long calm does not buy a retry storm.
const MOST: u64 = 130;

/// The process's budget for list calls to servers.
pub fn list_retries() -> &'static RetryBudget {
    static BUDGET: OnceLock<RetryBudget> = OnceLock::new();
    BUDGET.get_or_init(RetryBudget::default)
}

/// The balance in tenths of a retry, the calls and the retries so far.
pub struct RetryBudget {
    state: Mutex<(u64, u64, u64)>,
}

impl Default for RetryBudget {
    fn default() -> Self {
        RetryBudget {
            state: Mutex::new((FLOOR, 0, 0)),
        }
    }
}

impl RetryBudget {
    /// Counts a first attempt.
    pub fn called(&self) {
        let mut state = self.state.lock().unwrap();
        state.0 = (state.0 + 1).min(MOST);
        state.1 += 1;
    }

    /// Takes one retry from the budget; `false` when it is spent.
    pub fn try_retry(&self) -> bool {
        let mut state = self.state.lock().unwrap();
        if state.0 < 10 {
            return false;
        }
        state.0 -= 10;
        state.2 += 1;
        crate::telemetry::metrics::retried();
        true
    }

    pub fn status(&self) -> Value {
        let state = self.state.lock().unwrap();
        json!({"calls": state.1, "retries": state.2, "left": state.0 / 10})
    }
}

#[cfg(test)]
mod tests {
    use super::RetryBudget;

    #[test]
    fn retries_are_a_tenth_of_calls_plus_a_floor() {
        let budget = RetryBudget::default();
        let spent = (0..100).filter(|_| budget.try_retry()).count();
        assert_eq!(spent, 3);
        for _ in 0..20 {
            budget.called();
        }
        assert_eq!((0..100).filter(|_| budget.try_retry()).count(), 2);
    }
}
