//! Config hot reload: the config file is watched (its folder, since editors replace
//! files by renaming), changes are debounced, and a valid new config is applied; an
//! invalid one is logged and recorded, and the running config stays.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use notify::{RecursiveMode, Watcher};
use serde_json::json;
use tokio::sync::mpsc;

use crate::config;
use crate::gateway::Gateway;
use crate::telemetry::events::Status;

/// Quiet time after the last file event before the config is read.
const DEBOUNCE: Duration = Duration::from_millis(150);

/// Watches `path` until the returned watcher is dropped.
/// `plugin_files` (`--plugin`) are added to each new version of the config, as at start.
pub fn watch_config(
    gateway: Arc<Gateway>,
    path: PathBuf,
    plugin_files: Vec<PathBuf>,
) -> Option<notify::RecommendedWatcher> {
    let (tx, rx) = mpsc::unbounded_channel();
    let file_name = path.file_name().map(|n| n.to_owned());
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        if let Ok(event) = event
            && crate::file_events::is_change(&event.kind)
            && event
                .paths
                .iter()
                .any(|p| p.file_name() == file_name.as_deref())
        {
            let _ = tx.send(());
        }
    })
    .map_err(|e| tracing::warn!("config changes will not be picked up: {e}"))
    .ok()?;
    let folder = path
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    if let Err(err) = watcher.watch(folder, RecursiveMode::NonRecursive) {
        tracing::warn!(
            "config changes will not be picked up: cannot watch {}: {err}",
            folder.display()
        );
        return None;
    }
    tokio::spawn(apply_changes(gateway, path, plugin_files, rx));
    Some(watcher)
}

async fn apply_changes(
    gateway: Arc<Gateway>,
    path: PathBuf,
    plugin_files: Vec<PathBuf>,
    mut rx: mpsc::UnboundedReceiver<()>,
) {
    while rx.recv().await.is_some() {
        // Debounce: wait until the writes stop.
        while let Ok(Some(())) = tokio::time::timeout(DEBOUNCE, rx.recv()).await {}
        if !path.exists() {
            continue;
        }
        match config::load_with_plugin_files(Some(&path), &plugin_files) {
            Ok(next) => {
                tracing::info!("config changed: {}", path.display());
                gateway.reconfigure(next).await;
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
}
