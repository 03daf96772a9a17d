//! The gateway's own tools, served without prefix: `gateway_status` and `get_events`.
//! Their shapes follow the reference documents the project started from, with more fields.
//! A client sees what its profile's view holds; what the gateway runs (commands, URLs,
//! pids, paths) and other principals' names only the operator sees.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::backend::BackendState;
use crate::catalog::view::{Kind, View};
use crate::config::{Config, ServerTransport};
use crate::gateway::Gateway;
use crate::names;
use crate::peer::ClientPeer;
use crate::plugin::PluginKind;
use crate::protocol::RpcError;
use crate::telemetry::events::Query;

pub fn call(
    gateway: &Gateway,
    viewer: &ClientPeer,
    tool: &str,
    arguments: &Value,
) -> Result<Value, RpcError> {
    let payload = match tool {
        "gateway_status" if viewer.is_operator() => status(gateway),
        "gateway_status" => status_for(gateway, viewer),
        "get_events" => Value::Array(events_for(gateway, viewer, query(arguments)?)),
        _ => return Err(RpcError::unknown_tool(tool, "")),
    };
    Ok(json!({
        "content": [{"type": "text", "text": serde_json::to_string_pretty(&payload).unwrap_or_default()}],
        "structuredContent": if payload.is_object() { payload.clone() } else { json!({"events": payload}) },
    }))
}

fn query(arguments: &Value) -> Result<Query, RpcError> {
    let text = |key: &str| {
        arguments
            .get(key)
            .and_then(Value::as_str)
            .map(str::to_string)
    };
    let since = match text("since") {
        Some(since) => Some(
            chrono::DateTime::parse_from_rfc3339(&since)
                .map_err(|e| {
                    RpcError::invalid_arguments(
                        "get_events",
                        format!(
                            "since: {} is not an RFC 3339 time ({e}); want e.g. 2026-01-31T12:00:00Z",
                            crate::protocol::cut_short(&format!("{since:?}"), 80)
                        ),
                    )
                })?
                .with_timezone(&chrono::Utc),
        ),
        None => None,
    };
    Ok(Query {
        trace_id: text("trace_id"),
        event_type: text("event_type"),
        status: text("status"),
        since,
        limit: arguments
            .get("limit")
            .and_then(Value::as_u64)
            .unwrap_or(100) as usize,
    })
}

/// What `gateway_status` answers; `wasmgate tools` reads the failed backends from it too.
pub fn status(gateway: &Gateway) -> Value {
    let config = gateway.config.load();
    let catalog = gateway.catalog();
    // What the catalog lists of each backend: not a tool hidden by another's of its name,
    // nor those of a failed server (its last lists are kept below, for diagnosis).
    let tool_counts = catalog.tool_counts();
    let tools_of =
        |plugin: bool, name: &str| tool_counts.get(&(plugin, name)).copied().unwrap_or(0);
    let mut backends = serde_json::Map::new();
    for backend in gateway.servers() {
        let discovered = backend.discovered();
        let server = backend.config();
        let state = backend.state();
        // A failed server's items were removed from the catalog, though its last lists are
        // kept (with its protocol version and info) for diagnosis.
        let listed = |count: usize| {
            if state == BackendState::Failed {
                0
            } else {
                count
            }
        };
        backends.insert(
            server.name.clone(),
            json!({
                "kind": server_kind(&server.transport),
                "status": state.as_str(),
                "namespace": server.namespace,
                "tool_count": tools_of(false, &server.name),
                "resource_count": listed(discovered.resources.len()),
                "resource_template_count": listed(discovered.resource_templates.len()),
                "prompt_count": listed(discovered.prompts.len()),
                "restarts": backend.restarts(),
                "last_error": backend.last_error(),
                "pid": backend.pid(),
                "command": match &server.transport {
                    ServerTransport::Stdio(c) => Some(&c.command),
                    ServerTransport::Http(_) => None,
                },
                "url": match &server.transport {
                    ServerTransport::Stdio(_) => None,
                    // A token in the query stays out of the answer.
                    ServerTransport::Http(h) => Some(crate::config::redact_url(&h.url)),
                },
                "protocol_version": discovered.protocol_version,
                "server_info": discovered.server_info,
                "timeout_ms": server.timeout.as_millis() as u64,
                "breaker": gateway.limits.server_status(&server),
                "max_concurrent": server.max_concurrent,
            }),
        );
    }
    for server in config.servers.values().filter(|s| s.disabled) {
        backends.insert(server.name.clone(), json!({"kind": server_kind(&server.transport), "status": "disabled", "namespace": server.namespace, "tool_count": 0}));
    }
    // Plugins after servers; one named like a server is listed as "NAME (plugin)".
    let mut plugins: Vec<(String, Value)> = Vec::new();
    if let Some(host) = gateway.plugin_host() {
        // First: a plugin that is also ready (a moment at the end of its load) or failed
        // is listed as that, below.
        for (name, path) in host.loading_plugins() {
            let namespace = plugin_namespace(&config, &name);
            plugins.push((
                name,
                json!({"kind": "wasm", "status": "loading", "namespace": namespace, "tool_count": 0,
                       "path": path.map(|p| p.display().to_string())}),
            ));
        }
        for plugin in host.plugins() {
            let loaded_at: chrono::DateTime<chrono::Utc> = plugin.loaded_at.into();
            let kind = match plugin.kind {
                PluginKind::Tools => "wasm",
                PluginKind::Middleware => "middleware",
            };
            plugins.push((
                plugin.name.clone(),
                json!({
                    "kind": kind,
                    "status": "ready",
                    "namespace": plugin.namespace,
                    "world": plugin.world,
                    "tool_count": tools_of(true, &plugin.name),
                    "resource_count": plugin.resources.len() + plugin.templates.len(),
                    "prompt_count": plugin.prompts.len(),
                    "path": plugin.path.as_ref().map(|p| p.display().to_string()),
                    "digest": plugin.digest,
                    "loaded_at": loaded_at.to_rfc3339(),
                    "calls": plugin.calls,
                    "failures": plugin.failures,
                    "last_error": plugin.last_error,
                    "reload_error": plugin.reload_error,
                    "instance": plugin.instance.as_str(),
                    "declared_instance": plugin.declared_instance.map(|m| m.as_str()),
                    "instances": plugin.instances,
                    "limits": {
                        "memory_bytes": plugin.limits.memory,
                        "timeout_ms": plugin.limits.timeout.as_millis() as u64,
                        "fuel": plugin.limits.fuel,
                        "calls_at_once": plugin.max_calls,
                    },
                }),
            ));
        }
    }
    for plugin in config.plugins.plugins.values().filter(|p| p.disabled) {
        plugins.push((
            plugin.name.clone(),
            json!({"kind": "wasm", "status": "disabled", "namespace": plugin.namespace, "tool_count": 0}),
        ));
    }
    if let Some(host) = gateway.plugin_host() {
        for failed in host.failed_plugins() {
            let at: chrono::DateTime<chrono::Utc> = failed.at.into();
            let namespace = plugin_namespace(&config, &failed.name);
            plugins.push((
                failed.name.clone(),
                json!({
                    "kind": "wasm",
                    "status": "failed",
                    "namespace": namespace,
                    "tool_count": 0,
                    "path": failed.path.as_ref().map(|p| p.display().to_string()),
                    "failed_at": at.to_rfc3339(),
                    "last_error": failed.reason(),
                }),
            ));
        }
    }
    // One entry a plugin: the last pushed.
    let plugins: BTreeMap<String, Value> = plugins.into_iter().collect();
    for (name, entry) in plugins {
        let key = if backends.contains_key(&name) {
            format!("{name} (plugin)")
        } else {
            name
        };
        backends.insert(key, entry);
    }
    let mut status = json!({
        "gateway": {
            "name": config.gateway.name,
            "version": env!("CARGO_PKG_VERSION"),
            "uptime_s": gateway.started.elapsed().as_secs(),
            "started_at": gateway.started_at.to_rfc3339(),
            "config": {
                "file": config.source.as_ref().map(|p| p.display().to_string()),
                "separator": config.gateway.separator,
                "timeout_ms": config.gateway.timeout.as_millis() as u64,
                "startup_timeout_ms": config.gateway.startup_timeout.as_millis() as u64,
                "init_timeout_ms": config.gateway.init_timeout.as_millis() as u64,
                // `--log-level` or `RUST_LOG` win over the file's.
                "log_level": crate::telemetry::effective_level().unwrap_or_else(|| config.gateway.log_level.clone()),
                "page_size": config.gateway.page_size,
            },
            "tool_count": catalog.tools.len(),
            // Plugins join the status and the catalog once compiled and loaded.
            "plugins_loading": gateway.plugins_loading(),
            "prompt_count": catalog.prompts.len(),
            "resource_count": catalog.resources.len(),
        },
        "backends": backends,
        // In order; the operator's (a scope names servers a profile may not see).
        "middleware": gateway.middleware_status(),
        // Over all principals: the operator's.
        "relay": {"calls_waiting_for_input": gateway.relay.parked.len()},
        // The rules name principals, profiles and tools: the operator's.
        "limits": gateway.limits.status(&config),
    });
    if let Some(http) = gateway.front_status() {
        status["http"] = http;
    }
    status
}

/// A server's `kind` in `gateway_status`, enabled or not.
fn server_kind(transport: &ServerTransport) -> &'static str {
    match transport {
        ServerTransport::Stdio(_) => "process",
        ServerTransport::Http(_) => "remote",
    }
}

/// Fields of a backend's status that say what the gateway runs or where: the operator's.
const OPERATOR_FIELDS: &[&str] = &["pid", "command", "url", "path"];

/// `gateway_status` as a client that is not the operator sees it: the backends its view
/// includes, the counts of its view, and nothing of what the gateway runs or of other
/// principals (no HTTP sessions, no other profiles).
fn status_for(gateway: &Gateway, viewer: &ClientPeer) -> Value {
    let mut status = status(gateway);
    if let Some(backends) = status["backends"].as_object_mut() {
        backends.retain(|key, _| gateway.sees(viewer, key.trim_end_matches(" (plugin)")));
        for entry in backends.values_mut().filter_map(Value::as_object_mut) {
            for field in OPERATOR_FIELDS {
                entry.remove(*field);
            }
        }
    }
    if let Some(object) = status.as_object_mut() {
        object.remove("http");
        object.remove("relay");
        object.remove("middleware");
        object.remove("limits");
    }
    if let Some(config) = status["gateway"]["config"].as_object_mut() {
        config.remove("file");
    }
    let catalog = gateway.catalog();
    let view = View::of(viewer.profile(), &gateway.config.load());
    let count = |kind: Kind| view.items(&catalog, kind).len();
    status["gateway"]["tool_count"] = count(Kind::Tools).into();
    status["gateway"]["prompt_count"] = count(Kind::Prompts).into();
    status["gateway"]["resource_count"] = count(Kind::Resources).into();
    status
}

/// Fields of an event that name other principals or the gateway's own files.
const PRINCIPAL_FIELDS: &[&str] = &["token", "remote", "profile", "config", "path"];

/// `get_events` for `viewer`: the operator reads every event; another client reads the
/// events of the backends its view includes, and of its own calls, without other
/// principals' names and without the sessions' events.
fn events_for(gateway: &Gateway, viewer: &ClientPeer, query: Query) -> Vec<Value> {
    if viewer.is_operator() {
        return gateway.events.query(&query);
    }
    let limit = query.limit;
    let everything = Query {
        limit: usize::MAX,
        ..query
    };
    let own_token = viewer.token();
    gateway
        .events
        .query(&everything)
        .into_iter()
        .filter(|event| {
            let kind = event["event_type"].as_str().unwrap_or_default();
            let source = event["source"].as_str().unwrap_or_default();
            // A conflict names the items of both backends.
            !kind.starts_with("session.")
                && kind != "catalog.conflict"
                && (source == "wasmgate" || gateway.sees(viewer, source))
        })
        .map(|mut event| {
            if let Some(fields) = event.as_object_mut() {
                let mine =
                    own_token.is_some() && fields.get("token").and_then(Value::as_str) == own_token;
                for field in PRINCIPAL_FIELDS
                    .iter()
                    .filter(|f| !(mine && **f == "token"))
                {
                    fields.remove(*field);
                }
            }
            event
        })
        .take(limit)
        .collect()
}

/// A plugin's namespace: from its `[plugins.NAME]` table, else from its name.
fn plugin_namespace(config: &Config, name: &str) -> String {
    let entry = config.plugins.plugins.get(name);
    names::namespace_of(entry.map(|p| p.namespace.as_str()), name)
}
