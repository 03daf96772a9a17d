//! The clients that hear what servers send on their own (list changes, resource updates,
//! log lines outside a call): session-era clients and open `subscriptions/listen`
//! requests. Held weakly: a client that left drops out.

use std::sync::{Arc, Mutex, Weak};

use crate::peer::ClientPeer;

#[derive(Default)]
pub struct Peers(Mutex<Vec<Weak<ClientPeer>>>);

impl Peers {
    pub fn register(&self, peer: &Arc<ClientPeer>) {
        let mut peers = self.0.lock().unwrap();
        peers.retain(|p| p.strong_count() > 0);
        peers.push(Arc::downgrade(peer));
    }

    pub fn live(&self) -> Vec<Arc<ClientPeer>> {
        (self.0.lock().unwrap().iter())
            .filter_map(Weak::upgrade)
            .collect()
    }
}
