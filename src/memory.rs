//! Memory the gateway gives back after one-off work and after bursts. The allocator
//! (mimalloc, in the binary) keeps freed memory for reuse and returns it to the system
//! only as later allocations come by: after a plugin compiled or loaded from the cache
//! (CPython's 35 MB of compiled code is read, checked and copied), an idle gateway kept
//! ~70 MiB it no longer used, and after a burst of big messages, what they took.

use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// Messages read and batches written since start: activity, for [`give_back_when_idle`].
static MESSAGES: AtomicU64 = AtomicU64::new(0);

/// How long without a message the gateway counts as idle.
const IDLE: Duration = Duration::from_secs(2);

/// A message came in, or answers went out (one relaxed add: the hot path can afford
/// it). Writes count: a client that reads big answers slowly is not idle yet.
pub fn note_activity() {
    MESSAGES.fetch_add(1, Ordering::Relaxed);
}

/// Gives memory back once messages stopped for [`IDLE`] both ways after some came: a burst's
/// big requests and results do not stay resident while the gateway waits for the next.
/// Runs for the life of the runtime it is spawned on (the I/O thread's, whose heap held
/// most of a burst's messages).
pub async fn give_back_when_idle() {
    let mut seen = MESSAGES.load(Ordering::Relaxed);
    let mut since_given = false;
    loop {
        tokio::time::sleep(IDLE).await;
        let now = MESSAGES.load(Ordering::Relaxed);
        if now != seen {
            seen = now;
            since_given = true;
        } else if since_given {
            give_back();
            since_given = false;
        }
    }
}

/// Asks the allocator to return to the system the freed memory it holds (`mi_collect`:
/// this thread's heap and the arenas all threads share; measured after a CPython load, the
/// heap went from 86 to 32 MiB). Costs about a millisecond: for after a load or a burst,
/// not a call.
pub fn give_back() {
    // SAFETY: mi_collect takes no pointers and may be called from any thread at any
    // time; with the system allocator in use (unit tests) it finds nothing to do.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
