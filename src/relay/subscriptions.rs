//! Resource subscriptions: which clients subscribed to each URI, and through which server
//! (the only one that may say the resource changed, and the one told again when it
//! restarts).

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use crate::peer::ClientPeer;

#[derive(Default)]
pub struct Subscriptions {
    /// URI -> the clients subscribed to it.
    by_uri: Mutex<HashMap<String, Vec<Weak<ClientPeer>>>>,
    /// URI -> the server a subscription to it went to.
    through: Mutex<HashMap<String, String>>,
}

impl Subscriptions {
    /// Records `peer`'s subscription to `uri` on `server`; once per client, however often
    /// it asks. `false` when it was subscribed already.
    pub fn subscribe(&self, peer: &Arc<ClientPeer>, uri: &str, server: &str) -> bool {
        (self.through.lock().unwrap()).insert(uri.to_string(), server.to_string());
        let mut by_uri = self.by_uri.lock().unwrap();
        let list = by_uri.entry(uri.to_string()).or_default();
        list.retain(|w| w.strong_count() > 0);
        let added = !(list.iter()).any(|w| std::ptr::eq(w.as_ptr(), Arc::as_ptr(peer)));
        if added {
            list.push(Arc::downgrade(peer));
        }
        added
    }

    /// Ends `peer`'s subscription to `uri`; `true` when no client is subscribed any more.
    pub fn unsubscribe(&self, peer: &Arc<ClientPeer>, uri: &str) -> bool {
        let mut by_uri = self.by_uri.lock().unwrap();
        let Some(list) = by_uri.get_mut(uri) else {
            return true;
        };
        list.retain(|w| w.upgrade().is_some_and(|s| !Arc::ptr_eq(&s, peer)));
        let empty = list.is_empty();
        if empty {
            by_uri.remove(uri);
            self.through.lock().unwrap().remove(uri);
        }
        empty
    }

    /// The server subscriptions to `uri` went to.
    pub fn through(&self, uri: &str) -> Option<String> {
        self.through.lock().unwrap().get(uri).cloned()
    }

    /// The live clients subscribed to `uri`.
    pub fn subscribers(&self, uri: &str) -> Vec<Arc<ClientPeer>> {
        let by_uri = self.by_uri.lock().unwrap();
        (by_uri.get(uri).into_iter().flatten())
            .filter_map(Weak::upgrade)
            .collect()
    }

    /// The URIs live clients subscribed to through `server`.
    pub fn through_server(&self, server: &str) -> Vec<String> {
        let by_uri = self.by_uri.lock().unwrap();
        (self.through.lock().unwrap().iter())
            .filter(|(uri, through)| {
                *through == server
                    && (by_uri.get(*uri)).is_some_and(|l| l.iter().any(|w| w.strong_count() > 0))
            })
            .map(|(uri, _)| uri.clone())
            .collect()
    }
}
