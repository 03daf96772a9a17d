//! The WebAssembly plugin host: loads WASI components that implement the
//! `wasmgate:plugin` world, lists their tools, runs every call in a fresh,
//! sandboxed and limited instance, and hot-reloads plugins whose files change.
//!
//! One `Engine` and one `Linker` for the process; per plugin version one
//! compiled `Component` and `InstancePre`; per call one `Store`.

mod bindings;
mod cache;
mod calls;
mod convert;
mod discovery;
mod engine;
mod grants;
mod host_impl;
mod kept;
mod limits;
mod loading;
mod outbound;
mod pool;
mod refill;
mod sandbox;
mod version;
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
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::sync::{Mutex, Semaphore, mpsc};
use wasmtime::component::{Component, Linker};
use wasmtime::{Engine, Store};

use crate::config::{InstancePolicy, PluginConfig, PluginLimits, PluginsConfig, ToolFilter};
use crate::protocol::{self, RpcError};
use bindings::{CallError, PluginPre};
use cache::Cache;
pub use cache::hex;
use grants::GrantedDir;
pub use loading::{check_header, check_plugin_files};
use sandbox::StoreState;
use version::*;
use {calls::*, discovery::*};

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
    /// Which instance its calls run in (`instance` in its config).
    pub instance: crate::config::InstanceMode,
    /// Instances kept between calls now (idle or in a call); 0 for `instance = "call"`.
    pub instances: usize,
    /// Why the last new version was refused, while this one keeps serving; cleared
    /// when a new version loads.
    pub reload_error: Option<String>,
}

/// Why a plugin's version could not be loaded: which plugin and from where (`plugin `NAME`
/// (SOURCE)`), and why.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{what}: {why}")]
pub struct LoadError {
    pub what: String,
    pub why: String,
}

/// A plugin that is configured or present but could not be loaded, and serves nothing.
#[derive(Debug, Clone)]
pub struct FailedPlugin {
    pub name: String,
    pub path: Option<PathBuf>,
    pub error: LoadError,
    pub at: SystemTime,
}

impl FailedPlugin {
    /// The whole reason: "plugin `NAME` (SOURCE): WHY".
    pub fn reason(&self) -> String {
        self.error.to_string()
    }

    /// "plugin `NAME` (SOURCE) could not be loaded: WHY", the reason cut at `max` bytes.
    pub fn not_loaded(&self, max: usize) -> String {
        format!(
            "{} could not be loaded: {}",
            self.error.what,
            crate::protocol::cut_short(&self.error.why, max)
        )
    }
}

/// Where a call's instance comes from: the ready pool, made for it with a permit from
/// these slots, or kept between calls (the one the lease holds, or made for it).
enum Instance {
    Ready(pool::Ready),
    Make(Arc<Semaphore>),
    Kept(kept::Lease, Option<kept::Held>),
}

/// Per-call context from the gateway.
#[derive(Clone)]
pub struct CallContext {
    /// The gateway's timeout for this call; the plugin's own limit bounds it too.
    pub timeout: Duration,
    pub progress: Option<ProgressSink>,
    pub log: Option<LogSink>,
    pub trace_id: String,
    /// The client session that calls: `instance = "session"` keeps an instance per session.
    pub session: Option<Arc<str>>,
}

/// Why a call did not run. Failures while it ran are tool results with `isError`.
#[derive(Debug, thiserror::Error)]
pub enum PluginError {
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

impl PluginError {
    /// The one place where a plugin call's failure becomes a JSON-RPC error; `tool` is the
    /// name the client called it by.
    pub fn to_rpc(&self, tool: &str) -> RpcError {
        match self {
            PluginError::NotFound(plugin) => RpcError::new(
                protocol::BACKEND_UNAVAILABLE,
                format!("plugin `{plugin}` is not loaded"),
            )
            .with_data(json!({"server": plugin})),
            // Worded as the gateway's own checks are, with the name the client used.
            PluginError::InvalidArguments {
                plugin, message, ..
            } => RpcError::invalid_arguments(tool, message).with_data(json!({"server": plugin})),
            PluginError::UnknownTool { plugin, .. } => {
                RpcError::unknown_tool(tool, &format!(" ({self})"))
                    .with_data(json!({"server": plugin}))
            }
        }
    }
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
    /// After a refused build, the plugin's file is a version that serves again (the one
    /// serving, rebuilt as it was, or a new one).
    Recovered {
        name: String,
    },
}

/// Tools one plugin may list: clients handle a few hundred tools in all, and a catalog
/// of a hundred thousand makes every list page slow.
const MAX_TOOLS: usize = 1000;

/// How long `list-tools` may take when a version is validated, at most.
const LIST_TOOLS_TIMEOUT: Duration = Duration::from_secs(10);

/// The largest component file read, well above an interpreter's (CPython's).
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
        host.start_sweeping();
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
                    instance: version.settings.instances.mode,
                    instances: version.kept.live(),
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
    fn waiting_for_file(&self, name: &str, path: &Path) {
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
            self.discard(&slot.current.load());
        }
        self.ticker.stop();
    }
}

impl Drop for PluginHost {
    fn drop(&mut self) {
        self.ticker.stop();
    }
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
