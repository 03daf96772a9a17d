//! `max_concurrent`: calls to a server at once, whatever carries it; a call beyond waits
//! up to its timeout for a place, then is refused.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::Refusal;

/// A place among a server's calls, given back when dropped.
pub type Permit = OwnedSemaphorePermit;

#[derive(Default)]
pub struct Caps {
    /// Per server, its cap and its places (a new semaphore when the cap changes).
    places: Mutex<HashMap<String, (usize, Arc<Semaphore>)>>,
}

impl Caps {
    pub async fn acquire(
        &self,
        server: &str,
        cap: usize,
        wait: Duration,
    ) -> Result<Permit, Refusal> {
        let places = {
            let mut places = self.places.lock().unwrap();
            let entry = places
                .entry(server.to_string())
                .or_insert_with(|| (cap, Arc::new(Semaphore::new(cap))));
            if entry.0 != cap {
                *entry = (cap, Arc::new(Semaphore::new(cap)));
            }
            entry.1.clone()
        };
        match tokio::time::timeout(wait, places.acquire_owned()).await {
            Ok(Ok(permit)) => Ok(permit),
            // Timed out (the semaphore is never closed).
            _ => {
                let retry_after = wait.clamp(Duration::from_millis(100), Duration::from_secs(1));
                Err(Refusal {
                    limit: format!("server:{server}"),
                    kind: "concurrency",
                    key: server.to_string(),
                    retry_after,
                    message: format!(
                        "Server `{server}` already has {cap} calls in flight (max_concurrent) and none ended within {} ms; retry later",
                        wait.as_millis()
                    ),
                })
            }
        }
    }
}
