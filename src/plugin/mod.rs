//! The WebAssembly plugin host: loads WASI components that implement the
//! `wasmgate:plugin` world (or the `wasmgate:middleware` world: see `hook_calls`), lists
//! their tools, runs every call in a sandboxed and limited
//! instance (a fresh one per call, or one kept per session or shared, per the plugin's
//! `instance` mode), and hot-reloads plugins whose files change.
//!
//! One `Engine` and one `Linker` for the process; per plugin version one compiled
//! `Component` and `InstancePre`; per instance one `Store`. [`PluginHost`] is the façade:
//! `calls::Calls` runs calls, `loading::Loader` loads, reloads and watches.

mod bindings;
mod bindings_v2;
mod cache;
mod calls;
mod calls_v2;
mod cancel;
mod convert;
mod discovery;
mod engine;
mod errno;
mod grants;
mod hook_calls;
mod hooks;
mod host_impl;
mod host_v2;
mod kept;
mod kind;
pub mod kv;
mod limits;
mod listing;
mod loading;
mod middleware_bindings;
mod outbound;
mod plugin_v2;
mod pool;
mod refill;
mod relist;
mod reply;
mod sandbox;
mod version;
mod watch;
mod workers;

#[cfg(test)]
mod bundled_middleware_tests;
#[cfg(test)]
mod middleware_tests;
#[cfg(test)]
mod tests;

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant, SystemTime};

use serde_json::{Value, json};
use tokio::sync::{Semaphore, mpsc};
use wasmtime::component::Linker;

use crate::config::{PluginLimits, PluginsConfig};
use crate::protocol::{self, RpcError};
pub use cache::hex;
use calls::{Calls, said_of};
pub use hook_calls::Middleware;
pub use hooks::{
    Denial, Direction, Edit, HookCall, HookContext, HookError, Interest, ListContext, ListEntry,
    Outcome, PluginKind, RequestAction, ResultAction,
};
use loading::Loader;
pub use loading::{check_header, check_plugin_files};
use sandbox::StoreState;

/// Receives a call's `host.log` lines: `(MCP level, message)`.
pub type LogSink = Arc<dyn Fn(&'static str, &str) + Send + Sync>;

/// Receives a call's progress reports: `(progress, total, message)`.
pub type ProgressSink = Arc<dyn Fn(f64, Option<f64>, Option<String>) + Send + Sync>;

/// Sends a 0.2 plugin's request (`elicitation/create`, `sampling/createMessage`,
/// `roots/list` and its params) to the client whose call it runs in, and gives its answer.
pub type AskSink =
    Arc<dyn Fn(&'static str, Option<Value>) -> BoxFuture<Result<Value, RpcError>> + Send + Sync>;

/// A boxed future the plugin host awaits on its threads.
pub type BoxFuture<T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + Send>>;

/// What a 0.2 plugin announced (`notify`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PluginNotice {
    ToolsChanged,
    ResourcesChanged,
    PromptsChanged,
    ResourceUpdated(String),
}

/// A loaded plugin, as the gateway's catalog and status see it.
#[derive(Debug, Clone)]
pub struct PluginInfo {
    pub name: String,
    pub namespace: String,
    /// The component file; `None` for a plugin bundled into the binary.
    pub path: Option<PathBuf>,
    /// MCP `Tool` objects with unprefixed names, after the tool filter; none for a
    /// middleware.
    pub tools: Vec<Value>,
    /// A tool plugin or a middleware.
    pub kind: PluginKind,
    /// A middleware's `describe`; `None` for a tool plugin.
    pub interest: Option<Interest>,
    /// The WIT package version its component implements: `0.1.0` or `0.2.0`.
    pub world: &'static str,
    /// A 0.2 plugin's resources, resource templates and prompts (MCP objects, names
    /// unprefixed); empty otherwise.
    pub resources: Vec<Value>,
    pub templates: Vec<Value>,
    pub prompts: Vec<Value>,
    /// A 0.2 plugin that exports `completion`.
    pub completes: bool,
    /// The instance mode a 0.2 plugin declared (`meta.describe`).
    pub declared_instance: Option<crate::config::InstanceMode>,
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
    /// Where a 0.2 plugin's requests to the client go; `None`: no client to ask.
    pub ask: Option<AskSink>,
    /// How long one such request waits for the client's answer.
    pub ask_timeout: Duration,
    /// The key of the store a 0.2 plugin's call uses (see `kv::scope_for`): one per
    /// principal, so state never crosses tokens.
    pub principal: Option<Arc<str>>,
    /// The W3C `traceparent` of the call's span, when the request is traced: what a 0.2
    /// plugin reads through `host.traceparent`, and what its instances' spans link to.
    pub traceparent: Option<Arc<str>>,
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
    /// A 0.2 plugin's announcement, from one of its calls.
    Notice {
        name: String,
        notice: PluginNotice,
    },
}

/// Instances kept free of calls so that loads and reloads can always validate.
const RESERVED_INSTANCES: u32 = 4;

/// Permits of the instance semaphores: [`engine::SLOT_UNITS`] per instance. An instance
/// takes the units its memories need ([`version::Code::units`]), so that a component with
/// several memories cannot leave other plugins' calls to fail with a pool error.
const CALL_UNITS: usize =
    ((engine::MAX_INSTANCES - RESERVED_INSTANCES) * engine::SLOT_UNITS) as usize;
const PROBE_UNITS: usize = (RESERVED_INSTANCES * engine::SLOT_UNITS) as usize;

/// The plugin host as the rest of the gateway sees it: calls, status, reloads, shutdown.
pub struct PluginHost {
    calls: Arc<Calls>,
    loader: Arc<Loader>,
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
        host_v2::add_to_linker(&mut linker).map_err(wasm_err)?;
        let ticker = engine::Ticker::start(engine.clone())?;
        let workers = workers::Workers::start()?;
        let calls = Arc::new_cyclic(|this| Calls {
            engine,
            fuel_enabled,
            ticker,
            workers,
            slots: Default::default(),
            instances: Arc::new(Semaphore::new(CALL_UNITS)),
            ready_pool: AtomicBool::new(true),
            memory: Arc::new(limits::MemoryBudget::new(config.total_memory)),
            kv: kv::KvStores::new(config.data_dir.clone(), config.store_size),
            events: events.clone(),
            this: this.clone(),
        });
        calls.start_sweeping();
        let loader = Loader::new(calls.clone(), linker, config, bundled, events, PROBE_UNITS);
        Ok(Arc::new(PluginHost { calls, loader }))
    }

    /// Loads every plugin of the config (compiling in parallel or from the cache), each
    /// reported as it is ready, and starts the watcher when `config.watch`. A plugin that
    /// fails to load is reported (log and `LoadFailed`), not fatal.
    pub async fn load(&self) {
        self.loader.load().await;
    }

    /// Applies a changed configuration: loads, unloads or reloads only what changed.
    pub async fn reconfigure(&self, config: &PluginsConfig) {
        self.loader.reconfigure(config).await;
    }

    /// Runs one tool of `plugin` (see `Calls::call`).
    pub async fn call(
        &self,
        plugin: &str,
        tool: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<convert::Reply, PluginError> {
        self.calls.call(plugin, tool, arguments, ctx).await
    }

    /// A 0.2 plugin's lists changed (`notify`): reads them again and serves them.
    pub async fn relist(&self, plugin: &str) -> Result<(), String> {
        self.loader.relist(plugin).await
    }

    /// `resources/read` of a URI a 0.2 plugin serves.
    pub async fn read_resource(
        &self,
        plugin: &str,
        uri: &str,
        ctx: CallContext,
    ) -> Result<Value, RpcError> {
        self.calls.read_resource(plugin, uri, ctx).await
    }

    /// `prompts/get` of a 0.2 plugin's prompt (`name` as the plugin knows it).
    pub async fn get_prompt(
        &self,
        plugin: &str,
        name: &str,
        arguments: Vec<(String, String)>,
        ctx: CallContext,
    ) -> Result<Value, RpcError> {
        self.calls.get_prompt(plugin, name, arguments, ctx).await
    }

    /// `completion/complete` of a 0.2 plugin's prompt argument or template variable;
    /// `params` as the client sent them, with names as the plugin knows them.
    pub async fn complete(
        &self,
        plugin: &str,
        params: &Value,
        ctx: CallContext,
    ) -> Result<Value, RpcError> {
        self.calls.complete(plugin, params, ctx).await
    }

    /// Client session `id` ended: the instances kept for it go.
    pub fn end_session(&self, id: &str) {
        self.calls.end_session(id);
    }

    /// The loaded plugins now.
    pub fn plugins(&self) -> Vec<PluginInfo> {
        self.calls
            .slots
            .load()
            .iter()
            .map(|(name, slot)| {
                let version = slot.current.load();
                let listing = version.code.listing.as_deref().cloned().unwrap_or_default();
                PluginInfo {
                    name: name.clone(),
                    namespace: version.settings.namespace.clone(),
                    path: version.source.path().map(Path::to_path_buf),
                    tools: version.tools.clone(),
                    kind: version.code.pre.kind(),
                    interest: version.code.interest.as_deref().cloned(),
                    world: match version.code.pre.kind() {
                        PluginKind::Middleware => "0.1.0",
                        PluginKind::Tools if version.code.pre.is_v2() => "0.2.0",
                        PluginKind::Tools => "0.1.0",
                    },
                    resources: listing.resources,
                    templates: listing.templates,
                    prompts: listing.prompts,
                    completes: listing.completes,
                    declared_instance: listing.declared,
                    digest: version.code.digest.clone(),
                    loaded_at: version.loaded_at,
                    limits: self.effective(version.settings.limits),
                    calls: slot.stats.calls.load(Ordering::Relaxed),
                    max_calls: slot.turn_limit.load(Ordering::Relaxed),
                    instance: version.kept.mode(),
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
        if !self.calls.fuel_enabled {
            limits.fuel = None;
        }
        limits
    }

    /// The plugins still being read and compiled for their first version, with their files.
    pub fn loading_plugins(&self) -> Vec<(String, Option<PathBuf>)> {
        read(&self.loader.loading).into_iter().collect()
    }

    /// The plugins that could not be loaded now, with the reason.
    pub fn failed_plugins(&self) -> Vec<FailedPlugin> {
        read(&self.loader.failed).into_values().collect()
    }

    /// Stops the watcher and the epoch ticker; calls in flight finish (or hit
    /// their deadline, which no longer advances: they are abandoned with the store).
    pub async fn shutdown(&self) {
        self.loader.stop_watching();
        for slot in self.calls.slots.load().values() {
            self.calls.discard(&slot.current.load());
        }
        self.calls.ticker.stop();
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
