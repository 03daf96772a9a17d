//! The process's file-descriptor limit: raised from the soft to the hard limit at start (a
//! plugin's open files are the gateway's own descriptors), given back to the servers it
//! starts, and shared so that plugins can never take the descriptors the gateway needs.

use std::sync::OnceLock;

/// The soft limit the gateway was started with, and the one in force after [`raise`].
static LIMITS: OnceLock<(libc::rlim_t, libc::rlim_t)> = OnceLock::new();

/// Calls of one plugin that may run at once (its turn limit), each holding its share.
const CALLS_AT_ONCE: usize = 32;

/// Raises the soft limit on open files to the hard one; once, at start.
pub fn raise() {
    LIMITS.get_or_init(|| {
        let mut limit = libc::rlimit {
            rlim_cur: 0,
            rlim_max: 0,
        };
        // SAFETY: getrlimit writes the struct it is given.
        if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut limit) } != 0 {
            return (1024, 1024);
        }
        let original = limit.rlim_cur;
        let raised = libc::rlimit {
            rlim_cur: limit.rlim_max,
            rlim_max: limit.rlim_max,
        };
        // SAFETY: setrlimit reads the struct it is given.
        if limit.rlim_max > original
            && unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0
        {
            (original, limit.rlim_max)
        } else {
            (original, original)
        }
    });
}

/// The soft limit the gateway started with: what a server it starts gets back.
pub fn original_soft_limit() -> Option<libc::rlim_t> {
    LIMITS.get().map(|(original, _)| *original)
}

/// The limit on open files in force (after [`raise`]).
pub fn limit() -> usize {
    raise();
    let (_, limit) = LIMITS.get().copied().unwrap_or((1024, 1024));
    usize::try_from(limit).unwrap_or(usize::MAX)
}

/// Host resources (each may be an open file) one plugin instance may hold: one plugin's
/// calls at once hold at most half the descriptors, whatever they open; at most `cap`.
pub fn per_instance(cap: usize) -> usize {
    (limit() / 2 / CALLS_AT_ONCE).clamp(64, cap)
}
