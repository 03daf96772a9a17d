//! A bounded queue of lines to a pipe (a client's stdout, a server's stdin) and the task
//! that writes it. Past its byte budget a peer that stopped reading gets no more
//! notifications (dropped and counted) and the side that feeds it is told to wait or to
//! fail, so that a peer that never reads cannot grow the gateway's memory without end.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use tokio::io::{AsyncWrite, AsyncWriteExt, BufWriter};
use tokio::sync::{Notify, mpsc};

/// Bytes queued past which notifications are dropped and requests refused or held back.
pub const BUDGET: usize = 16 << 20;

/// A line to send, and the request of the peer's it belongs to, if any (the key of its id):
/// a transport with a stream per request (HTTP) sends it there; stdio has one stream.
#[derive(Debug)]
pub struct Outgoing {
    pub line: String,
    pub related: Option<Arc<str>>,
}

/// The sending side; cheap to clone.
#[derive(Clone, Debug)]
pub struct Outbox {
    tx: mpsc::UnboundedSender<Outgoing>,
    state: Arc<State>,
}

#[derive(Debug)]
struct State {
    /// Who reads it, for the log: "the client", "server `x`".
    peer: String,
    queued: AtomicUsize,
    dropped: AtomicU64,
    room: Notify,
    created: Instant,
    /// When the writer last took a line, in ms since `created`.
    taken_at: AtomicU64,
}

/// The writing side, for [`write_lines`].
pub struct Inbox {
    rx: mpsc::UnboundedReceiver<Outgoing>,
    state: Arc<State>,
}

/// A queue whose reader is `peer`.
pub fn outbox(peer: impl Into<String>) -> (Outbox, Inbox) {
    let (tx, rx) = mpsc::unbounded_channel();
    let state = Arc::new(State {
        peer: peer.into(),
        queued: AtomicUsize::new(0),
        dropped: AtomicU64::new(0),
        room: Notify::new(),
        created: Instant::now(),
        taken_at: AtomicU64::new(0),
    });
    (
        Outbox {
            tx,
            state: state.clone(),
        },
        Inbox { rx, state },
    )
}

impl Outbox {
    /// Queues a line whatever the backlog: an answer, which the peer is waiting for.
    pub fn send(&self, line: String) {
        self.send_related(line, None);
    }

    /// [`Self::send`] for a line that belongs to the peer's request `related`.
    pub fn send_related(&self, line: String, related: Option<Arc<str>>) {
        self.state.queued.fetch_add(line.len(), Ordering::Relaxed);
        if self.tx.send(Outgoing { line, related }).is_err() {
            self.state.queued.store(0, Ordering::Relaxed);
        }
    }

    /// Queues a notification unless the backlog is over budget; `false` when dropped.
    pub fn send_or_drop(&self, line: String) -> bool {
        self.send_or_drop_related(line, None)
    }

    /// [`Self::send_or_drop`] for a notification that belongs to the peer's request `related`.
    pub fn send_or_drop_related(&self, line: String, related: Option<Arc<str>>) -> bool {
        if self.is_full() {
            let dropped = self.state.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            if dropped.is_power_of_two() {
                tracing::warn!(
                    peer = %self.state.peer,
                    dropped,
                    "{} is not reading: {} MiB waiting; notifications to it are dropped",
                    self.state.peer,
                    self.backlog() >> 20
                );
            }
            return false;
        }
        self.send_related(line, related);
        true
    }

    /// Whether the backlog is over budget.
    pub fn is_full(&self) -> bool {
        self.backlog() > BUDGET
    }

    /// Bytes queued and not written yet.
    pub fn backlog(&self) -> usize {
        self.state.queued.load(Ordering::Relaxed)
    }

    /// Notifications dropped so far.
    pub fn dropped(&self) -> u64 {
        self.state.dropped.load(Ordering::Relaxed)
    }

    /// Resolves once the backlog is within budget: a reader of requests waits here rather
    /// than take more work whose answers could not go out.
    pub async fn room(&self) {
        loop {
            let notified = self.state.room.notified();
            if !self.is_full() {
                return;
            }
            notified.await;
        }
    }

    /// How long since the writer last took a line while lines wait: a peer that reads slowly
    /// keeps this short, one that stopped reading lets it grow.
    pub fn stalled_for(&self) -> Duration {
        if self.backlog() == 0 {
            return Duration::ZERO;
        }
        let taken = Duration::from_millis(self.state.taken_at.load(Ordering::Relaxed));
        self.state.created.elapsed().saturating_sub(taken)
    }

    /// Asks the writer to stop after the lines queued before this one.
    pub fn close(&self) {
        let _ = self.tx.send(Outgoing {
            line: String::new(),
            related: None,
        });
    }
}

impl Inbox {
    /// The next line, once the writer side queued one; `None` when every sender is gone.
    pub async fn recv(&mut self) -> Option<Outgoing> {
        let out = self.rx.recv().await?;
        self.taken(&out.line);
        Some(out)
    }

    /// The next line if one is queued now.
    pub fn try_recv(&mut self) -> Option<Outgoing> {
        let out = self.rx.try_recv().ok()?;
        self.taken(&out.line);
        Some(out)
    }

    fn taken(&self, line: &str) {
        let now = self.state.created.elapsed().as_millis() as u64;
        self.state.taken_at.store(now, Ordering::Relaxed);
        let before = self.state.queued.fetch_sub(line.len(), Ordering::Relaxed);
        if before > BUDGET && before - line.len() <= BUDGET {
            self.state.room.notify_waiters();
        }
    }
}

/// The writer is gone (the peer closed its end, or the write failed): nothing queued will be
/// written, so nothing waits for room any more.
impl Drop for Inbox {
    fn drop(&mut self) {
        self.state.queued.store(0, Ordering::Relaxed);
        self.state.room.notify_waiters();
    }
}

/// Writes each line until every sender is gone or [`Outbox::close`]; everything already
/// queued goes out before one flush. `true` when it ended on a close, not on an error.
pub async fn write_lines<W: AsyncWrite + Unpin>(output: W, mut inbox: Inbox) -> bool {
    let mut out = BufWriter::with_capacity(64 * 1024, output);
    let mut closed = false;
    'outer: while let Some(Outgoing { mut line, .. }) = inbox.recv().await {
        loop {
            if line.is_empty() {
                closed = true;
                break 'outer;
            }
            if out.write_all(line.as_bytes()).await.is_err() || out.write_all(b"\n").await.is_err()
            {
                return false;
            }
            match inbox.try_recv() {
                Some(next) => line = next.line,
                None => break,
            }
        }
        if out.flush().await.is_err() {
            return false;
        }
        crate::memory::note_activity();
    }
    let _ = out.flush().await;
    let _ = out.shutdown().await;
    closed
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::{BUDGET, outbox, write_lines};

    /// At a close, the lines queued before it go out whole, even to a reader that reads
    /// slowly; nothing after it is written.
    #[tokio::test]
    async fn a_close_writes_what_was_queued_whole() {
        let (client, gateway) = tokio::io::duplex(1024);
        let (tx, rx) = outbox("the client");
        let big = "x".repeat(100_000);
        tx.send(big.clone());
        tx.close();
        tx.send("after the stop".into());
        let writer = tokio::spawn(write_lines(gateway, rx));
        let mut read = String::new();
        let mut client = client;
        client.read_to_string(&mut read).await.unwrap();
        assert!(writer.await.unwrap());
        assert_eq!(read, format!("{big}\n"));
    }

    /// A reader that stops reading: notifications past the budget are dropped and counted,
    /// answers still queue, and `room` waits until the reader catches up.
    #[tokio::test]
    async fn a_reader_that_stops_bounds_the_queue() {
        let (mut client, gateway) = tokio::io::duplex(64 * 1024);
        let (tx, rx) = outbox("the client");
        let writer = tokio::spawn(write_lines(gateway, rx));
        let line = "n".repeat(64 * 1024);
        let mut sent = 0;
        for _ in 0..(2 * BUDGET / line.len()) {
            if tx.send_or_drop(line.clone()) {
                sent += 1;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        assert!(tx.dropped() > 0, "nothing was dropped");
        assert!(tx.backlog() <= BUDGET + line.len(), "{}", tx.backlog());
        // An answer queues whatever the backlog (the writer has taken a little meanwhile).
        tx.send("a".repeat(BUDGET));
        assert!(tx.is_full());
        let waiting = tokio::time::timeout(std::time::Duration::from_millis(50), tx.room()).await;
        assert!(waiting.is_err(), "room while the reader is stopped");
        // The reader catches up: room again, and every line queued arrives.
        let reading = tokio::spawn(async move {
            let mut all = Vec::new();
            client.read_to_end(&mut all).await.unwrap();
            all
        });
        tx.room().await;
        tx.close();
        drop(tx);
        assert!(writer.await.unwrap());
        let all = reading.await.unwrap();
        let lines = all.split(|&b| b == b'\n').filter(|l| !l.is_empty()).count();
        assert_eq!(lines, sent + 1);
    }
}
