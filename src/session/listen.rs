//! `subscriptions/listen` (MCP 2026-07-28): one stateless request whose response stream
//! carries the list changes and resource updates it opted in to, acknowledged first and
//! each tagged with the request's id, until the client closes the stream (HTTP) or
//! cancels it (stdio), or the gateway stops.
//!
//! A listen is a client peer of its own, registered where the gateway fans out what
//! servers announce: the rule that a client hears only of servers its view includes, and
//! the `resources/subscribe` upstream for the URIs it names, are the sessions' own. Each
//! open listen holds one of the request bounds' places (`[http] max_requests`; stdio's
//! stateless requests in flight) for its life.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use super::Session;
use super::lifecycle;
use super::stateless::finish;
use crate::gateway::Gateway;
use crate::peer::{ClientPeer, ClientSink};
use crate::protocol::modern::{self, LISTEN};
use crate::protocol::{self, Reply, RpcError, methods};
use crate::router::{RequestContext, Router};

pub use crate::protocol::modern::{ACKNOWLEDGED, META_SUBSCRIPTION_ID};

/// URIs one listen may name: each is a subscription upstream, made before the acknowledgement.
const MAX_URIS: usize = 256;

/// What a listen opts in to (`params.notifications`), or what the gateway honours of it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Filter {
    pub tools: bool,
    pub prompts: bool,
    pub resources: bool,
    /// `resourceSubscriptions`, when the request named the field.
    pub uris: Option<Vec<String>>,
}

impl Filter {
    /// Reads `params.notifications`; -32602 naming what is wrong with it.
    pub fn parse(params: Option<&Value>) -> Result<Filter, RpcError> {
        let invalid =
            |problem: &str| RpcError::invalid_params(format!("Invalid params: {problem}"));
        let filter = params
            .and_then(|p| p.get("notifications"))
            .ok_or_else(|| invalid("subscriptions/listen needs params.notifications"))?
            .as_object()
            .ok_or_else(|| invalid("params.notifications must be an object"))?;
        let flag = |key: &str| match filter.get(key) {
            None => Ok(false),
            Some(Value::Bool(on)) => Ok(*on),
            Some(_) => Err(invalid(&format!("notifications.{key} must be a boolean"))),
        };
        let uris = match filter.get("resourceSubscriptions") {
            None => None,
            Some(Value::Array(items)) if items.len() > MAX_URIS => {
                return Err(invalid(&format!(
                    "notifications.resourceSubscriptions names more than {MAX_URIS} URIs"
                )));
            }
            Some(Value::Array(items)) => {
                let mut uris: Vec<String> = Vec::with_capacity(items.len());
                for item in items {
                    let uri = item.as_str().ok_or_else(|| {
                        invalid("notifications.resourceSubscriptions must be an array of URIs")
                    })?;
                    if !uris.iter().any(|u| u == uri) {
                        uris.push(uri.to_string());
                    }
                }
                Some(uris)
            }
            Some(_) => {
                return Err(invalid(
                    "notifications.resourceSubscriptions must be an array of URIs",
                ));
            }
        };
        Ok(Filter {
            tools: flag("toolsListChanged")?,
            prompts: flag("promptsListChanged")?,
            resources: flag("resourcesListChanged")?,
            uris,
        })
    }

    /// As the acknowledgement carries it: only what is on.
    fn to_value(&self) -> Value {
        let uris = self.uris.as_deref();
        modern::listen_filter(self.tools, self.prompts, self.resources, uris)
    }

    /// Whether a notification `method` is one the filter lets through.
    fn admits(&self, method: &str) -> bool {
        match method {
            methods::TOOLS_LIST_CHANGED => self.tools,
            methods::PROMPTS_LIST_CHANGED => self.prompts,
            methods::RESOURCES_LIST_CHANGED => self.resources,
            // Only the URIs subscribed to through this listen's peer come at all.
            methods::RESOURCES_UPDATED => self.uris.as_ref().is_some_and(|u| !u.is_empty()),
            _ => false,
        }
    }
}

/// Where a listen's peer sends: the listen request's own stream, what its filter admits,
/// tagged with its id; nothing before the acknowledgement or after the listen ended.
struct ListenSink {
    to: Arc<ClientPeer>,
    key: Arc<str>,
    id: Value,
    filter: Filter,
    open: Arc<AtomicBool>,
}

impl ClientSink for ListenSink {
    fn deliver(&self, line: String, _related: Option<&Arc<str>>, _droppable: bool) {
        // Most lines that reach a listener are log lines for sessions: spare them a parse.
        let kind = line.contains("/list_changed") || line.contains(methods::RESOURCES_UPDATED);
        if !kind || !self.open.load(Ordering::Acquire) {
            return;
        }
        let Ok(mut message) = serde_json::from_str::<Value>(&line) else {
            return;
        };
        // Requests and answers never travel on a listen stream; log lines neither.
        let admitted = message.get("id").is_none()
            && (message.get("method").and_then(Value::as_str))
                .is_some_and(|m| self.filter.admits(m));
        if admitted {
            tag(&mut message, &self.id);
            self.to.send_related(message, Some(&self.key));
        }
    }
}

/// Puts the listen's id in a notification's `params._meta`.
fn tag(message: &mut Value, id: &Value) {
    if !message.get("params").is_some_and(Value::is_object) {
        message["params"] = json!({});
    }
    let params = &mut message["params"];
    if !params.get("_meta").is_some_and(Value::is_object) {
        params["_meta"] = json!({});
    }
    params["_meta"][META_SUBSCRIPTION_ID] = id.clone();
}

/// A request's id from the key it is in flight under (`super::request_key`): numbers and
/// JSON strings read back as they were sent.
fn id_of(key: &str) -> Value {
    serde_json::from_str(key).unwrap_or_else(|_| Value::String(key.to_string()))
}

/// An open listen's hold on the gateway: when it ends (answered, cancelled, stream
/// closed), its peer stops sending and its resource subscriptions are given back.
struct Listening {
    gateway: Arc<Gateway>,
    peer: Arc<ClientPeer>,
    open: Arc<AtomicBool>,
    uris: Vec<String>,
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.open.store(false, Ordering::Release);
        if self.uris.is_empty() {
            return;
        }
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let (gateway, peer) = (self.gateway.clone(), self.peer.clone());
        let uris = std::mem::take(&mut self.uris);
        // The last listener of a URI unsubscribes upstream: that takes a round trip.
        runtime.spawn(async move {
            for uri in uris {
                let _ =
                    resource_request(&gateway, &peer, methods::RESOURCES_UNSUBSCRIBE, uri).await;
            }
        });
    }
}

/// `resources/subscribe` or `unsubscribe` of `uri` for a listen's `peer`, as a session's
/// would be: within its view, and shared with every other subscriber of the URI.
async fn resource_request(
    gateway: &Arc<Gateway>,
    peer: &Arc<ClientPeer>,
    method: &str,
    uri: String,
) -> Result<Reply, RpcError> {
    let context = RequestContext::new(gateway, peer.clone(), None);
    Router::new(gateway)
        .dispatch(&context, method, Some(json!({ "uri": uri })))
        .await
}

impl Session {
    /// Runs a `subscriptions/listen` of this stateless request (`key`: its id in flight)
    /// until the gateway stops; a client ends it sooner by closing or cancelling it.
    pub(super) async fn listen(
        self: &Arc<Self>,
        params: Option<Value>,
        key: &Arc<str>,
    ) -> Result<Reply, RpcError> {
        let asked = Filter::parse(params.as_ref())?;
        let gateway = &self.gateway;
        let id = id_of(key);
        let mut honoured = Filter {
            tools: asked.tools,
            prompts: asked.prompts && lifecycle::offers(gateway, "prompts"),
            resources: asked.resources && lifecycle::offers(gateway, "resources"),
            uris: asked.uris.clone(),
        };
        let open = Arc::new(AtomicBool::new(false));
        let peer = Arc::new(ClientPeer::new(ListenSink {
            to: self.peer.clone(),
            key: key.clone(),
            id: id.clone(),
            filter: honoured.clone(),
            open: open.clone(),
        }));
        peer.set_principal(self.peer.principal().clone());
        let _ = peer.initialized(modern::MODERN_VERSION, json!({}), self.peer.client_info());
        for (on, list) in [
            (honoured.tools, methods::TOOLS_LIST),
            (honoured.prompts, methods::PROMPTS_LIST),
            (honoured.resources, methods::RESOURCES_LIST),
        ] {
            if on {
                peer.mark_listed(list);
            }
        }
        let mut listening = Listening {
            gateway: gateway.clone(),
            peer: peer.clone(),
            open: open.clone(),
            uris: Vec::new(),
        };
        // A URI is honoured once its server took the subscription (a URI outside the
        // view, or that no server has, is left out of the acknowledgement).
        for uri in asked.uris.iter().flatten() {
            let subscribed =
                resource_request(gateway, &peer, methods::RESOURCES_SUBSCRIBE, uri.clone()).await;
            if subscribed.is_ok() {
                listening.uris.push(uri.clone());
            }
        }
        if honoured.uris.is_some() {
            honoured.uris = Some(listening.uris.clone());
        }
        let ack = json!({
            "notifications": honoured.to_value(),
            "_meta": { META_SUBSCRIPTION_ID: id },
        });
        self.peer
            .send_related(protocol::notification(ACKNOWLEDGED, Some(ack)), Some(key));
        open.store(true, Ordering::Release);
        gateway.register_peer(&peer);
        tracing::debug!(session = %self.peer.id, filter = ?honoured, "listen opened");
        let mut ending = gateway.listens_ending();
        let _ = ending.wait_for(|ending| *ending).await;
        drop(listening);
        // The gateway stops: the result that ends a subscription gracefully.
        let result = json!({ "_meta": { META_SUBSCRIPTION_ID: id } });
        finish(
            gateway,
            self.peer.principal(),
            LISTEN,
            None,
            Ok(Reply::from(result)),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_parse_and_refuse_what_is_not_one() {
        let params = json!({"notifications": {"toolsListChanged": true,
            "resourceSubscriptions": ["a://x", "a://x", "b://y"]}});
        let filter = Filter::parse(Some(&params)).unwrap();
        assert!(filter.tools && !filter.prompts && !filter.resources);
        assert_eq!(filter.uris, Some(vec!["a://x".into(), "b://y".into()]));
        for bad in [
            json!({}),
            json!({"notifications": true}),
            json!({"notifications": {"toolsListChanged": "yes"}}),
            json!({"notifications": {"resourceSubscriptions": "a://x"}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
            json!({"notifications": {"resourceSubscriptions": vec!["a://x"; MAX_URIS + 1]}}),
        ] {
            let error = Filter::parse(Some(&bad)).unwrap_err();
            assert_eq!(error.code, protocol::INVALID_PARAMS, "{bad}");
        }
    }

    #[test]
    fn ids_read_back_from_their_keys() {
        assert_eq!(id_of("7"), json!(7));
        assert_eq!(id_of("\"listen-1\""), json!("listen-1"));
    }
}
