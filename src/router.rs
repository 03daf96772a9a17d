//! Dispatch of MCP methods (`Router`, over the gateway's state and a request's context):
//! finds the backend in the catalog snapshot, rewrites what must be rewritten (names,
//! progress tokens, cursors) and passes the rest untouched.

use std::sync::Arc;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};

use crate::backend::Backend;
use crate::backend::{BackendError, BackendState};
use crate::catalog::page::Viewer;
use crate::catalog::view::{self, Kind};
use crate::catalog::{self, Target};
use crate::gateway::{Gateway, ProgressMapping};
use crate::peer::ClientPeer;
use crate::plugin::PluginError;
use crate::protocol::methods;
use crate::protocol::{self, Reply, RpcError};
use crate::telemetry::events::{CallFields, Status};

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

/// A call to a server or plugin, recorded as a `tool.called` event once it ends: by its
/// outcome, or (dropped unended) as cancelled, so the events agree with the call counts.
struct CallRecord<'a> {
    gateway: &'a Gateway,
    trace_id: &'a str,
    server: &'a str,
    tool: &'a str,
    token: Option<&'a str>,
    started: Instant,
    ended: bool,
}

impl CallRecord<'_> {
    fn end(mut self, status: Status, error: Option<String>) {
        self.ended = true;
        self.emit(status, error, false);
    }

    fn emit(&self, status: Status, error: Option<String>, cancelled: bool) {
        let call = CallFields {
            tool: self.tool.to_string(),
            duration_ms: self.started.elapsed().as_secs_f64() * 1000.0,
            error,
            cancelled,
            token: self.token.map(str::to_string),
        };
        self.gateway
            .events
            .emit_call(self.trace_id, self.server, status, call);
    }
}

impl Drop for CallRecord<'_> {
    fn drop(&mut self) {
        if !self.ended {
            let why = "cancelled before it ended (by the client, or the gateway stopping)";
            self.emit(Status::Failure, Some(why.into()), true);
        }
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

    /// One page of a catalog list ([`catalog::Catalog::page`]).
    async fn list(
        &self,
        context: &RequestContext,
        method: &str,
        params: &Option<Value>,
        kind: Kind,
        key: &str,
    ) -> Result<Reply, RpcError> {
        self.gateway.wait_for_startup().await;
        // After the start-up wait (this answer holds what joined meanwhile) and before
        // the catalog is read: a change from here on is announced to the client.
        context.peer.mark_listed(method);
        let catalog = self.gateway.catalog();
        let config = self.gateway.config.load();
        let viewer = match context.peer.profile() {
            None => Viewer::All,
            // Its profile left the config: it sees nothing until it reconnects.
            Some(name) => config
                .profiles
                .get(name)
                .map_or(Viewer::Nothing, Viewer::Profile),
        };
        let cursor = params.as_ref().and_then(|p| p.get("cursor"));
        let page_size = config.gateway.page_size.max(1);
        (catalog.page(kind, viewer, cursor, page_size, key))
            .map(Reply::Raw)
            .ok_or_else(|| RpcError::invalid_params("Invalid cursor"))
    }

    async fn call_tool(
        &self,
        context: &RequestContext,
        mut params: Value,
    ) -> Result<Reply, RpcError> {
        let name = required_string(&params, methods::TOOLS_CALL, "name")?;
        let route = match self.gateway.catalog().tool(&name).cloned() {
            Some(route) => route,
            None => {
                // The tool may belong to a server or plugin still starting (a client that
                // calls without listing): it is called as soon as it is there.
                self.gateway.wait_for_tool(&name, false).await;
                // The specification answers an unknown tool with -32602 (the seed documents said -32601).
                self.gateway.catalog().tool(&name).cloned().ok_or_else(|| {
                    let loading = if self.gateway.plugins_loading() {
                        " (plugins are still loading: a client that has listed the tools gets notifications/tools/list_changed when they are ready)"
                    } else {
                        ""
                    };
                    let unavailable = self
                        .unavailable_backend_of(&name)
                        .map(|why| format!(" ({why})"))
                        .unwrap_or_default();
                    let name = protocol::cut_short(&name, 200);
                    RpcError::invalid_params(format!("Unknown tool: {name}{loading}{unavailable}"))
                })?
            }
        };
        if self.hides(context, Kind::Tools, &name, Some(&route.target)) {
            let name = protocol::cut_short(&name, 200);
            return Err(RpcError::invalid_params(format!("Unknown tool: {name}")));
        }
        // The same `data` as the errors a server or plugin gives for its own checks.
        let refused = |why: &dyn std::fmt::Display| {
            let error = RpcError::invalid_arguments(&name, why)
                .with_data(json!({"server": route.target.server()}));
            argument_error(context, error)
        };
        let arguments = match params.get("arguments") {
            None | Some(Value::Null) => json!({}),
            Some(args @ Value::Object(_)) => args.clone(),
            Some(_) => return refused(&"`arguments` must be an object"),
        };
        if let Err(why) = route.validate(&arguments) {
            return refused(&why);
        }
        let server = route.target.server().to_string();
        let started = Instant::now();
        // Recorded as `tool.called` when the call ends, also when it is cancelled.
        let record = (!matches!(route.target, Target::Builtin)).then(|| CallRecord {
            gateway: self.gateway,
            trace_id: &context.trace_id,
            server: &server,
            tool: &name,
            token: context.peer.token(),
            started,
            ended: false,
        });
        let outcome = match &route.target {
            Target::Builtin => {
                crate::builtin::call(self.gateway, &context.peer, &route.name, &arguments)
                    .map(Reply::from)
            }
            Target::Server(backend) => {
                params["name"] = Value::String(route.name.clone());
                self.forward_to_process(
                    context,
                    backend,
                    methods::TOOLS_CALL,
                    params,
                    route.timeout,
                )
                .await
            }
            Target::Wasm(plugin) => {
                self.call_plugin(context, &name, plugin, &route, arguments, &params)
                    .await
            }
        };
        let outcome = match outcome {
            Err(error) if error.invalid_arguments => argument_error(context, error),
            outcome => outcome,
        };
        let (status, error) = match &outcome {
            Ok(reply) if !reply.is_error_result() => (Status::Success, None),
            Ok(reply) => (Status::Failure, reply.first_text()),
            Err(e) => (Status::Failure, Some(e.message.clone())),
        };
        if let Some(record) = record {
            record.end(status, error);
        }
        tracing::debug!(tool = %name, server = %server, elapsed_us = started.elapsed().as_micros() as u64, "tools/call");
        outcome
    }

    /// `name` is the tool as the client calls it, `route.name` as the plugin knows it.
    async fn call_plugin(
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
        let ctx = crate::plugin::CallContext {
            timeout,
            progress,
            log: plugin_log_sink(context, plugin),
            trace_id: context.trace_id.clone(),
            session: Some(Arc::from(context.peer.id.as_str())),
        };
        host.call(plugin, tool, arguments, ctx)
            .await
            .map_err(|err| err.to_rpc(name))
    }

    /// Replaces the client's progress token with one unique across sessions.
    fn map_progress(
        &self,
        context: &RequestContext,
        server: &str,
        mut params: Value,
    ) -> (Value, Option<ProgressMapping<'_>>) {
        let Some(token) = progress_token(&params).cloned() else {
            return (params, None);
        };
        let mapping =
            self.gateway
                .register_progress(server, &context.peer, context.request.clone(), token);
        params["_meta"]["progressToken"] = Value::String(mapping.token.clone());
        (params, Some(mapping))
    }

    async fn forward(
        &self,
        context: &RequestContext,
        target: &Target,
        method: &str,
        params: Value,
    ) -> Result<Reply, RpcError> {
        match target {
            Target::Server(backend) => {
                self.forward_to_process(context, backend, method, params, backend.timeout_for(None))
                    .await
            }
            Target::Builtin | Target::Wasm(_) => Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!("{method} is not supported by `{}`", target.server()),
            )),
        }
    }

    /// Sends a request to a server with the client's progress token mapped for the time of the call.
    async fn forward_to_process(
        &self,
        context: &RequestContext,
        backend: &Backend,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Reply, RpcError> {
        let (params, mapping) = self.map_progress(context, backend.name(), params);
        // A server that asks clients things over stdio cannot say for which call: with
        // `exclusive`, one client's calls run at a time, so the asker is always known. The
        // wait for a turn is bounded by the call's timeout, and the call then gets its own.
        let _turn = match backend.config().exclusive {
            true => Some(
                tokio::time::timeout(
                    timeout,
                    self.gateway.exclusive_turn(backend.name(), &context.peer),
                )
                .await
                .map_err(|_| {
                    BackendError::Timeout {
                        server: backend.name().to_string(),
                        timeout,
                    }
                    .to_rpc()
                })?,
            ),
            false => None,
        };
        let in_flight =
            self.gateway
                .begin_call(backend.name(), &context.peer, context.request.clone());
        let result = crate::backend::CALL
            .scope(
                in_flight.id(),
                backend.request_raw(method, Some(params), timeout),
            )
            .await;
        if let Some(mapping) = mapping {
            mapping.end().await;
        }
        result.map(Reply::Raw).map_err(|e: BackendError| e.to_rpc())
    }

    async fn get_prompt(
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

    /// Why the tools under `name`'s namespace are not served, when their server is not
    /// ready or their plugin failed to load: "Unknown tool" alone would send the user
    /// looking for a typo.
    fn unavailable_backend_of(&self, name: &str) -> Option<String> {
        let config = self.gateway.config.load();
        let separator = &config.gateway.separator;
        let under = |namespace: &str| {
            !namespace.is_empty()
                && name
                    .strip_prefix(namespace)
                    .is_some_and(|rest| rest.starts_with(separator.as_str()))
        };
        for backend in self.gateway.servers() {
            let state = backend.state();
            if state != BackendState::Ready && under(&backend.config().namespace) {
                let error = backend
                    .last_error()
                    .map(|e| format!(": {}", protocol::cut_short(&e, 300)))
                    .unwrap_or_default();
                let state = match state {
                    BackendState::Failed => "failed (no more restarts)",
                    BackendState::Starting => "still starting",
                    other => other.as_str(),
                };
                return Some(format!("server `{}` is {state}{error}", backend.name()));
            }
        }
        let host = self.gateway.plugin_host()?;
        host.failed_plugins().into_iter().find_map(|failed| {
            let namespace = config
                .plugins
                .plugins
                .get(&failed.name)
                .map(|entry| entry.namespace.clone())
                .unwrap_or_else(|| crate::config::namespace_for(&failed.name));
            under(&namespace).then(|| failed.not_loaded(300))
        })
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

    async fn resource_request(
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
        self.forward(context, &target, method, params).await
    }

    async fn complete(
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

    /// Forwarded to every ready server that logs; the gateway's own log level is not changed.
    async fn set_level(&self, context: &RequestContext, params: Value) -> Result<Value, RpcError> {
        let level = required_string(&params, methods::LOGGING_SET_LEVEL, "level")?;
        let level = level.as_str();
        let Some(rank) = protocol::log_rank(level) else {
            return Err(RpcError::invalid_params(format!(
                "Unknown log level `{level}`; one of {}",
                protocol::LOG_LEVELS.join(", ")
            )));
        };
        // Plugins log to the session that set a level (see `plugin_log_sink`).
        context.peer.set_log_level(rank);
        // A server logs at the most verbose level of the sessions that see it, and only
        // those: a client cannot change the level of a server outside its view.
        let mut forwards = Vec::new();
        for backend in self.gateway.servers().into_iter().filter(|b| {
            b.discovered().has_capability("logging") && self.gateway.sees(&context.peer, b.name())
        }) {
            let Some(level) = self.gateway.server_log_level(backend.name()) else {
                continue;
            };
            let params = json!({"level": level});
            forwards.push(tokio::spawn(async move {
                let timeout = backend.timeout_for(None).min(Duration::from_secs(10));
                if let Err(err) = backend
                    .request(methods::LOGGING_SET_LEVEL, Some(params), timeout)
                    .await
                {
                    tracing::debug!(server = %backend.name(), "logging/setLevel: {err}");
                }
            }));
        }
        // Answer once the servers have the new level, so that what the client does next is logged by it.
        for forward in forwards {
            let _ = forward.await;
        }
        Ok(json!({}))
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

/// The client's progress token (`_meta.progressToken`), unless absent or null.
fn progress_token(params: &Value) -> Option<&Value> {
    params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| !t.is_null())
}

/// `params[key]` as a string, or the invalid-params error that names the method and the key.
fn required_string(params: &Value, method: &str, key: &str) -> Result<String, RpcError> {
    params
        .get(key)
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| RpcError::invalid_params(format!("{method} needs a string `{key}`")))
}

/// Invalid arguments as the client's protocol version has them: a tool error result the
/// model reads (2025-11-25 on), or error -32602 (before).
fn argument_error(context: &RequestContext, error: RpcError) -> Result<Reply, RpcError> {
    if context.peer.argument_errors_are_results() {
        Ok(Reply::from(protocol::error_result(error.message)))
    } else {
        Err(error)
    }
}

impl Router<'_> {
    /// One tool call outside any client session (the `call` command): through the same
    /// dispatch, for a peer that no notification reaches.
    pub async fn call_once(&self, tool: &str, arguments: Value) -> Result<Value, RpcError> {
        let (out, _nobody) = crate::pipe::outbox::outbox("nobody");
        let context = once_context(crate::peer::ClientPeer::new(out));
        self.call_tool(&context, json!({"name": tool, "arguments": arguments}))
            .await
            .map(Reply::into_value)
    }

    /// [`Self::call_once`] for a caller that shows the call's log messages (every level)
    /// and progress: the notifications the call sent, with its outcome.
    pub async fn call_once_observed(
        &self,
        tool: &str,
        arguments: Value,
    ) -> (Result<Value, RpcError>, Vec<Value>) {
        let (out, mut inbox) = crate::pipe::outbox::outbox("command line");
        let peer = crate::peer::ClientPeer::new(out);
        // Log messages go to initialized sessions only: this one is, as a current client.
        let _ = peer.initialized(
            protocol::LATEST_VERSION,
            json!({}),
            json!({"name": "wasmgate plugin call"}),
        );
        peer.set_log_level(0);
        let context = once_context(peer);
        let params = json!({
            "name": tool,
            "arguments": arguments,
            "_meta": {"progressToken": "command line"},
        });
        let outcome = self
            .call_tool(&context, params)
            .await
            .map(Reply::into_value);
        let mut notifications = Vec::new();
        while let Some(message) = inbox.try_recv() {
            if let Ok(value) = serde_json::from_str(&message.line) {
                notifications.push(value);
            }
        }
        (outcome, notifications)
    }
}

fn once_context(peer: crate::peer::ClientPeer) -> RequestContext {
    // The command line is the local user's.
    peer.set_operator();
    RequestContext {
        trace_id: crate::telemetry::events::new_trace_id(),
        peer: Arc::new(peer),
        request: None,
    }
}
