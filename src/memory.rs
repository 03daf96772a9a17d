//! Memory the gateway gives back after one-off work. The allocator (mimalloc, in the
//! binary) keeps freed memory for reuse and returns it to the system only as later
//! allocations come by: after a plugin compiled or loaded from the cache (CPython's 35 MB
//! of compiled code is read, checked and copied), an idle gateway kept ~70 MiB it no
//! longer used.

/// Returns the memory freed so far that the allocator still holds (all threads' freed
/// large blocks; this thread's small ones). Costs about a millisecond: for after a load,
/// not a call.
pub fn give_back() {
    // SAFETY: mi_collect takes no pointers and may be called from any thread at any
    // time; with the system allocator in use (unit tests) it finds nothing to do.
    unsafe { libmimalloc_sys::mi_collect(true) }
}
