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

use crate::config::Config;

/// The relay's state, one per gateway.
pub struct Relay {
    pub parked: parked::Parked,
}

impl Relay {
    /// With `[http.replicas]`, handles are signed with the replicas' shared key and name
    /// this replica; without, with a key of this process's own.
    pub fn new(config: &Config) -> Relay {
        let sealer = match &config.http.replicas {
            Some(replicas) => handle::Sealer::shared(&replicas.key, replicas.name.clone()),
            None => handle::Sealer::new(),
        };
        Relay {
            parked: parked::Parked::new(sealer),
        }
    }
}
