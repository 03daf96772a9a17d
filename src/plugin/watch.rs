//! File watching for hot reload: a `notify` watcher on the plugin directory and
//! on the parent of every configured plugin file, debounced per path (a burst
//! of writes, or a rename over the file, is one change).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use tokio::sync::mpsc;
use tokio::time::Instant;

/// Quiet time after the last event for a path before it is acted on.
pub const DEBOUNCE: Duration = Duration::from_millis(75);

/// Starts watching `dirs` (non-recursively); changed paths arrive on the
/// returned receiver, not yet debounced. Directories that do not exist yet are
/// returned, for the caller to look for again; others that cannot be watched are logged.
pub fn watch(
    dirs: &[PathBuf],
) -> anyhow::Result<(
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
            Err(e) => tracing::warn!(error = %e, "plugin file watcher error"),
        })?;
    let missing = add(&mut watcher, dirs);
    Ok((watcher, rx, missing))
}

/// Watches `dirs` too (non-recursively); returns those that do not exist yet. Others
/// that cannot be watched are logged.
pub fn add(watcher: &mut RecommendedWatcher, dirs: &[PathBuf]) -> Vec<PathBuf> {
    let mut missing = Vec::new();
    for dir in dirs {
        if !dir.is_dir() {
            tracing::info!(dir = %dir.display(), "plugin folder does not exist yet; it will be watched once it does");
            missing.push(dir.clone());
            continue;
        }
        match watcher.watch(dir, RecursiveMode::NonRecursive) {
            Ok(()) => tracing::debug!(dir = %dir.display(), "watching for plugin changes"),
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot watch plugin directory")
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

/// Where a symlink ends up, through a chain of links; `None` for a path that is not a
/// link, or a loop. The target need not exist (a build output after `cargo clean`); it is
/// given [`canonical`].
pub fn link_target(path: &Path) -> Option<PathBuf> {
    const MAX_HOPS: usize = 40;
    let mut current = path.to_path_buf();
    let mut hops = 0;
    while let Ok(target) = std::fs::read_link(&current) {
        hops += 1;
        if hops > MAX_HOPS {
            return None;
        }
        current = match current.parent() {
            Some(parent) => parent.join(target),
            None => target,
        };
    }
    (hops > 0).then(|| canonical(&current))
}

/// A file's path with its folder as the system names it (`..` and symlinks resolved),
/// where the folder exists: two spellings of one file compare equal this way.
pub fn canonical(path: &Path) -> PathBuf {
    match (
        path.parent().and_then(|p| p.canonicalize().ok()),
        path.file_name(),
    ) {
        (Some(folder), Some(name)) => folder.join(name),
        _ => path.to_path_buf(),
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

/// The directories to watch for a set of plugin files and an optional plugin directory.
pub fn dirs_to_watch<'a>(
    dir: Option<&'a Path>,
    files: impl Iterator<Item = &'a Path>,
) -> Vec<PathBuf> {
    let candidates = dir
        .into_iter()
        .map(Path::to_path_buf)
        .chain(files.filter_map(|f| f.parent().map(Path::to_path_buf)));
    // One spelling per folder (`a/../b` and `b` are one): the watcher reports a folder's
    // changes under one of them, and unwatching one would unwatch both. The first kept.
    let mut seen = std::collections::HashSet::new();
    let mut dirs: Vec<PathBuf> = candidates
        .filter(|d| seen.insert(d.canonicalize().unwrap_or_else(|_| d.clone())))
        .collect();
    dirs.sort();
    dirs
}
