//! The per-client relay: what the gateway keeps of its clients beyond one message, which the
//! router and the backends hand messages to. It knows, for what a server sends, which client
//! it is for: the clients that hear what servers send on their own (`peers`), the client
//! requests in flight to each server (`calls`), where each request's progress goes
//! (`progress`), who subscribed to which resource through which server (`subscriptions`),
//! and the stateless (2026-07-28) calls parked between the rounds of an `input_required`
//! exchange under an authenticated handle (`parked`). Who may hear what (a profile's view)
//! is the gateway's to decide; the relay keeps the links.

pub mod calls;
pub mod exchange;
pub mod handle;
pub mod parked;
pub mod peers;
pub mod progress;
pub mod subscriptions;
pub mod url_elicitation;

pub use exchange::Exchange;
pub use handle::StateError;
pub use parked::Parked;

use crate::config::Config;

/// The relay's state, one per gateway.
pub struct Relay {
    pub peers: peers::Peers,
    pub calls: calls::CallsInFlight,
    pub progress: progress::ProgressRoutes,
    pub subscriptions: subscriptions::Subscriptions,
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
            peers: peers::Peers::default(),
            calls: calls::CallsInFlight::default(),
            progress: progress::ProgressRoutes::default(),
            subscriptions: subscriptions::Subscriptions::default(),
            parked: parked::Parked::new(sealer),
        }
    }
}
