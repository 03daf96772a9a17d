//! The process's one wasmtime `Engine`: pooling allocator, epoch interruption
//! driven by a ticker thread, optional fuel.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances; the granularity of time limits and of the
/// guest's yields to the async runtime.
pub const EPOCH_TICK: Duration = Duration::from_millis(1);

/// Component instances alive at once (calls in flight plus validations). Calls
/// beyond this wait for a slot instead of failing.
pub const MAX_INSTANCES: u32 = 128;

/// Free instance slots kept for the plugin that last used them, beyond need (see `build`).
const MAX_UNUSED_WARM_SLOTS: u32 = 0;

/// Headroom per component: Rust wasm32-wasip2 components have one memory and three core
/// instances (main module, shim, fixup); a component built with the preview1 adapter
/// has two memories and more instances.
const MEMORIES_PER_COMPONENT: u32 = 4;

/// The pool holds this many memory slots per instance; an instance takes as many units of
/// the instance semaphores as it has memories, and at least this many.
pub const SLOT_UNITS: u32 = 2;

/// The units an instance of `component` takes: its memories, at least [`SLOT_UNITS`]; the
/// most a component may have when they cannot be known before it runs.
pub fn slot_units(component: &wasmtime::component::Component) -> u32 {
    component
        .resources_required()
        .map_or(MEMORIES_PER_COMPONENT, |r| r.num_memories)
        .max(SLOT_UNITS)
}
const CORE_INSTANCES_PER_COMPONENT: u32 = 16;

pub fn build(fuel: bool) -> anyhow::Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(MAX_INSTANCES)
        .total_core_instances(MAX_INSTANCES * CORE_INSTANCES_PER_COMPONENT)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .total_memories(MAX_INSTANCES * SLOT_UNITS)
        .total_tables(MAX_INSTANCES * CORE_INSTANCES_PER_COMPONENT)
        .total_stacks(MAX_INSTANCES)
        // The per-plugin limit is enforced by the store's limiter; the pool
        // only bounds what any plugin could ask for.
        .max_memory_size(4 << 30)
        // A slot keeps up to 16 MiB of the pages its last instance wrote resident (found
        // with pagemap_scan, Linux 6.7+, and reset by memset): giving pages back on every
        // call cost more in page faults and TLB shootdowns than a small call itself, and
        // 16 MiB covers a Python plugin's memory image. A slot only holds what it wrote.
        .linear_memory_keep_resident(16 << 20)
        .table_keep_resident(64 << 10)
        // A free slot keeps its pages too. With none kept warm beyond need, a new instance
        // takes the free slot its plugin used last, else the least recently used one, so the
        // slots used over a gateway's life are as many as its instances at once. Wasmtime's
        // default (100 warm slots, new instances in cold ones) spread a plugin that writes
        // much a call over all of them as hot reloads came, each keeping its pages.
        .max_unused_warm_slots(MAX_UNUSED_WARM_SLOTS)
        .pagemap_scan(wasmtime::Enabled::Auto);

    let mut config = Config::new();
    config
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .epoch_interruption(true)
        .consume_fuel(fuel)
        .parallel_compilation(true)
        // Data segments are copied into an instance's memory when it is made (by the
        // ready pool, ahead of its call), not mapped copy-on-write: with CoW, a CPython
        // instance took page faults on every call, because the slot reset keeps at most 32
        // dirty regions per pagemap scan resident and gives back everything after them,
        // and CPython dirties more. The copy makes a Python instance slower to make, off
        // the call's path, and its slot keeps the image resident; small Rust plugins
        // measured the same either way.
        .memory_init_cow(false);
    Engine::new(&config).map_err(|e| anyhow::anyhow!("cannot create the wasmtime engine: {e}"))
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own, so
/// that time limits hold even when every runtime worker is busy. It ticks only while
/// guest code may run (see [`Ticker::busy`]) and for [`IDLE_TICKS`] after: an idle gateway
/// gets no wake-ups from it.
pub struct Ticker {
    shared: Arc<TickerShared>,
}

struct TickerShared {
    stop: AtomicBool,
    /// Holders of a [`Busy`] guard.
    busy: AtomicUsize,
    /// Guards taken so far: a tick that sees it unchanged and no holder had no guest code.
    taken: AtomicU64,
    /// Set while the thread sleeps until the next `busy`.
    parked: AtomicBool,
    /// Set right after the spawn, long before the thread first parks.
    thread: OnceLock<std::thread::Thread>,
}

/// Ticks in a row without guest code after which the ticker sleeps. Short, since a tick
/// costs CPU (a timer wake-up) and waking a sleeping ticker one futex wake: with a
/// one-second idle limit, calls a little apart kept it ticking between them (figures in
/// docs/performance.md). A steady run of calls takes a guard every tick, so the ticker
/// does not sleep in it.
const IDLE_TICKS: u32 = 2;

/// Keeps the epoch advancing while held: taken before guest code runs.
pub struct Busy {
    shared: Arc<TickerShared>,
}

impl Drop for Busy {
    fn drop(&mut self) {
        self.shared.busy.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Ticker {
    pub fn start(engine: Engine) -> std::io::Result<Ticker> {
        let shared = Arc::new(TickerShared {
            stop: AtomicBool::new(false),
            busy: AtomicUsize::new(0),
            taken: AtomicU64::new(0),
            parked: AtomicBool::new(false),
            thread: OnceLock::new(),
        });
        let ticking = shared.clone();
        let handle = std::thread::Builder::new()
            .name("wasmgate-epoch".into())
            .spawn(move || {
                let shared = ticking;
                let (mut idle, mut seen) = (0, 0);
                while !shared.stop.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                    let taken = shared.taken.load(Ordering::SeqCst);
                    idle = if shared.busy.load(Ordering::SeqCst) == 0 && taken == seen {
                        idle + 1
                    } else {
                        0
                    };
                    seen = taken;
                    if idle >= IDLE_TICKS {
                        // `busy` raises the count before it looks at `parked`: one of the
                        // two sees the other's write, so no call waits for a parked ticker.
                        shared.parked.store(true, Ordering::SeqCst);
                        while shared.busy.load(Ordering::SeqCst) == 0
                            && !shared.stop.load(Ordering::SeqCst)
                        {
                            std::thread::park();
                        }
                        shared.parked.store(false, Ordering::SeqCst);
                        idle = 0;
                    }
                }
            })?;
        let _ = shared.thread.set(handle.thread().clone());
        Ok(Ticker { shared })
    }

    /// Guest code is about to run: the epoch must advance until the guard drops.
    pub fn busy(&self) -> Busy {
        self.shared.busy.fetch_add(1, Ordering::SeqCst);
        self.shared.taken.fetch_add(1, Ordering::Relaxed);
        if self.shared.parked.load(Ordering::SeqCst) {
            self.unpark();
        }
        Busy {
            shared: self.shared.clone(),
        }
    }

    pub fn stop(&self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        self.unpark();
    }

    fn unpark(&self) {
        if let Some(thread) = self.shared.thread.get() {
            thread.unpark();
        }
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn wait_until(what: &str, within: Duration, condition: impl Fn() -> bool) {
        let deadline = std::time::Instant::now() + within;
        while !condition() {
            assert!(
                std::time::Instant::now() < deadline,
                "{what}: not within {within:?}"
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    #[test]
    fn the_ticker_sleeps_when_idle_and_ticks_while_guest_code_may_run() {
        let engine = Engine::new(Config::new().epoch_interruption(true)).unwrap();
        let ticker = Ticker::start(engine).unwrap();
        let parked = || ticker.shared.parked.load(Ordering::SeqCst);
        wait_until("parked when idle", Duration::from_secs(10), parked);
        let busy = ticker.busy();
        wait_until("awake once busy", Duration::from_secs(1), || !parked());
        // Past the idle limit, it keeps ticking while a guard is held.
        std::thread::sleep(EPOCH_TICK * IDLE_TICKS + Duration::from_millis(300));
        assert!(!parked());
        drop(busy);
        wait_until("parked again", Duration::from_secs(10), parked);
        ticker.stop();
    }
}
