//! Dispatch of MCP methods (`Router`, over the gateway's state and a request's context):
//! finds the backend in the catalog snapshot, rewrites what must be rewritten (names,
//! progress tokens, cursors) and passes the rest untouched. The methods are handled by
//! family: `tools` (and the forwarding to servers), `resources` (with prompts and
//! completions), `lists` and `logging`; this file keeps the dispatch and the profile's view.

mod lists;
mod logging;
mod resources;
mod tools;

use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::catalog::Target;
use crate::catalog::view::{self, Kind};
use crate::gateway::Gateway;
use crate::peer::ClientPeer;
use crate::protocol::methods;
use crate::protocol::{self, Reply, RpcError};

/// State of one request: what the stateless protocol versions carry in `_meta` instead of the session.
pub struct RequestContext {
    pub trace_id: String,
    /// The client that asked.
    pub peer: Arc<ClientPeer>,
    /// Which of its requests this is (the key of its id), for what the request's work sends
    /// the client on its own; `None` outside a client's request.
    pub request: Option<Arc<str>>,
}

/// Dispatch of a client's requests over the gateway's state: the catalog, the backends,
/// the progress routes and subscriptions. Made for each request; it holds only a borrow.
pub struct Router<'g> {
    gateway: &'g Arc<Gateway>,
}

impl<'g> Router<'g> {
    pub fn new(gateway: &'g Arc<Gateway>) -> Router<'g> {
        Router { gateway }
    }
}

impl Router<'_> {
    /// Whether the client's profile hides the item of `kind` named `name`.
    fn hides(
        &self,
        context: &RequestContext,
        kind: Kind,
        name: &str,
        target: Option<&Target>,
    ) -> bool {
        let Some(profile) = context.peer.profile() else {
            return false;
        };
        match self.gateway.config.load().profiles.get(profile) {
            Some(profile) => !view::shows(profile, kind, name, target),
            None => true,
        }
    }

    /// The answer to `initialize`: capabilities reflect what the backends offer; the
    /// instructions are those of the servers `peer`'s view includes.
    pub fn initialize_result(&self, peer: &ClientPeer, version: &str) -> Value {
        let config = self.gateway.config.load();
        let backends = self.gateway.servers();
        let any = |cap: &str| backends.iter().any(|b| b.discovered().has_capability(cap));
        // Servers still starting may offer anything: promise what they might, since the
        // answer to `initialize` does not wait for them. So may a server that an edit of
        // the config file adds later, and capabilities are fixed for the session.
        let may_offer_any = config.source.is_some()
            || backends
                .iter()
                .any(|b| b.discovered().capabilities.is_null());
        let mut capabilities = Map::new();
        capabilities.insert("tools".into(), json!({"listChanged": true}));
        capabilities.insert("logging".into(), json!({}));
        if may_offer_any || any("resources") {
            capabilities.insert(
                "resources".into(),
                json!({"subscribe": true, "listChanged": true}),
            );
        }
        if may_offer_any || any("prompts") {
            capabilities.insert("prompts".into(), json!({"listChanged": true}));
        }
        if may_offer_any || any("completions") {
            capabilities.insert("completions".into(), json!({}));
        }
        let instructions: Vec<String> = backends
            .iter()
            .filter(|b| self.gateway.sees(peer, b.name()))
            .filter_map(|b| {
                b.discovered()
                    .instructions
                    .clone()
                    .map(|i| format!("## {}\n{}", b.name(), i))
            })
            .collect();
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": capabilities,
            "serverInfo": {"name": config.gateway.name, "version": env!("CARGO_PKG_VERSION")},
        });
        if !instructions.is_empty() {
            result["instructions"] = Value::String(instructions.join("\n\n"));
        }
        result
    }

    pub async fn dispatch(
        &self,
        context: &RequestContext,
        method: &str,
        params: Option<Value>,
    ) -> Result<Reply, RpcError> {
        match method {
            methods::PING => Ok(json!({}).into()),
            methods::TOOLS_LIST => self
                .list(context, method, &params, Kind::Tools, "tools")
                .await
                .map(Reply::from),
            methods::PROMPTS_LIST => self
                .list(context, method, &params, Kind::Prompts, "prompts")
                .await
                .map(Reply::from),
            methods::RESOURCES_LIST => self
                .list(context, method, &params, Kind::Resources, "resources")
                .await
                .map(Reply::from),
            methods::RESOURCE_TEMPLATES_LIST => self
                .list(
                    context,
                    method,
                    &params,
                    Kind::Templates,
                    "resourceTemplates",
                )
                .await
                .map(Reply::from),
            methods::TOOLS_CALL => self.call_tool(context, params.unwrap_or_default()).await,
            methods::PROMPTS_GET => self.get_prompt(context, params.unwrap_or_default()).await,
            methods::RESOURCES_READ
            | methods::RESOURCES_SUBSCRIBE
            | methods::RESOURCES_UNSUBSCRIBE => {
                self.resource_request(context, method, params.unwrap_or_default())
                    .await
            }
            methods::COMPLETION_COMPLETE => {
                self.complete(context, params.unwrap_or_default()).await
            }
            methods::LOGGING_SET_LEVEL => self
                .set_level(context, params.unwrap_or_default())
                .await
                .map(Reply::from),
            _ => Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!("Method not found: {method}"),
            )),
        }
    }
}

/// `params[key]` as a string, or the invalid-params error that names the method and the key.
fn required_string(params: &Value, method: &str, key: &str) -> Result<String, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| RpcError::invalid_params(format!("{method} needs a string `{key}`")))
}
