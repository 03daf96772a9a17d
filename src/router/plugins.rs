//! Requests to plugins: a tool call, and a 0.2 plugin's resources, prompts and
//! completions, each with what the plugin may reach of its client for the call (progress,
//! log messages, requests to the client in its era, the principal's store).

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::tools::progress_token;
use super::{RequestContext, Router};
use crate::catalog;
use crate::plugin::{AskSink, CallContext, PluginError};
use crate::protocol::{self, Reply, RpcError, methods};
use crate::telemetry::traces;

impl Router<'_> {
    /// `name` is the tool as the client calls it, `route.name` as the plugin knows it.
    pub(super) async fn call_plugin(
        &self,
        context: &RequestContext,
        name: &str,
        plugin: &str,
        route: &catalog::ToolRoute,
        arguments: Value,
        params: &Value,
    ) -> Result<Reply, RpcError> {
        let (tool, timeout) = (route.name.as_str(), route.timeout);
        let host = self
            .gateway
            .plugin_host()
            .ok_or_else(|| PluginError::NotFound(plugin.into()).to_rpc(name))?;
        let traced = traces::plugin_call(plugin, tool);
        let called = traces::within(traced.as_ref(), async {
            let ctx = self.plugin_context(context, plugin, timeout, params);
            host.call(plugin, tool, arguments, ctx).await
        })
        .await
        .map_err(|err| err.to_rpc(name));
        let failed = match &called {
            Ok(reply) if reply.is_error_result() => Some("the tool reported an error"),
            Ok(_) => None,
            Err(error) => Some(error.message.as_str()),
        };
        traces::end(traced, failed);
        called
    }

    /// What a call of `plugin` for `context` may reach of its client.
    fn plugin_context(
        &self,
        context: &RequestContext,
        plugin: &str,
        timeout: Duration,
        params: &Value,
    ) -> CallContext {
        // Progress goes straight to the asking session: no backend id to map.
        let progress = progress_token(params).map(|token| {
            let session = Arc::downgrade(&context.peer);
            let token = token.clone();
            let request = context.request.clone();
            let sink: crate::plugin::ProgressSink = Arc::new(move |progress, total, message| {
                let Some(session) = session.upgrade() else {
                    return;
                };
                let mut params = json!({"progressToken": token, "progress": progress});
                if let Some(total) = total {
                    params["total"] = json!(total);
                }
                if let Some(message) = message {
                    params["message"] = json!(message);
                }
                session.send_related(
                    protocol::notification(methods::PROGRESS, Some(params)),
                    request.as_ref(),
                );
            });
            sink
        });
        CallContext {
            timeout,
            progress,
            log: plugin_log_sink(context, plugin),
            trace_id: context.trace_id.clone(),
            session: Some(Arc::from(context.peer.id.as_str())),
            ask: Some(self.ask_sink(context, plugin)),
            ask_timeout: self.gateway.config.load().gateway.timeout,
            principal: context.principal.token.as_deref().map(Arc::from),
            traceparent: traces::current_traceparent().map(Arc::from),
        }
    }

    /// Where the plugin's requests to the client go: to this request's client, on its
    /// stream (or in its `input_required` rounds), through the middleware chain.
    fn ask_sink(&self, context: &RequestContext, plugin: &str) -> AskSink {
        let gateway = self.gateway.clone();
        let peer = context.peer.clone();
        let related = context.request.clone();
        let plugin: Arc<str> = plugin.into();
        Arc::new(move |method, params| {
            let (gateway, peer, related, plugin) = (
                gateway.clone(),
                peer.clone(),
                related.clone(),
                plugin.clone(),
            );
            Box::pin(async move {
                gateway
                    .ask_for_plugin(&peer, &plugin, method, params, related.as_ref())
                    .await
            })
        })
    }

    /// `resources/read`, `prompts/get`, `completion/complete` (and subscriptions) for
    /// an item a 0.2 plugin serves; `params` carry the plugin's own names.
    pub(super) async fn forward_to_plugin(
        &self,
        context: &RequestContext,
        plugin: &str,
        method: &str,
        params: Value,
    ) -> Result<Reply, RpcError> {
        let host = (self.gateway.plugin_host())
            .ok_or_else(|| PluginError::NotFound(plugin.into()).to_rpc(method))?;
        let timeout = self.gateway.config.load().gateway.timeout;
        let ctx = self.plugin_context(context, plugin, timeout, &params);
        let text = |key: &str| params.get(key).and_then(Value::as_str).unwrap_or_default();
        let answer = match method {
            methods::RESOURCES_READ => host.read_resource(plugin, text("uri"), ctx).await,
            methods::PROMPTS_GET => {
                let arguments = (params.get("arguments").and_then(Value::as_object))
                    .map(|args| {
                        (args.iter())
                            .map(|(k, v)| {
                                let v = v.as_str().map_or_else(|| v.to_string(), str::to_string);
                                (k.clone(), v)
                            })
                            .collect()
                    })
                    .unwrap_or_default();
                host.get_prompt(plugin, text("name"), arguments, ctx).await
            }
            methods::COMPLETION_COMPLETE => host.complete(plugin, &params, ctx).await,
            // The gateway keeps who subscribed; the plugin announces updates itself.
            methods::RESOURCES_SUBSCRIBE | methods::RESOURCES_UNSUBSCRIBE => Ok(json!({})),
            _ => Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!("{method} is not supported by plugin `{plugin}`"),
            )),
        };
        answer.map(Reply::from)
    }
}

/// A plugin's `host.log` lines, as `notifications/message` to the calling session once its
/// client has asked for messages with `logging/setLevel` (at that level or above).
fn plugin_log_sink(context: &RequestContext, plugin: &str) -> Option<crate::plugin::LogSink> {
    context.peer.log_level()?;
    let session = Arc::downgrade(&context.peer);
    let logger = plugin.to_string();
    let request = context.request.clone();
    Some(Arc::new(move |level: &'static str, message: &str| {
        if let Some(session) = session.upgrade() {
            session.log_related(level, &logger, message, false, request.as_ref());
        }
    }))
}
