//! Dispatch of MCP methods (`Router`, over the gateway's state and a request's context):
//! finds the backend in the catalog snapshot, rewrites what must be rewritten (names,
//! progress tokens, cursors) and passes the rest untouched. The methods are handled by
//! family: `tools` (and the forwarding to servers), `resources` (with prompts and
//! completions), `lists` and `logging`; this file keeps the dispatch and the profile's view.

mod chained;
mod lists;
mod logging;
mod mrtr_bridge;
mod plugins;
mod resources;
mod tools;

use std::sync::Arc;

use opentelemetry::trace::SpanKind;
use serde_json::Value;

use crate::catalog::Target;
use crate::catalog::view::{Kind, View};
use crate::gateway::Gateway;
use crate::peer::{ClientPeer, Principal};
use crate::protocol::methods;
use crate::protocol::{self, Reply, RpcError};
use crate::telemetry::events::new_trace_id;
use crate::telemetry::traces;

/// State of one request: what the stateless protocol versions carry in `_meta` instead of the session.
pub struct RequestContext {
    pub trace_id: String,
    /// The client that asked.
    pub peer: Arc<ClientPeer>,
    /// Which of its requests this is (the key of its id), for what the request's work sends
    /// the client on its own; `None` outside a client's request.
    pub request: Option<Arc<str>>,
    /// Who asked: its token and profile, as the request began.
    pub principal: Principal,
    /// What of the catalog it sees: its profile, looked up once for the request.
    pub view: View,
}

impl RequestContext {
    /// The context of a request of `peer`'s, its principal resolved under the config now.
    pub fn new(gateway: &Gateway, peer: Arc<ClientPeer>, request: Option<Arc<str>>) -> Self {
        let principal = peer.principal().clone();
        // Without a profile the config is not read: most requests have none.
        let view = match principal.profile.as_deref() {
            None => View::All,
            profile => View::of(profile, &gateway.config.load()),
        };
        RequestContext {
            trace_id: traces::current_trace_id().unwrap_or_else(new_trace_id),
            peer,
            request,
            principal,
            view,
        }
    }
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
        !context.view.shows(kind, name, target)
    }

    /// A client's request: through the middleware chain when it has links, to the method's
    /// handler.
    pub async fn dispatch(
        &self,
        context: &RequestContext,
        method: &str,
        params: Option<Value>,
    ) -> Result<Reply, RpcError> {
        let traced = traces::child(|| "route".into(), SpanKind::Internal, Vec::new);
        let routed = traces::within(traced.as_ref(), async {
            let chain = self.gateway.chain().await;
            if chain.is_empty() {
                return self.route(context, method, params).await;
            }
            self.through_chain(&chain, context, method, params).await
        })
        .await;
        traces::end(traced, routed.as_ref().err().map(|e| e.message.as_str()));
        routed
    }

    /// The method's handler.
    async fn route(
        &self,
        context: &RequestContext,
        method: &str,
        params: Option<Value>,
    ) -> Result<Reply, RpcError> {
        match method {
            methods::TOOLS_LIST => {
                self.list(context, method, &params, Kind::Tools, "tools")
                    .await
            }
            methods::PROMPTS_LIST => {
                self.list(context, method, &params, Kind::Prompts, "prompts")
                    .await
            }
            methods::RESOURCES_LIST => {
                self.list(context, method, &params, Kind::Resources, "resources")
                    .await
            }
            methods::RESOURCE_TEMPLATES_LIST => {
                self.list(
                    context,
                    method,
                    &params,
                    Kind::Templates,
                    "resourceTemplates",
                )
                .await
            }
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
