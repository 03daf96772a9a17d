//! What servers send the gateway on their own: notifications (progress, log messages,
//! list changes, resource updates, cancellations) and requests for a client (sampling,
//! elicitation, roots), routed to the client they belong to.

use super::*;

/// A client's request in flight to a server.
pub(super) struct InFlightCall {
    id: u64,
    peer: Weak<ClientPeer>,
    request: Option<Arc<str>>,
}

/// Removes its call from [`Gateway::begin_call`]'s record when dropped.
pub struct CallInFlight<'g> {
    gateway: &'g Gateway,
    server: String,
    id: u64,
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
    pub(super) fn on_notification(
        self: &Arc<Self>,
        server: &str,
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
                for session in self.live_sessions() {
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
                let subscribers: Vec<_> = self
                    .subscriptions
                    .lock()
                    .unwrap()
                    .get(uri)
                    .cloned()
                    .unwrap_or_default();
                for session in subscribers.iter().filter_map(Weak::upgrade) {
                    session.notify(method, params.clone());
                }
            }
            methods::CANCELLED => {
                // The server gave up on a request it sent to a client.
                let request_id = params
                    .as_ref()
                    .and_then(|p| p.get("requestId"))
                    .cloned()
                    .unwrap_or(Value::Null);
                for session in self.live_sessions() {
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

    /// The client (and its request) a request of `server`'s most likely belongs to: the
    /// newest call in flight to that server whose client declared `capability`; else the
    /// newest session that did. Servers over stdio do not say which call caused their request.
    fn asker_of(
        &self,
        server: &str,
        capability: &str,
    ) -> Option<(Arc<ClientPeer>, Option<Arc<str>>)> {
        let in_flight = self
            .calls_in_flight
            .lock()
            .unwrap()
            .get(server)
            .and_then(|calls| {
                calls.iter().rev().find_map(|call| {
                    let peer = call.peer.upgrade()?;
                    peer.client_has(capability)
                        .then(|| (peer, call.request.clone()))
                })
            });
        in_flight.or_else(|| {
            self.live_sessions()
                .into_iter()
                .rev()
                .find(|s| s.client_has(capability))
                .map(|peer| (peer, None))
        })
    }

    /// Sends a server's request (sampling, elicitation, roots) to the client that most
    /// likely caused it ([`Self::asker_of`]), on the stream of the request it belongs to.
    pub(super) async fn forward_to_client(
        &self,
        server: &str,
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
        let Some((session, related)) = self.asker_of(server, capability) else {
            return Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!("no connected client supports {capability} (asked by server `{server}`)"),
            ));
        };
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
