//! What servers send the gateway on their own: notifications (progress, log messages,
//! list changes, resource updates, cancellations) and requests for a client (sampling,
//! elicitation, roots), routed to the client they belong to.

use std::collections::HashMap;
use std::sync::{Arc, Weak};

use serde_json::{Value, json};

use super::Gateway;
use crate::backend::ListKind;
use crate::catalog::view::View;
use crate::peer::ClientPeer;
use crate::protocol::{self, RpcError, methods};

/// A client's request in flight to a server.
pub(super) struct InFlightCall {
    id: u64,
    peer: Weak<ClientPeer>,
    request: Option<Arc<str>>,
}

/// A client, and which of its requests (the key of its id) a server's message belongs to.
type Asker = (Arc<ClientPeer>, Option<Arc<str>>);

/// Removes its call from [`Gateway::begin_call`]'s record when dropped.
pub struct CallInFlight<'g> {
    gateway: &'g Gateway,
    server: String,
    id: u64,
}

impl CallInFlight<'_> {
    /// The call's number, which a backend carries as [`crate::backend::CALL`].
    pub fn id(&self) -> u64 {
        self.id
    }
}

impl Drop for CallInFlight<'_> {
    fn drop(&mut self) {
        let mut calls = self.gateway.calls_in_flight.lock().unwrap();
        if let Some(list) = calls.get_mut(&self.server) {
            list.retain(|c| c.id != self.id);
            if list.is_empty() {
                calls.remove(&self.server);
            }
        }
    }
}

impl Gateway {
    /// Whether `peer`'s view includes backend `name` (a server or plugin): only such a
    /// client hears what that backend sends on its own.
    pub fn sees(&self, peer: &ClientPeer, name: &str) -> bool {
        // Most clients have no profile: the config is not read for them.
        match peer.profile() {
            None => true,
            profile => View::of(profile, &self.config.load()).includes(&self.catalog(), name),
        }
    }

    /// The live sessions whose view includes backend `name`.
    pub fn sessions_seeing(&self, name: &str) -> Vec<Arc<ClientPeer>> {
        let config = self.config.load();
        let catalog = self.catalog();
        let mut by_profile: HashMap<String, bool> = HashMap::new();
        self.live_sessions()
            .into_iter()
            .filter(|peer| match peer.profile() {
                None => true,
                Some(profile) => *by_profile
                    .entry(profile.to_string())
                    .or_insert_with(|| View::of(Some(profile), &config).includes(&catalog, name)),
            })
            .collect()
    }

    /// `call`: the client call whose stream it came on, when the transport says.
    pub(super) fn on_notification(
        self: &Arc<Self>,
        server: &str,
        call: Option<u64>,
        method: &str,
        params: Option<Value>,
    ) {
        let list_kind = match method {
            methods::TOOLS_LIST_CHANGED => Some(ListKind::Tools),
            methods::PROMPTS_LIST_CHANGED => Some(ListKind::Prompts),
            methods::RESOURCES_LIST_CHANGED => Some(ListKind::Resources),
            _ => None,
        };
        if let Some(kind) = list_kind {
            let Some(backend) = self.backend(server) else {
                return;
            };
            let gateway = self.clone();
            tokio::spawn(async move {
                if let Err(err) = backend.refresh(kind).await {
                    tracing::warn!(server = %backend.name(), "re-fetching a changed list failed: {err}");
                }
                gateway.rebuild_catalog();
            });
            return;
        }
        match method {
            methods::PROGRESS => {
                let mut params = params.unwrap_or_default();
                let token = params
                    .get("progressToken")
                    .and_then(Value::as_str)
                    .unwrap_or_default()
                    .to_string();
                let progress = params.get("progress").and_then(Value::as_f64);
                let target = {
                    let mut routes = self.progress.lock().unwrap();
                    // Only the server the token was given to may use it.
                    let Some(route) = routes.get_mut(&token).filter(|r| r.server == server) else {
                        tracing::debug!(
                            server,
                            "progress for a token not given to this server dropped"
                        );
                        return;
                    };
                    let increasing = progress.is_some_and(|p| route.last.is_none_or(|l| p > l));
                    if !increasing || !route.budget.take_or_drop() {
                        return;
                    }
                    route.last = progress;
                    (route.session.upgrade())
                        .map(|s| (s, route.original.clone(), route.request.clone()))
                };
                let Some((session, original, request)) = target else {
                    return;
                };
                params["progressToken"] = original;
                session.send_related(
                    protocol::notification(method, Some(params)),
                    request.as_ref(),
                );
            }
            methods::MESSAGE => {
                let mut params = params.unwrap_or_default();
                if params.get("logger").is_none() {
                    params["logger"] = Value::String(server.to_string());
                }
                let level = params
                    .get("level")
                    .and_then(Value::as_str)
                    .unwrap_or("info");
                // A line on a call's own stream is that call's; any other goes to the
                // sessions that see the server, never to the others.
                if let Some((peer, request)) = call.and_then(|c| self.call_of(server, c)) {
                    if peer.admits_log(level, true) && peer.is_initialized() {
                        peer.send_related(
                            protocol::notification(method, Some(params)),
                            request.as_ref(),
                        );
                    }
                    return;
                }
                // A stdio server's line names no call: a stateless request (never
                // registered for fan-out) hears it by the rule a server's requests go by,
                // when it asked for log lines.
                if let Ok(Some((peer, request))) = self.asker_of(server, None)
                    && peer.is_stateless()
                    && peer.admits_log(level, true)
                {
                    let line = protocol::notification(method, Some(params.clone()));
                    peer.send_related(line, request.as_ref());
                }
                for session in self.sessions_seeing(server) {
                    if session.admits_log(level, true) {
                        session.notify(method, Some(params.clone()));
                    }
                }
            }
            methods::RESOURCES_UPDATED => {
                let uri = params
                    .as_ref()
                    .and_then(|p| p.get("uri"))
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                // Only the server the subscription went to may say the resource changed.
                let through = self.subscribed_through.lock().unwrap().get(uri).cloned();
                if through.as_deref() != Some(server) {
                    tracing::debug!(
                        server,
                        "resources/updated for a URI not subscribed to through it dropped"
                    );
                    return;
                }
                let subscribers: Vec<_> = self
                    .subscriptions
                    .lock()
                    .unwrap()
                    .get(uri)
                    .cloned()
                    .unwrap_or_default();
                for session in subscribers.iter().filter_map(Weak::upgrade) {
                    if self.sees(&session, server) {
                        session.notify(method, params.clone());
                    }
                }
            }
            methods::CANCELLED => {
                // The server gave up on a request it sent to a client.
                let request_id = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .cloned()
                    .unwrap_or(Value::Null);
                for session in self.sessions_seeing(server) {
                    session.cancel_forwarded(server, &request_id);
                }
            }
            _ => tracing::debug!(server, method, "notification not forwarded"),
        }
    }

    /// Records a client's request in flight to `server` until the guard is dropped.
    pub fn begin_call(
        &self,
        server: &str,
        peer: &Arc<ClientPeer>,
        request: Option<Arc<str>>,
    ) -> CallInFlight<'_> {
        let id = self
            .next_call
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let call = InFlightCall {
            id,
            peer: Arc::downgrade(peer),
            request,
        };
        self.calls_in_flight
            .lock()
            .unwrap()
            .entry(server.to_string())
            .or_default()
            .push(call);
        CallInFlight {
            gateway: self,
            server: server.to_string(),
            id,
        }
    }

    /// The client (and its request) of call `call` to `server`, while it is in flight.
    fn call_of(&self, server: &str, call: u64) -> Option<Asker> {
        let calls = self.calls_in_flight.lock().unwrap();
        let call = calls.get(server)?.iter().find(|c| c.id == call)?;
        Some((call.peer.upgrade()?, call.request.clone()))
    }

    /// Who asked a request of `server`'s: the call named by `call` (a remote server's
    /// request on a call's own stream), else the one client with calls in flight to it
    /// (a request over stdio names no call). `Ok(None)`: no call is in flight.
    fn asker_of(&self, server: &str, call: Option<u64>) -> Result<Option<Asker>, RpcError> {
        if let Some(call) = call {
            return Ok(self.call_of(server, call));
        }
        let calls = self.calls_in_flight.lock().unwrap();
        let live: Vec<_> = (calls.get(server).into_iter().flatten())
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

    /// Sends a server's request (sampling, elicitation, roots) to the client whose call
    /// caused it ([`Self::asker_of`]), on the stream of that call. With no call in flight it
    /// is answered here: no roots, and an error for the rest; never asked of another client.
    pub(super) async fn forward_to_client(
        &self,
        server: &str,
        call: Option<u64>,
        server_request_id: Value,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, RpcError> {
        let capability = match method {
            methods::SAMPLING_CREATE_MESSAGE => "sampling",
            methods::ELICITATION_CREATE => "elicitation",
            methods::ROOTS_LIST => "roots",
            methods::PING => return Ok(json!({})),
            _ => {
                return Err(RpcError::new(
                    protocol::METHOD_NOT_FOUND,
                    format!("Method not found: {method}"),
                ));
            }
        };
        let Some((session, related)) = self.asker_of(server, call)? else {
            if method == methods::ROOTS_LIST {
                return Ok(json!({"roots": []}));
            }
            return Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!(
                    "{method} from server `{server}` outside a client's call: no client to ask"
                ),
            ));
        };
        if !session.client_has(capability) {
            return Err(session.lacks_capability(server, capability));
        }
        session
            .request_client(
                server,
                server_request_id,
                method,
                params,
                self.config.load().gateway.timeout,
                related.as_ref(),
            )
            .await
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
