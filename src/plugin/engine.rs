//! The process's one wasmtime `Engine`: pooling allocator, epoch interruption
//! driven by a ticker thread, optional fuel.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use wasmtime::{Config, Engine, InstanceAllocationStrategy, PoolingAllocationConfig};

/// How often the epoch advances; the granularity of time limits and of the
/// guest's yields to the async runtime.
pub const EPOCH_TICK: Duration = Duration::from_millis(10);

/// Component instances alive at once (calls in flight plus validations). Calls
/// beyond this wait for a slot instead of failing.
pub const MAX_INSTANCES: u32 = 128;

/// Rust wasm32-wasip2 components carry the preview1 adapter beside the main
/// module: two memories and a handful of core instances per component.
const MEMORIES_PER_COMPONENT: u32 = 4;
const CORE_INSTANCES_PER_COMPONENT: u32 = 16;

pub fn build(fuel: bool) -> anyhow::Result<Engine> {
    let mut pool = PoolingAllocationConfig::default();
    pool.total_component_instances(MAX_INSTANCES)
        .total_core_instances(MAX_INSTANCES * CORE_INSTANCES_PER_COMPONENT)
        .max_core_instances_per_component(CORE_INSTANCES_PER_COMPONENT)
        .max_memories_per_component(MEMORIES_PER_COMPONENT)
        .total_memories(MAX_INSTANCES * 2)
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
        .pagemap_scan(wasmtime::Enabled::Auto);

    let mut config = Config::new();
    config
        .allocation_strategy(InstanceAllocationStrategy::Pooling(pool))
        .epoch_interruption(true)
        .consume_fuel(fuel)
        .parallel_compilation(true)
        // Data segments are copied into an instance's memory when it is made (by the
        // ready pool, ahead of its call), not mapped copy-on-write: with CoW, the first
        // call of a fresh CPython instance took ~130 page faults (~0.3 ms) writing to its
        // image. The copy costs a Python instance ~1 ms more to make, and its slot keeps
        // the image resident (~12 MB); small Rust plugins measured the same either way.
        .memory_init_cow(false);
    Engine::new(&config).map_err(|e| anyhow::anyhow!("cannot create the wasmtime engine: {e}"))
}

/// Advances the engine's epoch every [`EPOCH_TICK`] on a thread of its own, so
/// that time limits hold even when every runtime worker is busy.
pub struct Ticker {
    stop: Arc<AtomicBool>,
}

impl Ticker {
    pub fn start(engine: Engine) -> std::io::Result<Ticker> {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        std::thread::Builder::new()
            .name("wasmgate-epoch".into())
            .spawn(move || {
                while !flag.load(Ordering::Relaxed) {
                    std::thread::sleep(EPOCH_TICK);
                    engine.increment_epoch();
                }
            })?;
        Ok(Ticker { stop })
    }

    pub fn stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Drop for Ticker {
    fn drop(&mut self) {
        self.stop();
    }
}
