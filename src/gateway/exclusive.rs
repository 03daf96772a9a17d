//! `exclusive = true` servers: one client's calls at a time, so that a request such a
//! server sends over stdio (which names no call) has exactly one client it can belong to.

use std::collections::HashMap;
use std::sync::Mutex;

use tokio::sync::Notify;

/// Which client holds each exclusive server, and with how many calls.
#[derive(Default)]
pub struct ExclusiveTurns {
    holders: Mutex<HashMap<String, (String, usize)>>,
    freed: Notify,
}

/// A client's hold on an exclusive server, for one call; the server is free for another
/// client once its holder's last call has dropped its turn.
pub struct Turn<'a> {
    turns: &'a ExclusiveTurns,
    server: String,
}

impl ExclusiveTurns {
    /// Waits until `server` is free or already held by `client`, then holds it for a call.
    pub async fn take(&self, server: &str, client: &str) -> Turn<'_> {
        loop {
            let freed = self.freed.notified();
            tokio::pin!(freed);
            // Registered before the check: a release in between is not missed.
            freed.as_mut().enable();
            {
                let mut holders = self.holders.lock().unwrap();
                let holder = holders
                    .entry(server.to_string())
                    .or_insert_with(|| (client.to_string(), 0));
                if holder.0 == client {
                    holder.1 += 1;
                    return Turn {
                        turns: self,
                        server: server.to_string(),
                    };
                }
            }
            freed.await;
        }
    }
}

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let mut holders = self.turns.holders.lock().unwrap();
        if let Some(holder) = holders.get_mut(&self.server) {
            holder.1 -= 1;
            if holder.1 == 0 {
                holders.remove(&self.server);
                self.turns.freed.notify_waiters();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    /// A second client waits until the first client's calls are all over; the first
    /// client's own further calls do not.
    #[tokio::test]
    async fn one_client_at_a_time() {
        let turns = ExclusiveTurns::default();
        let a1 = turns.take("s", "a").await;
        let a2 = turns.take("s", "a").await;
        let b = tokio::time::timeout(Duration::from_millis(50), turns.take("s", "b")).await;
        assert!(b.is_err(), "b ran beside a");
        drop(a1);
        let b = tokio::time::timeout(Duration::from_millis(50), turns.take("s", "b")).await;
        assert!(b.is_err(), "b ran beside a's second call");
        drop(a2);
        let b = tokio::time::timeout(Duration::from_secs(5), turns.take("s", "b")).await;
        assert!(b.is_ok(), "b got its turn once a was done");
    }
}
