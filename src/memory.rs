//! Memory the gateway gives back after one-off work (a plugin compiled or loaded from the
//! cache) and after bursts of big messages: the allocator (mimalloc) would otherwise keep
//! what they freed until later allocations come by (docs/performance.md has the figures).

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::Duration;

use tokio::sync::Notify;

/// Messages read and batches written since start: activity, for [`give_back_when_idle`].
static MESSAGES: AtomicU64 = AtomicU64::new(0);

/// Set while [`give_back_when_idle`] sleeps until the next activity: only the first
/// message after a give-back wakes it, and an idle gateway gets no timer wake-ups.
static ASLEEP: AtomicBool = AtomicBool::new(false);
static WAKE: Notify = Notify::const_new();

/// How long without a message the gateway counts as idle.
const IDLE: Duration = Duration::from_secs(2);

/// A message came in, or answers went out (a relaxed add and load on the hot path).
/// Writes count: a client that reads big answers slowly is not idle yet.
pub fn note_activity() {
    MESSAGES.fetch_add(1, Ordering::Relaxed);
    if ASLEEP.load(Ordering::Relaxed) && ASLEEP.swap(false, Ordering::AcqRel) {
        WAKE.notify_one();
    }
}

/// Gives memory back once messages stopped for [`IDLE`] both ways after some came: a burst's
/// big requests and results do not stay resident while the gateway waits for the next.
/// Runs for the life of the runtime it is spawned on (the I/O thread's, whose heap held
/// most of a burst's messages).
pub async fn give_back_when_idle() {
    loop {
        // Asleep until a message (a wake-up given before this await is kept by `Notify`).
        ASLEEP.store(true, Ordering::Release);
        WAKE.notified().await;
        let mut seen = MESSAGES.load(Ordering::Relaxed);
        loop {
            tokio::time::sleep(IDLE).await;
            let now = MESSAGES.load(Ordering::Relaxed);
            if now == seen {
                break;
            }
            seen = now;
        }
        give_back();
    }
}

/// Asks the allocator to return to the system the freed memory it holds (`mi_collect`:
/// this thread's heap and the arenas all threads share; a CPython load leaves much). Too
/// slow for every call: for after a load or a burst.
pub fn give_back() {
    // SAFETY: mi_collect takes no pointers and may be called from any thread at any
    // time; with the system allocator in use (unit tests) it finds nothing to do.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
