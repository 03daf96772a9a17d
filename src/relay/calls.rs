//! Client requests in flight to each server: which client (and which of its requests) a
//! server's request or log line belongs to. A remote server's message on a call's own
//! stream names the call; a stdio server's names none, and is attributed only when that
//! cannot reach another principal's client.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::peer::ClientPeer;
use crate::protocol::{self, RpcError};

/// A client, and which of its requests (the key of its id) a server's message belongs to.
pub type Asker = (Arc<ClientPeer>, Option<Arc<str>>);

/// A client's request in flight to a server.
struct InFlight {
    id: u64,
    peer: Weak<ClientPeer>,
    request: Option<Arc<str>>,
}

/// The calls in flight, by server, newest last.
#[derive(Default)]
pub struct CallsInFlight {
    by_server: Mutex<HashMap<String, Vec<InFlight>>>,
    next: AtomicU64,
}

/// Removes its call from [`CallsInFlight`] when dropped.
pub struct CallInFlight<'r> {
    calls: &'r CallsInFlight,
    server: String,
    id: u64,
}

impl CallInFlight<'_> {
    /// The call's number, which a backend carries as `crate::backend::CALL`.
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for CallInFlight<'_> {
    fn drop(&mut self) {
        let mut by_server = self.calls.by_server.lock().unwrap();
        if let Some(list) = by_server.get_mut(&self.server) {
            list.retain(|c| c.id != self.id);
            if list.is_empty() {
                by_server.remove(&self.server);
            }
        }
    }
}

impl CallsInFlight {
    /// Records `peer`'s request `request` in flight to `server` until the guard is dropped.
    pub fn begin(
        &self,
        server: &str,
        peer: &Arc<ClientPeer>,
        request: Option<Arc<str>>,
    ) -> CallInFlight<'_> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let call = InFlight {
            id,
            peer: Arc::downgrade(peer),
            request,
        };
        (self.by_server.lock().unwrap())
            .entry(server.to_string())
            .or_default()
            .push(call);
        CallInFlight {
            calls: self,
            server: server.to_string(),
            id,
        }
    }

    /// The client (and its request) of call `call` to `server`, while it is in flight.
    pub fn call_of(&self, server: &str, call: u64) -> Option<Asker> {
        let by_server = self.by_server.lock().unwrap();
        let call = by_server.get(server)?.iter().find(|c| c.id == call)?;
        Some((call.peer.upgrade()?, call.request.clone()))
    }

    /// Who a message of `server`'s is for: the call named by `call` (a remote server's
    /// message on a call's own stream), else the one client with calls in flight to it (a
    /// message over stdio names no call). `Ok(None)`: no call is in flight.
    pub fn asker_of(&self, server: &str, call: Option<u64>) -> Result<Option<Asker>, RpcError> {
        if let Some(call) = call {
            return Ok(self.call_of(server, call));
        }
        let by_server = self.by_server.lock().unwrap();
        let live: Vec<_> = (by_server.get(server).into_iter().flatten())
            .filter_map(|c| Some((c.peer.upgrade()?, c.request.clone())))
            .collect();
        let Some((newest, request)) = live.last().cloned() else {
            return Ok(None);
        };
        if live.iter().any(|(peer, _)| !Arc::ptr_eq(peer, &newest)) {
            if let Some(asker) = the_active_one(&live) {
                return Ok(Some(asker));
            }
            return Err(RpcError::new(
                protocol::INVALID_REQUEST,
                format!(
                    "calls from several clients are in flight to server `{server}`, and its \
                     request names none of them, so the gateway cannot tell which client to \
                     ask; set exclusive = true on [servers.{server}] to run one client's \
                     calls at a time"
                ),
            ));
        }
        // With several calls of that client in flight, which one asked is not known either:
        // its newest call's stream reaches it (clients read a request on any of their streams).
        Ok(Some((newest, request)))
    }
}

/// With calls of several clients in flight to a server: the one client whose calls are not
/// parked (waiting for their client's retry, so blocked on the client and asking nothing
/// now), when every parked one is of the same principal, so no request can reach another
/// principal's client.
fn the_active_one(live: &[Asker]) -> Option<Asker> {
    let mut active = live.iter().filter(|(peer, _)| !peer.is_parked());
    let (asker, request) = active.next_back()?;
    let one_client = active.all(|(peer, _)| Arc::ptr_eq(peer, asker));
    let one_principal = (live.iter()).all(|(peer, _)| peer.principal() == asker.principal());
    (one_client && one_principal).then(|| (asker.clone(), request.clone()))
}
