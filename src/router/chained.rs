//! A client's request through the middleware chain: the names the chain's list edits gave
//! (a renamed tool answers to its new name, a hidden one to none) mapped back to the
//! gateway's, the request's facts gathered for the hooks, and the dispatch run inside them.

use std::sync::Arc;

use serde_json::Value;

use super::{RequestContext, Router};
use crate::catalog::view::Kind;
use crate::middleware::{Chain, Edited, Facts, Gone, Route, refused_by_failure};
use crate::plugin::Direction;
use crate::protocol::methods;
use crate::protocol::{Reply, RpcError};

impl Router<'_> {
    /// [`Router::dispatch`] with a chain that has links.
    pub(super) async fn through_chain(
        &self,
        chain: &Chain,
        context: &RequestContext,
        method: &str,
        mut params: Option<Value>,
    ) -> Result<Reply, RpcError> {
        if let Some((kind, key)) = named_by(method) {
            let name = (params.as_ref())
                .and_then(|p| pointer_str(p, key))
                .map(str::to_string);
            if let Some(name) = name
                && let Some(edited) = self.edited(chain, context, kind).await
            {
                let original = match edited.resolve(&name) {
                    Ok(original) => original,
                    Err(Gone::Unknown) => return Err(unknown(kind, &name)),
                    Err(Gone::Failed(link, why)) => return Err(refused_by_failure(link, why)),
                };
                if original != name
                    && let Some(slot) = params.as_mut().and_then(|p| p.pointer_mut(key))
                {
                    *slot = Value::String(original.to_string());
                }
            }
        }
        let target = params.as_ref().and_then(|p| target_of(method, p));
        let catalog = self.gateway.catalog();
        let route = match target.as_deref() {
            Some(target) => route_of(&catalog, method, target),
            None => Route::Gateway,
        };
        let peer = &context.peer;
        let client = || peer.client_info();
        let era = || peer.protocol_version();
        let facts = Facts {
            method,
            direction: Direction::ToServer,
            target: target.as_deref(),
            route,
            principal: context.principal.token.as_deref(),
            profile: context.principal.profile.as_deref(),
            client: &client,
            era: &era,
            trace_id: &context.trace_id,
            session: Some(Arc::from(peer.id.as_str())),
            timeout: self.gateway.config.load().gateway.timeout,
        };
        let outcome = chain
            .around(&facts, params, |params| self.route(context, method, params))
            .await;
        (self.gateway).record_refusal(&context.trace_id, method, target.as_deref(), &outcome);
        outcome
    }

    /// The list of `kind` as the chain edits it for the client's profile, if it does.
    pub(super) async fn edited(
        &self,
        chain: &Chain,
        context: &RequestContext,
        kind: Kind,
    ) -> Option<Arc<Edited>> {
        let profile = context.principal.profile.as_ref();
        if !chain.edits(kind, profile.map(|p| &**p)) {
            return None;
        }
        let catalog = self.gateway.catalog();
        let timeout = self.gateway.config.load().gateway.timeout;
        (chain.edited(kind, &catalog, &context.view, profile, timeout)).await
    }
}

/// The methods that name a list's entry, and where in their params.
fn named_by(method: &str) -> Option<(Kind, &'static str)> {
    match method {
        methods::TOOLS_CALL => Some((Kind::Tools, "/name")),
        methods::PROMPTS_GET => Some((Kind::Prompts, "/name")),
        methods::COMPLETION_COMPLETE => Some((Kind::Prompts, "/ref/name")),
        _ => None,
    }
}

fn pointer_str<'v>(params: &'v Value, pointer: &str) -> Option<&'v str> {
    params.pointer(pointer)?.as_str()
}

/// What a request names: a tool or prompt name, or a resource URI.
fn target_of(method: &str, params: &Value) -> Option<String> {
    let pointer = match method {
        methods::TOOLS_CALL | methods::PROMPTS_GET => "/name",
        methods::RESOURCES_READ | methods::RESOURCES_SUBSCRIBE | methods::RESOURCES_UNSUBSCRIBE => {
            "/uri"
        }
        methods::COMPLETION_COMPLETE => match pointer_str(params, "/ref/type") {
            Some("ref/resource") => "/ref/uri",
            _ => "/ref/name",
        },
        _ => return None,
    };
    pointer_str(params, pointer).map(str::to_string)
}

fn route_of<'c>(catalog: &'c crate::catalog::Catalog, method: &str, target: &str) -> Route<'c> {
    let found = match method {
        methods::TOOLS_CALL => catalog.tool(target).map(|r| &r.target),
        methods::PROMPTS_GET => catalog.prompt(target).map(|r| &r.target),
        methods::COMPLETION_COMPLETE => {
            (catalog.prompt(target).map(|r| &r.target)).or_else(|| catalog.resource_target(target))
        }
        _ => catalog.resource_target(target),
    };
    Route::of(found)
}

/// The error for a name the chain's edits took away, as for any unknown name.
fn unknown(kind: Kind, name: &str) -> RpcError {
    match kind {
        Kind::Prompts => RpcError::invalid_params(format!("Unknown prompt: {name}")),
        _ => RpcError::unknown_tool(name, ""),
    }
}
