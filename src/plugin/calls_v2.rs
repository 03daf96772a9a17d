//! Calls into a 0.2 plugin: a tool call whose result is written into a `reply`, and the
//! requests only 0.2 serves — `resources/read`, `prompts/get`, `completion/complete` —
//! each through the same turn, instance and limits as a tool call. Also what a call of
//! either world reports to (`Sinks`): its client's progress, log, requests and store.

use std::sync::Arc;
use std::time::Instant;

use serde_json::{Map, Value, json};
use wasmtime::Store;
use wasmtime::component::Resource;

use super::bindings::{CallError, ToolOutput};
use super::bindings_v2::wasmgate::plugin::types as v2;
use super::calls::{Calls, Entered};
use super::cancel::Cancel;
use super::host_impl::{AskRoute, Sinks};
use super::kind::Bound;
use super::reply::{ReplyFor, from_v2};
use super::sandbox::StoreState;
use super::version::{Slot, Version};
use super::{CallContext, convert, kv};
use crate::protocol::{self, RpcError};

/// Values of one completion passed on, at most (MCP's limit).
const MAX_COMPLETIONS: usize = 100;

/// Runs tool `tool` in `bound`, of either world; a 0.2 result is read out of its reply.
pub(super) async fn call_tool(
    store: &mut Store<StoreState>,
    bound: &Bound,
    tool: &str,
    arguments: &str,
) -> wasmtime::Result<Result<ToolOutput, CallError>> {
    let plugin = match bound {
        Bound::ToolsV2(plugin) => plugin,
        _ => {
            return bound
                .tools()?
                .wasmgate_plugin_tool()
                .call_call_tool(store, tool, arguments)
                .await;
        }
    };
    let reply = store.data_mut().new_reply(ReplyFor::Tool)?;
    let borrowed = Resource::new_borrow(reply.rep());
    let called = plugin
        .tool
        .call_call_tool(&mut *store, tool, arguments, borrowed)
        .await;
    let reply = store.data_mut().take_reply(reply)?;
    Ok(match called? {
        Ok(()) => Ok(reply.output),
        Err(v2::CallError::UnknownTool(s)) => Err(CallError::UnknownTool(s)),
        Err(v2::CallError::InvalidArguments(s)) => Err(CallError::InvalidArguments(s)),
        Err(v2::CallError::Failed(s)) => Err(CallError::Failed(s)),
    })
}

/// Why a 0.2 request did not give a result, in the plugin's words.
fn request_error(plugin: &str, error: v2::RequestError, uri: Option<&str>) -> RpcError {
    let cut = |s: String| super::calls::cut_error(s);
    match error {
        v2::RequestError::NotFound(what) => match uri {
            Some(uri) => RpcError::new(protocol::RESOURCE_NOT_FOUND, cut(what))
                .with_data(json!({"uri": uri, "server": plugin})),
            None => RpcError::invalid_params(cut(what)).with_data(json!({"server": plugin})),
        },
        v2::RequestError::InvalidParams(why) => {
            RpcError::invalid_params(cut(why)).with_data(json!({"server": plugin}))
        }
        v2::RequestError::Failed(why) => {
            RpcError::new(protocol::INTERNAL_ERROR, cut(why)).with_data(json!({"server": plugin}))
        }
    }
}

/// A request the plugin's code cannot serve (it trapped, hit a limit, does not export it).
fn failed(plugin: &str, why: String) -> RpcError {
    RpcError::new(protocol::INTERNAL_ERROR, why).with_data(json!({"server": plugin}))
}

impl Calls {
    /// What a call of `version` reports to: the client's sinks, the route of its
    /// requests to the client (bounded per plugin), its cancellation and its store.
    pub(super) fn sinks(
        &self,
        slot: &Slot,
        version: &Version,
        ctx: CallContext,
        cancel: &Arc<Cancel>,
    ) -> Sinks {
        let v2 = version.code.pre.is_v2();
        let ask = ctx.ask.filter(|_| v2).map(|sink| AskRoute {
            sink,
            waiting: slot.waiting.clone(),
            max_waiting: slot.max_waiting,
            timeout: ctx.ask_timeout,
        });
        let kv = v2.then(|| {
            let scope = kv::scope_for(version.settings.store_shared, ctx.principal.as_deref());
            self.kv.open(&version.name, &scope)
        });
        Sinks {
            progress: ctx.progress,
            log: ctx.log,
            ask,
            cancel: v2.then(|| cancel.clone()),
            kv,
            traceparent: ctx.traceparent,
        }
    }

    /// Runs `f` on a 0.2 instance of `plugin`, as a tool call runs (turn, instance mode,
    /// limits); `what` names the request in errors.
    async fn request<R: Send + 'static>(
        &self,
        plugin: &str,
        what: &str,
        ctx: CallContext,
        f: impl for<'a> FnOnce(
            &'a mut Store<StoreState>,
            &'a Bound,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>,
        > + Send
        + 'static,
    ) -> Result<R, RpcError> {
        let slot = (self.slots.load().get(plugin).cloned()).ok_or_else(|| {
            RpcError::new(
                protocol::BACKEND_UNAVAILABLE,
                format!("plugin `{plugin}` is not loaded"),
            )
            .with_data(json!({"server": plugin}))
        })?;
        let version = slot.current.load_full();
        if !version.code.pre.is_v2() {
            return Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!(
                    "{what} is not supported by plugin `{plugin}` (a 0.1 plugin serves tools only)"
                ),
            ));
        }
        let limit = ctx.timeout.min(version.settings.limits.timeout);
        let started = Instant::now();
        let session = ctx.session.clone();
        let Entered {
            instance,
            inline,
            keeps,
            turn,
            time,
        } = (self
            .enter(&slot, &version, session.as_ref(), limit, started)
            .await)
            .map_err(|why| failed(plugin, why))?;
        let cancel = Arc::new(Cancel::default());
        let sinks = self.sinks(&slot, &version, ctx, &cancel);
        let outcome = self
            .run(version.clone(), time, sinks, instance, inline, f)
            .await;
        drop(turn);
        if !keeps {
            self.refill(&version, None);
        }
        outcome.map_err(|why| {
            slot.stats.failed(&why);
            failed(plugin, why)
        })
    }

    /// `resources/read` of `uri` (a URI the plugin lists, or one of its templates matches).
    pub(super) async fn read_resource(
        &self,
        plugin: &str,
        uri: &str,
        ctx: CallContext,
    ) -> Result<Value, RpcError> {
        let task_uri = uri.to_string();
        let (answer, reply) = self
            .request(plugin, "resources/read", ctx, |store, bound| {
                Box::pin(async move {
                    let resources = (bound.v2()?.resources.as_ref()).ok_or_else(|| {
                        wasmtime::Error::msg("it does not export wasmgate:plugin/resources")
                    })?;
                    let reply = store.data_mut().new_reply(ReplyFor::Read)?;
                    let borrowed = Resource::new_borrow(reply.rep());
                    let answer = resources
                        .call_read_resource(&mut *store, &task_uri, borrowed)
                        .await;
                    let reply = store.data_mut().take_reply(reply)?;
                    Ok((answer?, reply))
                })
            })
            .await?;
        answer.map_err(|e| request_error(plugin, e, Some(uri)))?;
        let contents: Vec<Value> = (reply.output.content.into_iter())
            .filter_map(|item| match item {
                super::bindings::Content::Resource(r) => {
                    let mut object = Map::new();
                    object.insert("uri".into(), json!(r.uri));
                    if let Some(mime) = r.mime_type {
                        object.insert("mimeType".into(), json!(mime));
                    }
                    match (r.text, r.blob) {
                        (_, Some(blob)) => {
                            object.insert("blob".into(), json!(convert::base64(&blob)));
                        }
                        (text, None) => {
                            object.insert("text".into(), json!(text.unwrap_or_default()));
                        }
                    }
                    Some(Value::Object(object))
                }
                _ => None,
            })
            .collect();
        Ok(json!({"contents": contents}))
    }

    /// `prompts/get` of prompt `name` with `arguments` (string values).
    pub(super) async fn get_prompt(
        &self,
        plugin: &str,
        name: &str,
        arguments: Vec<(String, String)>,
        ctx: CallContext,
    ) -> Result<Value, RpcError> {
        let task_name = name.to_string();
        let answer = self
            .request(plugin, "prompts/get", ctx, |store, bound| {
                Box::pin(async move {
                    let prompts = (bound.v2()?.prompts.as_ref()).ok_or_else(|| {
                        wasmtime::Error::msg("it does not export wasmgate:plugin/prompts")
                    })?;
                    prompts
                        .call_get_prompt(&mut *store, &task_name, &arguments)
                        .await
                })
            })
            .await?;
        let output = answer.map_err(|e| request_error(plugin, e, None))?;
        let messages: Result<Vec<Value>, String> = (output.messages.into_iter())
            .map(|m| {
                let role = match m.role {
                    v2::Role::User => "user",
                    v2::Role::Assistant => "assistant",
                };
                convert::content_to_mcp(from_v2(m.content))
                    .map(|content| json!({"role": role, "content": content}))
            })
            .collect();
        let messages = messages
            .map_err(|why| failed(plugin, format!("plugin `{plugin}` prompt `{name}` {why}")))?;
        let mut result = json!({"messages": messages});
        if let Some(description) = output.description {
            result["description"] = json!(description);
        }
        Ok(result)
    }

    /// `completion/complete` for a prompt's argument or a template's variable.
    pub(super) async fn complete(
        &self,
        plugin: &str,
        params: &Value,
        ctx: CallContext,
    ) -> Result<Value, RpcError> {
        let reference = &params["ref"];
        let reference = match reference["type"].as_str() {
            Some("ref/prompt") => {
                v2::CompletionRef::Prompt(reference["name"].as_str().unwrap_or_default().into())
            }
            _ => v2::CompletionRef::ResourceTemplate(
                reference["uri"].as_str().unwrap_or_default().into(),
            ),
        };
        let context = (params["context"]["arguments"].as_object())
            .map(|args| {
                args.iter()
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.as_str().map_or_else(|| v.to_string(), str::to_string),
                        )
                    })
                    .collect()
            })
            .unwrap_or_default();
        let request = v2::CompletionRequest {
            ref_: reference,
            argument_name: params["argument"]["name"]
                .as_str()
                .unwrap_or_default()
                .into(),
            argument_value: params["argument"]["value"]
                .as_str()
                .unwrap_or_default()
                .into(),
            context,
        };
        let answer = self
            .request(plugin, "completion/complete", ctx, |store, bound| {
                Box::pin(async move {
                    match bound.v2()?.completion.as_ref() {
                        Some(completion) => completion.call_complete(&mut *store, &request).await,
                        // Nothing to offer: an empty completion, as MCP servers answer.
                        None => Ok(Ok(v2::Completions {
                            values: Vec::new(),
                            total: None,
                            has_more: false,
                        })),
                    }
                })
            })
            .await?;
        let mut completions = answer.map_err(|e| request_error(plugin, e, None))?;
        let more = completions.values.len() > MAX_COMPLETIONS;
        completions.values.truncate(MAX_COMPLETIONS);
        let mut completion = json!({
            "values": completions.values,
            "hasMore": completions.has_more || more,
        });
        if let Some(total) = completions.total {
            completion["total"] = json!(total);
        }
        Ok(json!({"completion": completion}))
    }
}
