//! The middleware chain: the `[[middleware]]` links in order, each a component the plugin
//! host runs (`wasmgate:middleware` world), with the scope it applies to and what its
//! failure does. A request goes through the request hooks of the links that apply, in
//! order, and its outcome back through their result hooks in reverse (`onion`); lists go
//! through the list hooks once per catalog snapshot and profile (`lists`).
//!
//! The chain is rebuilt whole when the config or a middleware's version changes; a request
//! keeps the chain (and so the versions) it started with.

mod lists;
mod onion;
mod scope;

use std::collections::HashMap;
use std::sync::{Arc, Mutex as StdMutex};

use serde_json::{Value, json};

use crate::config::{Config, OnError};
use crate::plugin::{HookError, LogSink, Middleware, PluginHost};
use crate::protocol::{self, RpcError};
use crate::telemetry::events::{EventLog, Status};
pub use lists::{Edited, Gone};
pub use onion::{Facts, Route};
use scope::Scope;

/// One link: the config entry and the component it runs, as loaded when the chain was built.
pub struct Link {
    pub name: String,
    pub on_error: OnError,
    scope: Scope,
    /// The loaded middleware, or why it is not there.
    state: Result<Middleware, String>,
    /// Where its hooks' `log` lines go beyond the gateway's log: warnings and errors
    /// become `middleware.log` events (a pin's "this tool changed" is one).
    log: LogSink,
}

impl Link {
    /// The error a request gets when this link refuses it because it failed.
    fn failed(&self, reason: &str) -> RpcError {
        refused_by_failure(&self.name, reason)
    }
}

/// The error of a request that middleware `name` refused because it failed (`on_error =
/// "deny"`): its trap, limit, bad answer, or why it is not loaded.
pub fn refused_by_failure(name: &str, reason: &str) -> RpcError {
    RpcError::new(
        protocol::MIDDLEWARE_DENIED,
        format!(
            "middleware `{name}` failed, so the request is refused (on_error = \"deny\"): {reason}"
        ),
    )
    .with_data(json!({"middleware": name, "reason": reason}))
}

/// The chain in force: what requests and lists go through.
#[derive(Default)]
pub struct Chain {
    links: Vec<Link>,
    /// Edited lists by (list, profile), for the catalog snapshot they were made from.
    lists: StdMutex<HashMap<lists::Key, lists::Cached>>,
}

impl Chain {
    /// The chain `config` describes, over the middleware `host` has loaded now.
    pub fn build(config: &Config, host: Option<&PluginHost>, events: &Arc<EventLog>) -> Chain {
        let links = (config.middleware.iter())
            .filter(|entry| !entry.disabled)
            .map(|entry| {
                let state = match host {
                    None => Err("the plugin host is not running".to_string()),
                    Some(host) => host
                        .middleware(&entry.name)
                        .map_err(|e| not_loaded(host, &entry.name, e)),
                };
                if let Err(why) = &state {
                    let does = match entry.on_error {
                        OnError::Deny => "refuses the requests in its scope",
                        OnError::Pass => "is passed over",
                    };
                    tracing::warn!(middleware = %entry.name, "middleware {} {does}: {why}", entry.name);
                }
                Link {
                    name: entry.name.clone(),
                    on_error: entry.on_error,
                    scope: Scope::new(entry, state.as_ref().ok().map(Middleware::interest)),
                    state,
                    log: events_of(&entry.name, events),
                }
            })
            .collect();
        Chain {
            links,
            lists: StdMutex::default(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.links.is_empty()
    }

    /// Whether a link's component is not loaded (yet, or at all).
    pub fn has_unloaded(&self) -> bool {
        self.links.iter().any(|link| link.state.is_err())
    }

    /// The chain as `gateway_status` shows it, in order.
    pub fn status(&self) -> Value {
        let links: Vec<Value> = (self.links.iter())
            .map(|link| {
                let mut entry = json!({
                    "name": link.name,
                    "on_error": link.on_error.as_str(),
                    "scope": link.scope.describe(),
                });
                match &link.state {
                    Ok(middleware) => {
                        let interest = middleware.interest();
                        entry["state"] = json!("loaded");
                        entry["digest"] = json!(middleware.digest());
                        entry["interest"] = json!({
                            "requests": interest.requests,
                            "results": interest.results,
                            "lists": interest.lists,
                            "names": interest.names,
                        });
                    }
                    Err(why) => {
                        entry["state"] = json!("not loaded");
                        entry["error"] = json!(why);
                    }
                }
                entry
            })
            .collect();
        Value::Array(links)
    }
}

/// A link's log sink: its warnings and errors as events from it.
fn events_of(name: &str, events: &Arc<EventLog>) -> LogSink {
    let (name, events) = (name.to_string(), events.clone());
    Arc::new(move |level, message| {
        if matches!(level, "warning" | "error") {
            let fields = json!({"level": level, "message": message});
            events.emit("middleware.log", &name, Status::Failure, fields);
        }
    })
}

/// Why `name` is not a loaded middleware, in words.
fn not_loaded(host: &PluginHost, name: &str, error: HookError) -> String {
    if let HookError::NotLoaded(_) = error {
        if let Some(failed) = host.failed_plugins().into_iter().find(|f| f.name == name) {
            return failed.reason();
        }
        if host.loading_plugins().iter().any(|(n, _)| n == name) {
            return "it is still loading".into();
        }
        return "it is not loaded (its file is missing?)".into();
    }
    error.to_string()
}
