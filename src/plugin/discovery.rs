//! Finding plugins and watching for change: the folder and configured paths, what the
//! config asks for, and the watchers that start reloads (the `Loader`'s watching half).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::Duration;

use super::loading::{Control, Loader};
use super::version::{Settings, Source};
use super::{lock, watch};
use crate::config::{PluginConfig, PluginsConfig};

impl Loader {
    /// Stops the watcher for good: `shutdown`. A load or reload in progress (a Python
    /// plugin compiling for half a minute) holds the control: the exit does not wait for
    /// it, and its end starts no new watcher.
    pub(super) fn stop_watching(&self) {
        self.shut_down.store(true, Ordering::Release);
        if let Ok(mut control) = self.control.try_lock() {
            control.watcher = None;
            control.watched.clear();
            control.missing.clear();
            control.watch_generation += 1;
        }
    }

    /// (Re)starts the watcher when the set of directories to watch changed.
    pub(super) fn rewatch(&self, control: &mut Control) {
        if self.shut_down.load(Ordering::Acquire) {
            return;
        }
        let config = &control.config;
        let (dirs, links) = if config.watch {
            let links = plugin_links(config);
            let files = config
                .plugins
                .values()
                .filter(|p| !p.disabled)
                // A pulled file never changes: a new version comes from a config reload.
                .filter(|p| p.oci.is_none())
                .filter_map(|p| p.path.as_deref())
                .chain(links.iter().map(|(target, _)| target.as_path()));
            (watch::dirs_to_watch(config.dir.as_deref(), files), links)
        } else {
            (Vec::new(), Vec::new())
        };
        control.links = links;
        if dirs == control.watched && (control.watcher.is_some() || dirs.is_empty()) {
            return;
        }
        // A running watcher is changed in place (a link added or gone, a config reload):
        // a new one would drop the changes the old one's debounce still holds.
        if !dirs.is_empty()
            && let Some(watcher) = control.watcher.as_mut()
        {
            let gone: Vec<PathBuf> = control
                .watched
                .iter()
                .filter(|d| !dirs.contains(d))
                .cloned()
                .collect();
            crate::file_events::remove(watcher, &gone);
            let added: Vec<PathBuf> = dirs
                .iter()
                .filter(|d| !control.watched.contains(d))
                .cloned()
                .collect();
            let missing = crate::file_events::add(watcher, &added, "plugin folder");
            control.missing.retain(|d| dirs.contains(d));
            control.missing.extend(missing.iter().cloned());
            control.watched = dirs;
            if !missing.is_empty() {
                tokio::spawn(wait_for_folders(
                    self.this.clone(),
                    control.watch_generation,
                    missing,
                ));
            }
            return;
        }
        control.watcher = None;
        control.watched = dirs.clone();
        // Also when nothing is watched any more: a poll for a missing folder stops.
        control.watch_generation += 1;
        if dirs.is_empty() {
            return;
        }
        tokio::spawn(check_folders_present(
            self.this.clone(),
            control.watch_generation,
        ));
        match crate::file_events::watch(&dirs, "plugin folder") {
            Ok((watcher, rx, missing)) => {
                control.watcher = Some(watcher);
                control.missing = missing.clone();
                if !missing.is_empty() {
                    tokio::spawn(wait_for_folders(
                        self.this.clone(),
                        control.watch_generation,
                        missing,
                    ));
                }
                let host = self.this.clone();
                tokio::spawn(crate::file_events::debounce(rx, move |path| {
                    let host = host.clone();
                    async move {
                        match host.upgrade() {
                            Some(host) => {
                                host.file_changed(&path).await;
                                true
                            }
                            None => false,
                        }
                    }
                }));
            }
            Err(e) => {
                tracing::warn!(error = %e, "cannot start the plugin file watcher; hot reload is off")
            }
        }
    }

    /// A folder that was missing now exists: watch it and load what it holds.
    pub(super) async fn folder_appeared(&self, generation: u64) {
        let mut control = self.control.lock().await;
        if control.watch_generation != generation {
            return;
        }
        self.rescan(&mut control, false).await;
    }

    /// Watches the folders anew (polling for those missing) and brings the loaded set in
    /// line. Watched before read: a file still being written is then seen again when its
    /// writer is done.
    pub(super) async fn rescan(&self, control: &mut Control, reread: bool) {
        // A new watcher: the old one may hold watches on folders that were replaced.
        control.watcher = None;
        control.watched.clear();
        control.missing.clear();
        self.rewatch(control);
        self.apply(control, reread).await;
    }

    /// A watched file settled: load, reload or unload the plugins it belongs to. A watched
    /// folder itself that changed (deleted, renamed, made again) is one the watcher lost:
    /// everything is read again and the folders watched anew, polled for while missing.
    pub(super) async fn file_changed(&self, path: &Path) {
        let mut control = self.control.lock().await;
        // The folder's own event, or (should that one be missed) a file's in a folder gone
        // (`cargo clean` removes many). Not one already known to be gone and still gone:
        // its files' events and its own both arrive, and one rescan is enough.
        let folder_lost = |dir: &&PathBuf| {
            let gone = !dir.is_dir();
            (*dir == path || (path.parent() == Some(dir.as_path()) && gone))
                && !(gone && control.missing.contains(dir))
        };
        if let Some(dir) = control.watched.iter().find(folder_lost) {
            tracing::info!(dir = %dir.display(), "a watched plugin folder was moved, removed or made again");
            self.rescan(&mut control, true).await;
            return;
        }
        // The file itself, the config's other spellings of it (`a/../b/x.wasm`), and the
        // plugin files that are symlinks to it.
        let file = watch::canonical(path);
        let mut paths = vec![path.to_path_buf()];
        paths.extend(
            control
                .config
                .plugins
                .values()
                .filter_map(|p| p.path.as_deref())
                .filter(|p| *p != path && watch::canonical(p) == file)
                .map(Path::to_path_buf),
        );
        paths.extend(
            control
                .links
                .iter()
                .filter(|(target, _)| *target == file)
                .map(|(_, link)| link.clone()),
        );
        paths.sort();
        paths.dedup();
        for path in &paths {
            self.plugin_file_changed(&control, path).await;
        }
        // A link added, replaced or removed: watch where the links end now. Not after
        // `shutdown`, which stopped the watcher.
        if control.watcher.is_some() {
            self.rewatch(&mut control);
        }
    }

    /// Loads, reloads or unloads the plugins whose file is `path`.
    pub(super) async fn plugin_file_changed(&self, control: &Control, path: &Path) {
        let Desired {
            plugins: mut desired,
            passed_over,
        } = desired_plugins(&control.config, control.bundled);
        self.warn_passed_over(passed_over);
        for name in plugins_for_path(&control.config, path) {
            let existing = self
                .calls
                .slots
                .load()
                .get(&name)
                .map(|slot| slot.current.load_full());
            match desired.remove(&name) {
                Some((source, settings)) => {
                    // Re-hash the file even if nothing else changed: that is what
                    // tells a real change from a rewrite of the same bytes.
                    let force_read = source.path() == Some(path);
                    self.update(name, source, Arc::new(settings), existing, force_read)
                        .await;
                }
                None => {
                    if existing.is_some_and(|v| v.source.path() == Some(path)) {
                        self.unload(&name);
                    }
                    match control.config.plugins.get(&name) {
                        // A configured file that went away: waiting for it, as at start.
                        Some(entry) if entry.path.as_deref() == Some(path) && !entry.disabled => {
                            self.waiting_for_file(&name, path)
                        }
                        _ => self.forget_failure(&name),
                    }
                }
            }
        }
        crate::memory::give_back();
    }
}

/// What the configuration asks for now: every plugin by name (configured paths first, then
/// `*.wasm` files in `dir`, then bundled plugins), and the folder's files passed over.
pub(super) struct Desired {
    pub(super) plugins: BTreeMap<String, (Source, Settings)>,
    /// `*.wasm` files of the folder that are not loaded, sorted, with why: a name with
    /// control characters, or a name a configured plugin (`path`, `--plugin`) already has.
    /// Without a word, a build dropped there would seem to be ignored.
    pub(super) passed_over: Vec<(PathBuf, String)>,
}

/// [`desired_plugins_with`] the middleware bundled into this binary.
pub(super) fn desired_plugins(
    config: &PluginsConfig,
    bundled: &'static [(&'static str, &'static [u8])],
) -> Desired {
    desired_plugins_with(config, bundled, crate::bundled::BUNDLED_MIDDLEWARE)
}

/// What `config` asks for, with `bundled` as the bundled plugins (`bundled = true`) and
/// `middleware` as the bundled middleware that `use` in a `[[middleware]]` entry names.
pub(super) fn desired_plugins_with(
    config: &PluginsConfig,
    bundled: &'static [(&'static str, &'static [u8])],
    middleware: &'static [(&'static str, &'static [u8])],
) -> Desired {
    let mut out = BTreeMap::new();
    let mut passed_over = Vec::new();
    let settings =
        |name: &str| Settings::from_config(name, config.plugins.get(name), config.limits);
    for (name, entry) in &config.plugins {
        if let (Some(path), false) = (&entry.path, entry.disabled)
            && path.is_file()
        {
            out.insert(name.clone(), (Source::File(path.clone()), settings(name)));
        }
        if let (None, Some(uses), false) = (&entry.path, &entry.uses_bundled, entry.disabled)
            && let Some((_, bytes)) = middleware.iter().find(|(bundled, _)| bundled == uses)
        {
            out.insert(name.clone(), (Source::Bundled(bytes), settings(name)));
        }
    }
    if let Some(dir) = &config.dir {
        match std::fs::read_dir(dir) {
            Ok(entries) => {
                for path in entries.flatten().map(|entry| entry.path()) {
                    let Some(name) = dir_plugin_name(&path) else {
                        if path.extension().is_some_and(|ext| ext == "wasm")
                            && stem_has_control(&path)
                            && path.is_file()
                        {
                            let why = "its name holds control characters; rename it";
                            passed_over.push((path, why.to_string()));
                        }
                        continue;
                    };
                    match config.plugins.get(&name) {
                        // Its name is configured: off, or served from its `path` or a
                        // bundled middleware.
                        Some(entry) if entry.uses_bundled.is_some() && entry.path.is_none() => {
                            if let (false, Some(uses)) = (entry.disabled, &entry.uses_bundled)
                                && path.is_file()
                            {
                                let why = format!(
                                    "middleware `{name}` runs the bundled `{uses}`; rename this \
                                     file to serve it as well"
                                );
                                passed_over.push((path, why));
                            }
                        }
                        Some(entry) if entry.disabled || entry.path.is_some() => {
                            if let Some(other) = entry.path.as_deref()
                                && !entry.disabled
                                && other != path
                                && path.is_file()
                            {
                                let why = format!(
                                    "plugin `{name}` is served from {}, set as its path or by \
                                     --plugin; rename this file to serve it as well",
                                    other.display()
                                );
                                passed_over.push((path, why));
                            }
                        }
                        entry if path.is_file() => {
                            warn_granted_by_name(&name, &path, entry, config, bundled);
                            let s = settings(&name);
                            out.insert(name, (Source::File(path), s));
                        }
                        _ => {}
                    }
                }
            }
            // A folder not there (yet, or after `cargo clean`) is polled for, and said once.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::debug!(dir = %dir.display(), "the plugin directory is not there")
            }
            Err(e) => {
                tracing::warn!(dir = %dir.display(), error = %e, "cannot read the plugin directory")
            }
        }
    }
    if config.bundled {
        for (name, bytes) in bundled {
            if !out.contains_key(*name) && !config.plugins.get(*name).is_some_and(|p| p.disabled) {
                out.insert(name.to_string(), (Source::Bundled(bytes), settings(name)));
            }
        }
    }
    passed_over.sort();
    Desired {
        plugins: out,
        passed_over,
    }
}

/// The middleware entries of `config` whose `use` names none of the bundled `middleware`,
/// as (entry, what it uses).
pub(super) fn missing_bundled(
    config: &PluginsConfig,
    middleware: &[(&str, &[u8])],
) -> Vec<(String, String)> {
    (config.plugins.values())
        .filter(|entry| entry.path.is_none() && !entry.disabled)
        .filter_map(|entry| Some((entry, entry.uses_bundled.as_ref()?)))
        .filter(|(_, uses)| !middleware.iter().any(|(bundled, _)| bundled == uses))
        .map(|(entry, uses)| (entry.name.clone(), uses.clone()))
        .collect()
}

/// A folder file that takes a configured plugin's grants, or a bundled plugin's place, by its
/// name alone: said once per file and reason, since whoever can write the folder gets them.
pub(super) fn warn_granted_by_name(
    name: &str,
    path: &Path,
    entry: Option<&PluginConfig>,
    config: &PluginsConfig,
    bundled: &[(&str, &[u8])],
) {
    static SAID: StdMutex<BTreeSet<String>> = StdMutex::new(BTreeSet::new());
    let grants = entry.filter(|e| {
        e.sha256.is_none()
            && !(e.allow_dirs.is_empty() && e.allow_env.is_empty() && e.allow_hosts.is_empty())
    });
    let replaces_bundled = config.bundled && bundled.iter().any(|(b, _)| *b == name);
    let what = match (grants.is_some(), replaces_bundled) {
        (false, false) => return,
        (true, false) => format!("takes the grants of [plugins.{name}]"),
        (false, true) => format!("replaces the bundled plugin `{name}`"),
        (true, true) => {
            format!("replaces the bundled plugin `{name}` and takes the grants of [plugins.{name}]")
        }
    };
    let text = format!(
        "plugin `{name}`: {} {what} by its file name alone; pin the code meant to have them \
         with sha256 = \"...\" in [plugins.{name}] (sha256sum prints it)",
        path.display()
    );
    if lock(&SAID).insert(text.clone()) {
        tracing::warn!(plugin = %name, "{text}");
    }
}

/// The namespace of a plugin found in the plugin folder: its file name may hold what
/// clients refuse in a tool name (spaces, dots, non-ASCII), which becomes `_`.
pub(super) fn default_namespace(name: &str) -> String {
    // Said once per name: this runs at every change in the folder.
    static WARNED: StdMutex<BTreeSet<String>> = StdMutex::new(BTreeSet::new());
    let namespace = crate::config::namespace_for(name);
    if namespace != name && lock(&WARNED).insert(name.to_string()) {
        tracing::warn!(
            plugin = %name,
            "plugin `{name}`: its file name is not a valid namespace, so its tools are prefixed \
             \"{namespace}\"; rename the file or give it a [plugins] table with a namespace"
        );
    }
    namespace
}

/// The plugin name of a file in the plugin directory: its stem, for `*.wasm`. A stem with
/// control characters names no plugin: the name goes into every log line about it.
pub(super) fn dir_plugin_name(path: &Path) -> Option<String> {
    if path.extension()? != "wasm" {
        return None;
    }
    let stem = path.file_stem()?.to_str()?;
    (!stem.is_empty() && !stem.starts_with('.') && !stem_has_control(path))
        .then(|| stem.to_string())
}

pub(super) fn stem_has_control(path: &Path) -> bool {
    path.file_stem()
        .is_some_and(|stem| stem.to_string_lossy().chars().any(char::is_control))
}

/// Which plugins a changed path belongs to: those configured with it as their path (one
/// file may serve under several names), and the folder plugin named after it.
pub(super) fn plugins_for_path(config: &PluginsConfig, path: &Path) -> Vec<String> {
    let mut names: Vec<String> = config
        .plugins
        .iter()
        .filter(|(_, p)| p.path.as_deref() == Some(path))
        .map(|(name, _)| name.clone())
        .collect();
    let in_dir = config
        .dir
        .as_deref()
        .is_some_and(|dir| path.parent() == Some(dir));
    if let Some(name) = dir_plugin_name(path).filter(|_| in_dir)
        && config.plugins.get(&name).is_none_or(|p| p.path.is_none())
        && !names.contains(&name)
    {
        names.push(name);
    }
    names
}

/// The plugin files that are symlinks, configured or in the folder (also links whose
/// target is missing, as after `cargo clean`), as (where the link ends, the link).
pub(super) fn plugin_links(config: &PluginsConfig) -> Vec<(PathBuf, PathBuf)> {
    let configured = config
        .plugins
        .values()
        .filter(|p| !p.disabled)
        .filter_map(|p| p.path.clone());
    let in_folder = config
        .dir
        .iter()
        .filter_map(|dir| std::fs::read_dir(dir).ok())
        .flatten()
        .flatten()
        .filter(|entry| entry.file_type().is_ok_and(|t| t.is_symlink()))
        .map(|entry| entry.path())
        .filter(|path| dir_plugin_name(path).is_some());
    let mut links: Vec<(PathBuf, PathBuf)> = configured
        .chain(in_folder)
        .filter_map(|link| Some((watch::link_target(&link)?, link)))
        .collect();
    links.sort();
    links.dedup();
    links
}

/// How often folders that do not exist yet are looked for: `notify` cannot watch
/// what is not there, and a plugin's build folder often appears only after the first build.
pub(super) const MISSING_FOLDER_POLL: Duration = Duration::from_millis(500);

/// How often the folders being watched are checked to still be there: a folder moved or
/// removed without the watcher saying so (an event lost, a watcher that could not start)
/// is noticed within this.
pub(super) const PRESENT_FOLDER_CHECK: Duration = Duration::from_secs(2);

/// Rescans when a watched folder that was there is gone, for as long as `generation` is
/// the current watch.
pub(super) async fn check_folders_present(host: Weak<Loader>, generation: u64) {
    loop {
        tokio::time::sleep(PRESENT_FOLDER_CHECK).await;
        let Some(host) = host.upgrade() else { return };
        let mut control = host.control.lock().await;
        if control.watch_generation != generation {
            return;
        }
        let gone = control
            .watched
            .iter()
            .find(|d| !control.missing.contains(d) && !d.is_dir())
            .cloned();
        if let Some(dir) = gone {
            tracing::info!(dir = %dir.display(), "a watched plugin folder is gone; watching anew");
            host.rescan(&mut control, true).await;
            return;
        }
    }
}

pub(super) async fn wait_for_folders(host: Weak<Loader>, generation: u64, missing: Vec<PathBuf>) {
    loop {
        tokio::time::sleep(MISSING_FOLDER_POLL).await;
        let Some(host) = host.upgrade() else { return };
        if host.control.lock().await.watch_generation != generation {
            return;
        }
        if let Some(dir) = missing.iter().find(|dir| dir.is_dir()) {
            tracing::info!(dir = %dir.display(), "a plugin folder appeared; watching it");
            host.folder_appeared(generation).await;
            return;
        }
    }
}
