//! Instances made ahead of their call: a few per plugin version, each used for
//! exactly one call and then dropped, refilled in the background after each call. Filled only
//! once a version is called, so an idle plugin holds no instance (and no RSS).
//!
//! Instantiation is most of a call's cost (measured on `echo`: ~100 µs of
//! ~180 µs), and it moves off the request path this way.

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use tokio::sync::OwnedSemaphorePermit;
use wasmtime::Store;

use super::bindings::Plugin;
use super::sandbox::StoreState;

/// Ready instances kept per plugin version.
pub const READY_PER_VERSION: usize = 2;

/// A component this big (bytes) carries an interpreter: CPython from componentize-py is
/// 18 MB, a JavaScript engine about 10 MB; the Rust plugins here are 40 KB to 2 MB. Its
/// first call on a fresh instance touches much of that runtime (CPython's: ~0.4 ms), so
/// its ready instances get a `list-tools` call first: the one export that takes no input
/// and has no effect, so no client data reaches an instance before its call, and the
/// real call's latency halves. Its used stores are dropped on the reaper thread (see
/// `workers`): resetting megabytes of memory must not delay the answer.
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

#[derive(Default)]
pub struct ReadyPool {
    ready: Mutex<Vec<Ready>>,
    filling: AtomicBool,
}

impl ReadyPool {
    pub fn take(&self) -> Option<Ready> {
        self.ready.lock().unwrap_or_else(|e| e.into_inner()).pop()
    }

    pub fn missing(&self) -> usize {
        READY_PER_VERSION.saturating_sub(self.ready.lock().unwrap_or_else(|e| e.into_inner()).len())
    }

    pub fn put(&self, ready: Ready) {
        self.ready
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(ready);
    }

    /// Claims the right to refill; `false` when a refill is already running.
    pub fn start_filling(&self) -> bool {
        !self.filling.swap(true, Ordering::AcqRel)
    }

    pub fn done_filling(&self) {
        self.filling.store(false, Ordering::Release);
    }

    pub fn clear(&self) {
        self.ready.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }
}
