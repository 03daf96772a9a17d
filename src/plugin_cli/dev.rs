//! `wasmgate dev [SOURCE_DIR...]`: serves as `serve` does and rebuilds a plugin when its
//! source folder changes (those given, and those `[plugins.NAME] source` names). The
//! gateway already watches the built file, so a good build is swapped in as any rebuilt
//! plugin is (calls in flight finish on the old version, clients get `list_changed`); a
//! failed one leaves the old version serving, and says why on stderr and to the clients,
//! as a log message at level `error`, with the compiler's first errors. Each rebuild ends
//! with one line of its timings. Rust projects rebuild with the release profile made fast
//! (`build::Profile::Dev`; `--release`: as it is).
//!
//! The watcher stays in the project: it follows no link (one to `/usr` would cost
//! thousands of watches) and skips build output, dependencies and hidden folders.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use notify::{RecommendedWatcher, RecursiveMode, Watcher};
use sha2::{Digest, Sha256};

use super::build::Profile;
use crate::gateway::Gateway;
use crate::plugin::PluginEvent;

/// Quiet time after a source change before the rebuild: an editor's save is several writes.
const SETTLE: Duration = Duration::from_millis(200);
/// How long the gateway may take to compile and swap in a build before `dev` stops
/// waiting to time it (a big interpreter component on a debug build takes tens of seconds).
const SWAP_WITHIN: Duration = Duration::from_secs(300);

/// A plugin project `dev` builds and watches, and the plugin it is served as.
#[derive(Debug, Clone)]
pub struct DevSource {
    pub dir: PathBuf,
    pub plugin: String,
    /// The component its build writes (not the link it may be served through).
    pub built: PathBuf,
    /// The profile a Rust project builds with.
    pub profile: Profile,
}

/// What [`build_all`] made: the components to serve (as `--plugin` files), the sources to
/// watch, and the folder of the links some are served through, to keep while serving.
pub type Built = (Vec<PathBuf>, Vec<DevSource>, Option<LinkFolder>);

/// Builds each source folder once, before serving: the command line's and those the
/// config's `[plugins.NAME] source` names.
pub fn build_all(
    config: Option<&Path>,
    sources: &[PathBuf],
    release: bool,
) -> Result<Built, String> {
    let profile = if release {
        Profile::Release
    } else {
        Profile::Dev
    };
    let mut files = Vec::new();
    let mut watched = Vec::new();
    let mut links = None;
    for dir in sources {
        let wasm = build_one(dir, first_profile(dir, profile))?;
        files.push(wasm.clone());
        watched.push(DevSource {
            dir: dir.clone(),
            plugin: stem(&wasm),
            built: wasm,
            profile,
        });
    }
    for (plugin, dir) in config_sources(config)? {
        let wasm = build_one(&dir, first_profile(&dir, profile))?;
        files.push(served_as(&plugin, wasm.clone(), &mut links)?);
        watched.push(DevSource {
            dir,
            plugin,
            built: wasm,
            profile,
        });
    }
    Ok((files, watched, links))
}

/// The profile of the build `dev` starts with: a release build already there is brought
/// up to date, quickly (see `build::has_release_build`).
fn first_profile(dir: &Path, rebuilds: Profile) -> Profile {
    if rebuilds == Profile::Dev && super::build::has_release_build(dir) {
        Profile::Release
    } else {
        rebuilds
    }
}

fn build_one(dir: &Path, profile: Profile) -> Result<PathBuf, String> {
    let started = Instant::now();
    let wasm =
        super::build::build_project(dir, profile).map_err(|e| format!("{}: {e}", dir.display()))?;
    eprintln!(
        "wasmgate dev: built {} in {:.1} s",
        wasm.display(),
        started.elapsed().as_secs_f64()
    );
    Ok(wasm)
}

fn stem(wasm: &Path) -> String {
    wasm.file_stem()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned())
}

/// The config's `[plugins.NAME] source` entries that are not disabled, by plugin name.
fn config_sources(config: Option<&Path>) -> Result<Vec<(String, PathBuf)>, String> {
    let Some(path) = config else {
        return Ok(Vec::new());
    };
    let config = crate::config::load(path).map_err(|e| e.to_string())?;
    Ok(config
        .plugins
        .plugins
        .into_values()
        .filter(|entry| !entry.disabled)
        .filter_map(|entry| Some((entry.name, entry.source?)))
        .collect())
}

/// A `--plugin` file serves as the plugin its file stem names: a build whose stem is not
/// the config's name (crate `my-tool` writes `my_tool.wasm`) is served through a link
/// named after the entry, which the gateway follows to the rebuilt file.
fn served_as(
    plugin: &str,
    wasm: PathBuf,
    links: &mut Option<LinkFolder>,
) -> Result<PathBuf, String> {
    if stem(&wasm) == plugin {
        return Ok(wasm);
    }
    let links = match links {
        Some(folder) => folder,
        None => links.insert(LinkFolder::create()?),
    };
    let link = links.0.join(format!("{plugin}.wasm"));
    let target = std::path::absolute(&wasm).unwrap_or(wasm);
    std::os::unix::fs::symlink(&target, &link).map_err(|e| {
        format!(
            "cannot link {} to {}: {e}",
            link.display(),
            target.display()
        )
    })?;
    Ok(link)
}

/// The folder of the links [`served_as`] makes, in the temp folder: made under a random
/// name, mode 0700, and checked to be the gateway user's, so that no other local user can
/// have made it first or swap a link in it (the gateway serves what a link points to,
/// with the plugin's grants). Removed when dropped, as `dev` exits.
pub struct LinkFolder(PathBuf);

impl LinkFolder {
    fn create() -> Result<LinkFolder, String> {
        use std::os::unix::fs::{DirBuilderExt, MetadataExt};
        let name = format!("wasmgate-dev-{}", uuid::Uuid::new_v4().simple());
        let path = std::env::temp_dir().join(name);
        // `create`, not `create_dir_all`: whatever is at the name already, it fails.
        std::fs::DirBuilder::new()
            .mode(0o700)
            .create(&path)
            .map_err(|e| format!("cannot make a folder for links: {}: {e}", path.display()))?;
        let meta =
            std::fs::symlink_metadata(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        // SAFETY: geteuid has no preconditions and cannot fail.
        let me = unsafe { libc::geteuid() };
        if !meta.is_dir() || meta.uid() != me || meta.mode() & 0o077 != 0 {
            return Err(format!(
                "{}: not a private folder of uid {me} (owner {}, mode {:o}); not used",
                path.display(),
                meta.uid(),
                meta.mode() & 0o777
            ));
        }
        Ok(LinkFolder(path))
    }
}

impl Drop for LinkFolder {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Folders of a project that are not source and are not watched: build output,
/// dependencies, caches and hidden ones (`.git`). A rebuild writes some of them (and would
/// start another), and each would cost a watch for every folder in it.
fn skipped(name: &OsStr) -> bool {
    let name = name.to_string_lossy();
    name == "target" || name == "__pycache__" || name == "node_modules" || name.starts_with('.')
}

/// Whether a path in the project (relative to its folder) is source.
fn is_source(path: &Path) -> bool {
    !path.components().any(|c| skipped(c.as_os_str()))
        && path.extension().is_none_or(|e| e != "wasm")
}

/// Watches `dir` and each folder under it (one watch each), but for [`skipped`] ones and
/// links: a link may lead out of the project.
fn watch_tree(watcher: &mut RecommendedWatcher, dir: &Path) {
    let mut pending = vec![dir.to_path_buf()];
    while let Some(dir) = pending.pop() {
        if let Err(e) = watcher.watch(&dir, RecursiveMode::NonRecursive) {
            tracing::error!("wasmgate dev: cannot watch {}: {e}", dir.display());
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // The entry's own type: a link to a folder is not a folder here.
            if entry.file_type().is_ok_and(|t| t.is_dir()) && !skipped(&entry.file_name()) {
                pending.push(entry.path());
            }
        }
    }
}

/// A watcher of plugin sources: [`watch`] returns it, and it watches while it is held.
pub type SourceWatcher = Arc<Mutex<RecommendedWatcher>>;

/// Watches `sources` and rebuilds the one that changed, for as long as the watcher lives.
pub fn watch(gateway: Arc<Gateway>, sources: Vec<DevSource>) -> Option<SourceWatcher> {
    let (tx, mut changed) = tokio::sync::mpsc::unbounded_channel::<(usize, Instant, PathBuf)>();
    let sources: Vec<DevSource> = sources
        .into_iter()
        .map(|s| DevSource {
            dir: s.dir.canonicalize().unwrap_or(s.dir),
            ..s
        })
        .collect();
    let owners: Vec<PathBuf> = sources.iter().map(|s| s.dir.clone()).collect();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<notify::Event>| {
        let Ok(event) = event else { return };
        if !crate::file_events::is_change(&event.kind) {
            return;
        }
        for path in event.paths {
            let owner = owners.iter().enumerate().find_map(|(i, root)| {
                let inside = path.strip_prefix(root).ok()?;
                is_source(inside).then_some(i)
            });
            if let Some(i) = owner {
                let _ = tx.send((i, Instant::now(), path));
            }
        }
    })
    .map_err(|e| tracing::error!("wasmgate dev: cannot watch the sources: {e}"))
    .ok()?;
    for source in &sources {
        watch_tree(&mut watcher, &source.dir);
    }
    let watcher = Arc::new(Mutex::new(watcher));
    // Not kept alive by the task: once the caller drops it, the changes end, and the task.
    let held = Arc::downgrade(&watcher);
    tokio::spawn(async move {
        // The sources whose last build failed: their next good one is announced.
        let mut failing = vec![false; sources.len()];
        // The digest of each source's last good build: an unchanged one is not swapped.
        let mut served: Vec<Option<Vec<u8>>> = sources.iter().map(|s| digest(&s.built)).collect();
        while let Some(first) = changed.recv().await {
            let mut due = vec![first];
            tokio::time::sleep(SETTLE).await;
            while let Ok(more) = changed.try_recv() {
                due.push(more);
            }
            // A new folder is watched before the build that reads it.
            for (_, _, path) in &due {
                if let Some(watcher) = held.upgrade()
                    && std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir())
                {
                    watch_tree(&mut watcher.lock().unwrap(), path);
                }
            }
            // Each source once, timed from its first change.
            due.sort_by_key(|(i, at, _)| (*i, *at));
            due.dedup_by_key(|(i, _, _)| *i);
            for (i, saved, _) in due {
                let rebuild = Rebuild {
                    source: &sources[i],
                    saved,
                    was_failing: failing[i],
                };
                failing[i] = !rebuild.run(&gateway, &mut served[i]).await;
            }
        }
    });
    Some(watcher)
}

/// One rebuild of a source, from the first change seen.
struct Rebuild<'a> {
    source: &'a DevSource,
    saved: Instant,
    /// The last build failed, so clients, whose last word was that failure, hear that it
    /// builds again.
    was_failing: bool,
}

impl Rebuild<'_> {
    /// Builds, waits for the gateway to swap the result in, and prints one line of timings;
    /// whether it built.
    async fn run(&self, gateway: &Gateway, served: &mut Option<Vec<u8>>) -> bool {
        let DevSource {
            dir,
            plugin,
            profile,
            ..
        } = self.source;
        let mut news = gateway.plugin_news.subscribe();
        let started = Instant::now();
        let (owned, profile) = (dir.clone(), *profile);
        let built =
            tokio::task::spawn_blocking(move || super::build::build_project(&owned, profile))
                .await
                .unwrap_or_else(|e| Err(format!("the build task failed: {e}")));
        let build = started.elapsed();
        let wasm = match built {
            Ok(wasm) => wasm,
            Err(why) => {
                let message = format!(
                    "{}: the rebuild failed after {:.1} s; the previous version keeps serving: {why}",
                    dir.display(),
                    build.as_secs_f64()
                );
                eprintln!("wasmgate dev: {message}");
                gateway.tell_clients("error", "wasmgate dev", &message);
                return false;
            }
        };
        if self.was_failing {
            let message = format!(
                "{}: builds again; the plugin is healthy again",
                dir.display()
            );
            gateway.tell_clients("notice", "wasmgate dev", &message);
        }
        let digest = digest(&wasm);
        if *served == digest {
            eprintln!(
                "wasmgate dev: {plugin}: build {:.1} s; the component is unchanged, nothing to swap",
                build.as_secs_f64()
            );
            return true;
        }
        *served = digest;
        let line = match swapped(&mut news, plugin).await {
            Some(Swap::Served { compile_ms }) => {
                let total = self.saved.elapsed();
                let after_build = started.elapsed().saturating_sub(build);
                let compile = Duration::from_millis(compile_ms.unwrap_or(0));
                format!(
                    "{plugin}: build {:.1} s, compile {:.2} s{}, swap {:.2} s; saved → served {:.1} s",
                    build.as_secs_f64(),
                    compile.as_secs_f64(),
                    if compile_ms.is_none() {
                        " (cached)"
                    } else {
                        ""
                    },
                    after_build.saturating_sub(compile).as_secs_f64(),
                    total.as_secs_f64()
                )
            }
            Some(Swap::Refused(reason)) => format!(
                "{plugin}: build {:.1} s; the gateway refused the component, the previous \
                 version keeps serving: {reason}",
                build.as_secs_f64()
            ),
            None => format!(
                "{plugin}: build {:.1} s; not swapped in within {} s",
                build.as_secs_f64(),
                SWAP_WITHIN.as_secs()
            ),
        };
        eprintln!("wasmgate dev: {line}");
        true
    }
}

fn digest(file: &Path) -> Option<Vec<u8>> {
    std::fs::read(file)
        .ok()
        .map(|bytes| Sha256::digest(&bytes).to_vec())
}

enum Swap {
    Served { compile_ms: Option<u64> },
    Refused(String),
}

/// The gateway's word on `plugin`'s new file: served (the catalog shows it) or refused.
async fn swapped(
    news: &mut tokio::sync::broadcast::Receiver<PluginEvent>,
    plugin: &str,
) -> Option<Swap> {
    let wait = async {
        loop {
            match news.recv().await {
                Ok(
                    PluginEvent::Reloaded {
                        name, compile_ms, ..
                    }
                    | PluginEvent::Loaded {
                        name, compile_ms, ..
                    },
                ) if name == plugin => return Some(Swap::Served { compile_ms }),
                Ok(
                    PluginEvent::ReloadFailed { name, reason }
                    | PluginEvent::LoadFailed { name, reason },
                ) if name == plugin => return Some(Swap::Refused(reason)),
                Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => {}
                Err(tokio::sync::broadcast::error::RecvError::Closed) => return None,
            }
        }
    };
    tokio::time::timeout(SWAP_WITHIN, wait).await.ok().flatten()
}
