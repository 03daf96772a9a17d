//! Config hot reload: the config file is watched (its folder, since editors replace
//! files by renaming), changes are debounced, and a valid new config is applied; an
//! invalid one is logged and recorded, and the running config stays.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;

use crate::config;
use crate::gateway::Gateway;
use crate::telemetry::events::Status;

/// Watches `path` until the returned watcher is dropped: its folder, since editors replace
/// files by renaming. `plugin_files` (`--plugin`) are added to each new version of the
/// config, as at start.
pub fn watch_config(
    gateway: Arc<Gateway>,
    path: PathBuf,
    plugin_files: Vec<PathBuf>,
) -> Option<notify::RecommendedWatcher> {
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."))
        .to_path_buf();
    let (watcher, changes, missing) = crate::file_events::watch(&[folder], "config folder")
        .map_err(|e| tracing::warn!("config changes will not be picked up: {e}"))
        .ok()?;
    if !missing.is_empty() {
        return None;
    }
    let file_name = path.file_name().map(|n| n.to_owned());
    tokio::spawn(crate::file_events::debounce(changes, move |changed| {
        let ours = changed.file_name() == file_name.as_deref();
        let (gateway, path, plugin_files) = (gateway.clone(), path.clone(), plugin_files.clone());
        async move {
            if ours {
                apply_change(&gateway, &path, &plugin_files).await;
            }
            true
        }
    }));
    Some(watcher)
}

/// Reads the config again; a valid one is applied, an invalid one logged and recorded.
async fn apply_change(gateway: &Arc<Gateway>, path: &Path, plugin_files: &[PathBuf]) {
    if !path.exists() {
        return;
    }
    match config::load_with_plugin_files(Some(path), plugin_files) {
        Ok(next) => {
            tracing::info!("config changed: {}", path.display());
            // A tag is re-resolved: it may name a new version since the last pull.
            let running = gateway.config.load_full();
            let (next, notices) = crate::oci_sources::resolve(next, Some(&running)).await;
            gateway.reconfigure(next).await;
            crate::oci_sources::report(&gateway.events, notices);
        }
        Err(err) => {
            tracing::error!("config change ignored, the running config stays: {err}");
            gateway.events.emit(
                "config.invalid",
                "wasmgate",
                Status::Failure,
                json!({"error": err.to_string()}),
            );
        }
    }
}
