//! The per-client relay: what the gateway keeps of a client's requests beyond one message.
//! Today: the calls of stateless (2026-07-28) requests that a session-era server asked the
//! client something during, kept open between the rounds of their `input_required`
//! exchange under an authenticated `requestState` handle.

pub mod exchange;
pub mod handle;
pub mod parked;

pub use exchange::Exchange;
pub use handle::StateError;
pub use parked::Parked;

/// The relay's state, one per gateway.
pub struct Relay {
    pub parked: parked::Parked,
}

impl Relay {
    pub fn new() -> Relay {
        Relay {
            parked: parked::Parked::new(handle::Sealer::new()),
        }
    }
}

impl Default for Relay {
    fn default() -> Self {
        Relay::new()
    }
}
