//! The catalog's rebuilds: from every backend's lists to a new catalog swapped in, and the
//! `list_changed` notifications of the sessions whose view changed. What the servers' part
//! was built from is kept, so that a server's event that changed none of it (most state
//! changes: starting, stopping) costs a comparison, not a rebuild.

use std::collections::HashMap;
use std::sync::Arc;

use serde_json::json;

use super::Gateway;
use crate::backend::{Backend, BackendState, Discovered};
use crate::catalog::view::{Kind, View};
use crate::catalog::{Catalog, Source, Target};
use crate::config::{Config, ServerConfig};
use crate::plugin::PluginKind;
use crate::protocol::methods;
use crate::telemetry::events::Status;

/// What the catalog was last built from, of the config and the servers: the rest of its
/// inputs (the plugins' lists) rebuild it on their own. Held, so that no pointer compared
/// can be freed and reused by another list.
#[derive(Default)]
pub(super) struct Built {
    config: Option<Arc<Config>>,
    /// Each server's lists and entry, and whether it had failed (a failed one is left out).
    servers: Vec<(Arc<Discovered>, Arc<ServerConfig>, bool)>,
}

impl Built {
    fn is_current(&self, config: &Arc<Config>, backends: &[Backend]) -> bool {
        self.config.as_ref().is_some_and(|c| Arc::ptr_eq(c, config))
            && self.servers.len() == backends.len()
            && (self.servers.iter().zip(backends)).all(|((discovered, entry, failed), b)| {
                Arc::ptr_eq(discovered, &b.discovered())
                    && Arc::ptr_eq(entry, &b.config())
                    && *failed == (b.state() == BackendState::Failed)
            })
    }
}

/// The lists a `list_changed` notification is about.
fn list_kinds(method: &str) -> &'static [Kind] {
    match method {
        methods::TOOLS_LIST_CHANGED => &[Kind::Tools],
        methods::PROMPTS_LIST_CHANGED => &[Kind::Prompts],
        _ => &[Kind::Resources, Kind::Templates],
    }
}

impl Gateway {
    /// After a server's event: rebuilds unless the servers' lists, entries and failed states,
    /// and the config, are those the catalog was built from. Servers starting or stopping
    /// pass through states the catalog does not show; with 100 servers of 114 tools a
    /// rebuild takes tens of ms, and one per server stopped made shutdown take seconds.
    pub(super) fn rebuild_catalog_if_servers_changed(&self) {
        let current =
            (self.rebuild.lock().unwrap()).is_current(&self.config.load_full(), &self.servers());
        if !current {
            self.rebuild_catalog();
        }
    }

    /// Rebuilds the catalog from every backend's lists and swaps it in; tells clients
    /// which lists changed.
    pub fn rebuild_catalog(&self) {
        self.rebuild_catalog_announcing(false)
    }

    /// `new_code`: a plugin's code was swapped, which clients hear about even when the
    /// tool definitions read the same (their behaviour may not be).
    pub fn rebuild_catalog_announcing(&self, new_code: bool) {
        // One at a time, so that two rebuilds never race to store an older catalog.
        let mut built = self.rebuild.lock().unwrap();
        let config = self.config.load_full();
        let backends = self.servers();
        let discovered: Vec<_> = backends.iter().map(|b| b.discovered()).collect();
        let server_configs: Vec<_> = backends.iter().map(|b| b.config()).collect();
        let failed: Vec<_> = (backends.iter())
            .map(|b| b.state() == BackendState::Failed)
            .collect();
        let timeouts: Vec<_> = backends
            .iter()
            .map(|b| {
                let b = b.clone();
                move |tool: &str| b.timeout_for(Some(tool))
            })
            .collect();
        let sources: Vec<Source<'_>> = backends
            .iter()
            .zip(&discovered)
            .zip(&timeouts)
            .zip(&server_configs)
            .zip(&failed)
            .filter(|(_, failed)| !**failed)
            .map(|((((b, d), t), c), _)| Source {
                target: Target::Server(b.clone()),
                namespace: &c.namespace,
                discovered: d,
                filter: &c.tool_filter,
                timeout_for: t,
            })
            .collect();
        // Middleware serve no tools.
        let plugins: Vec<_> = (self.plugin_host())
            .map(|host| host.plugins())
            .unwrap_or_default()
            .into_iter()
            .filter(|p| p.kind == PluginKind::Tools)
            .collect();
        let plugin_lists: Vec<_> = plugins
            .iter()
            .map(|p| Discovered {
                tools: p.tools.clone(),
                resources: p.resources.clone(),
                resource_templates: p.templates.clone(),
                prompts: p.prompts.clone(),
                ..Default::default()
            })
            .collect();
        let plugin_timeouts: Vec<_> = plugins
            .iter()
            .map(|p| move |_: &str| p.limits.timeout)
            .collect();
        let no_filter = crate::config::ToolFilter::default();
        let mut sources = sources;
        sources.extend(plugins.iter().zip(&plugin_lists).zip(&plugin_timeouts).map(
            |((p, d), t)| Source {
                target: Target::Wasm(p.name.as_str().into()),
                namespace: &p.namespace,
                discovered: d,
                // The plugin host applies the plugin's filter when it lists the tools.
                filter: &no_filter,
                timeout_for: t,
            },
        ));
        let next = Catalog::build(
            &config.gateway.separator,
            crate::catalog::builtin_tools::definitions(),
            &sources,
        );
        let previous = self.catalog.load_full();
        let changed = [
            (
                new_code || previous.tools != next.tools,
                methods::TOOLS_LIST_CHANGED,
            ),
            (
                previous.prompts != next.prompts,
                methods::PROMPTS_LIST_CHANGED,
            ),
            (
                previous.resources != next.resources || previous.templates != next.templates,
                methods::RESOURCES_LIST_CHANGED,
            ),
        ];
        for conflict in next
            .conflicts
            .iter()
            .filter(|c| !previous.conflicts.contains(c))
        {
            tracing::warn!("{conflict}");
            self.events.emit(
                "catalog.conflict",
                "wasmgate",
                Status::Failure,
                json!({"detail": conflict}),
            );
        }
        let tool_count = next.tools.len();
        self.catalog.store(Arc::new(next));
        self.rebuild_chain();
        *built = Built {
            config: Some(config.clone()),
            servers: (discovered.iter().cloned())
                .zip(server_configs.iter().cloned())
                .zip(failed.iter().copied())
                .map(|((d, c), f)| (d, c, f))
                .collect(),
        };
        self.catalog_swapped.send_replace(());
        if changed.iter().any(|(c, _)| *c) {
            self.events.emit(
                "catalog.changed",
                "wasmgate",
                Status::Success,
                json!({"tool_count": tool_count}),
            );
        }
        let current = self.catalog.load_full();
        for (_, method) in changed.iter().filter(|(c, _)| *c) {
            // A profile's sessions hear of a change only when their own view changed.
            let mut view_changed: HashMap<String, bool> = HashMap::new();
            for session in self.live_sessions() {
                if let Some(name) = session.profile()
                    && !new_code
                {
                    let changed = *view_changed.entry(name.to_string()).or_insert_with(|| {
                        let view = View::of(Some(name), &config);
                        (list_kinds(method).iter())
                            .any(|k| view.items(&previous, *k) != view.items(&current, *k))
                    });
                    if !changed {
                        continue;
                    }
                }
                session.notify_list_changed(method);
            }
        }
    }
}
