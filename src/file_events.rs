//! Watching files for hot reload, for the config and the plugins alike: a `notify` watcher
//! on folders, what counts as a change, and a debounce per path (a burst of writes, or a
//! rename over the file, is one change).

use std::collections::HashMap;
use std::path::PathBuf;
use std::time::Duration;

use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Quiet time after the last event for a path before it is acted on.
pub const DEBOUNCE: Duration = Duration::from_millis(75);

/// Opening or reading a file is not a change: the gateway reads the files it watches
/// when they change, and counting that as a change would reload them forever (as would
/// an editor or a backup tool reading them).
pub fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}

/// Starts watching `dirs` (non-recursively); changed paths arrive on the
/// returned receiver, not yet debounced. Directories that do not exist yet are
/// returned, for the caller to look for again; others that cannot be watched are logged.
pub fn watch(
    dirs: &[PathBuf],
    what: &'static str,
) -> notify::Result<(
    RecommendedWatcher,
    mpsc::UnboundedReceiver<PathBuf>,
    Vec<PathBuf>,
)> {
    let (tx, rx) = mpsc::unbounded_channel();
    let mut watcher =
        notify::recommended_watcher(move |event: notify::Result<notify::Event>| match event {
            Ok(event) => {
                if crate::file_events::is_change(&event.kind) {
                    for path in event.paths {
                        let _ = tx.send(path);
                    }
                }
            }
            Err(e) => tracing::warn!(error = %e, "{what} watcher error"),
        })?;
    let missing = add(&mut watcher, dirs, what);
    Ok((watcher, rx, missing))
}

/// Watches `dirs` too (non-recursively); returns those that do not exist yet. Others
/// that cannot be watched are logged.
pub fn add(watcher: &mut RecommendedWatcher, dirs: &[PathBuf], what: &str) -> Vec<PathBuf> {
    let mut missing = Vec::new();
    for dir in dirs {
        if !dir.is_dir() {
            tracing::info!(dir = %dir.display(), "the {what} does not exist yet; it will be watched once it does");
            missing.push(dir.clone());
            continue;
        }
        match watcher.watch(dir, RecursiveMode::NonRecursive) {
            Ok(()) => tracing::debug!(dir = %dir.display(), "watching the {what}"),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot watch the {what}")
            }
        }
    }
    missing
}

/// Stops watching `dirs`; one that was missing was never watched, and is skipped.
pub fn remove(watcher: &mut RecommendedWatcher, dirs: &[PathBuf]) {
    for dir in dirs {
        let _ = watcher.unwatch(dir);
    }
}

/// Feeds `on_change` each path once it has been quiet for [`DEBOUNCE`]; ends
/// when the watcher (the sender side) is gone or `on_change` says stop.
pub async fn debounce<F, Fut>(mut rx: mpsc::UnboundedReceiver<PathBuf>, mut on_change: F)
where
    F: FnMut(PathBuf) -> Fut,
    Fut: Future<Output = bool>,
{
    let mut pending: HashMap<PathBuf, Instant> = HashMap::new();
    loop {
        let next = pending.values().min().copied();
        tokio::select! {
            received = rx.recv() => match received {
                Some(path) => { pending.insert(path, Instant::now() + DEBOUNCE); }
                None => return,
            },
            () = sleep_until(next) => {
                let now = Instant::now();
                let due: Vec<PathBuf> = pending.iter().filter(|(_, at)| **at <= now).map(|(p, _)| p.clone()).collect();
                for path in due {
                    pending.remove(&path);
                    if !on_change(path).await {
                        return;
                    }
                }
            }
        }
    }
}

async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}
