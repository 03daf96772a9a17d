//! Progress routes: the token the gateway gave a server for one client request, mapped back
//! to the client, its request and the token it chose. Only the server the token was given
//! to may use it, and only increasing progress within a budget passes.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};

use serde_json::Value;

use crate::peer::ClientPeer;
use crate::telemetry::budget::Budget;

/// Where a server's progress for one request goes, and what it sent so far.
struct Route {
    server: String,
    peer: Weak<ClientPeer>,
    /// The client's request the progress belongs to.
    request: Option<Arc<str>>,
    original: Value,
    /// The last `progress` passed on: MCP requires it to increase.
    last: Option<f64>,
    budget: Budget,
}

/// Where one server's progress notification goes: the client, its request, its token.
pub struct Destination {
    pub peer: Arc<ClientPeer>,
    pub request: Option<Arc<str>>,
    pub token: Value,
}

#[derive(Default)]
pub struct ProgressRoutes(Mutex<HashMap<String, Route>>);

impl ProgressRoutes {
    /// A token of the gateway's for `peer`'s `token` on its request `request` to `server`:
    /// unique across clients, and not one another server can guess.
    pub fn open(
        &self,
        server: &str,
        peer: &Arc<ClientPeer>,
        request: Option<Arc<str>>,
        token: Value,
    ) -> String {
        let ours = format!("wg-{}", uuid::Uuid::new_v4().simple());
        let route = Route {
            server: server.to_string(),
            peer: Arc::downgrade(peer),
            request,
            original: token,
            last: None,
            budget: Budget::default(),
        };
        self.0.lock().unwrap().insert(ours.clone(), route);
        ours
    }

    pub fn close(&self, ours: &str) {
        self.0.lock().unwrap().remove(ours);
    }

    /// Where `server`'s `progress` for token `ours` goes; `None` for a token not given to
    /// it, progress that does not increase, or past the route's budget.
    pub fn route(&self, server: &str, ours: &str, progress: Option<f64>) -> Option<Destination> {
        let mut routes = self.0.lock().unwrap();
        let Some(route) = routes.get_mut(ours).filter(|r| r.server == server) else {
            tracing::debug!(
                server,
                "progress for a token not given to this server dropped"
            );
            return None;
        };
        let increasing = progress.is_some_and(|p| route.last.is_none_or(|l| p > l));
        if !increasing || !route.budget.take_or_drop() {
            return None;
        }
        route.last = progress;
        Some(Destination {
            peer: route.peer.upgrade()?,
            request: route.request.clone(),
            token: route.original.clone(),
        })
    }
}
