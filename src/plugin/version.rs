//! Plugin versions and their slots: the settings a version runs with, its compiled
//! code, and the slot that holds the version calls get now.

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex as StdMutex};
use std::time::{Duration, Instant, SystemTime};

use arc_swap::ArcSwap;
use serde_json::Value;
use tokio::sync::Semaphore;

use super::discovery::default_namespace;
use super::grants::GrantedDir;
use super::hooks::Interest;
use super::kind::Pre;
use super::listing::ListingV2;
use super::{convert, engine, kept, lock, pool};
use crate::config::{InstanceMode, InstancePolicy, PluginConfig, PluginLimits, ToolFilter};

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
    pub instances: InstancePolicy,
    pub calls_at_once: Option<usize>,
    /// From a `[[middleware]]` entry: its code must be a middleware, and a plugin's must not.
    pub middleware: bool,
    /// One store for every principal (`store = "shared"`), not one each.
    pub store_shared: bool,
}

impl Settings {
    pub(super) fn from_config(
        name: &str,
        entry: Option<&PluginConfig>,
        defaults: PluginLimits,
    ) -> Settings {
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
                instances: c.instances,
                calls_at_once: c.calls_at_once,
                middleware: c.middleware,
                store_shared: false,
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
                instances: InstancePolicy::default(),
                calls_at_once: None,
                middleware: false,
                store_shared: false,
            },
        }
    }

    pub(super) fn same_as(&self, other: &Settings) -> bool {
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
            && self.instances == other.instances
            && self.calls_at_once == other.calls_at_once
            && self.middleware == other.middleware
            && self.store_shared == other.store_shared
    }
}

/// Where a plugin's bytes come from.
#[derive(Clone)]
pub(super) enum Source {
    File(PathBuf),
    Bundled(&'static [u8]),
}

impl Source {
    pub(super) fn path(&self) -> Option<&Path> {
        match self {
            Source::File(path) => Some(path),
            Source::Bundled(_) => None,
        }
    }

    /// Its size in bytes, when it can be read.
    pub(super) fn len(&self) -> Option<usize> {
        match self {
            Source::File(path) => std::fs::metadata(path).ok().map(|m| m.len() as usize),
            Source::Bundled(bytes) => Some(bytes.len()),
        }
    }

    pub(super) fn same_as(&self, other: &Source) -> bool {
        match (self, other) {
            (Source::File(a), Source::File(b)) => a == b,
            (Source::Bundled(a), Source::Bundled(b)) => std::ptr::eq(*a, *b),
            _ => false,
        }
    }

    pub(super) fn describe(&self) -> String {
        match self {
            Source::File(path) => path.display().to_string(),
            Source::Bundled(_) => "bundled".to_string(),
        }
    }
}

/// The compiled code of one plugin version, shared by versions that differ
/// only in settings.
pub(super) struct Code {
    pub(super) digest: String,
    pub(super) pre: Pre,
    /// A middleware's `describe`, bounded; `None` for a tool plugin.
    pub(super) interest: Option<Arc<Interest>>,
    /// A 0.2 plugin's resources, templates and prompts, and what it declared.
    pub(super) listing: Option<Arc<ListingV2>>,
    /// Every tool the plugin lists, validated, unfiltered (none for a middleware).
    pub(super) tools: Vec<Value>,
    /// The output schemas of the tools that declare one, by tool name.
    pub(super) output_schemas: HashMap<String, Arc<convert::OutputSchema>>,
    /// An interpreter inside (see `pool::BIG_RUNTIME`): each ready instance gets a
    /// `list-tools` (or `describe`) call first, and a call starts inline only on a ready instance.
    pub(super) big_runtime: bool,
    /// Permits of the instance semaphores one instance takes: its memories' pool slots.
    pub(super) units: u32,
}

/// The instance policy a version's calls run under: the operator's, unless the plugin
/// declared the mode its state needs (0.2's `meta.describe`). A declared `session` is
/// honoured; a declared `shared` (state every principal sees) only when the operator said
/// `shared` too, else it runs as `session`, with a warning.
pub(super) fn instances(name: &str, code: &Code, settings: &Settings) -> InstancePolicy {
    let mut policy = settings.instances;
    let declared = code.listing.as_ref().and_then(|l| l.declared);
    match declared {
        Some(InstanceMode::Session) => policy.mode = InstanceMode::Session,
        Some(InstanceMode::Shared) if policy.mode != InstanceMode::Shared => {
            tracing::warn!(
                plugin = name,
                "the plugin declares instance \"shared\" (state every client sees); it runs as \"session\" unless its config says instance = \"shared\""
            );
            policy.mode = InstanceMode::Session;
        }
        _ => {}
    }
    policy
}

/// One loaded version of a plugin. Calls hold an `Arc` of the version they
/// started with, so a reload never disturbs them.
pub(super) struct Version {
    pub(super) name: Arc<str>,
    pub(super) source: Source,
    pub(super) code: Arc<Code>,
    pub(super) settings: Arc<Settings>,
    /// The tools after the filter.
    pub(super) tools: Vec<Value>,
    pub(super) loaded_at: SystemTime,
    pub(super) pool: pool::ReadyPool,
    /// The instances kept between calls, for `instance = "session"` or `"shared"`.
    pub(super) kept: Arc<kept::Kept>,
    /// When this version's calls last proved to compute on the I/O thread (see `polled_long`).
    pub(super) went_async: StdMutex<Option<Instant>>,
    /// Inline first polls in a row that ran long.
    pub(super) long_polls: AtomicU32,
}

/// How long a version whose call left the I/O thread starts its calls on the plugin threads.
pub(super) const ASYNC_MEMORY: Duration = Duration::from_secs(1);

impl Version {
    pub(super) fn new(
        name: Arc<str>,
        source: Source,
        code: Arc<Code>,
        settings: Arc<Settings>,
    ) -> Version {
        let policy = instances(&name, &code, &settings);
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
            kept: Arc::new(kept::Kept::new(policy)),
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
    pub(super) fn may_run_inline(&self, ready: bool) -> bool {
        let recently_async = lock(&self.went_async).is_some_and(|at| at.elapsed() < ASYNC_MEMORY);
        !recently_async && (ready || !self.code.big_runtime)
    }

    /// A call ended within its first poll on the I/O thread.
    pub(super) fn ended_inline(&self) {
        if self.long_polls.load(Ordering::Relaxed) != 0 {
            self.long_polls.store(0, Ordering::Relaxed);
        }
    }

    /// A call's first poll on the I/O thread ran long and the call went on elsewhere. Two
    /// such with no call ending inline between them (one alone may be the I/O thread
    /// losing its core for a while) send this version's calls to the plugin threads.
    pub(super) fn polled_long(&self) {
        if self.long_polls.fetch_add(1, Ordering::Relaxed) + 1 >= 2 {
            self.long_polls.store(0, Ordering::Relaxed);
            *lock(&self.went_async) = Some(Instant::now());
        }
    }

    pub(super) fn has_tool(&self, tool: &str) -> bool {
        self.tools.iter().any(|t| t["name"] == tool)
    }
}

#[derive(Default)]
pub(super) struct Stats {
    pub(super) calls: AtomicU64,
    pub(super) failures: AtomicU64,
    pub(super) last_error: StdMutex<Option<String>>,
    pub(super) reload_error: StdMutex<Option<String>>,
}

impl Stats {
    pub(super) fn failed(&self, reason: &str) {
        self.failures.fetch_add(1, Ordering::Relaxed);
        *lock(&self.last_error) = Some(reason.to_string());
    }

    /// Sets or clears why the newest file was refused; whether one was set before.
    pub(super) fn set_reload_error(&self, reason: Option<String>) -> bool {
        std::mem::replace(&mut *lock(&self.reload_error), reason).is_some()
    }
}

/// A plugin name's place in the catalog: the current version, swapped on reload.
pub(super) struct Slot {
    pub(super) current: ArcSwap<Version>,
    pub(super) stats: Stats,
    /// Turns for calls: `turn_limit` at once (see [`turn_limit`]), whatever the version.
    pub(super) turns: Arc<Semaphore>,
    pub(super) turn_limit: AtomicUsize,
    /// Permits for its calls that wait for their clients (0.2's `client`): half its turns,
    /// so that calls waiting on people never hold every turn.
    pub(super) waiting: Arc<Semaphore>,
    pub(super) max_waiting: usize,
}

impl Slot {
    pub(super) fn new(version: Arc<Version>) -> Slot {
        let limit = turn_limit(&version);
        Slot {
            current: ArcSwap::new(version),
            stats: Stats::default(),
            turns: Arc::new(Semaphore::new(limit)),
            turn_limit: AtomicUsize::new(limit),
            waiting: Arc::new(Semaphore::new((limit / 2).max(1))),
            max_waiting: (limit / 2).max(1),
        }
    }

    /// A new version may have another limit (a Rust plugin rewritten in Python).
    pub(super) fn set_turn_limit(&self, limit: usize) {
        let old = self.turn_limit.swap(limit, Ordering::Relaxed);
        resize_turns(&self.turns, old, limit);
    }
}

/// Turns from `old` to `new` at once: added, or taken out of use now and, for those calls
/// hold, as they give them back.
pub(super) fn resize_turns(turns: &Arc<Semaphore>, old: usize, new: usize) {
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
pub(super) struct TimeLimit {
    pub(super) limit: Duration,
    pub(super) since: Instant,
}

/// Calls one plugin runs at once unless its `calls_at_once` says fewer; more wait for a
/// turn, within their time limit.
pub(super) const MAX_CALLS_PER_PLUGIN: usize = crate::config::MAX_CALLS_AT_ONCE;
const _: () = assert!(MAX_CALLS_PER_PLUGIN as u32 <= engine::MAX_INSTANCES / 4);

/// The same for a plugin with an interpreter inside (`pool::BIG_RUNTIME`). Its calls take
/// milliseconds of CPU each, so more at once would not end sooner on a few cores; and each
/// instance slot it has used keeps up to 16 MiB resident for good (see `engine`), so this
/// bounds what a burst leaves behind (a Python plugin's, after 32 calls at once).
pub(super) const MAX_CALLS_PER_BIG_PLUGIN: usize = 8;

pub(super) fn turn_limit(version: &Version) -> usize {
    let default = if version.code.big_runtime {
        MAX_CALLS_PER_BIG_PLUGIN
    } else {
        MAX_CALLS_PER_PLUGIN
    };
    version.settings.calls_at_once.unwrap_or(default)
}
