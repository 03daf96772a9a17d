//! Instances made ahead of their call, a few per called plugin version, each used for one
//! call (a fresh instance per call: `instance = "call"`, or a `"session"` plugin called
//! outside a session) and refilled on a plugin thread afterwards; used stores wait here to
//! be reset there too. Making and resetting an instance are most of a small call's cost
//! (docs/performance.md, "Where a call's time goes"), and both leave the request path.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;

use super::kind::Bound;
use super::lock;
use super::sandbox::StoreState;

/// Ready instances kept per plugin version: enough for a burst of calls to start at
/// once; a big runtime's instance holds megabytes, so it keeps fewer.
pub const READY_PER_VERSION: usize = 8;
pub const READY_PER_BIG_VERSION: usize = 2;

/// How long a refill that filled its pool waits for more work before its plugin thread
/// may sleep. Calls that follow each other closely (an agent's batch, a benchmark) then
/// hand their used stores to a thread that is awake, on another core: waking a sleeping
/// one costs the calling thread a syscall per call (an `eventfd` write, a large share of
/// the I/O thread's time at 1 in flight per `perf`), and the woken thread often ran its refill
/// on the core of the client's next request. The cost: up to this much CPU after the
/// last call of a burst. Figures in docs/performance.md.
pub const REFILL_LINGER: Duration = Duration::from_micros(100);

/// A component this big (bytes) carries an interpreter (CPython, a JavaScript engine),
/// well above the Rust plugins here. Its first call on a fresh instance touches much of
/// that runtime, so
/// its ready instances get a `list-tools` call first: the one export that takes no input
/// and has no effect, so no client data reaches an instance before its call, and the
/// real call's latency halves.
pub static BIG_RUNTIME: AtomicUsize = AtomicUsize::new(BIG_RUNTIME_DEFAULT);
pub const BIG_RUNTIME_DEFAULT: usize = 4 << 20;

/// Whether a component of `len` bytes carries a big runtime (see [`BIG_RUNTIME`], which
/// tests lower to put a small component on that path).
pub fn is_big_runtime(len: usize) -> bool {
    len >= BIG_RUNTIME.load(Ordering::Relaxed)
}

/// An instance nobody has called yet, with the store it lives in and its
/// share of the host's instance budget.
pub struct Ready {
    pub store: Store<StoreState>,
    pub instance: Bound,
    pub permit: OwnedSemaphorePermit,
}

/// A store after its call, with its instance budget: what the refill drops.
pub type Used = (Store<StoreState>, OwnedSemaphorePermit);

/// Used stores a pool holds for its refill task to drop; past that they are dropped
/// where they are.
const USED_BACKLOG: usize = 32;

pub struct ReadyPool {
    ready: Mutex<Vec<Ready>>,
    used: Mutex<Vec<Used>>,
    filling: AtomicBool,
    /// The core of the thread that last asked for a refill (-1: not known).
    caller_cpu: AtomicI32,
    /// When the last refill was asked for, in µs since `created`.
    asked_at: AtomicU64,
    /// µs between the last two asks: calls this far apart gain nothing from a linger.
    asked_apart: AtomicU64,
    created: Instant,
    /// How many ready instances to keep.
    size: usize,
}

impl ReadyPool {
    pub fn new(big_runtime: bool) -> ReadyPool {
        ReadyPool {
            ready: Mutex::default(),
            used: Mutex::default(),
            filling: AtomicBool::new(false),
            caller_cpu: AtomicI32::new(-1),
            asked_at: AtomicU64::new(0),
            asked_apart: AtomicU64::new(u64::MAX),
            created: Instant::now(),
            size: if big_runtime {
                READY_PER_BIG_VERSION
            } else {
                READY_PER_VERSION
            },
        }
    }

    pub fn take(&self) -> Option<Ready> {
        lock(&self.ready).pop()
    }

    pub fn missing(&self) -> usize {
        self.size.saturating_sub(lock(&self.ready).len())
    }

    /// Leaves a used store for the refill task; drops it here when too many wait.
    pub fn throw_away(&self, used: Used) {
        let mut waiting = lock(&self.used);
        if waiting.len() < USED_BACKLOG {
            waiting.push(used);
            return;
        }
        drop(waiting);
        drop(used);
    }

    /// The used stores waiting to be dropped.
    pub fn take_used(&self) -> Vec<Used> {
        std::mem::take(&mut *lock(&self.used))
    }

    /// Whether the refill has work: a ready instance missing or a used store waiting.
    pub fn needs_refill(&self) -> bool {
        self.missing() > 0 || !lock(&self.used).is_empty()
    }

    /// Notes when a refill is asked for and the core of the thread that asks, for
    /// [`Self::wait_for_work`].
    pub fn note_ask(&self) {
        let now = self.created.elapsed().as_micros() as u64;
        let before = self.asked_at.swap(now, Ordering::Relaxed);
        self.asked_apart
            .store(now.saturating_sub(before), Ordering::Relaxed);
        let cpu = current_cpu().map_or(-1, |cpu| cpu as i32);
        self.caller_cpu.store(cpu, Ordering::Relaxed);
    }

    fn caller_cpu(&self) -> Option<usize> {
        usize::try_from(self.caller_cpu.load(Ordering::Relaxed)).ok()
    }

    /// Waits up to `linger` for [`Self::needs_refill`], `true` once it does. It polls, and
    /// yields between polls to the other tasks of its thread: a sleep and a wake-up would
    /// cost what the wait is there to save. Not to other threads (`sched_yield`): that can
    /// hand the core to any runnable thread for a whole time slice, and under the bench's
    /// spin loops many more calls then found the pool empty. Polling on the core
    /// of the thread that asked for the refill (the I/O thread) would hold up the very calls
    /// it waits for (`perf sched` showed the I/O thread waiting behind it), so the
    /// wait moves the thread off that core, once; it ends if the scheduler brings it back.
    /// Calls further apart than twice the linger would not be caught by it: then it does
    /// not wait at all (calls far apart spent CPU in it for nothing).
    pub async fn wait_for_work(&self, linger: Duration) -> bool {
        let close = self.asked_apart.load(Ordering::Relaxed) <= 2 * linger.as_micros() as u64;
        if !close {
            return self.needs_refill();
        }
        let since = Instant::now();
        let mut stepped_off = false;
        loop {
            if self.needs_refill() {
                return true;
            }
            if since.elapsed() >= linger {
                return false;
            }
            if let Some(cpu) = current_cpu().filter(|&cpu| Some(cpu) == self.caller_cpu()) {
                if stepped_off || !step_off(cpu) {
                    return false;
                }
                stepped_off = true;
            }
            tokio::task::yield_now().await;
        }
    }

    pub fn put(&self, ready: Ready) {
        lock(&self.ready).push(ready);
    }

    /// Claims the right to refill; `false` when a refill is already running.
    pub fn start_filling(&self) -> bool {
        !self.filling.swap(true, Ordering::AcqRel)
    }

    /// Whether a refill is scheduled or running (tests wait for it to end).
    #[cfg(test)]
    pub fn is_filling(&self) -> bool {
        self.filling.load(Ordering::Acquire)
    }

    pub fn done_filling(&self) {
        self.filling.store(false, Ordering::Release);
    }

    /// Empties the pool; the caller drops what it held where resets may take time.
    pub fn drain(&self) -> (Vec<Ready>, Vec<Used>) {
        (
            std::mem::take(&mut *lock(&self.ready)),
            std::mem::take(&mut *lock(&self.used)),
        )
    }
}

/// The core this thread runs on, where the system says.
#[cfg(target_os = "linux")]
fn current_cpu() -> Option<usize> {
    // SAFETY: sched_getcpu takes no arguments and touches no memory of ours.
    usize::try_from(unsafe { libc::sched_getcpu() }).ok()
}

#[cfg(not(target_os = "linux"))]
fn current_cpu() -> Option<usize> {
    None
}

/// Moves this thread off core `cpu`, leaving the cores it may run on as they were: the
/// affinity is narrowed, which migrates the thread, then restored at once (a nudge, not
/// pinning). `false` if it cannot (one core allowed, or the calls fail).
#[cfg(target_os = "linux")]
fn step_off(cpu: usize) -> bool {
    let Some(allowed) = affinity() else {
        return false;
    };
    let Some(elsewhere) = without(&allowed, cpu) else {
        return false;
    };
    set_affinity(&elsewhere) && set_affinity(&allowed)
}

/// `cores` less `cpu`; `None` if nothing is left, or `cpu` is past what a cpu_set_t can
/// name (1,024).
#[cfg(target_os = "linux")]
fn without(cores: &libc::cpu_set_t, cpu: usize) -> Option<libc::cpu_set_t> {
    if cpu >= libc::CPU_SETSIZE as usize {
        return None;
    }
    let mut rest = *cores;
    // SAFETY: CPU_CLR and CPU_COUNT work on the set they are given, a plain bit set.
    let left = unsafe {
        libc::CPU_CLR(cpu, &mut rest);
        libc::CPU_COUNT(&rest)
    };
    (left > 0).then_some(rest)
}

/// The cores this thread may run on.
#[cfg(target_os = "linux")]
fn affinity() -> Option<libc::cpu_set_t> {
    // SAFETY: the set is a plain bit set owned here, passed with its size.
    unsafe {
        let mut allowed: libc::cpu_set_t = std::mem::zeroed();
        let size = std::mem::size_of::<libc::cpu_set_t>();
        (libc::sched_getaffinity(0, size, &mut allowed) == 0).then_some(allowed)
    }
}

/// Lets this thread run on `cores` only; the kernel moves it before this returns if it runs
/// elsewhere.
#[cfg(target_os = "linux")]
fn set_affinity(cores: &libc::cpu_set_t) -> bool {
    // SAFETY: as in `affinity`; the set is only read.
    unsafe { libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), cores) == 0 }
}

#[cfg(not(target_os = "linux"))]
fn step_off(_cpu: usize) -> bool {
    false
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    use super::*;

    #[test]
    fn stepping_off_a_core_moves_the_thread_and_keeps_its_allowed_cores() {
        let before = affinity().expect("sched_getaffinity answers on Linux");
        let cpu = current_cpu().expect("sched_getcpu answers on Linux");
        let elsewhere = without(&before, cpu);
        // The narrowing moves the thread at once (once restored, the scheduler may bring it
        // back at any time, so that is where the move is seen).
        if let Some(elsewhere) = &elsewhere {
            assert!(set_affinity(elsewhere));
            assert_ne!(current_cpu(), Some(cpu), "still on core {cpu}");
            assert!(set_affinity(&before));
        }
        assert_eq!(step_off(cpu), elsewhere.is_some(), "no other core allowed?");
        let after = affinity().expect("sched_getaffinity answers on Linux");
        // SAFETY: CPU_EQUAL reads the two sets it is given.
        assert!(
            unsafe { libc::CPU_EQUAL(&before, &after) },
            "allowed cores changed"
        );
    }

    #[tokio::test]
    async fn a_refill_waits_its_linger_for_work_and_no_longer() {
        let linger = Duration::from_millis(50);
        // Nothing to make or drop, and calls close together: the whole linger, then no.
        let full = ReadyPool {
            size: 0,
            ..ReadyPool::new(false)
        };
        full.note_ask();
        full.note_ask();
        // As if asked from no known core: this thread noted its own, and the wait would
        // step off it and end early should the scheduler bring it back (the step-off test
        // covers that).
        full.caller_cpu.store(-1, Ordering::Relaxed);
        let since = Instant::now();
        assert!(!full.wait_for_work(linger).await);
        assert!(since.elapsed() >= linger);
        // Calls far apart: no wait at all.
        full.note_ask();
        std::thread::sleep(2 * linger + Duration::from_millis(5));
        full.note_ask();
        let since = Instant::now();
        assert!(!full.wait_for_work(linger).await);
        assert!(since.elapsed() < linger);
        // Instances missing: yes at once, however long the linger.
        let empty = ReadyPool::new(false);
        let since = Instant::now();
        assert!(empty.wait_for_work(Duration::from_secs(60)).await);
        assert!(since.elapsed() < Duration::from_secs(1));
    }
}
