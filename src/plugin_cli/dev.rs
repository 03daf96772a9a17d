//! `wasmgate dev [SOURCE_DIR...]`: serves as `serve` does and rebuilds a plugin when its
//! source folder changes. The gateway already watches the built file, so a good build is
//! swapped in as any rebuilt plugin is (calls in flight finish on the old version, clients
//! get `list_changed`); a failed one leaves the old version serving, and says why on stderr
//! and to the clients, as a log message at level `error`.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use notify::{RecommendedWatcher, RecursiveMode, Watcher};

use crate::gateway::Gateway;

/// Quiet time after a source change before the rebuild: an editor's save is several writes.
const SETTLE: Duration = Duration::from_millis(200);

/// Builds each source folder once, before serving; the components to serve.
pub fn build_all(sources: &[PathBuf]) -> Result<Vec<PathBuf>, String> {
    sources
        .iter()
        .map(|dir| {
            let started = Instant::now();
            let wasm =
                super::build::build_project(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            eprintln!(
                "wasmgate dev: built {} in {:.1} s",
                wasm.display(),
                started.elapsed().as_secs_f64()
            );
            Ok(wasm)
        })
        .collect()
}

/// What is not source: build output and caches (a rebuild writes them, and would start another).
fn is_source(path: &Path) -> bool {
    !path.components().any(|c| {
        let part = c.as_os_str().to_string_lossy();
        part == "target" || part == "__pycache__" || part.starts_with('.')
    }) && path.extension().is_none_or(|e| e != "wasm")
}

/// Watches `sources` and rebuilds the one that changed, for as long as the watcher lives.
pub fn watch(gateway: Arc<Gateway>, sources: Vec<PathBuf>) -> Option<RecommendedWatcher> {
    let (tx, mut changed) = tokio::sync::mpsc::unbounded_channel::<usize>();
    let roots: Vec<PathBuf> = sources
        .iter()
        .map(|s| s.canonicalize().unwrap_or(s.clone()))
        .collect();
    let owners = roots.clone();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if !crate::file_events::is_change(&event.kind) {
            return;
        }
        for path in event.paths.iter().filter(|p| is_source(p)) {
            if let Some(i) = owners.iter().position(|root| path.starts_with(root)) {
                let _ = tx.send(i);
            }
        }
    })
    .map_err(|e| tracing::error!("wasmgate dev: cannot watch the sources: {e}"))
    .ok()?;
    for root in &roots {
        if let Err(e) = watcher.watch(root, RecursiveMode::Recursive) {
            tracing::error!("wasmgate dev: cannot watch {}: {e}", root.display());
        }
    }
    tokio::spawn(async move {
        // The sources whose last build failed: their next good one is announced.
        let mut failing = vec![false; roots.len()];
        while let Some(first) = changed.recv().await {
            tokio::time::sleep(SETTLE).await;
            let mut due = vec![first];
            while let Ok(more) = changed.try_recv() {
                due.push(more);
            }
            due.sort_unstable();
            due.dedup();
            for i in due {
                failing[i] = !rebuild(&gateway, &roots[i], failing[i]).await;
            }
        }
    });
    Some(watcher)
}

/// Rebuilds `dir`; whether it built. `was_failing`: the last build failed, so clients,
/// whose last word was that failure, hear that it builds again.
async fn rebuild(gateway: &Gateway, dir: &Path, was_failing: bool) -> bool {
    let started = Instant::now();
    let owned = dir.to_path_buf();
    let built = tokio::task::spawn_blocking(move || super::build::build_project(&owned))
        .await
        .unwrap_or_else(|e| Err(format!("the build task failed: {e}")));
    let took = started.elapsed().as_secs_f64();
    match built {
        Ok(wasm) => {
            eprintln!(
                "wasmgate dev: rebuilt {} in {took:.1} s; the gateway swaps it in once compiled",
                wasm.display()
            );
            if was_failing {
                let message = format!(
                    "{}: builds again; the plugin is healthy again",
                    dir.display()
                );
                gateway.tell_clients("notice", "wasmgate dev", &message);
            }
            true
        }
        Err(why) => {
            let message = format!(
                "{}: the rebuild failed after {took:.1} s; the previous version keeps serving: {why}",
                dir.display()
            );
            eprintln!("wasmgate dev: {message}");
            gateway.tell_clients("error", "wasmgate dev", &message);
            false
        }
    }
}
