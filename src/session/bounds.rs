//! Bounds on a session's client requests in flight, set by a transport that serves many
//! clients: per session, and over all its sessions.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::protocol::{self, RpcError};

/// Bounds on client requests in flight that a transport serving many clients sets: per
/// session, and over all its sessions (a batch's members and a legacy `POST` count as
/// requests too).
pub struct RequestBounds {
    pub(super) per_session: usize,
    total: usize,
    running: Arc<AtomicUsize>,
}

impl RequestBounds {
    pub fn new(per_session: usize, total: usize) -> Arc<RequestBounds> {
        Arc::new(RequestBounds {
            per_session,
            total,
            running: Arc::default(),
        })
    }

    /// Requests in flight over all sessions now.
    pub fn running(&self) -> usize {
        self.running.load(Ordering::Relaxed)
    }

    /// Counts one more request of a session that has `session_running` in flight, or
    /// says which bound it would pass.
    pub(super) fn count(&self, session_running: usize) -> Result<Counted, RpcError> {
        if session_running >= self.per_session {
            return Err(RpcError::new(
                protocol::BACKEND_UNAVAILABLE,
                format!(
                    "Too Many Requests: this session has {} requests in flight (max_requests_per_session)",
                    self.per_session
                ),
            ));
        }
        let before = self.running.fetch_add(1, Ordering::Relaxed);
        let counted = Counted(self.running.clone());
        if before >= self.total {
            return Err(RpcError::new(
                protocol::BACKEND_UNAVAILABLE,
                format!(
                    "Too Many Requests: the gateway has {} requests in flight from all its \
                     clients (max_requests); retry shortly",
                    self.total
                ),
            ));
        }
        Ok(counted)
    }
}

/// One request counted in [`RequestBounds::running`].
pub(super) struct Counted(Arc<AtomicUsize>);

impl Drop for Counted {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}
