//! What servers send the gateway on their own: notifications (progress, log messages,
//! list changes, resource updates, cancellations) and requests for a client (sampling,
//! elicitation, roots), routed to the client they belong to.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::{Value, json};

use super::Gateway;
use crate::backend::ListKind;
use crate::catalog::view::View;
use crate::peer::ClientPeer;
use crate::protocol::{self, RpcError, methods};
use crate::relay::calls::CallInFlight;
use crate::relay::url_elicitation;

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
                let Some(to) = self.relay.progress.route(server, &token, progress) else {
                    return;
                };
                params["progressToken"] = to.token;
                to.peer.send_related(
                    protocol::notification(method, Some(params)),
                    to.request.as_ref(),
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
                if let Some((peer, request)) =
                    call.and_then(|c| self.relay.calls.call_of(server, c))
                {
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
                if let Ok(Some((peer, request))) = self.relay.calls.asker_of(server, None)
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
                let through = self.relay.subscriptions.through(uri);
                if through.as_deref() != Some(server) {
                    tracing::debug!(
                        server,
                        "resources/updated for a URI not subscribed to through it dropped"
                    );
                    return;
                }
                for session in self.relay.subscriptions.subscribers(uri) {
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
        self.relay.calls.begin(server, peer, request)
    }

    /// Sends a server's request (sampling, elicitation, roots) to the client whose call
    /// caused it (`CallsInFlight::asker_of`), on the stream of that call. With no call in
    /// flight it is answered here: no roots, and an error for the rest; never asked of
    /// another client.
    pub(super) async fn forward_to_client(
        &self,
        server: &str,
        call: Option<u64>,
        server_request_id: Value,
        method: &str,
        params: Option<Value>,
    ) -> Result<Value, RpcError> {
        if method == methods::PING {
            return Ok(json!({}));
        }
        let capability = capability_for(method, params.as_ref())?;
        let Some((session, related)) = self.relay.calls.asker_of(server, call)? else {
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
        let timeout = self.config.load().gateway.timeout;
        self.ask_through_chain(&session, server, method, params, |params| {
            session.request_client(
                server,
                server_request_id,
                method,
                params,
                timeout,
                related.as_ref(),
            )
        })
        .await
    }
}

/// The client capability a request to the client needs (a path: `elicitation.url`).
pub(super) fn capability_for(
    method: &str,
    params: Option<&Value>,
) -> Result<&'static str, RpcError> {
    match method {
        methods::SAMPLING_CREATE_MESSAGE => Ok("sampling"),
        methods::ELICITATION_CREATE if url_elicitation::is_url_mode(params) => {
            Ok(url_elicitation::CAPABILITY)
        }
        methods::ELICITATION_CREATE => Ok("elicitation"),
        methods::ROOTS_LIST => Ok("roots"),
        _ => Err(RpcError::new(
            protocol::METHOD_NOT_FOUND,
            format!("Method not found: {method}"),
        )),
    }
}
