//! What the plugin host watches: the plugin directory and the folder of every configured
//! plugin file (watched and debounced by `crate::file_events`), through symlinks.

use std::path::{Path, PathBuf};

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
