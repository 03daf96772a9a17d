//! The one supervisor of a server, whatever carries its messages: it runs the server,
//! and after a run that ended without the gateway asking, runs it again with backoff, or
//! gives up. A kind of server says only how one run goes and what its end is called.

use std::ops::Deref;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use serde_json::{Map, Value, json};
use tokio::sync::watch;

use super::BackendState;
use super::common::{Common, stop_requested};
use super::listen::{self, Listening};
use super::mcp_client::{self, Upstream};
use crate::telemetry::events::Status;

/// A run of this long resets the count of consecutive failures. A shorter one counts as a
/// failure even after a good start: a server that crashes soon after each `initialize` is
/// in a crash loop as surely as one that never starts.
pub(super) const HEALTHY_RUN: Duration = Duration::from_secs(30);
/// The longest wait before the next run; the first is 100 ms, doubling.
pub(super) const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What a kind of server calls the ends of its runs, and how many in a row it bears.
pub(super) struct RestartPolicy {
    /// Failed runs in a row after which the server is given up (`failed`); `None`: never.
    pub(super) give_up_after: Option<u32>,
    /// The event of a run's end the gateway did not ask for.
    pub(super) end_event: &'static str,
    /// Whether a run that never got ready reports `end_event` too: a process that fails to
    /// start crashed, but a server never reached was not disconnected.
    pub(super) end_before_ready: bool,
    /// Put before the reason in the log and the last error.
    pub(super) end_prefix: &'static str,
    /// The event of a run that got ready after an earlier one (the first: `backend.ready`).
    pub(super) ready_again: &'static str,
}

impl RestartPolicy {
    /// A subprocess: a run that ends on its own crashed, and `max_restarts` such runs in a
    /// row give it up.
    pub(super) fn process(max_restarts: u32) -> RestartPolicy {
        RestartPolicy {
            give_up_after: Some(max_restarts),
            end_event: "backend.crashed",
            end_before_ready: true,
            end_prefix: "",
            ready_again: "backend.restarted",
        }
    }

    /// A remote server: a session the server ended is opened again at once; an
    /// unreachable server is tried again less and less often, and never given up.
    pub(super) fn remote() -> RestartPolicy {
        RestartPolicy {
            give_up_after: None,
            end_event: "backend.disconnected",
            end_before_ready: false,
            end_prefix: "reconnecting: ",
            ready_again: "backend.reconnected",
        }
    }
}

/// A kind of server, as its supervisor runs it.
pub(super) trait Supervised: Deref<Target = Common> + Send + Sync + 'static {
    fn policy(&self) -> RestartPolicy;

    /// One run: start, handshake, serve until it ends or the gateway stops it (`Ok`).
    fn run_once(
        &self,
        stopping: &mut watch::Receiver<bool>,
    ) -> impl Future<Output = Result<(), String>> + Send;

    /// Forgets what the run left behind (its connection, its process id).
    fn run_ended(&self);
}

/// Starts the supervisor of `server`, on a task of its own.
pub(super) fn start<S: Supervised>(server: S) -> Arc<S> {
    let server = Arc::new(server);
    tokio::spawn(supervise(server.clone()));
    server
}

/// Runs `server` until the gateway stops it, or it fails too often in a row.
async fn supervise(server: Arc<impl Supervised>) {
    let policy = server.policy();
    let name = server.name.clone();
    let mut stopping = server.stopping.subscribe();
    let mut failures: u32 = 0;
    loop {
        let started = Instant::now();
        let outcome = server.run_once(&mut stopping).await;
        // Only a run marks the server ready, and nothing else changes its state meanwhile.
        let was_ready = server.state() == BackendState::Ready;
        server.run_ended();
        if *stopping.borrow() {
            server.set_state(BackendState::Stopped);
            server
                .events
                .emit("backend.stopped", &name, Status::Success, Value::Null);
            return;
        }
        let reason = outcome.err().unwrap_or_default();
        let message = format!("{}{reason}", policy.end_prefix);
        tracing::warn!(server = %name, "{message}");
        *server.last_error.lock().unwrap() = Some(message);
        if started.elapsed() >= HEALTHY_RUN {
            failures = 0;
        }
        failures += 1;
        if let Some(max_restarts) = policy.give_up_after
            && failures > max_restarts
        {
            server.events.emit(
                "backend.failed",
                &name,
                Status::Failure,
                json!({"error": reason, "failures": failures}),
            );
            tracing::error!(
                server = %name,
                failures,
                "giving up on the server: {failures} crashes or failed starts in a row, each within {} s of starting (max_restarts = {max_restarts})",
                HEALTHY_RUN.as_secs(),
            );
            server.set_state(BackendState::Failed);
            return;
        }
        if was_ready || policy.end_before_ready {
            server.events.emit(
                policy.end_event,
                &name,
                Status::Failure,
                json!({"error": reason}),
            );
        }
        server.set_state(BackendState::Restarting);
        let backoff = Duration::from_millis(100 << (failures - 1).min(12)).min(MAX_BACKOFF);
        tracing::info!(server = %name, backoff_ms = backoff.as_millis() as u64, "restarting");
        tokio::select! {
            _ = tokio::time::sleep(backoff) => {}
            _ = stop_requested(&mut stopping) => {}
        }
        if *stopping.borrow() {
            server.set_state(BackendState::Stopped);
            return;
        }
        server.restarts.fetch_add(1, Ordering::Relaxed);
    }
}

/// A run got through its handshake over `upstream`, and its lists are kept: says so, gives
/// the server what clients asked of it before, opens its listen (a stateless server's;
/// kept open while the returned value lives) and marks it ready. `(key, value)` says
/// which process or URL, first in the event's fields.
pub(super) async fn ready<U: Upstream + Send + 'static>(
    server: &impl Supervised,
    upstream: &Arc<U>,
    (key, value): (&str, Value),
    init_timeout: Duration,
    begun: Instant,
) -> Option<Listening> {
    let name = &server.name;
    let discovered = server.discovered();
    let elapsed_ms = begun.elapsed().as_millis() as u64;
    tracing::info!(server = %name, tools = discovered.tools.len(), elapsed_ms, "server ready ({key} {value})");
    server.warn_unmatched_filter();
    let mut detail = Map::new();
    detail.insert(key.to_string(), value);
    detail.insert("tool_count".into(), discovered.tools.len().into());
    detail.insert(
        "protocol_version".into(),
        discovered.protocol_version.clone().into(),
    );
    if !discovered.protocol_source.is_empty() {
        detail.insert("protocol_source".into(), discovered.protocol_source.into());
    }
    detail.insert("elapsed_ms".into(), elapsed_ms.into());
    let event = match server.restarts() {
        0 => "backend.ready",
        _ => server.policy().ready_again,
    };
    server
        .events
        .emit(event, name, Status::Success, Value::Object(detail));
    let timeout = init_timeout.min(Duration::from_secs(10));
    let requests = mcp_client::client_requests(&server.to_gateway, name).await;
    // A stateless server's subscriptions are its listen's filter.
    if let Some(requests) = &requests
        && super::modern::is_modern(&discovered)
    {
        server.listen.restore(requests.subscriptions.clone());
    }
    let listening = listen::start(
        &server.listen,
        upstream.clone(),
        &discovered,
        &server.to_gateway,
    );
    if let Some(requests) = requests {
        mcp_client::restore(&**upstream, name, &discovered, requests, timeout).await;
    }
    // Ready once the listen is open (or its first try failed): a change the server makes
    // from then on reaches the clients.
    if let Some(listening) = &listening {
        listening.settled(timeout).await;
    }
    server.set_state(BackendState::Ready);
    listening
}
