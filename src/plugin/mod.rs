//! The WebAssembly plugin host: loads WASI components that implement the
//! `wasmgate:plugin` world, lists their tools, runs every call in a fresh,
//! sandboxed and limited instance, and hot-reloads plugins whose files change.
//!
//! One `Engine` and one `Linker` for the process; per plugin version one
//! compiled `Component` and `InstancePre`; per call one `Store`.

mod bindings;
mod cache;
mod convert;
mod engine;
mod grants;
mod host_impl;
mod limits;
mod outbound;
mod pool;
mod sandbox;
mod watch;
mod workers;

#[cfg(test)]
mod tests;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex, Weak};
use std::task::Poll;
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use serde_json::Value;
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, Semaphore, mpsc};
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use crate::config::{PluginConfig, PluginLimits, PluginsConfig, ToolFilter};
use bindings::{CallError, PluginPre};
use cache::Cache;
use grants::GrantedDir;
use sandbox::StoreState;

/// Receives a call's `host.log` lines: `(MCP level, message)`.
pub type LogSink = Arc<dyn Fn(&'static str, &str) + Send + Sync>;

/// Receives a call's progress reports: `(progress, total, message)`.
pub type ProgressSink = Arc<dyn Fn(f64, Option<f64>, Option<String>) + Send + Sync>;

/// A loaded plugin, as the gateway's catalog and status see it.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    pub name: String,
    pub namespace: String,
    /// The component file; `None` for a plugin bundled into the binary.
    pub path: Option<PathBuf>,
    /// MCP `Tool` objects with unprefixed names, after the tool filter.
    pub tools: Vec<Value>,
    /// sha256 of the component bytes, hex.
    pub digest: String,
    pub loaded_at: SystemTime,
    pub limits: PluginLimits,
    /// Calls since the plugin was first loaded (reloads keep counting).
    pub calls: u64,
    /// Calls that trapped or hit a limit (a tool's own `failed` error is a result).
    pub failures: u64,
    /// The last of those failures.
    pub last_error: Option<String>,
    /// Calls it runs at once; more wait for a turn (32; 8 with an interpreter inside).
    pub max_calls: usize,
    /// Why the last new version was refused, while this one keeps serving; cleared
    /// when a new version loads.
    pub reload_error: Option<String>,
}

/// A plugin that is configured or present but could not be loaded, and serves nothing.
#[derive(Debug, Clone)]
pub struct FailedPlugin {
    pub name: String,
    pub path: Option<PathBuf>,
    pub reason: String,
    pub at: SystemTime,
}

impl FailedPlugin {
    /// "plugin `NAME` (SOURCE) could not be loaded: WHY", the reason's end cut at `max`
    /// bytes. A reason starts with the plugin and its source (`what` in `load_code`, or
    /// a missing file's path), which this says once.
    pub fn not_loaded(&self, max: usize) -> String {
        let named = format!("plugin `{}`", self.name);
        let (what, why) = self
            .reason
            .strip_prefix(&named)
            .and_then(|rest| rest.split_once("): "))
            .filter(|(source, _)| source.starts_with(" ("))
            .map_or((named.clone(), self.reason.as_str()), |(source, why)| {
                (format!("{named}{source})"), why)
            });
        format!(
            "{what} could not be loaded: {}",
            crate::protocol::cut_short(why, max)
        )
    }
}

/// Where a call's instance comes from: the ready pool, or made for it with a permit
/// from these slots.
enum Instance {
    Ready(pool::Ready),
    Make(Arc<Semaphore>),
}

/// Per-call context from the gateway.
#[derive(Clone)]
pub struct CallContext {
    /// The gateway's timeout for this call; the plugin's own limit bounds it too.
    pub timeout: Duration,
    pub progress: Option<ProgressSink>,
    pub log: Option<LogSink>,
    pub trace_id: String,
}

/// The plugin's words in an unknown-tool error, unless they only repeat the tool's name.
fn said_of(said: &Option<String>, tool: &str) -> String {
    match said {
        Some(words) if !words.is_empty() && words != tool => {
            format!(": it answered unknown-tool({words:?})")
        }
        _ => String::new(),
    }
}

/// Why a call did not run. Failures while it ran are tool results with `isError`.
#[derive(Debug, thiserror::Error)]
pub enum PluginCallError {
    #[error("no plugin named `{0}`")]
    NotFound(String),
    #[error("plugin `{plugin}` has no tool `{tool}`{}", said_of(.said, .tool))]
    UnknownTool {
        plugin: String,
        tool: String,
        /// What the plugin's own `unknown-tool` error said, when it was the plugin's.
        said: Option<String>,
    },
    #[error("invalid arguments for tool `{tool}` of plugin `{plugin}`: {message}")]
    InvalidArguments {
        plugin: String,
        tool: String,
        message: String,
    },
}

/// Something that changed the set of plugins or their tools: the gateway
/// rebuilds its catalog and tells clients `tools/list_changed`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginEvent {
    /// `compile_ms` is `None` when the compiled code came from the cache (or
    /// was reused because only the plugin's settings changed).
    Loaded {
        name: String,
        tools: usize,
        compile_ms: Option<u64>,
        total_ms: u64,
    },
    Reloaded {
        name: String,
        tools: usize,
        compile_ms: Option<u64>,
        total_ms: u64,
        /// `false` when only settings (grants, limits, filter) changed: clients hear of
        /// new code even when the tool list reads the same, not of a new limit.
        new_code: bool,
    },
    /// A new version was refused; the previous one (if any) keeps serving.
    ReloadFailed {
        name: String,
        reason: String,
    },
    /// A plugin that was not loaded could not be loaded (start, a new file, a config change).
    LoadFailed {
        name: String,
        reason: String,
    },
    Unloaded {
        name: String,
    },
}

/// Tools one plugin may list: clients handle a few hundred tools in all, and a catalog
/// of a hundred thousand makes every list page slow.
const MAX_TOOLS: usize = 1000;

/// How long `list-tools` may take when a version is validated, at most.
const LIST_TOOLS_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest component file read: CPython's is ~40 MB.
const MAX_COMPONENT_BYTES: u64 = 256 << 20;

/// Instances kept free of calls so that loads and reloads can always validate.
const RESERVED_INSTANCES: u32 = 4;

/// Permits of the instance semaphores: [`engine::SLOT_UNITS`] per instance. An instance
/// takes the units its memories need ([`Code::units`]), so that a component with several
/// memories cannot leave other plugins' calls to fail with a pool error.
const CALL_UNITS: usize =
    ((engine::MAX_INSTANCES - RESERVED_INSTANCES) * engine::SLOT_UNITS) as usize;
const PROBE_UNITS: usize = (RESERVED_INSTANCES * engine::SLOT_UNITS) as usize;

/// Units the ready pools leave to calls: with many plugins in use, their ready
/// instances could otherwise hold every slot while a call waits for one.
const READY_HEADROOM: usize = (engine::MAX_INSTANCES / 2 * engine::SLOT_UNITS) as usize;

/// Extra time the async timeout grants over the epoch deadline, which normally
/// fires first; the async timeout catches guests blocked in host I/O.
const TIMEOUT_GRACE: Duration = Duration::from_millis(50);

/// The configuration-derived part of a plugin: everything but its code.
pub struct Settings {
    pub namespace: String,
    pub limits: PluginLimits,
    /// Opened when the settings are made, and shared by every instance of the version.
    pub allow_dirs: Vec<GrantedDir>,
    pub allow_env: Vec<String>,
    pub allow_hosts: Vec<String>,
    pub allow_private_addresses: bool,
    /// The sha256 the plugin's code must have to be loaded with these settings.
    pub sha256: Option<String>,
    pub config: Arc<BTreeMap<String, String>>,
    pub tool_filter: ToolFilter,
}

impl Settings {
    fn from_config(name: &str, entry: Option<&PluginConfig>, defaults: PluginLimits) -> Settings {
        match entry {
            Some(c) => Settings {
                namespace: c.namespace.clone(),
                limits: c.limits,
                allow_dirs: c.allow_dirs.iter().map(GrantedDir::open).collect(),
                allow_env: c.allow_env.clone(),
                allow_hosts: c.allow_hosts.clone(),
                allow_private_addresses: c.allow_private_addresses,
                sha256: c.sha256.clone(),
                config: Arc::new(c.config.clone()),
                tool_filter: c.tool_filter.clone(),
            },
            None => Settings {
                namespace: default_namespace(name),
                limits: defaults,
                allow_dirs: Vec::new(),
                allow_env: Vec::new(),
                allow_hosts: Vec::new(),
                allow_private_addresses: false,
                sha256: None,
                config: Arc::default(),
                tool_filter: ToolFilter::default(),
            },
        }
    }

    fn same_as(&self, other: &Settings) -> bool {
        self.namespace == other.namespace
            && self.limits == other.limits
            && self.allow_dirs.len() == other.allow_dirs.len()
            && (self.allow_dirs.iter())
                .zip(&other.allow_dirs)
                .all(|(a, b)| a.grant == b.grant)
            && self.allow_env == other.allow_env
            && self.allow_hosts == other.allow_hosts
            && self.allow_private_addresses == other.allow_private_addresses
            && self.sha256 == other.sha256
            && self.config == other.config
            && self.tool_filter.same_as(&other.tool_filter)
    }
}

/// Where a plugin's bytes come from.
#[derive(Clone)]
enum Source {
    File(PathBuf),
    Bundled(&'static [u8]),
}

impl Source {
    fn path(&self) -> Option<&Path> {
        match self {
            Source::File(path) => Some(path),
            Source::Bundled(_) => None,
        }
    }

    /// Its size in bytes, when it can be read.
    fn len(&self) -> Option<usize> {
        match self {
            Source::File(path) => std::fs::metadata(path).ok().map(|m| m.len() as usize),
            Source::Bundled(bytes) => Some(bytes.len()),
        }
    }

    fn same_as(&self, other: &Source) -> bool {
        match (self, other) {
            (Source::File(a), Source::File(b)) => a == b,
            (Source::Bundled(a), Source::Bundled(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }

    fn describe(&self) -> String {
        match self {
            Source::File(path) => path.display().to_string(),
            Source::Bundled(_) => "bundled".to_string(),
        }
    }
}

/// The compiled code of one plugin version, shared by versions that differ
/// only in settings.
struct Code {
    digest: String,
    pre: PluginPre<StoreState>,
    /// Every tool the plugin lists, validated, unfiltered.
    tools: Vec<Value>,
    /// The output schemas of the tools that declare one, by tool name.
    output_schemas: HashMap<String, Arc<convert::OutputSchema>>,
    /// An interpreter inside (see `pool::BIG_RUNTIME`): each ready instance gets a
    /// `list-tools` call first, and a call starts inline only on a ready instance.
    big_runtime: bool,
    /// Permits of the instance semaphores one instance takes: its memories' pool slots.
    units: u32,
}

/// One loaded version of a plugin. Calls hold an `Arc` of the version they
/// started with, so a reload never disturbs them.
struct Version {
    name: Arc<str>,
    source: Source,
    code: Arc<Code>,
    settings: Arc<Settings>,
    /// The tools after the filter.
    tools: Vec<Value>,
    loaded_at: SystemTime,
    pool: pool::ReadyPool,
    /// When this version's calls last proved to compute on the I/O thread (see `polled_long`).
    went_async: StdMutex<Option<Instant>>,
    /// Inline first polls in a row that ran long.
    long_polls: AtomicU32,
}

/// How long a version whose call left the I/O thread starts its calls on the plugin threads.
const ASYNC_MEMORY: Duration = Duration::from_secs(1);

impl Version {
    fn new(name: Arc<str>, source: Source, code: Arc<Code>, settings: Arc<Settings>) -> Version {
        let tools = code
            .tools
            .iter()
            .filter(|t| {
                t["name"]
                    .as_str()
                    .is_some_and(|n| settings.tool_filter.allows(n))
            })
            .cloned()
            .collect();
        Version {
            name,
            source,
            settings,
            tools,
            loaded_at: SystemTime::now(),
            pool: pool::ReadyPool::new(code.big_runtime),
            went_async: StdMutex::new(None),
            long_polls: Default::default(),
            code,
        }
    }

    /// Whether a call starts on the calling (I/O) thread. A call that finishes within its
    /// first poll (echo: a few µs) skips two thread hops that cost more than the call; one
    /// that does not (a guest computing past an epoch tick, or waiting for host I/O) moves
    /// to the plugin threads right then, and this version's calls start there for a while.
    /// A big runtime's instantiation takes milliseconds: without a ready instance, its call
    /// starts on the plugin threads.
    fn may_run_inline(&self, ready: bool) -> bool {
        let recently_async = lock(&self.went_async).is_some_and(|at| at.elapsed() < ASYNC_MEMORY);
        !recently_async && (ready || !self.code.big_runtime)
    }

    /// A call ended within its first poll on the I/O thread.
    fn ended_inline(&self) {
        if self.long_polls.load(Ordering::Relaxed) != 0 {
            self.long_polls.store(0, Ordering::Relaxed);
        }
    }

    /// A call's first poll on the I/O thread ran long and the call went on elsewhere. Two
    /// such with no call ending inline between them (one alone may be the I/O thread
    /// losing its core for a while) send this version's calls to the plugin threads.
    fn polled_long(&self) {
        if self.long_polls.fetch_add(1, Ordering::Relaxed) + 1 >= 2 {
            self.long_polls.store(0, Ordering::Relaxed);
            *lock(&self.went_async) = Some(Instant::now());
        }
    }

    fn has_tool(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t["name"] == tool)
    }
}

#[derive(Default)]
struct Stats {
    calls: AtomicU64,
    failures: AtomicU64,
    last_error: StdMutex<Option<String>>,
    reload_error: StdMutex<Option<String>>,
}

impl Stats {
    fn failed(&self, reason: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        *lock(&self.last_error) = Some(reason.to_string());
    }

    fn set_reload_error(&self, reason: Option<String>) {
        *lock(&self.reload_error) = reason;
    }
}

/// A plugin name's place in the catalog: the current version, swapped on reload.
struct Slot {
    current: ArcSwap<Version>,
    stats: Stats,
    /// Turns for calls: `turn_limit` at once (see [`turn_limit`]), whatever the version.
    turns: Arc<Semaphore>,
    turn_limit: AtomicUsize,
}

impl Slot {
    fn new(version: Arc<Version>) -> Slot {
        let limit = turn_limit(&version.code);
        Slot {
            current: ArcSwap::new(version),
            stats: Stats::default(),
            turns: Arc::new(Semaphore::new(limit)),
            turn_limit: AtomicUsize::new(limit),
        }
    }

    /// A new version may have another limit (a Rust plugin rewritten in Python).
    fn set_turn_limit(&self, limit: usize) {
        let old = self.turn_limit.swap(limit, Ordering::Relaxed);
        resize_turns(&self.turns, old, limit);
    }
}

/// Turns from `old` to `new` at once: added, or taken out of use now and, for those calls
/// hold, as they give them back.
fn resize_turns(turns: &Arc<Semaphore>, old: usize, new: usize) {
    if new > old {
        turns.add_permits(new - old);
    } else if old > new {
        let in_use = old - new - turns.forget_permits(old - new);
        if in_use > 0 {
            let turns = turns.clone();
            tokio::spawn(async move {
                if let Ok(taken) = turns.acquire_many_owned(in_use as u32).await {
                    taken.forget();
                }
            });
        }
    }
}

/// A call's time limit, and when its time started to count (waits for a turn or an
/// instance count).
#[derive(Clone, Copy)]
struct TimeLimit {
    limit: Duration,
    since: Instant,
}

/// Calls one plugin runs at once; more wait for a turn, within their time limit. A quarter
/// of the instance budget: a plugin flooded with slow calls leaves instances to the others.
const MAX_CALLS_PER_PLUGIN: usize = (engine::MAX_INSTANCES / 4) as usize;

/// The same for a plugin with an interpreter inside (`pool::BIG_RUNTIME`). Its calls take
/// milliseconds of CPU each, so more at once would not end sooner on a few cores; and each
/// instance slot it has used keeps up to 16 MiB resident for good (see `engine`), so this
/// bounds what a burst leaves behind: a Python plugin after 32 calls at once held ~800 MiB.
const MAX_CALLS_PER_BIG_PLUGIN: usize = 8;

fn turn_limit(code: &Code) -> usize {
    if code.big_runtime {
        MAX_CALLS_PER_BIG_PLUGIN
    } else {
        MAX_CALLS_PER_PLUGIN
    }
}

/// What load, reload and unload are serialised on.
struct Control {
    config: PluginsConfig,
    bundled: &'static [(&'static str, &'static [u8])],
    watcher: Option<notify::RecommendedWatcher>,
    watched: Vec<PathBuf>,
    /// Watched folders that did not exist when last looked at (polled for): files gone
    /// from them are not news.
    missing: Vec<PathBuf>,
    /// Plugin files that are symlinks, as (where the link ends, the link): a change at
    /// the end of the link is a change of the plugin.
    links: Vec<(PathBuf, PathBuf)>,
    /// Bumped by every new watch, so that a stale poll for missing folders stops.
    watch_generation: u64,
}

pub struct PluginHost {
    engine: Engine,
    linker: Linker<StoreState>,
    fuel_enabled: bool,
    cache: Option<Cache>,
    ticker: engine::Ticker,
    /// Where calls and instance refills run, off the gateway's I/O thread.
    workers: workers::Workers,
    /// The catalog of loaded plugins; replaced whole when one is added or removed.
    slots: ArcSwap<BTreeMap<String, Arc<Slot>>>,
    /// Plugins that could not be loaded, by name, until they load or are gone.
    failed: StdMutex<BTreeMap<String, FailedPlugin>>,
    /// Plugins being read and compiled for their first version, with their files.
    loading: StdMutex<BTreeMap<String, Option<PathBuf>>>,
    /// Files in the plugin folder passed over when last looked, each warned about once.
    passed_over: StdMutex<BTreeSet<PathBuf>>,
    /// Bounds the instances calls keep alive at once to what the pooling allocator holds,
    /// less what `probes` keeps for validating new versions.
    instances: Arc<Semaphore>,
    probes: Arc<Semaphore>,
    events: mpsc::UnboundedSender<PluginEvent>,
    control: Mutex<Control>,
    /// Set by `shutdown`: no watcher is started after it.
    shut_down: AtomicBool,
    /// Keep ready instances (see `pool`); on by default.
    ready_pool: AtomicBool,
    /// `compile_timeout` of the config now.
    compile_limit: StdMutex<Duration>,
    /// Digests of components whose compiling outran the limit: refused until the file
    /// changes, so that each rescan does not start another compile of the same bytes.
    compile_refused: StdMutex<BTreeSet<String>>,
    /// The linear memory of all live instances, against `total_memory`.
    memory: Arc<limits::MemoryBudget>,
    this: Weak<PluginHost>,
}

impl PluginHost {
    /// [`Self::new`], then [`Self::load`].
    pub async fn start(
        config: &PluginsConfig,
        bundled: &'static [(&'static str, &'static [u8])],
        events: mpsc::UnboundedSender<PluginEvent>,
    ) -> anyhow::Result<Arc<PluginHost>> {
        let host = PluginHost::new(config, bundled, events)?;
        host.load().await;
        Ok(host)
    }

    /// Builds the engine and linker; no plugin is loaded yet.
    pub fn new(
        config: &PluginsConfig,
        bundled: &'static [(&'static str, &'static [u8])],
        events: mpsc::UnboundedSender<PluginEvent>,
    ) -> anyhow::Result<Arc<PluginHost>> {
        let fuel_enabled = config.limits.fuel.is_some()
            || config.plugins.values().any(|p| p.limits.fuel.is_some());
        let engine = engine::build(fuel_enabled)?;
        let mut linker = Linker::<StoreState>::new(&engine);
        wasmtime_wasi::p2::add_to_linker_async(&mut linker).map_err(wasm_err)?;
        wasmtime_wasi_http::p2::add_only_http_to_linker_async(&mut linker).map_err(wasm_err)?;
        bindings::wasmgate::plugin::host::add_to_linker::<StoreState, host_impl::HostData>(
            &mut linker,
            |s| &mut s.host,
        )
        .map_err(wasm_err)?;
        let cache = config
            .cache_dir
            .as_deref()
            .and_then(|dir| Cache::new(dir, &engine));
        let ticker = engine::Ticker::start(engine.clone())?;
        let workers = workers::Workers::start()?;
        let host = Arc::new_cyclic(|this| PluginHost {
            engine,
            linker,
            fuel_enabled,
            cache,
            ticker,
            workers,
            slots: ArcSwap::default(),
            failed: StdMutex::default(),
            passed_over: StdMutex::default(),
            loading: StdMutex::default(),
            instances: Arc::new(Semaphore::new(CALL_UNITS)),
            probes: Arc::new(Semaphore::new(PROBE_UNITS)),
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
            ready_pool: AtomicBool::new(true),
            compile_limit: StdMutex::new(config.compile_timeout),
            compile_refused: StdMutex::default(),
            memory: Arc::new(limits::MemoryBudget::new(config.total_memory)),
            this: this.clone(),
        });
        Ok(host)
    }

    /// Loads every plugin of the config (compiling in parallel or from the cache), each
    /// reported as it is ready, and starts the watcher when `config.watch`. A plugin that
    /// fails to load is reported (log and `LoadFailed`), not fatal.
    pub async fn load(&self) {
        let mut control = self.control.lock().await;
        self.apply(&mut control, false).await;
        self.rewatch(&mut control);
    }

    /// Applies a changed configuration: loads, unloads or reloads only what changed.
    pub async fn reconfigure(&self, config: &PluginsConfig) {
        let mut control = self.control.lock().await;
        let wants_fuel = config.limits.fuel.is_some()
            || config.plugins.values().any(|p| p.limits.fuel.is_some());
        if wants_fuel && !self.fuel_enabled {
            tracing::warn!(
                "a fuel limit was added: it takes effect after a restart (time and memory limits apply now)"
            );
        }
        // Files may have changed while nobody watched them: read them all again.
        let reread = config.watch && !control.config.watch;
        *lock(&self.compile_limit) = config.compile_timeout;
        self.memory.set_total(config.total_memory);
        control.config = config.clone();
        self.apply(&mut control, reread).await;
        self.rewatch(&mut control);
    }

    /// The loaded plugins now.
    pub fn plugins(&self) -> Vec<PluginInfo> {
        self.slots
            .load()
            .iter()
            .map(|(name, slot)| {
                let version = slot.current.load();
                PluginInfo {
                    name: name.clone(),
                    namespace: version.settings.namespace.clone(),
                    path: version.source.path().map(Path::to_path_buf),
                    tools: version.tools.clone(),
                    digest: version.code.digest.clone(),
                    loaded_at: version.loaded_at,
                    limits: self.effective(version.settings.limits),
                    calls: slot.stats.calls.load(Ordering::Relaxed),
                    max_calls: slot.turn_limit.load(Ordering::Relaxed),
                    failures: slot.stats.failures.load(Ordering::Relaxed),
                    last_error: read(&slot.stats.last_error),
                    reload_error: read(&slot.stats.reload_error),
                }
            })
            .collect()
    }

    /// The limits a call gets: a fuel limit needs an engine built with fuel metering,
    /// which only a restart gives when the first fuel limit was added by a config reload.
    fn effective(&self, mut limits: PluginLimits) -> PluginLimits {
        if !self.fuel_enabled {
            limits.fuel = None;
        }
        limits
    }

    /// The plugins still being read and compiled for their first version, with their files.
    pub fn loading_plugins(&self) -> Vec<(String, Option<PathBuf>)> {
        read(&self.loading).into_iter().collect()
    }

    /// The plugins that could not be loaded now, with the reason.
    pub fn failed_plugins(&self) -> Vec<FailedPlugin> {
        read(&self.failed).into_values().collect()
    }

    /// Records why `name` could not be loaded, for the log, the event log and status.
    fn load_failed(&self, name: String, path: Option<PathBuf>, reason: String) {
        tracing::error!(plugin = %name, "{reason}");
        self.record_failure(name, path, reason);
    }

    /// [`Self::load_failed`] without the log line, for a caller that logs it its own way.
    fn record_failure(&self, name: String, path: Option<PathBuf>, reason: String) {
        let failure = FailedPlugin {
            name: name.clone(),
            path,
            reason: reason.clone(),
            at: SystemTime::now(),
        };
        lock(&self.failed).insert(name.clone(), failure);
        self.emit(PluginEvent::LoadFailed { name, reason });
    }

    /// A configured file that is not there (yet): not an error, since it is loaded when it
    /// appears (a first build), but what status shows meanwhile.
    fn waiting_for_file(&self, name: &str, path: &Path) {
        let what = if path.exists() {
            "not a regular file"
        } else {
            "file not found"
        };
        let reason = format!("plugin `{name}` ({}): {what}", path.display());
        tracing::warn!(plugin = %name, "{reason}; waiting for it");
        self.record_failure(name.to_string(), Some(path.to_path_buf()), reason);
    }

    /// Warns about each file of the plugin folder that is not loaded (see
    /// [`Desired::passed_over`]) when it starts being passed over, not at every look.
    fn warn_passed_over(&self, now: Vec<(PathBuf, String)>) {
        let mut said = lock(&self.passed_over);
        for (file, why) in &now {
            if !said.contains(file) {
                // `{:?}`: a name may hold a line break, and a log message is one line.
                tracing::warn!("the plugin folder's {file:?} is not loaded: {why}");
            }
        }
        *said = now.into_iter().map(|(file, _)| file).collect();
    }

    fn forget_failure(&self, name: &str) {
        lock(&self.failed).remove(name);
    }

    /// Runs one tool in a fresh instance. Traps, exhausted limits and timeouts
    /// are results with `isError: true` that name the plugin and the limit.
    pub async fn call(
        &self,
        plugin: &str,
        tool: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<convert::Reply, PluginCallError> {
        let slot = self
            .slots
            .load()
            .get(plugin)
            .cloned()
            .ok_or_else(|| PluginCallError::NotFound(plugin.into()))?;
        let version = slot.current.load_full();
        if !version.has_tool(tool) {
            return Err(PluginCallError::UnknownTool {
                plugin: plugin.into(),
                tool: tool.into(),
                said: None,
            });
        }
        slot.stats.calls.fetch_add(1, Ordering::Relaxed);
        let arguments = arguments.to_string();
        let limit = ctx.timeout.min(version.settings.limits.timeout);
        let started = Instant::now();
        // The wait for a turn counts against the call's time; no timer when there is one.
        let turn = match slot.turns.clone().try_acquire_owned() {
            Ok(turn) => Ok(turn),
            Err(_) => tokio::time::timeout(limit, slot.turns.clone().acquire_owned())
                .await
                .map_err(|_| ())
                .and_then(|t| t.map_err(|_| ())),
        };
        let Ok(turn) = turn else {
            let turns = slot.turn_limit.load(Ordering::Relaxed);
            let reason = limits::no_turn_message(plugin, limit, turns);
            tracing::warn!(plugin, tool, trace_id = %ctx.trace_id, "{reason}");
            slot.stats.failed(&reason);
            return Ok(convert::error_result(reason).into());
        };
        let time = TimeLimit {
            limit,
            since: started,
        };
        let ready = version.pool.take();
        let inline = version.may_run_inline(ready.is_some());
        let task_tool = tool.to_string();
        let outcome = self
            .run(
                version.clone(),
                time,
                host_impl::Sinks {
                    progress: ctx.progress,
                    log: ctx.log,
                },
                ready.map_or_else(|| Instance::Make(self.instances.clone()), Instance::Ready),
                inline,
                |store, plugin| {
                    Box::pin(async move {
                        plugin
                            .wasmgate_plugin_tool()
                            .call_call_tool(store, &task_tool, &arguments)
                            .await
                    })
                },
            )
            .await;
        // Refilled after the call, not beside it: on few cores a refill that
        // starts first would hold the call up for a whole instantiation.
        self.refill(&version);
        let elapsed_us = started.elapsed().as_micros() as u64;
        match outcome {
            Ok(Ok(output)) => {
                tracing::debug!(plugin, tool, trace_id = %ctx.trace_id, elapsed_us, "plugin call done");
                let schema = version.code.output_schemas.get(tool).cloned();
                Ok(result_for_client(
                    &slot,
                    schema,
                    plugin,
                    tool,
                    output,
                    turn,
                    time,
                    &ctx.trace_id,
                )
                .await)
            }
            Ok(Err(CallError::UnknownTool(said))) => Err(PluginCallError::UnknownTool {
                plugin: plugin.into(),
                tool: tool.into(),
                said: Some(cut_error(said)),
            }),
            Ok(Err(CallError::InvalidArguments(message))) => {
                Err(PluginCallError::InvalidArguments {
                    plugin: plugin.into(),
                    tool: tool.into(),
                    message: cut_error(message),
                })
            }
            Ok(Err(CallError::Failed(message))) => {
                Ok(convert::error_result(cut_error(message)).into())
            }
            Err(reason) => {
                tracing::warn!(plugin, tool, trace_id = %ctx.trace_id, elapsed_us, "{reason}");
                slot.stats.failed(&reason);
                Ok(convert::error_result(reason).into())
            }
        }
    }

    /// Stops the watcher and the epoch ticker; calls in flight finish (or hit
    /// their deadline, which no longer advances: they are abandoned with the store).
    pub async fn shutdown(&self) {
        self.shut_down.store(true, Ordering::Release);
        // A load or reload in progress (a Python plugin compiling for half a minute) holds
        // the control: the exit does not wait for it, and its end starts no new watcher.
        if let Ok(mut control) = self.control.try_lock() {
            control.watcher = None;
            control.watched.clear();
            control.missing.clear();
            control.watch_generation += 1;
        }
        for slot in self.slots.load().values() {
            self.discard(&slot.current.load().pool);
        }
        self.ticker.stop();
    }

    /// Runs `f` on an instance of `version` — `ready` if given, else one made
    /// now in a fresh store — armed with the call's limits. With `inline`, its first
    /// poll happens here, on the caller's (I/O) thread, and what is left after it runs
    /// on the plugin threads; without, all of it runs there (see
    /// `Version::may_run_inline`). `Err` is the failure in words for the client.
    async fn run<R: Send + 'static>(
        &self,
        version: Arc<Version>,
        time: TimeLimit,
        sinks: host_impl::Sinks,
        instance: Instance,
        inline: bool,
        f: impl for<'a> FnOnce(
            &'a mut Store<StoreState>,
            bindings::Plugin,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>,
        > + Send
        + 'static,
    ) -> Result<R, String> {
        let host = self
            .this
            .upgrade()
            .ok_or("the plugin host is shutting down")?;
        let started_on = inline.then(|| version.clone());
        let mut task =
            Box::pin(async move { host.run_here(&version, time, sinks, instance, f).await });
        if let Some(version) = started_on {
            let polled_at = Instant::now();
            let first = std::future::poll_fn(|cx| {
                let _context = self.workers.enter();
                Poll::Ready(task.as_mut().poll(cx))
            })
            .await;
            if let Poll::Ready(outcome) = first {
                version.ended_inline();
                return outcome;
            }
            // A guest that waits for host I/O leaves at once. One that computed until an
            // epoch tick stopped it held the I/O thread for up to a tick; a tick that falls
            // inside a short call stops it early, and does not count.
            if polled_at.elapsed() >= engine::EPOCH_TICK / 2 {
                version.polled_long();
            }
        }
        self.workers.run(task).await.and_then(|outcome| outcome)
    }

    /// [`Self::run`] on the current thread. The used store goes to the version's pool,
    /// for the refill that follows the call to drop.
    async fn run_here<R>(
        &self,
        version: &Version,
        time: TimeLimit,
        sinks: host_impl::Sinks,
        instance: Instance,
        f: impl for<'a> FnOnce(
            &'a mut Store<StoreState>,
            bindings::Plugin,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>,
        >,
    ) -> Result<R, String> {
        let name = &*version.name;
        let limits = &version.settings.limits;
        let TimeLimit {
            limit: timeout,
            since: started,
        } = time;
        let (mut store, instance, _permit) = match instance {
            Instance::Ready(ready) => (ready.store, Some(ready.instance), ready.permit),
            Instance::Make(slots) => {
                // Waiting for a free slot counts against the call's time.
                let left = timeout.saturating_sub(started.elapsed());
                let permit =
                    tokio::time::timeout(left, slots.acquire_many_owned(version.code.units))
                        .await
                        .map_err(|_| limits::no_instance_message(name, timeout))?
                        .map_err(|_| format!("plugin `{name}`: the host is shutting down"))?;
                (self.new_store(version)?, None, permit)
            }
        };
        // The limit the client reads in a message stays the whole `timeout`.
        let remaining = timeout.saturating_sub(started.elapsed());
        limits::arm(&mut store, remaining, self.fuel_enabled, limits.fuel)
            .map_err(|e| limits::chain(&e))?;
        store.data_mut().host.sinks = sinks;
        let pre = version.code.pre.clone();
        let busy = self.ticker.busy();
        let result = tokio::time::timeout(remaining + TIMEOUT_GRACE, async {
            let instance = match instance {
                Some(instance) => instance,
                None => pre.instantiate_async(&mut store).await?,
            };
            f(&mut store, instance).await
        })
        .await;
        drop(busy);
        store.data_mut().host.call_ended();
        let data = store.data();
        let outcome = match result {
            Ok(Ok(value)) => Ok(value),
            Ok(Err(error)) => Err(limits::describe_failure(
                name,
                &error,
                data.memory.exceeded,
                data.deadline.expired,
                limits,
                timeout,
                &data.stderr_tail(),
            )),
            Err(_elapsed) => Err(limits::time_limit_message(name, timeout)),
        };
        // The refill that follows the call resets the store, on a plugin thread and
        // after the answer: a Python store's reset writes megabytes.
        store.data_mut().memory.release();
        version.pool.throw_away((store, _permit));
        outcome
    }

    fn new_store(&self, version: &Version) -> Result<Store<StoreState>, String> {
        let state = StoreState::new(&version.name, &version.settings, &self.memory)
            .map_err(|e| format!("plugin `{}`: {e:#}", version.name))?;
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.memory);
        Ok(store)
    }

    /// Whether `version` is what its plugin's calls get now (not replaced or unloaded).
    fn is_current(&self, version: &Arc<Version>) -> bool {
        self.slots
            .load()
            .get(&*version.name)
            .is_some_and(|slot| Arc::ptr_eq(&slot.current.load(), version))
    }

    /// Drops `version`'s used stores and tops up its ready instances, in the background
    /// and with instance budget to spare only: calls waiting for a slot come first; and
    /// after the answer of the call that asks for it is written (see below).
    fn refill(&self, version: &Arc<Version>) {
        if !self.ready_pool.load(Ordering::Relaxed) {
            // Measuring without the pool: used stores still give their slots back.
            drop(version.pool.take_used());
            return;
        }
        // A version replaced or unloaded meanwhile gets no new instances, only its
        // used stores dropped.
        if !self.is_current(version) {
            self.discard(&version.pool);
            return;
        }
        version.pool.note_ask();
        if !version.pool.needs_refill() || !version.pool.start_filling() {
            return;
        }
        let Some(host) = self.this.upgrade() else {
            return;
        };
        let version = version.clone();
        // Waking a plugin thread is a syscall, and the woken thread may take the core from
        // this one before the answer is written (it did: 22 µs of refill ahead of the
        // answer's write). A task that yields runs only after every task ready now has run,
        // the writer of the call's answer among them.
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            host.workers.spawn(host.clone().fill(version));
        });
    }

    /// The refill's work on a plugin thread: drops used stores and makes ready instances
    /// until `version`'s pool is full, the instance budget runs low, or a reload replaces it.
    /// A full pool keeps it a moment longer (see [`pool::REFILL_LINGER`]).
    async fn fill(self: Arc<Self>, version: Arc<Version>) {
        loop {
            drop(version.pool.take_used());
            // A reload may replace the version while this runs: no instances for it then.
            if !self.is_current(&version) {
                break;
            }
            if version.pool.missing() == 0 {
                if version.pool.wait_for_work(pool::REFILL_LINGER).await {
                    continue;
                }
                break;
            }
            if self.instances.available_permits() <= READY_HEADROOM {
                break;
            }
            let Ok(permit) = self
                .instances
                .clone()
                .try_acquire_many_owned(version.code.units)
            else {
                break;
            };
            let Ok(mut store) = self.new_store(&version) else {
                break;
            };
            let limits = &version.settings.limits;
            if limits::arm(&mut store, limits.timeout, self.fuel_enabled, limits.fuel).is_err() {
                break;
            }
            let busy = self.ticker.busy();
            // The epoch deadline stops guest code; this stops a guest blocked in a host call,
            // so that a stuck warm-up frees its slot and the pool refills.
            let warm_up = async {
                match version.code.pre.instantiate_async(&mut store).await {
                    Ok(instance) if version.code.big_runtime => instance
                        .wasmgate_plugin_tool()
                        .call_list_tools(&mut store)
                        .await
                        .map(|_| instance),
                    other => other,
                }
            };
            let made = tokio::time::timeout(limits.timeout + TIMEOUT_GRACE, warm_up)
                .await
                .unwrap_or_else(|_| Err(wasmtime::Error::msg("the warm-up outran the time limit")));
            drop(busy);
            match made {
                Ok(instance) => version.pool.put(pool::Ready {
                    store,
                    instance,
                    permit,
                }),
                Err(e) => {
                    tracing::debug!(plugin = %version.name, error = %limits::chain(&e), "cannot prepare an instance");
                    break;
                }
            }
        }
        version.pool.done_filling();
        // A call that ended after the last take above saw the refill running and left
        // its store here: drop it now, or it would wait for that version's next call.
        drop(version.pool.take_used());
        // An instance made across a reload would wait in the old version's pool for as
        // long as anything holds that version.
        if !self.is_current(&version) {
            self.discard(&version.pool);
        }
    }

    /// Empties `pool`, resetting its stores on a plugin thread: a Python store's reset
    /// writes megabytes, too slow for the I/O thread.
    fn discard(&self, pool: &pool::ReadyPool) {
        let stores = pool.drain();
        self.workers.spawn(async move { drop(stores) });
    }

    /// Brings the loaded set in line with `control.config`; `reread` hashes every file again
    /// (after a time unwatched) instead of trusting an unchanged path.
    async fn apply(&self, control: &mut Control, reread: bool) {
        let Desired {
            plugins: desired,
            passed_over,
        } = desired_plugins(&control.config, control.bundled);
        self.warn_passed_over(passed_over);
        let current = self.slots.load_full();
        lock(&self.failed).retain(|name, _| desired.contains_key(name));
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
        // small plugin's compile queued behind CPython's waited for all of it (cold cache:
        // 1 s alone, 10-30 s beside it). From the cache, the wait is the others' ~30 ms.
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
    fn reuse_code(
        &self,
        name: String,
        name_arc: Arc<str>,
        source: Source,
        old: &Version,
        settings: Arc<Settings>,
        started: Instant,
    ) {
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
    async fn update(
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
                // Same bytes as the running version: a refused version in between is moot.
                if let Some(slot) = self.slots.load().get(&name) {
                    slot.stats.set_reload_error(None);
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
                self.install(&name, version);
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
            Err(reason) => {
                // A reason may quote what the plugin said (a tool name, a schema): the log,
                // the status and the events keep its start.
                let reason = cut_error(reason);
                match self.slots.load().get(&name).filter(|_| existing.is_some()) {
                    Some(slot) => {
                        tracing::error!(plugin = %name, "{reason}");
                        slot.stats.set_reload_error(Some(reason.clone()));
                        self.emit(PluginEvent::ReloadFailed { name, reason });
                    }
                    None => self.load_failed(name, source.path().map(Path::to_path_buf), reason),
                }
            }
        }
    }

    /// Reads, compiles (or loads from the cache) and validates a plugin's code.
    /// `Ok(None)`: the bytes are those of `existing`.
    async fn load_code(
        &self,
        name: &Arc<str>,
        source: &Source,
        settings: &Arc<Settings>,
        existing: Option<&Version>,
    ) -> Result<Option<(Arc<Code>, Option<u64>)>, String> {
        let what = format!("plugin `{name}` ({})", source.describe());
        let bytes: Arc<[u8]> = match source {
            Source::File(path) => {
                let size = tokio::fs::metadata(path)
                    .await
                    .map_err(|e| format!("{what}: cannot read the file: {e}"))?
                    .len();
                if size > MAX_COMPONENT_BYTES {
                    return Err(format!(
                        "{what}: is {} MiB; a plugin may be at most {} MiB",
                        size >> 20,
                        MAX_COMPONENT_BYTES >> 20
                    ));
                }
                tokio::fs::read(path)
                    .await
                    .map_err(|e| format!("{what}: cannot read the file: {e}"))?
                    .into()
            }
            Source::Bundled(bytes) => Arc::from(*bytes),
        };
        check_header(&bytes).map_err(|e| format!("{what}: {e}"))?;
        let big_runtime = pool::is_big_runtime(bytes.len());
        let digest = cache::hex(&Sha256::digest(&bytes));
        if let Some(pin) = settings.sha256.as_deref()
            && pin != digest
        {
            return Err(format!(
                "{what}: its sha256 is {digest}, not the {pin} its config pins (sha256 in \
                 [plugins.{name}]); not loaded, so its grants go to no other code"
            ));
        }
        if existing.is_some_and(|old| old.code.digest == digest) {
            return Ok(None);
        }
        let compile_limit = *lock(&self.compile_limit);
        let refused = || {
            format!(
                "{what}: compiling it took longer than {} (compile_timeout in [plugins]); \
                 refused until the file changes",
                humantime::format_duration(compile_limit)
            )
        };
        if lock(&self.compile_refused).contains(&digest) {
            return Err(refused());
        }

        let engine = self.engine.clone();
        let host = self
            .this
            .upgrade()
            .ok_or_else(|| format!("{what}: the host is shutting down"))?;
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
            .map_err(|e| format!("{what}: compilation panicked: {e}"))?
            .map_err(|e| format!("{what}: is not a valid component: {}", limits::chain(&e)))?;

        let units = engine::slot_units(&component);
        let pre = self.linker.instantiate_pre(&component).map_err(|e| {
            format!(
                "{what}: imports something the host does not provide: {}",
                limits::chain(&e)
            )
        })?;
        let pre = PluginPre::new(pre).map_err(|e| {
            format!(
                "{what}: does not implement the world wasmgate:plugin/plugin@0.1.0: {}",
                limits::chain(&e)
            )
        })?;

        let probe = Version::new(
            name.clone(),
            source.clone(),
            Arc::new(Code {
                digest: digest.clone(),
                pre: pre.clone(),
                tools: Vec::new(),
                output_schemas: HashMap::new(),
                big_runtime: false,
                units,
            }),
            settings.clone(),
        );
        let time = TimeLimit {
            limit: settings.limits.timeout.min(LIST_TOOLS_TIMEOUT),
            since: Instant::now(),
        };
        let infos = self
            .run(
                Arc::new(probe),
                time,
                host_impl::Sinks::default(),
                // Probes have slots of their own: a reload validates even while calls
                // hold every other slot.
                Instance::Make(self.probes.clone()),
                false,
                |store, plugin| {
                    Box::pin(
                        async move { plugin.wasmgate_plugin_tool().call_list_tools(store).await },
                    )
                },
            )
            .await
            .map_err(|e| format!("{what}: list-tools failed: {e}"))?;
        if infos.len() > MAX_TOOLS {
            return Err(format!(
                "{what}: list-tools returned {} tools; a plugin may have {MAX_TOOLS} at most",
                infos.len()
            ));
        }
        let listing = convert::listing_bytes(&infos);
        if listing > convert::MAX_LISTING_BYTES {
            return Err(format!(
                "{what}: list-tools returned {listing} bytes of names, descriptions and \
                 schemas; a plugin may list {} MiB at most",
                convert::MAX_LISTING_BYTES >> 20
            ));
        }
        // Compiling schemas takes time and memory: off the I/O thread.
        let checked = tokio::task::spawn_blocking({
            let what = what.clone();
            move || {
                let mut tools = Vec::with_capacity(infos.len());
                let mut output_schemas = HashMap::new();
                let mut seen = BTreeSet::new();
                let mut patterns = 0;
                for info in &infos {
                    let tool = convert::tool_to_mcp(info).map_err(|e| format!("{what}: {e}"))?;
                    if !seen.insert(info.name.clone()) {
                        return Err(format!("{what}: lists tool `{}` twice", info.name));
                    }
                    patterns += tool.patterns;
                    if patterns > convert::MAX_PLUGIN_PATTERNS {
                        return Err(format!(
                            "{what}: its schemas have more than {} patterns in all",
                            convert::MAX_PLUGIN_PATTERNS
                        ));
                    }
                    if let Some(schema) = tool.output_schema {
                        output_schemas.insert(info.name.clone(), schema);
                    }
                    tools.push(tool.mcp);
                }
                Ok((tools, output_schemas))
            }
        })
        .await
        .map_err(|e| format!("{what}: checking its tools failed: {e}"))?;
        let (tools, output_schemas) = checked?;
        Ok(Some((
            Arc::new(Code {
                digest,
                pre,
                tools,
                output_schemas,
                big_runtime,
                units,
            }),
            compile_ms,
        )))
    }

    fn install(&self, name: &str, version: Version) {
        let version = Arc::new(version);
        self.forget_failure(name);
        if let Some(slot) = self.slots.load().get(name) {
            slot.set_turn_limit(turn_limit(&version.code));
            // Calls in flight keep the old version; its spare instances go now.
            self.discard(&slot.current.swap(version).pool);
            slot.stats.set_reload_error(None);
            return;
        }
        self.slots.rcu(|slots| {
            let mut slots = BTreeMap::clone(slots);
            slots.insert(name.to_string(), Arc::new(Slot::new(version.clone())));
            slots
        });
    }

    fn unload(&self, name: &str) {
        self.forget_failure(name);
        let mut removed = None;
        self.slots.rcu(|slots| {
            let mut slots = BTreeMap::clone(slots);
            removed = slots.remove(name);
            slots
        });
        if let Some(slot) = removed {
            self.discard(&slot.current.load().pool);
            tracing::info!(plugin = %name, "plugin {name} unloaded");
            self.emit(PluginEvent::Unloaded {
                name: name.to_string(),
            });
        }
    }

    fn emit(&self, event: PluginEvent) {
        let _ = self.events.send(event);
    }

    /// (Re)starts the watcher when the set of directories to watch changed.
    fn rewatch(&self, control: &mut Control) {
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
            watch::remove(watcher, &gone);
            let added: Vec<PathBuf> = dirs
                .iter()
                .filter(|d| !control.watched.contains(d))
                .cloned()
                .collect();
            let missing = watch::add(watcher, &added);
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
        match watch::watch(&dirs) {
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
                tokio::spawn(watch::debounce(rx, move |path| {
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
    async fn folder_appeared(&self, generation: u64) {
        let mut control = self.control.lock().await;
        if control.watch_generation != generation {
            return;
        }
        self.rescan(&mut control, false).await;
    }

    /// Watches the folders anew (polling for those missing) and brings the loaded set in
    /// line. Watched before read: a file still being written is then seen again when its
    /// writer is done.
    async fn rescan(&self, control: &mut Control, reread: bool) {
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
    async fn file_changed(&self, path: &Path) {
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
    async fn plugin_file_changed(&self, control: &Control, path: &Path) {
        let Desired {
            plugins: mut desired,
            passed_over,
        } = desired_plugins(&control.config, control.bundled);
        self.warn_passed_over(passed_over);
        for name in plugins_for_path(&control.config, path) {
            let existing = self
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

impl Drop for PluginHost {
    fn drop(&mut self) {
        self.ticker.stop();
    }
}

/// What the configuration asks for now: every plugin by name (configured paths first, then
/// `*.wasm` files in `dir`, then bundled plugins), and the folder's files passed over.
struct Desired {
    plugins: BTreeMap<String, (Source, Settings)>,
    /// `*.wasm` files of the folder that are not loaded, sorted, with why: a name with
    /// control characters, or a name a configured plugin (`path`, `--plugin`) already has.
    /// Without a word, a build dropped there would seem to be ignored.
    passed_over: Vec<(PathBuf, String)>,
}

fn desired_plugins(
    config: &PluginsConfig,
    bundled: &'static [(&'static str, &'static [u8])],
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
                        // Its name is configured: off, or served from its `path`.
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

/// A folder file that takes a configured plugin's grants, or a bundled plugin's place, by its
/// name alone: said once per file and reason, since whoever can write the folder gets them.
fn warn_granted_by_name(
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
fn default_namespace(name: &str) -> String {
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
fn dir_plugin_name(path: &Path) -> Option<String> {
    if path.extension()? != "wasm" {
        return None;
    }
    let stem = path.file_stem()?.to_str()?;
    (!stem.is_empty() && !stem.starts_with('.') && !stem_has_control(path))
        .then(|| stem.to_string())
}

fn stem_has_control(path: &Path) -> bool {
    path.file_stem()
        .is_some_and(|stem| stem.to_string_lossy().chars().any(char::is_control))
}

/// Which plugins a changed path belongs to: those configured with it as their path (one
/// file may serve under several names), and the folder plugin named after it.
fn plugins_for_path(config: &PluginsConfig, path: &Path) -> Vec<String> {
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
fn plugin_links(config: &PluginsConfig) -> Vec<(PathBuf, PathBuf)> {
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

/// Refuses what is not a component before wasmtime sees it, with a reason a
/// plugin author can act on.
fn check_header(bytes: &[u8]) -> Result<(), String> {
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
struct Loading<'a> {
    loading: &'a StdMutex<BTreeMap<String, Option<PathBuf>>>,
    name: String,
}

impl<'a> Loading<'a> {
    fn mark(
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

/// A call's output as the client gets it. A check against the plugin's own output schema
/// may take long however small the result (a pattern can be slow on a short text), and a
/// big result takes long to expand: those run on a blocking thread, within what is left of
/// the call's time, holding the call's turn, so the I/O thread serves everyone else
/// meanwhile and a plugin keeps no more of them running than its calls at once.
#[allow(clippy::too_many_arguments)]
async fn result_for_client(
    slot: &Slot,
    schema: Option<Arc<convert::OutputSchema>>,
    plugin: &str,
    tool: &str,
    output: bindings::ToolOutput,
    turn: tokio::sync::OwnedSemaphorePermit,
    time: TimeLimit,
    trace_id: &str,
) -> convert::Reply {
    let bytes = match convert::result_size(plugin, tool, &output) {
        Ok(bytes) => bytes,
        Err(too_big) => return too_big.into(),
    };
    let checked = schema.is_some() && output.structured.is_some();
    if !checked && bytes <= convert::INLINE_RESULT_BYTES {
        return convert::output_to_mcp(plugin, tool, output, schema.as_deref());
    }
    let what = match checked {
        true => "checked against the tool's output schema",
        false => "made ready for the client",
    };
    let (name, tool_name) = (plugin.to_string(), tool.to_string());
    let check = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        convert::output_to_mcp(&name, &tool_name, output, schema.as_deref())
    });
    let left = time.limit.saturating_sub(time.since.elapsed());
    match tokio::time::timeout(left, check).await {
        Ok(Ok(result)) => result,
        Ok(Err(panicked)) => convert::error_result(format!(
            "plugin `{plugin}` tool `{tool}`: checking its result failed: {panicked}"
        ))
        .into(),
        Err(_) => {
            let reason = format!(
                "{} while its result was {what}",
                limits::time_limit_message(plugin, time.limit)
            );
            tracing::warn!(plugin, tool, trace_id, "{reason}");
            slot.stats.failed(&reason);
            convert::error_result(reason).into()
        }
    }
}

/// A plugin's error text, or a reason that quotes the plugin, cut to
/// [`convert::MAX_ERROR_TEXT`] bytes: it reaches the client (escaped in messages), the
/// log, the status and the events.
fn cut_error(text: String) -> String {
    crate::protocol::cut_owned(text, convert::MAX_ERROR_TEXT)
}

/// A lock whose holder panicked still guards plain data: go on with it.
fn lock<T>(mutex: &StdMutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(|e| e.into_inner())
}

fn read<T: Clone>(mutex: &StdMutex<T>) -> T {
    lock(mutex).clone()
}

fn ms(since: Instant) -> u64 {
    since.elapsed().as_millis() as u64
}

fn wasm_err(e: wasmtime::Error) -> anyhow::Error {
    anyhow::anyhow!(limits::chain(&e))
}

/// How often folders that do not exist yet are looked for: `notify` cannot watch
/// what is not there, and a plugin's build folder often appears only after the first build.
const MISSING_FOLDER_POLL: Duration = Duration::from_millis(500);

/// How often the folders being watched are checked to still be there: a folder moved or
/// removed without the watcher saying so (an event lost, a watcher that could not start)
/// is noticed within this.
const PRESENT_FOLDER_CHECK: Duration = Duration::from_secs(2);

/// Rescans when a watched folder that was there is gone, for as long as `generation` is
/// the current watch.
async fn check_folders_present(host: Weak<PluginHost>, generation: u64) {
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

async fn wait_for_folders(host: Weak<PluginHost>, generation: u64, missing: Vec<PathBuf>) {
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
