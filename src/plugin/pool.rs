//! Instances made ahead of their call: a few per plugin version, each used for
//! exactly one call, refilled in the background (on a plugin thread) after each call.
//! Filled only once a version is called, so an idle plugin holds no instance (and no RSS).
//! Used stores wait here too, for the same refill task to drop them: resetting a store
//! (its memory slot) costs as much as a small call and must not delay the answer.
//!
//! Instantiation and reset are most of a small call's cost (minimal: ~8 µs and ~6 µs of
//! CPU, the call itself 1-3 µs), and both move off the request path this way.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;

use super::bindings::Plugin;
use super::lock;
use super::sandbox::StoreState;

/// Ready instances kept per plugin version: enough for a burst of calls to start at
/// once; a big runtime's instance holds megabytes, so it keeps fewer.
pub const READY_PER_VERSION: usize = 8;
pub const READY_PER_BIG_VERSION: usize = 2;

/// A component this big (bytes) carries an interpreter: CPython from componentize-py is
/// 18 MB, a JavaScript engine about 10 MB; the Rust plugins here are 40 KB to 2 MB. Its
/// first call on a fresh instance touches much of that runtime (CPython's: ~0.4 ms), so
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
    pub instance: Plugin,
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
    /// How many ready instances to keep.
    size: usize,
}

impl ReadyPool {
    pub fn new(big_runtime: bool) -> ReadyPool {
        ReadyPool {
            ready: Mutex::default(),
            used: Mutex::default(),
            filling: AtomicBool::new(false),
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
