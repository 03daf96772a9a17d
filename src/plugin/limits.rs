//! Per-call limits: linear memory (a store limiter), wall time (an epoch deadline
//! that yields to the runtime every tick and traps once the time is up) and
//! optional fuel; and the words that tell a client which limit stopped a call.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use wasmtime::{ResourceLimiter, Store, StoreContextMut, Trap, UpdateDeadline};

/// Table elements one instance may hold; generous for any real guest.
const MAX_TABLE_ELEMENTS: usize = 1 << 20;

/// Host resources (streams, pollables, HTTP requests, open files) one instance may hold at
/// once, at most. Each lives in the gateway's memory, outside the plugin's memory limit: at
/// wasmtime's defaults (100,000 handles) a guest that kept every handle cost the gateway
/// tens of megabytes per call. A real plugin holds tens. The descriptor limit may make it
/// fewer ([`host_resources`]).
pub const MAX_HOST_RESOURCES: usize = 10_000;

/// Host resources one instance may hold here: [`MAX_HOST_RESOURCES`], or fewer where the
/// open-file limit would let a plugin's calls take the gateway's descriptors.
pub fn host_resources() -> usize {
    static PER_INSTANCE: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *PER_INSTANCE.get_or_init(|| crate::descriptors::per_instance(MAX_HOST_RESOURCES))
}

/// Random bytes one `get-random-bytes` call may ask for (see `sandbox`).
pub const MAX_RANDOM_BYTES: u64 = 1 << 20;

/// The linear memory of every live instance together, against `[plugins] total_memory`:
/// each plugin's own limit times the instances that may run at once is far more than a
/// machine has.
#[derive(Debug)]
pub struct MemoryBudget {
    used: AtomicU64,
    total: AtomicU64,
}

impl MemoryBudget {
    pub fn new(total: u64) -> MemoryBudget {
        MemoryBudget {
            used: AtomicU64::new(0),
            total: AtomicU64::new(total),
        }
    }

    pub fn set_total(&self, total: u64) {
        self.total.store(total, Ordering::Relaxed);
    }

    /// Takes `bytes` if they fit; `Err(total)` otherwise.
    fn take(&self, bytes: u64) -> Result<(), u64> {
        let total = self.total.load(Ordering::Relaxed);
        self.used
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |used| {
                used.checked_add(bytes).filter(|&sum| sum <= total)
            })
            .map(drop)
            .map_err(|_| total)
    }

    fn give(&self, bytes: u64) {
        self.used.fetch_sub(bytes, Ordering::AcqRel);
    }
}

/// Memory accounting for one instance: the sum of all its linear memories, within its
/// plugin's limit and the budget of all plugins together.
pub struct MemoryLimiter {
    limit: u64,
    used: u64,
    budget: Arc<MemoryBudget>,
    pub exceeded: bool,
}

impl MemoryLimiter {
    pub fn new(limit: u64, budget: Arc<MemoryBudget>) -> Self {
        MemoryLimiter {
            limit,
            used: 0,
            budget,
            exceeded: false,
        }
    }
}

impl MemoryLimiter {
    /// Gives the instance's memory back to the budget of all plugins: its call is over, and
    /// the store, kept a moment to be reset off the I/O thread, never runs guest code again.
    pub fn release(&mut self) {
        self.budget.give(std::mem::take(&mut self.used));
    }
}

impl Drop for MemoryLimiter {
    fn drop(&mut self) {
        self.budget.give(self.used);
    }
}

/// The error a growth past the budget of all plugins raises.
#[derive(Debug, thiserror::Error)]
#[error("the plugins' total memory of {} is in use", mib(*.0))]
pub struct TotalMemoryExceeded(pub u64);

/// The error a denied growth raises; traps the guest at the `memory.grow`.
#[derive(Debug, thiserror::Error)]
#[error("memory limit of {} exceeded", mib(*.0))]
pub struct MemoryLimitExceeded(pub u64);

impl ResourceLimiter for MemoryLimiter {
    fn memory_growing(
        &mut self,
        current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        let grow = desired.saturating_sub(current) as u64;
        if self.used.saturating_add(grow) > self.limit {
            self.exceeded = true;
            // A trap rather than `-1`: guests abort on a failed allocation
            // anyway, and this way the cause is certain.
            return Err(MemoryLimitExceeded(self.limit).into());
        }
        if let Err(total) = self.budget.take(grow) {
            return Err(TotalMemoryExceeded(total).into());
        }
        self.used += grow;
        Ok(true)
    }

    fn table_growing(
        &mut self,
        _current: usize,
        desired: usize,
        _max: Option<usize>,
    ) -> wasmtime::Result<bool> {
        Ok(desired <= MAX_TABLE_ELEMENTS)
    }
}

/// The time limit of one call, checked by the epoch callback.
#[derive(Debug, Clone)]
pub struct Deadline {
    pub at: Instant,
    pub expired: bool,
    /// Time the call spent waiting for its client (0.2's `client` imports), which does
    /// not count: shared with the async timeout that guards the call.
    pub paused: Arc<Paused>,
}

/// What a call waited for its client, and whether it waits now.
#[derive(Debug, Default)]
pub struct Paused {
    micros: AtomicU64,
    waiting: AtomicBool,
}

impl Paused {
    pub fn begin(&self) {
        self.waiting.store(true, Ordering::Relaxed);
    }

    pub fn end(&self, waited: Duration) {
        self.micros
            .fetch_add(waited.as_micros() as u64, Ordering::Relaxed);
        self.waiting.store(false, Ordering::Relaxed);
    }

    fn total(&self) -> Duration {
        Duration::from_micros(self.micros.load(Ordering::Relaxed))
    }
}

/// `future` within `limit`, plus the time it waited for its client: the timer that fires
/// while the call waits, or after it waited, is set again for what was added.
pub async fn within<F: Future>(limit: Duration, paused: &Paused, future: F) -> Option<F::Output> {
    let started = Instant::now();
    let mut future = std::pin::pin!(future);
    loop {
        let granted = paused.total();
        let until = started + limit + granted;
        match tokio::time::timeout_at(until.into(), &mut future).await {
            Ok(output) => return Some(output),
            // Waiting on the client now: look again a second from now (the wait itself
            // is bounded by `ask_timeout`).
            Err(_) if paused.waiting.load(Ordering::Relaxed) => {
                if let Ok(output) = tokio::time::timeout(Duration::from_secs(1), &mut future).await
                {
                    return Some(output);
                }
            }
            // It waited meanwhile: the limit moved.
            Err(_) if paused.total() != granted => {}
            Err(_) => return None,
        }
    }
}

impl Deadline {
    pub fn after(timeout: Duration) -> Self {
        Deadline {
            at: Instant::now() + timeout,
            expired: false,
            paused: Arc::default(),
        }
    }
}

/// The error raised in the guest when its time is up.
#[derive(Debug, thiserror::Error)]
#[error("time limit exceeded")]
pub struct TimeLimitExceeded;

/// Access to the limit state inside the store data.
pub trait LimitState: Send + 'static {
    fn deadline(&mut self) -> &mut Deadline;
}

/// Arms a store for one call: every epoch tick the guest yields to the async
/// runtime (a spinning guest never holds a worker thread for more than a
/// tick) and traps once its deadline has passed.
pub fn arm<T: LimitState>(
    store: &mut Store<T>,
    timeout: Duration,
    fuel_enabled: bool,
    fuel: Option<u64>,
) -> wasmtime::Result<()> {
    *store.data_mut().deadline() = Deadline::after(timeout);
    store.set_epoch_deadline(1);
    store.epoch_deadline_callback(|mut ctx: StoreContextMut<'_, T>| {
        let deadline = ctx.data_mut().deadline();
        if Instant::now() >= deadline.at {
            deadline.expired = true;
            return Err(TimeLimitExceeded.into());
        }
        Ok(UpdateDeadline::Yield(1))
    });
    if fuel_enabled {
        store.set_fuel(fuel.unwrap_or(u64::MAX))?;
    }
    Ok(())
}

/// The limit a failed call ran into, in words for the client; a trap or other failure
/// quotes the last lines the guest wrote to `stderr`.
pub fn describe_failure(
    plugin: &str,
    error: &wasmtime::Error,
    memory_exceeded: bool,
    time_expired: bool,
    limits: &crate::config::PluginLimits,
    timeout: Duration,
    stderr: &str,
) -> String {
    if let Some(TotalMemoryExceeded(total)) = find::<TotalMemoryExceeded>(error) {
        return format!(
            "plugin `{plugin}` ran out of memory: the instances of all plugins together may \
             hold {} (total_memory in [plugins]), and that is in use",
            mib(*total)
        );
    }
    if memory_exceeded || find::<MemoryLimitExceeded>(error).is_some() {
        return format!(
            "plugin `{plugin}` ran out of memory (limit {})",
            mib(limits.memory)
        );
    }
    if time_expired || find::<TimeLimitExceeded>(error).is_some() {
        return time_limit_message(plugin, timeout);
    }
    if find::<wasmtime::component::ResourceTableError>(error)
        .is_some_and(|e| matches!(e, wasmtime::component::ResourceTableError::Full))
    {
        return format!(
            "plugin `{plugin}` held more than {} host resources at once \
             (streams, pollables, requests, open files: each handle the plugin keeps is one){}",
            host_resources(),
            quoted(stderr)
        );
    }
    match find::<Trap>(error) {
        Some(Trap::OutOfFuel) => format!(
            "plugin `{plugin}` ran out of fuel (limit {})",
            limits.fuel.map_or_else(|| "none".into(), |f| f.to_string())
        ),
        Some(Trap::Interrupt) => time_limit_message(plugin, timeout),
        Some(trap) => format!(
            "plugin `{plugin}` trapped: {}{}{}{}",
            trap.to_string().trim_start_matches("wasm trap: "),
            place(error),
            hint(trap),
            quoted(stderr)
        ),
        None => format!(
            "plugin `{plugin}` failed: {}{}",
            chain(error),
            quoted(stderr)
        ),
    }
}

/// Where the trap happened, " in `crate::function`", from the innermost frame named by the
/// plugin's own code (a `name` section: release builds keep it unless stripped). Frames of
/// the standard library (a panic's way to `abort`) and the bindings' exports are skipped;
/// when the plugin's code was inlined into an export (`call_tool` into
/// `wasmgate:plugin/tool@0.1.0#call-tool`, say), the export is named instead.
fn place(error: &wasmtime::Error) -> String {
    // `wit_dylib`: componentize-py's glue between the bindings and CPython, where a
    // Python exception that escapes a tool ends.
    const NOT_THE_PLUGINS: [&str; 9] = [
        "std::",
        "core::",
        "alloc::",
        "panic_",
        "__",
        "rust_",
        "dlmalloc",
        "wit_bindgen",
        "wit_dylib",
    ];
    let Some(trace) = error.downcast_ref::<wasmtime::WasmBacktrace>() else {
        return String::new();
    };
    let names: Vec<String> = trace
        .frames()
        .iter()
        .filter_map(|frame| frame.func_name())
        .map(|name| format!("{:#}", rustc_demangle::demangle(name)))
        .collect();
    let own = names.iter().find(|name| {
        export_name(name).is_none()
            && name.as_str() != "abort"
            && !NOT_THE_PLUGINS
                .iter()
                .any(|prefix| name.trim_start_matches('<').starts_with(prefix))
    });
    if let Some(name) = own {
        return format!(" in `{name}`");
    }
    names
        .iter()
        .find_map(|name| export_name(name))
        .map_or_else(String::new, |export| format!(" in its `{export}` export"))
}

/// `call-tool` of `wasmgate:plugin/tool@0.1.0#call-tool`, the name the bindings give an
/// export's function; not the `0}` of a Rust closure's `{closure#0}`.
fn export_name(name: &str) -> Option<&str> {
    let (interface, function) = name.split_once('#')?;
    (interface.contains('/') && !interface.contains('{')).then_some(function)
}

/// Words for a trap whose usual cause its own message does not say.
fn hint(trap: &Trap) -> &'static str {
    match trap {
        Trap::MemoryOutOfBounds => {
            " (deep recursion ends this way too: a Rust or C plugin's stack is in its linear \
             memory)"
        }
        _ => "",
    }
}

/// What the guest wrote to stderr before it failed, as the end of a message.
fn quoted(stderr: &str) -> String {
    if stderr.is_empty() {
        String::new()
    } else {
        format!(" (its stderr: {stderr})")
    }
}

/// A call that waited its whole time limit for a turn, behind the plugin's other calls.
pub fn no_turn_message(plugin: &str, timeout: Duration, turns: usize) -> String {
    format!(
        "plugin `{plugin}` had no turn within its time limit of {}: it runs {turns} calls at \
         once, and this call waited for one of them to end",
        humantime::format_duration(timeout)
    )
}

/// A call that waited its whole time limit for a free instance, with the gateway at its
/// instance limit.
pub fn no_instance_message(plugin: &str, timeout: Duration) -> String {
    format!(
        "plugin `{plugin}` got no instance within its time limit of {}: the gateway's \
         plugins ran as many instances as it holds, and this call waited",
        humantime::format_duration(timeout)
    )
}

pub fn time_limit_message(plugin: &str, timeout: Duration) -> String {
    format!(
        "plugin `{plugin}` exceeded its time limit of {}",
        humantime::format_duration(timeout)
    )
}

/// A session's call that waited its whole time for the session's instance.
pub fn session_busy_message(plugin: &str, timeout: Duration) -> String {
    format!(
        "plugin `{plugin}` keeps one instance per session, and this session's other call \
         held it for the whole time limit of {}",
        humantime::format_duration(timeout)
    )
}

fn find<E: std::error::Error + Send + Sync + 'static>(error: &wasmtime::Error) -> Option<&E> {
    error
        .downcast_ref::<E>()
        .or_else(|| error.chain().find_map(|e| e.downcast_ref::<E>()))
}

/// An error and its causes on one line.
pub fn chain(error: &wasmtime::Error) -> String {
    let mut out = String::new();
    for (i, e) in error.chain().enumerate() {
        if i > 0 {
            out.push_str(": ");
        }
        out.push_str(&e.to_string());
    }
    out
}

pub fn mib(bytes: u64) -> String {
    if bytes.is_multiple_of(1 << 20) {
        format!("{} MiB", bytes >> 20)
    } else {
        format!("{bytes} bytes")
    }
}
