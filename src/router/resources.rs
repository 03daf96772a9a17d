//! Requests for one item a server holds: a resource by its URI (`resources/read`,
//! `subscribe`, `unsubscribe`), a prompt by its name (`prompts/get`), and the completion
//! of either's arguments; each goes to the server that serves the item, if the client's
//! profile shows it.

use serde_json::{Value, json};

use super::{RequestContext, Router, required_string};
use crate::catalog::Target;
use crate::catalog::view::Kind;
use crate::protocol::methods;
use crate::protocol::{self, Reply, RpcError};

impl Router<'_> {
    pub(super) async fn get_prompt(
        &self,
        context: &RequestContext,
        mut params: Value,
    ) -> Result<Reply, RpcError> {
        let name = required_string(&params, methods::PROMPTS_GET, "name")?;
        self.gateway.wait_for_startup().await;
        let catalog = self.gateway.catalog();
        let route = catalog
            .prompt(&name)
            .filter(|r| !self.hides(context, Kind::Prompts, &name, Some(&r.target)))
            .ok_or_else(|| RpcError::invalid_params(format!("Unknown prompt: {name}")))?;
        params["name"] = Value::String(route.name.clone());
        self.forward(context, &route.target, methods::PROMPTS_GET, params)
            .await
    }

    /// The backend that serves `uri`.
    fn resource_route(&self, uri: &str) -> Option<Target> {
        self.gateway
            .catalog()
            .resource_target(uri)
            .cloned()
            .or_else(|| {
                // A URI no list mentions: if one server alone serves resources, it may still know it.
                let with_resources: Vec<_> = self
                    .gateway
                    .servers()
                    .into_iter()
                    .filter(|b| b.discovered().has_capability("resources"))
                    .collect();
                (with_resources.len() == 1).then(|| Target::Server(with_resources[0].clone()))
            })
    }

    pub(super) async fn resource_request(
        &self,
        context: &RequestContext,
        method: &str,
        params: Value,
    ) -> Result<Reply, RpcError> {
        let uri = required_string(&params, method, "uri")?;
        self.gateway.wait_for_startup().await;
        let target = self
            .resource_route(&uri)
            .filter(|t| !self.hides(context, Kind::Resources, &uri, Some(t)));
        let Some(target) = target else {
            return Err(
                RpcError::new(protocol::RESOURCE_NOT_FOUND, "Resource not found")
                    .with_data(json!({"uri": uri})),
            );
        };
        // Not a match guard: `unsubscribe` changes state, and a guard should not.
        #[allow(clippy::collapsible_match)]
        match method {
            methods::RESOURCES_SUBSCRIBE => {
                // Recorded before it is sent, so no update in between is missed; dropped
                // if the server refuses it, so that a restart does not send it again.
                let added = self.gateway.subscribe(&context.peer, &uri, target.server());
                let answer = self.forward(context, &target, method, params).await;
                if answer.is_err() && added {
                    self.gateway.unsubscribe(&context.peer, &uri);
                }
                return answer;
            }
            methods::RESOURCES_UNSUBSCRIBE => {
                if !self.gateway.unsubscribe(&context.peer, &uri) {
                    // Another session still wants updates: keep the server's subscription.
                    return Ok(json!({}).into());
                }
            }
            _ => {}
        }
        let stateless = matches!(&target, Target::Server(b) if b.is_modern());
        let answer = self.forward(context, &target, method, params).await;
        match answer {
            // The stateless era says "not found" with -32602; a session-era client expects
            // the -32002 of its own era.
            Err(error)
                if stateless
                    && method == methods::RESOURCES_READ
                    && error.code == protocol::INVALID_PARAMS
                    && !context.peer.is_stateless() =>
            {
                Err(RpcError::new(protocol::RESOURCE_NOT_FOUND, error.message)
                    .with_data(json!({"uri": uri, "server": target.server()})))
            }
            answer => answer,
        }
    }

    pub(super) async fn complete(
        &self,
        context: &RequestContext,
        mut params: Value,
    ) -> Result<Reply, RpcError> {
        let reference = params.get("ref").cloned().unwrap_or_default();
        let catalog = self.gateway.catalog();
        let target = match reference.get("type").and_then(Value::as_str) {
            Some("ref/prompt") => {
                let name = reference
                    .get("name")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let route = catalog
                    .prompt(name)
                    .filter(|r| !self.hides(context, Kind::Prompts, name, Some(&r.target)))
                    .ok_or_else(|| RpcError::invalid_params(format!("Unknown prompt: {name}")))?;
                params["ref"]["name"] = Value::String(route.name.clone());
                route.target.clone()
            }
            Some("ref/resource") => {
                let uri = reference
                    .get("uri")
                    .and_then(Value::as_str)
                    .unwrap_or_default();
                let template = catalog
                    .template_target(uri)
                    .filter(|t| !self.hides(context, Kind::Templates, uri, Some(t)));
                let resource = || {
                    catalog
                        .resource_target(uri)
                        .filter(|t| !self.hides(context, Kind::Resources, uri, Some(t)))
                };
                template.or_else(resource).cloned().ok_or_else(|| {
                    RpcError::invalid_params(format!("Unknown resource or template: {uri}"))
                })?
            }
            _ => {
                return Err(RpcError::invalid_params(
                    "completion/complete needs `ref` of type ref/prompt or ref/resource",
                ));
            }
        };
        self.forward(context, &target, methods::COMPLETION_COMPLETE, params)
            .await
    }
}
