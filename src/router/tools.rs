//! `tools/call`: a tool's route in the catalog, the profile's and the arguments' checks,
//! then the call (to a built-in tool, a server or a plugin), recorded as a `tool.called`
//! event; and the forwarding of any request to a server, with its progress token mapped.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{RequestContext, Router, required_string};
use crate::backend::mcp_client::Upstream;
use crate::backend::{Backend, BackendError, BackendState};
use crate::catalog::Target;
use crate::catalog::view::Kind;
use crate::gateway::{Gateway, ProgressMapping};
use crate::limits::Outcome;
use crate::names;

use crate::protocol::methods;
use crate::protocol::{self, Reply, RpcError};
use crate::telemetry::events::{CallFields, Status};
use crate::telemetry::traces;

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
    pub(super) async fn call_tool(
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
                    RpcError::unknown_tool(&name, &format!("{loading}{unavailable}"))
                })?
            }
        };
        if self.hides(context, Kind::Tools, &name, Some(&route.target)) {
            return Err(RpcError::unknown_tool(&name, ""));
        }
        // Counted once per call: the rounds of a 2026-07-28 `input_required` exchange carry
        // on the parked call without coming back here.
        self.gateway
            .limits
            .admit_tool(&name)
            .map_err(|r| r.to_rpc())?;
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
            token: context.principal.token.as_deref(),
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
                self.forward_to_server(context, backend, methods::TOOLS_CALL, params, route.timeout)
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
        match record {
            Some(record) => record.end(status, error),
            // Not an event (a client polling `get_events` would fill the log with its own
            // polls), but counted in the metrics like any other tool.
            None => crate::telemetry::metrics::tool_call(
                &name,
                "gateway",
                if status == Status::Success {
                    "success"
                } else {
                    "error"
                },
                started.elapsed().as_secs_f64(),
            ),
        }
        tracing::debug!(tool = %name, server = %server, elapsed_us = started.elapsed().as_micros() as u64, "tools/call");
        outcome
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

    pub(super) async fn forward(
        &self,
        context: &RequestContext,
        target: &Target,
        method: &str,
        params: Value,
    ) -> Result<Reply, RpcError> {
        match target {
            Target::Server(backend) => {
                self.forward_to_server(context, backend, method, params, backend.timeout_for(None))
                    .await
            }
            Target::Wasm(plugin) => {
                self.forward_to_plugin(context, plugin, method, params)
                    .await
            }
            Target::Builtin => Err(RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!("{method} is not supported by `{}`", target.server()),
            )),
        }
    }

    /// Sends a request to a server with the client's progress token mapped for the time of the call.
    async fn forward_to_server(
        &self,
        context: &RequestContext,
        backend: &Backend,
        method: &str,
        params: Value,
        timeout: Duration,
    ) -> Result<Reply, RpcError> {
        // An open breaker refuses at once; a full server (`max_concurrent`) is waited for
        // as long as the call may take.
        let server = backend.config();
        let limits = &self.gateway.limits;
        limits.admit_server(&server).map_err(|r| r.to_rpc())?;
        let _place = limits
            .take_turn(&server, timeout)
            .await
            .map_err(|r| r.to_rpc())?;
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
        // A server away (reconnecting, restarting) is refused by the backend at once: no
        // call reached it, and its reconnection is what brings it back, so its breaker
        // counts nothing (counted, it would stay shut for `open_for` after the return).
        let reaches = backend.state() == BackendState::Ready;
        let in_flight =
            self.gateway
                .begin_call(backend.name(), &context.peer, context.request.clone());
        let mut params = params;
        let traced = traces::backend_call(method, backend.name(), &mut params);
        let call = async {
            match backend.is_modern() {
                true => {
                    super::mrtr_bridge::call(
                        self.gateway,
                        context,
                        backend,
                        method,
                        params,
                        timeout,
                    )
                    .await
                }
                false => backend
                    .request_raw(method, Some(params), timeout)
                    .await
                    .map_err(|e: BackendError| e.to_rpc()),
            }
        };
        let call = traces::within(traced.as_ref(), call);
        let result = crate::backend::CALL.scope(in_flight.id(), call).await;
        let outcome = if reaches {
            Outcome::of(&result)
        } else {
            Outcome::Neither
        };
        limits.record(&server, outcome);
        traces::end(traced, result.as_ref().err().map(|e| e.message.as_str()));
        if let Some(mapping) = mapping {
            mapping.end().await;
        } else if context.peer.is_stateless() && context.peer.log_level().is_some() {
            // A stdio server's log lines name no call: they find this one while it is in
            // flight, so the lines sent before the answer are passed on first.
            self.gateway.events_handled().await;
        }
        drop(in_flight);
        result.map(Reply::Raw)
    }

    /// Why the tools under `name`'s namespace are not served, when their server is not
    /// ready or their plugin failed to load: "Unknown tool" alone would send the user
    /// looking for a typo.
    fn unavailable_backend_of(&self, name: &str) -> Option<String> {
        let config = self.gateway.config.load();
        let separator = &config.gateway.separator;
        let under = |namespace: &str| names::in_namespace(name, namespace, separator);
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
            let entry = config.plugins.plugins.get(&failed.name);
            let namespace = names::namespace_of(entry.map(|e| e.namespace.as_str()), &failed.name);
            under(&namespace).then(|| failed.not_loaded(300))
        })
    }
}

/// The client's progress token (`_meta.progressToken`), unless absent or null.
pub(super) fn progress_token(params: &Value) -> Option<&Value> {
    params
        .get("_meta")
        .and_then(|m| m.get("progressToken"))
        .filter(|t| !t.is_null())
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
