//! Calls parked between the rounds of their `input_required` exchange, by handle: bounded,
//! given up at their expiry (the server is told), and each handle good for one retry.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use super::exchange::{Binding, Exchange};
use super::handle::{Handle, Sealer, StateError};
use crate::peer::Principal;

/// Calls that may wait for their clients at once, over all clients.
pub const MAX_PARKED: usize = 1024;
/// ... and for one principal.
pub const MAX_PARKED_PER_PRINCIPAL: usize = 64;

struct Entry {
    exchange: Exchange,
    round: u32,
    principal: Principal,
}

/// The parked calls of one gateway.
pub struct Parked {
    calls: Arc<Mutex<HashMap<u64, Entry>>>,
    next: AtomicU64,
    sealer: Sealer,
}

/// A call taken back by a retry: its exchange, and the round and id it parks under next.
pub struct Resumed {
    pub exchange: Exchange,
    pub call: u64,
    pub round: u32,
}

impl Parked {
    pub fn new(sealer: Sealer) -> Parked {
        Parked {
            calls: Arc::default(),
            next: AtomicU64::new(1),
            sealer,
        }
    }

    /// A new call's id.
    pub fn new_call(&self) -> u64 {
        self.next.fetch_add(1, Ordering::Relaxed)
    }

    /// Parks `exchange` as call `call`'s round `round` until a retry or `ttl`; the handle
    /// the client echoes. `Err` gives the exchange back when too many calls wait
    /// ([`StateError::Full`]).
    pub fn park(
        &self,
        call: u64,
        round: u32,
        exchange: Exchange,
        principal: &Principal,
        ttl: Duration,
    ) -> Result<String, Box<Exchange>> {
        let mut calls = self.calls.lock().unwrap();
        let mine = calls.values().filter(|e| &e.principal == principal).count();
        if calls.len() >= MAX_PARKED || mine >= MAX_PARKED_PER_PRINCIPAL {
            return Err(Box::new(exchange));
        }
        let handle = Handle {
            call,
            round,
            expires_ms: now_ms().saturating_add(ttl.as_millis() as u64),
            replica: self.sealer.replica().to_string(),
        };
        exchange.peer.set_parked(true);
        exchange.peer.handoff().inspect(|h| h.detach());
        calls.insert(
            call,
            Entry {
                exchange,
                round,
                principal: principal.clone(),
            },
        );
        drop(calls);
        // Given up at its expiry: the call is cancelled upstream.
        let calls = Arc::downgrade(&self.calls);
        tokio::spawn(async move {
            tokio::time::sleep(ttl).await;
            let Some(calls) = calls.upgrade() else {
                return;
            };
            let expired = {
                let mut calls = calls.lock().unwrap();
                match calls.get(&call) {
                    Some(entry) if entry.round == round => calls.remove(&call),
                    _ => None,
                }
            };
            if let Some(expired) = expired {
                expired.exchange.give_up();
            }
        });
        Ok(self.sealer.seal(&handle, principal))
    }

    /// The call `state` carries on, for a retry by `principal` that repeats `binding`.
    /// Nothing of a refused retry reaches the call.
    pub fn resume(
        &self,
        state: &str,
        principal: &Principal,
        binding: &Binding,
    ) -> Result<Resumed, StateError> {
        let handle = self.sealer.open(state, principal, now_ms())?;
        let mut calls = self.calls.lock().unwrap();
        let entry = calls.get(&handle.call).ok_or(StateError::Ended)?;
        if entry.round != handle.round {
            return Err(StateError::Used);
        }
        if &entry.exchange.binding != binding {
            return Err(StateError::OtherRequest);
        }
        let entry = calls.remove(&handle.call).ok_or(StateError::Ended)?;
        entry.exchange.peer.set_parked(false);
        Ok(Resumed {
            exchange: entry.exchange,
            call: handle.call,
            round: handle.round + 1,
        })
    }

    /// The replica that holds the call `state` names, if another one does.
    pub fn held_elsewhere(&self, state: &str, principal: &Principal) -> Option<String> {
        self.sealer.held_elsewhere(state, principal)
    }

    /// Calls parked now.
    pub fn len(&self) -> usize {
        self.calls.lock().unwrap().len()
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

fn now_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64)
}
