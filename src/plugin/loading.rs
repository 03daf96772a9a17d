//! Loading plugins: reading, compiling (or loading from the cache) and validating a
//! version, installing it, and bringing the loaded set in line with the config.
//! [`Loader`] owns what loading needs; what it loads, it installs in the calls' catalog.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::AtomicBool;
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::time::{Duration, Instant, SystemTime};

use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, Semaphore, mpsc};
use wasmtime::component::{Component, Linker};

use super::cache::{self, Cache};
use super::calls::{Calls, Instance, cut_error};
use super::discovery::{Desired, desired_plugins, missing_bundled};
use super::hooks::{self, Interest, PluginKind};
use super::kind::{Bound, HOOKS_EXPORT, Pre, TOOL_EXPORT};
use super::listing::{self, ListingV2, check_tools};
use super::sandbox::StoreState;
use super::version::{Code, Settings, Slot, Source, TimeLimit, Version, turn_limit};
use super::{
    FailedPlugin, LoadError, PluginEvent, convert, engine, host_impl, limits, lock, ms, pool,
};
use crate::config::PluginsConfig;

/// How long `list-tools` may take when a version is validated, at most.
pub(super) const LIST_TOOLS_TIMEOUT: Duration = Duration::from_secs(10);

/// A tool plugin's checked tools, and the output schemas of those that declare one.
/// A tool plugin's checked tools and output schemas, and what a 0.2 plugin lists besides.
type ToolListing = (
    Vec<serde_json::Value>,
    HashMap<String, Arc<convert::OutputSchema>>,
    Option<ListingV2>,
);

/// The largest component file read, well above an interpreter's (CPython's).
const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// What load, reload and unload are serialised on.
pub(super) struct Control {
    pub(super) config: PluginsConfig,
    pub(super) bundled: &'static [(&'static str, &'static [u8])],
    pub(super) watcher: Option<notify::RecommendedWatcher>,
    pub(super) watched: Vec<PathBuf>,
    /// Watched folders that did not exist when last looked at (polled for): files gone
    /// from them are not news.
    pub(super) missing: Vec<PathBuf>,
    /// Plugin files that are symlinks, as (where the link ends, the link): a change at
    /// the end of the link is a change of the plugin.
    pub(super) links: Vec<(PathBuf, PathBuf)>,
    /// Bumped by every new watch, so that a stale poll for missing folders stops.
    pub(super) watch_generation: u64,
}

/// What loading needs: the linker that checks a component's imports, the cache, slots of
/// its own for validating, what status shows of plugins not (yet) loaded, and the
/// control that load, reload, unload and the watcher are serialised on.
pub(super) struct Loader {
    pub(super) calls: Arc<Calls>,
    linker: Linker<StoreState>,
    cache: Option<Cache>,
    /// Instance slots kept free of calls so that loads and reloads can always validate.
    probes: Arc<Semaphore>,
    /// Plugins that could not be loaded, by name, until they load or are gone.
    pub(super) failed: StdMutex<BTreeMap<String, FailedPlugin>>,
    /// Plugins being read and compiled for their first version, with their files.
    pub(super) loading: StdMutex<BTreeMap<String, Option<PathBuf>>>,
    /// Files in the plugin folder passed over when last looked, each warned about once.
    passed_over: StdMutex<BTreeSet<PathBuf>>,
    events: mpsc::UnboundedSender<PluginEvent>,
    pub(super) control: Mutex<Control>,
    /// Set by `shutdown`: no watcher is started after it.
    pub(super) shut_down: AtomicBool,
    /// `compile_timeout` of the config now.
    compile_limit: StdMutex<Duration>,
    /// Digests of components whose compiling outran the limit: refused until the file
    /// changes, so that each rescan does not start another compile of the same bytes.
    compile_refused: StdMutex<BTreeSet<String>>,
    pub(super) this: Weak<Loader>,
}

impl Loader {
    pub(super) fn new(
        calls: Arc<Calls>,
        linker: Linker<StoreState>,
        config: &PluginsConfig,
        bundled: &'static [(&'static str, &'static [u8])],
        events: mpsc::UnboundedSender<PluginEvent>,
        probe_units: usize,
    ) -> Arc<Loader> {
        let cache = config
            .cache_dir
            .as_deref()
            .and_then(|dir| Cache::new(dir, &calls.engine));
        Arc::new_cyclic(|this| Loader {
            calls,
            linker,
            cache,
            probes: Arc::new(Semaphore::new(probe_units)),
            failed: StdMutex::default(),
            loading: StdMutex::default(),
            passed_over: StdMutex::default(),
            events,
            control: Mutex::new(Control {
                config: config.clone(),
                bundled,
                watcher: None,
                watched: Vec::new(),
                missing: Vec::new(),
                links: Vec::new(),
                watch_generation: 0,
            }),
            shut_down: AtomicBool::new(false),
            compile_limit: StdMutex::new(config.compile_timeout),
            compile_refused: StdMutex::default(),
            this: this.clone(),
        })
    }

    /// Loads every plugin of the config, and starts the watcher when `config.watch`.
    pub(super) async fn load(&self) {
        let mut control = self.control.lock().await;
        self.apply(&mut control, false).await;
        self.rewatch(&mut control);
    }

    /// Applies a changed configuration: loads, unloads or reloads only what changed.
    pub(super) async fn reconfigure(&self, config: &PluginsConfig) {
        let mut control = self.control.lock().await;
        let wants_fuel = config.limits.fuel.is_some()
            || config.plugins.values().any(|p| p.limits.fuel.is_some());
        if wants_fuel && !self.calls.fuel_enabled {
            tracing::warn!(
                "a fuel limit was added: it takes effect after a restart (time and memory limits apply now)"
            );
        }
        // Files may have changed while nobody watched them: read them all again.
        let reread = config.watch && !control.config.watch;
        *lock(&self.compile_limit) = config.compile_timeout;
        self.calls.memory.set_total(config.total_memory);
        control.config = config.clone();
        self.apply(&mut control, reread).await;
        self.rewatch(&mut control);
    }

    /// Records why `name` could not be loaded, for the log, the event log and status.
    fn load_failed(&self, name: String, path: Option<PathBuf>, error: LoadError) {
        tracing::error!(plugin = %name, "{error}");
        self.record_failure(name, path, error);
    }

    /// [`Self::load_failed`] without the log line, for a caller that logs it its own way.
    fn record_failure(&self, name: String, path: Option<PathBuf>, error: LoadError) {
        let reason = error.to_string();
        let failure = FailedPlugin {
            name: name.clone(),
            path,
            error,
            at: SystemTime::now(),
        };
        lock(&self.failed).insert(name.clone(), failure);
        self.emit(PluginEvent::LoadFailed { name, reason });
    }

    /// A configured file that is not there (yet): not an error, since it is loaded when it
    /// appears (a first build), but what status shows meanwhile.
    pub(super) fn waiting_for_file(&self, name: &str, path: &Path) {
        let what = if path.exists() {
            "not a regular file"
        } else {
            "file not found"
        };
        let error = LoadError {
            what: format!("plugin `{name}` ({})", path.display()),
            why: what.to_string(),
        };
        tracing::warn!(plugin = %name, "{error}; waiting for it");
        self.record_failure(name.to_string(), Some(path.to_path_buf()), error);
    }

    /// Warns about each file of the plugin folder that is not loaded (see
    /// [`Desired::passed_over`]) when it starts being passed over, not at every look.
    pub(super) fn warn_passed_over(&self, now: Vec<(PathBuf, String)>) {
        let mut said = lock(&self.passed_over);
        for (file, why) in &now {
            if !said.contains(file) {
                // `{:?}`: a name may hold a line break, and a log message is one line.
                tracing::warn!("the plugin folder's {file:?} is not loaded: {why}");
            }
        }
        *said = now.into_iter().map(|(file, _)| file).collect();
    }

    pub(super) fn forget_failure(&self, name: &str) {
        lock(&self.failed).remove(name);
    }

    /// Brings the loaded set in line with `control.config`; `reread` hashes every file again
    /// (after a time unwatched) instead of trusting an unchanged path.
    pub(super) async fn apply(&self, control: &mut Control, reread: bool) {
        let Desired {
            plugins: desired,
            passed_over,
        } = desired_plugins(&control.config, control.bundled);
        self.warn_passed_over(passed_over);
        let current = self.calls.slots.load_full();
        lock(&self.failed).retain(|name, _| desired.contains_key(name));
        let bundled_middleware = crate::bundled::BUNDLED_MIDDLEWARE;
        for (name, uses) in missing_bundled(&control.config, bundled_middleware) {
            let error = LoadError {
                what: format!("middleware `{name}` (bundled `{uses}`)"),
                why: format!(
                    "this build bundles no middleware `{uses}` (it bundles: {})",
                    bundled_names(bundled_middleware)
                ),
            };
            self.load_failed(name, None, error);
        }
        for (name, entry) in &control.config.plugins {
            if let (Some(path), false, false) =
                (&entry.path, entry.disabled, desired.contains_key(name))
            {
                self.waiting_for_file(name, path);
            }
        }
        for name in current.keys() {
            if !desired.contains_key(name) {
                self.unload(name);
            }
        }
        // Big runtimes after the others: a compile spreads over every core (rayon), and a
        // small plugin's compile queued behind CPython's waited for all of it. From the
        // cache, the wait is short.
        let (big, small): (Vec<_>, Vec<_>) = desired
            .into_iter()
            .partition(|(_, (source, _))| source.len().is_some_and(pool::is_big_runtime));
        for wave in [small, big] {
            let mut jobs = tokio::task::JoinSet::new();
            for (name, (source, settings)) in wave {
                let Some(host) = self.this.upgrade() else {
                    return;
                };
                let existing = current.get(&name).map(|slot| slot.current.load_full());
                jobs.spawn(async move {
                    host.update(name, source, Arc::new(settings), existing, reread)
                        .await
                });
            }
            while jobs.join_next().await.is_some() {}
        }
        crate::memory::give_back();
    }

    /// Installs a new version that keeps the running code (only the settings or the
    /// file's place changed), announced as a reload that compiled nothing.
    pub(super) fn reuse_code(
        &self,
        name: String,
        name_arc: Arc<str>,
        source: Source,
        old: &Version,
        settings: Arc<Settings>,
        started: Instant,
    ) {
        // A config that moved the name between [plugins] and [[middleware]]: the code is
        // what it was, and may not be what the entry wants now.
        if let Some(why) = kind_mismatch(old.code.pre.kind(), &settings) {
            let reason = format!(
                "{} `{name}` ({}): {why}",
                kind_word(&settings),
                source.describe()
            );
            tracing::error!(plugin = %name, "{reason}");
            if let Some(slot) = self.calls.slots.load().get(&name) {
                slot.stats.set_reload_error(Some(reason.clone()));
            }
            self.emit(PluginEvent::ReloadFailed { name, reason });
            return;
        }
        let version = Version::new(name_arc, source, old.code.clone(), settings);
        let tools = version.tools.len();
        self.install(&name, version);
        self.emit(PluginEvent::Reloaded {
            name,
            tools,
            compile_ms: None,
            total_ms: ms(started),
            new_code: false,
        });
    }

    /// Loads `name` from `source`, or reloads it if `existing`: reuses the
    /// compiled code when only settings changed, does nothing when neither
    /// changed (`force_read` re-reads and re-hashes the file even then, as the
    /// watcher does).
    pub(super) async fn update(
        &self,
        name: String,
        source: Source,
        settings: Arc<Settings>,
        existing: Option<Arc<Version>>,
        force_read: bool,
    ) {
        let started = Instant::now();
        let name_arc: Arc<str> = Arc::from(name.as_str());
        if let Some(old) = &existing
            && old.source.same_as(&source)
            && !force_read
        {
            if old.settings.same_as(&settings) {
                return;
            }
            self.reuse_code(name, name_arc, source, old, settings, started);
            return;
        }
        // Shown as loading until it is installed or has failed (the end of this call).
        let _loading = existing
            .is_none()
            .then(|| Loading::mark(&self.loading, &name, source.path()));
        let loaded = self
            .load_code(&name_arc, &source, &settings, existing.as_deref())
            .await;
        match loaded {
            Ok(None) => {
                // Same bytes as the running version: a refused version in between is moot,
                // and whoever saw it refused hears that the plugin is healthy again.
                let recovered = self
                    .calls
                    .slots
                    .load()
                    .get(&name)
                    .is_some_and(|slot| slot.stats.set_reload_error(None));
                if recovered {
                    self.emit(PluginEvent::Recovered { name: name.clone() });
                }
                if let Some(old) = existing
                    .filter(|old| !old.settings.same_as(&settings) || !old.source.same_as(&source))
                {
                    self.reuse_code(name, name_arc, source, &old, settings, started);
                }
            }
            Ok(Some((code, compile_ms))) => {
                let version = Version::new(name_arc, source, code, settings);
                let tools = version.tools.len();
                let total_ms = ms(started);
                tracing::info!(plugin = %name, tools, total_ms, "plugin {name} ready in {total_ms} ms");
                if self.install(&name, version) {
                    self.emit(PluginEvent::Recovered { name: name.clone() });
                }
                self.emit(match existing {
                    Some(_) => PluginEvent::Reloaded {
                        name,
                        tools,
                        compile_ms,
                        total_ms,
                        new_code: true,
                    },
                    None => PluginEvent::Loaded {
                        name,
                        tools,
                        compile_ms,
                        total_ms,
                    },
                });
            }
            Err(error) => {
                // A reason may quote what the plugin said (a tool name, a schema): the log,
                // the status and the events keep its start.
                let error = LoadError {
                    why: cut_error(error.why),
                    ..error
                };
                match self
                    .calls
                    .slots
                    .load()
                    .get(&name)
                    .filter(|_| existing.is_some())
                {
                    Some(slot) => {
                        let reason = error.to_string();
                        tracing::error!(plugin = %name, "{reason}");
                        slot.stats.set_reload_error(Some(reason.clone()));
                        self.emit(PluginEvent::ReloadFailed { name, reason });
                    }
                    None => self.load_failed(name, source.path().map(Path::to_path_buf), error),
                }
            }
        }
    }

    /// Reads, compiles (or loads from the cache) and validates a plugin's code.
    /// `Ok(None)`: the bytes are those of `existing`.
    pub(super) async fn load_code(
        &self,
        name: &Arc<str>,
        source: &Source,
        settings: &Arc<Settings>,
        existing: Option<&Version>,
    ) -> Result<Option<(Arc<Code>, Option<u64>)>, LoadError> {
        self.load_code_inner(name, source, settings, existing)
            .await
            .map_err(|why| LoadError {
                what: format!("{} `{name}` ({})", kind_word(settings), source.describe()),
                why,
            })
    }

    /// [`Self::load_code`]; `Err` is why, without the plugin's name and source.
    async fn load_code_inner(
        &self,
        name: &Arc<str>,
        source: &Source,
        settings: &Arc<Settings>,
        existing: Option<&Version>,
    ) -> Result<Option<(Arc<Code>, Option<u64>)>, String> {
        let bytes: Arc<[u8]> = match source {
            Source::File(path) => {
                let size = tokio::fs::metadata(path)
                    .await
                    .map_err(|e| format!("cannot read the file: {e}"))?
                    .len();
                if size > MAX_COMPONENT_BYTES {
                    return Err(format!(
                        "is {} MiB; a plugin may be at most {} MiB",
                        size >> 20,
                        MAX_COMPONENT_BYTES >> 20
                    ));
                }
                tokio::fs::read(path)
                    .await
                    .map_err(|e| format!("cannot read the file: {e}"))?
                    .into()
            }
            Source::Bundled(bytes) => Arc::from(*bytes),
        };
        check_header(&bytes).map_err(|e| e.to_string())?;
        let big_runtime = pool::is_big_runtime(bytes.len());
        let digest = cache::hex(&Sha256::digest(&bytes));
        if let Some(pin) = settings.sha256.as_deref()
            && pin != digest
        {
            return Err(format!(
                "its sha256 is {digest}, not the {pin} its config pins (sha256 in \
                 [plugins.{name}]); not loaded, so its grants go to no other code"
            ));
        }
        if existing.is_some_and(|old| old.code.digest == digest) {
            return Ok(None);
        }
        let compile_limit = *lock(&self.compile_limit);
        let refused = || {
            format!(
                "compiling it took longer than {} (compile_timeout in [plugins]); \
                 refused until the file changes",
                humantime::format_duration(compile_limit)
            )
        };
        if lock(&self.compile_refused).contains(&digest) {
            return Err(refused());
        }

        let engine = self.calls.engine.clone();
        let host = self
            .this
            .upgrade()
            .ok_or_else(|| "the host is shutting down".to_string())?;
        let digest2 = digest.clone();
        let label = name.clone();
        let compiling = tokio::task::spawn_blocking(move || {
            let cache = host.cache.as_ref();
            if let Some(component) = cache.and_then(|c| c.load(&engine, &digest2)) {
                return Ok((component, None));
            }
            tracing::info!(plugin = %label, "compiling plugin {label} ({} KB)…", bytes.len().div_ceil(1024));
            let started = Instant::now();
            let component = match cache {
                Some(cache) => {
                    let compiled = engine.precompile_component(&bytes)?;
                    cache.store(&digest2, &compiled);
                    // SAFETY: `compiled` was produced just now by this engine.
                    unsafe { Component::deserialize(&engine, &compiled)? }
                }
                None => Component::new(&engine, &bytes)?,
            };
            Ok::<_, wasmtime::Error>((component, Some(ms(started))))
        });
        // A compile cannot be stopped: past the limit it is left to finish on its thread
        // and its result dropped, while reloads and config edits go on.
        let Ok(compiled) = tokio::time::timeout(compile_limit, compiling).await else {
            lock(&self.compile_refused).insert(digest);
            return Err(refused());
        };
        let (component, compile_ms) = compiled
            .map_err(|e| format!("compilation panicked: {e}"))?
            .map_err(|e| format!("is not a valid component: {}", limits::chain(&e)))?;

        let units = engine::slot_units(&component);
        let pre = self.linker.instantiate_pre(&component).map_err(|e| {
            format!(
                "imports something the host does not provide: {}",
                limits::chain(&e)
            )
        })?;
        let pre = Pre::new(pre).map_err(|(as_tools, as_middleware)| match settings.middleware {
            true => format!(
                "does not implement the world wasmgate:middleware/middleware@0.1.0: {as_middleware}"
            ),
            false => {
                format!("does not implement the world wasmgate:plugin/plugin@0.1.0: {as_tools}")
            }
        })?;
        if let Some(why) = kind_mismatch(pre.kind(), settings) {
            return Err(why);
        }

        let probe = Arc::new(Version::new(
            name.clone(),
            source.clone(),
            Arc::new(Code {
                digest: digest.clone(),
                pre: pre.clone(),
                interest: None,
                listing: None,
                tools: Vec::new(),
                output_schemas: HashMap::new(),
                big_runtime: false,
                units,
            }),
            settings.clone(),
        ));
        let time = TimeLimit {
            limit: settings.limits.timeout.min(LIST_TOOLS_TIMEOUT),
            since: Instant::now(),
        };
        let (tools, output_schemas, interest, listing) = match pre.kind() {
            PluginKind::Tools => {
                let (tools, schemas, listing) = self.probe_tools(probe, time).await?;
                (tools, schemas, None, listing.map(Arc::new))
            }
            PluginKind::Middleware => {
                let interest = self.probe_middleware(probe, time).await?;
                (Vec::new(), HashMap::new(), Some(Arc::new(interest)), None)
            }
        };
        Ok(Some((
            Arc::new(Code {
                digest,
                pre,
                interest,
                listing,
                tools,
                output_schemas,
                big_runtime,
                units,
            }),
            compile_ms,
        )))
    }

    /// Runs `f` on a fresh instance of `probe`, with probe slots of its own: a reload
    /// validates even while calls hold every other slot.
    async fn probe<R: Send + 'static>(
        &self,
        probe: Arc<Version>,
        time: TimeLimit,
        f: impl for<'a> FnOnce(
            &'a mut wasmtime::Store<StoreState>,
            &'a Bound,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>,
        > + Send
        + 'static,
    ) -> Result<R, String> {
        let probes = Instance::Make(self.probes.clone());
        (self.calls)
            .run(probe, time, host_impl::Sinks::default(), probes, false, f)
            .await
    }

    /// A tool plugin's tools, from `list-tools`, checked: their number, size, names and
    /// schemas; with the output schemas compiled. A 0.2 plugin's other lists too.
    pub(super) async fn probe_tools(
        &self,
        probe: Arc<Version>,
        time: TimeLimit,
    ) -> Result<ToolListing, String> {
        if probe.code.pre.is_v2() {
            let raw = self
                .probe(probe, time, |store, bound| {
                    Box::pin(async move { listing::read(store, bound.v2()?).await })
                })
                .await
                .map_err(|e| format!("listing failed: {e}"))?;
            let (infos, listing) = raw.check()?;
            let (tools, schemas) = check_tools(infos).await?;
            return Ok((tools, schemas, Some(listing)));
        }
        let infos = self
            .probe(probe, time, |store, bound| {
                Box::pin(async move {
                    bound
                        .tools()?
                        .wasmgate_plugin_tool()
                        .call_list_tools(store)
                        .await
                })
            })
            .await
            .map_err(|e| format!("list-tools failed: {e}"))?;
        let (tools, schemas) = check_tools(infos).await?;
        Ok((tools, schemas, None))
    }

    /// A middleware's interest, from `describe`, bounded.
    async fn probe_middleware(
        &self,
        probe: Arc<Version>,
        time: TimeLimit,
    ) -> Result<Interest, String> {
        let interest = self
            .probe(probe, time, |store, bound| {
                Box::pin(async move {
                    bound
                        .middleware()?
                        .wasmgate_middleware_hooks()
                        .call_describe(store)
                        .await
                })
            })
            .await
            .map_err(|e| format!("describe failed: {e}"))?;
        hooks::interest_from(interest)
    }

    /// Serves `version` from now on; `true` when it replaces a version whose last reload
    /// had been refused.
    pub(super) fn install(&self, name: &str, version: Version) -> bool {
        let version = Arc::new(version);
        self.forget_failure(name);
        if let Some(slot) = self.calls.slots.load().get(name) {
            slot.set_turn_limit(turn_limit(&version));
            // Calls in flight keep the old version; its spare instances go now.
            self.calls.discard(&slot.current.swap(version));
            return slot.stats.set_reload_error(None);
        }
        self.calls.slots.rcu(|slots| {
            let mut slots = BTreeMap::clone(slots);
            slots.insert(name.to_string(), Arc::new(Slot::new(version.clone())));
            slots
        });
        false
    }

    pub(super) fn unload(&self, name: &str) {
        self.forget_failure(name);
        let mut removed = None;
        self.calls.slots.rcu(|slots| {
            let mut slots = BTreeMap::clone(slots);
            removed = slots.remove(name);
            slots
        });
        if let Some(slot) = removed {
            self.calls.discard(&slot.current.load());
            tracing::info!(plugin = %name, "plugin {name} unloaded");
            self.emit(PluginEvent::Unloaded {
                name: name.to_string(),
            });
        }
    }

    pub(super) fn emit(&self, event: PluginEvent) {
        let _ = self.events.send(event);
    }
}

/// The plugin files of `config` that cannot be plugins, by their first bytes (not a
/// component, not WebAssembly, unreadable): `wasmgate check` reports them. Whether a
/// component exports the plugin world takes a compile, which `wasmgate tools` does.
pub fn check_plugin_files(config: &PluginsConfig) -> Vec<(String, PathBuf, String)> {
    desired_plugins(config, &[])
        .plugins
        .into_iter()
        .filter_map(|(name, (source, _))| {
            let path = source.path()?.to_path_buf();
            use std::io::Read;
            let mut head = Vec::with_capacity(8);
            let read = std::fs::File::open(&path).and_then(|f| f.take(8).read_to_end(&mut head));
            let problem = match read {
                Ok(_) => check_header(&head).err()?,
                Err(e) => format!("cannot be read: {e}"),
            };
            Some((name, path, problem))
        })
        .collect()
}

/// Why code of `kind` cannot serve an entry with `settings`, if it cannot.
fn kind_mismatch(kind: PluginKind, settings: &Settings) -> Option<String> {
    match (kind, settings.middleware) {
        (PluginKind::Middleware, false) => Some(format!(
            "is a middleware (exports {HOOKS_EXPORT}); use it in a [[middleware]] entry"
        )),
        (PluginKind::Tools, true) => Some(format!(
            "is a tool plugin, not a middleware (it exports {TOOL_EXPORT}, not \
             {HOOKS_EXPORT}); serve it under [plugins]"
        )),
        _ => None,
    }
}

/// What an entry is called in messages: "plugin" or "middleware".
fn kind_word(settings: &Settings) -> &'static str {
    match settings.middleware {
        true => "middleware",
        false => "plugin",
    }
}

/// The names of a bundle, for a message: "a, b", or "none".
fn bundled_names(bundle: &[(&str, &[u8])]) -> String {
    match bundle.is_empty() {
        true => "none".into(),
        false => (bundle.iter().map(|(name, _)| *name))
            .collect::<Vec<_>>()
            .join(", "),
    }
}

/// Refuses what is not a component before wasmtime sees it, with a reason a
/// plugin author can act on.
pub fn check_header(bytes: &[u8]) -> Result<(), String> {
    if bytes.len() < 8 || &bytes[..4] != b"\0asm" {
        return Err("is not a WebAssembly file".into());
    }
    // A core module has layer 0 (version 1); a component layer 1.
    if bytes[6..8] == [0, 0] {
        return Err(
            "is a core WebAssembly module, not a component: build it for wasm32-wasip2 \
                    (or wrap it with `wasm-tools component new`)"
                .into(),
        );
    }
    Ok(())
}

/// A plugin's entry among those loading, taken out when dropped.
pub(super) struct Loading<'a> {
    pub(super) loading: &'a StdMutex<BTreeMap<String, Option<PathBuf>>>,
    pub(super) name: String,
}

impl<'a> Loading<'a> {
    pub(super) fn mark(
        loading: &'a StdMutex<BTreeMap<String, Option<PathBuf>>>,
        name: &str,
        path: Option<&Path>,
    ) -> Loading<'a> {
        lock(loading).insert(name.to_string(), path.map(Path::to_path_buf));
        Loading {
            loading,
            name: name.to_string(),
        }
    }
}

impl Drop for Loading<'_> {
    fn drop(&mut self) {
        lock(self.loading).remove(&self.name);
    }
}
