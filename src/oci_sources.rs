//! Before a config is served (at start and on each reload): each plugin's `oci://` source
//! is resolved to a file of the pull cache, which becomes its `path`; the plugin host then
//! loads it as any file. What went wrong is told as events once the gateway can emit them.

use std::path::PathBuf;

use serde_json::{Value, json};

use crate::config::Config;
use crate::oci::{OciError, PullCache, Registry};
use crate::telemetry::events::{EventLog, Status};

/// An event to emit about a plugin's source.
pub struct Notice {
    event: &'static str,
    plugin: String,
    status: Status,
    fields: Value,
}

/// Resolves the `oci://` sources of `config`'s enabled plugins. On a reload, `previous`
/// is the running config: a plugin whose new pull is refused keeps the file it serves.
pub async fn resolve(mut config: Config, previous: Option<&Config>) -> (Config, Vec<Notice>) {
    let mut notices = Vec::new();
    let wanted: Vec<(String, crate::oci::OciSource)> = (config.plugins.plugins.iter())
        .filter(|(_, p)| !p.disabled)
        .filter_map(|(name, p)| Some((name.clone(), p.oci.clone()?)))
        .collect();
    if wanted.is_empty() {
        return (config, notices);
    }
    let registry = Registry::new(&config.plugins.oci_insecure);
    let cache = config.plugins.cache_dir.as_deref().map(PullCache::new);
    for (name, source) in wanted {
        let reference = source.reference.to_string();
        let outcome = match &cache {
            Some(cache) => crate::oci::resolve(&registry, cache, &source).await,
            None => Err(OciError::Io {
                path: PathBuf::from("[plugins] cache_dir"),
                error: std::io::Error::other(
                    "no cache folder to pull into: set [plugins] cache_dir",
                ),
            }),
        };
        let path = match outcome {
            Ok(resolved) => {
                if let Some(error) = resolved.stale {
                    tracing::warn!(
                        "plugin `{name}`: {error}; serving the cached {}",
                        resolved.manifest_digest
                    );
                    notices.push(Notice {
                        event: "plugin.pull_failed",
                        plugin: name.clone(),
                        status: Status::Failure,
                        fields: json!({"reference": reference, "error": error.to_string(),
                                       "serving": resolved.manifest_digest}),
                    });
                }
                Some(resolved.path)
            }
            Err(error) => {
                let kept = previous
                    .and_then(|p| p.plugins.plugins.get(&name))
                    .filter(|p| p.oci.is_some())
                    .and_then(|p| p.path.clone());
                let (event, what) = match kept {
                    Some(_) => ("plugin.reload_failed", "keeps its running version"),
                    None => ("plugin.load_failed", "is not loaded"),
                };
                tracing::error!("plugin `{name}` {what}: {error}");
                notices.push(Notice {
                    event,
                    plugin: name.clone(),
                    status: Status::Failure,
                    fields: json!({"reference": reference, "error": error.to_string()}),
                });
                kept
            }
        };
        if let Some(plugin) = config.plugins.plugins.get_mut(&name) {
            // Not served at all, rather than from `{dir}/NAME.wasm` with these grants.
            plugin.disabled = path.is_none();
            plugin.path = path;
        }
    }
    (config, notices)
}

/// Emits `notices` (once the gateway, and so its event log, exists).
pub fn report(events: &EventLog, notices: Vec<Notice>) {
    for notice in notices {
        events.emit(notice.event, &notice.plugin, notice.status, notice.fields);
    }
}
