//! The stdio transport: newline-delimited JSON-RPC on stdin/stdout, one client.
//! stdout carries protocol only; logs go to stderr. A client gets [`MAX_IN_FLIGHT`]
//! requests worked on at once: the next one waits, unread past it, until one ends.
//! Answers go out as they come ([`handle_line`]), on the one stream back. A request of
//! the stateless era (2026-07-28) is answered by a session of its own, beside the client's.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, BufReader};

use crate::config::RatePer;
use crate::gateway::Gateway;
use crate::limits::LOCAL_PRINCIPAL;
use crate::peer::Principal;
use crate::pipe::lines::{Line, MAX_MESSAGE, read_line, reuse};
use crate::pipe::outbox::{Outbox, outbox, write_lines};
use crate::protocol::{self, Incoming, Message, methods};
use crate::session::{Handled, RequestBounds, Session, stateless};

/// How long the answers already queued may take to go out once the client closed stdin
/// and the answers in flight are in (or `shutdown_grace` passed).
const WRITER_GRACE: Duration = Duration::from_millis(200);

/// Requests of the client in flight at once (as `[http] max_requests_per_session` by
/// default). Each holds its arguments (up to `MAX_MESSAGE`) until it ends: without a
/// bound, large requests to a server that stopped answering would grow memory without end.
pub const MAX_IN_FLIGHT: usize = 64;

/// Serves one client until `input` ends or `stop` resolves (a signal: answers in flight
/// are dropped). Generic so tests can use in-memory pipes.
pub async fn serve<R, W>(
    gateway: Arc<Gateway>,
    input: R,
    output: W,
    stop: impl std::future::Future<Output = ()>,
) -> std::io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin + Send + 'static,
{
    let (out_tx, out_rx) = outbox("the client");
    let writer = tokio::spawn(write_lines(output, out_rx));
    let session = Session::new(gateway, out_tx.clone());
    // The client over stdio is the local user who started the gateway.
    session.peer.set_principal(Principal::operator());
    // Stateless requests run beside the session's, each in a session of its own.
    let beside = Beside {
        out: out_tx.clone(),
        bounds: RequestBounds::new(MAX_IN_FLIGHT, MAX_IN_FLIGHT),
        running: Arc::default(),
        listening: Arc::default(),
    };
    let mut reader = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::new();
    tokio::pin!(stop);
    let stopped = loop {
        reuse(&mut line);
        // A client that does not read its answers gets no more requests read until it does.
        if out_tx.is_full() {
            tokio::select! {
                biased;
                _ = &mut stop => break true,
                () = out_tx.room() => {}
            }
        }
        let read = tokio::select! {
            biased;
            _ = &mut stop => break true,
            read = read_line(&mut reader, &mut line, MAX_MESSAGE) => read?,
        };
        match read {
            Line::End => break false,
            Line::TooLong(len) => session.send(crate::protocol::error_response(
                serde_json::Value::Null,
                &crate::protocol::RpcError::new(
                    crate::protocol::INVALID_REQUEST,
                    format!(
                        "Invalid Request: a message of {len} bytes or more; the limit is {} MiB",
                        MAX_MESSAGE >> 20
                    ),
                ),
            )),
            // JSON text is UTF-8 (RFC 8259): other bytes are a parse error, wherever they are.
            Line::Read => match std::str::from_utf8(&line) {
                Ok(text) => {
                    let text = text.trim_end_matches(['\n', '\r']);
                    // At the bound, a request waits (and the input behind it stays unread);
                    // answers and notifications go through, since what the requests in
                    // flight wait for (a sampling answer, a cancel) may be among them.
                    if session.requests_in_flight() >= MAX_IN_FLIGHT && starts_work(text) {
                        tokio::select! {
                            biased;
                            _ = &mut stop => break true,
                            () = session.fewer_in_flight_than(MAX_IN_FLIGHT) => {}
                        }
                    }
                    if !over_rate(&session, text) && !beside.handle(&session, text) {
                        handle_line(&session, text)
                    }
                }
                Err(err) => session.send(crate::protocol::error_response(
                    serde_json::Value::Null,
                    &crate::protocol::RpcError::new(
                        crate::protocol::PARSE_ERROR,
                        format!("Parse error: not UTF-8 ({err})"),
                    ),
                )),
            },
        }
    };
    let grace = session.gateway.config.load().gateway.shutdown_grace;
    let mut writer_grace = WRITER_GRACE;
    if stopped {
        // Open listens end with their result, queued before the queue closes.
        session.gateway.end_listens();
        let _ = tokio::time::timeout(grace, beside.listening.write()).await;
        // Out go the lines already queued, whole, to a client that reads within
        // `shutdown_grace`; answers still being worked on are dropped.
        out_tx.close();
        writer_grace = grace;
    } else {
        // Answers still in flight get `shutdown_grace` once the client closed stdin: a
        // script that pipes requests in and closes stdin still gets its answers, and a
        // stuck call holds exit no longer than a server that ignores its closed stdin would.
        session.drained(tokio::time::Instant::now() + grace).await;
    }
    drop(session);
    drop(out_tx);
    let _ = tokio::time::timeout(writer_grace, writer).await;
    Ok(())
}

/// What a stateless request's own session needs: the client's output, and a bound on
/// such requests in flight (they are not the session's).
struct Beside {
    out: Outbox,
    bounds: Arc<RequestBounds>,
    /// Its requests in flight by id (as JSON text), for `notifications/cancelled`.
    running: Arc<Mutex<HashMap<String, Arc<Session>>>>,
    /// Read-held by each open `subscriptions/listen` until its answer is queued.
    listening: Arc<tokio::sync::RwLock<()>>,
}

impl Beside {
    /// Takes a request of the stateless era (2026-07-28: its `_meta` claims a version) and
    /// answers it without the session; `false` for any other line, which the session takes.
    fn handle(&self, session: &Arc<Session>, line: &str) -> bool {
        if line.contains(methods::CANCELLED) && self.cancel(line) {
            return true;
        }
        // Most lines are of the session: spare them a second parse.
        if !line.contains(protocol::modern::META_VERSION) {
            return false;
        }
        let Ok(Incoming::Single(Ok(Message::Request { id, method, params }))) =
            protocol::parse_line(line)
        else {
            return false;
        };
        if protocol::modern::body_claim(params.as_ref()).is_none() {
            return false;
        }
        let meta = stateless::check_meta(params.as_ref(), None)
            .and_then(|meta| stateless::check_method(&method).map(|()| meta));
        let meta = match meta {
            Ok(meta) => meta,
            Err(error) => {
                session.send_line(protocol::response_line(&id, Err(error)));
                return true;
            }
        };
        let own = Session::stateless(
            session.gateway.clone(),
            self.out.clone(),
            Principal::operator(),
            meta,
            Some(self.bounds.clone()),
        );
        let key = id.to_string();
        let listen = (method == protocol::modern::LISTEN)
            .then(|| self.listening.clone().try_read_owned().ok())
            .flatten();
        match own.handle(Message::Request { id, method, params }) {
            Handled::Running(running) => {
                self.running
                    .lock()
                    .unwrap()
                    .insert(key.clone(), own.clone());
                let running_now = self.running.clone();
                let out = self.out.clone();
                run_or_spawn(async move {
                    // Straight out: the peer's output may have been handed to a retry
                    // (an `input_required` answer leaves the call waiting for one).
                    if let Some(line) = running.await {
                        out.send_related(line, None);
                    }
                    drop(listen);
                    own.close();
                    let mut now = running_now.lock().unwrap();
                    if now.get(&key).is_some_and(|s| Arc::ptr_eq(s, &own)) {
                        now.remove(&key);
                    }
                })
            }
            Handled::Answer(line) | Handled::Refused(line) => own.send_line(line),
            Handled::Nothing | Handled::Batch(_) => {}
        }
        true
    }

    /// `notifications/cancelled` for one of its requests: that request ends, unanswered.
    /// `false` for a cancel of another request (the session's).
    fn cancel(&self, line: &str) -> bool {
        let Ok(Incoming::Single(Ok(Message::Notification { method, params }))) =
            protocol::parse_line(line)
        else {
            return false;
        };
        let Some(id) = params.as_ref().and_then(|p| p.get("requestId")) else {
            return false;
        };
        if method != methods::CANCELLED {
            return false;
        }
        let Some(own) = self.running.lock().unwrap().remove(&id.to_string()) else {
            return false;
        };
        own.close();
        true
    }
}

/// Answers a request over the local user's rate limit (`[[limits.rate]] per = "principal"`)
/// with -32000 and `data.retryAfterMs`; `false` for any other line.
fn over_rate(session: &Arc<Session>, line: &str) -> bool {
    let limits = &session.gateway.limits;
    if !limits.counts(RatePer::Principal) {
        return false;
    }
    let Ok(Incoming::Single(Ok(Message::Request { id, .. }))) = protocol::parse_line(line) else {
        return false;
    };
    match limits.admit_request(LOCAL_PRINCIPAL, None) {
        Ok(()) => false,
        Err(refusal) => {
            session.send_line(protocol::response_line(&id, Err(refusal.to_rpc())));
            true
        }
    }
}

/// Whether a line is a request, or a batch (which may hold some): what takes a place in flight.
fn starts_work(line: &str) -> bool {
    matches!(
        protocol::parse_line(line),
        Ok(Incoming::Batch(_) | Incoming::Single(Ok(Message::Request { .. })))
    )
}

/// Hands one line from the client to the session, for a transport with one stream back
/// (stdio, and the legacy HTTP+SSE transport's `POST`s): answers go to the peer's queue as
/// they come, and requests run concurrently.
pub fn handle_line(session: &Arc<Session>, line: &str) {
    if line.trim().is_empty() {
        return;
    }
    crate::memory::note_activity();
    let incoming = match protocol::parse_line(line) {
        Ok(incoming) => incoming,
        Err(answer) => return session.send(answer),
    };
    match session.handle(incoming) {
        Handled::Nothing => {}
        Handled::Answer(line) | Handled::Refused(line) => session.send_line(line),
        Handled::Running(running) => send_when_answered(session, running),
        Handled::Batch(answer) => send_when_answered(session, answer),
    }
}

/// Sends the answer line `answer` comes to, if any, once it comes.
fn send_when_answered(
    session: &Arc<Session>,
    answer: impl Future<Output = Option<String>> + Send + 'static,
) {
    let session = session.clone();
    run_or_spawn(async move {
        if let Some(line) = answer.await {
            session.send_line(line);
        }
    });
}

/// Polls a request's future once here, on the reader's turn, and spawns a task for it only
/// if it waits. Most requests end in that poll (a plugin call on a ready instance, a list
/// from the catalog): no task to allocate and schedule, and the answer is queued before the
/// next line is read. A future that waits is polled again by its task, which registers the
/// task's waker in place of the no-op one of this poll (every future wakes the waker of its
/// latest poll). A panic in that poll ends the request alone, as it would in a task: the
/// reader goes on.
fn run_or_spawn(request: impl Future<Output = ()> + Send + 'static) {
    let mut request = Box::pin(request);
    let mut here = std::task::Context::from_waker(std::task::Waker::noop());
    let first = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        request.as_mut().poll(&mut here)
    }));
    match first {
        Ok(std::task::Poll::Ready(())) => {}
        Ok(std::task::Poll::Pending) => {
            tokio::spawn(request);
        }
        Err(_) => tracing::error!("a request's handler panicked; it gets no answer"),
    }
}

/// The process's stdin and stdout. When they are pipes (as MCP clients start servers),
/// they are read and written by the async reactor: tokio's own `stdin()`/`stdout()` hand
/// every read and flush to a blocking thread, which costs more than the rest of a call.
pub fn std_streams() -> (
    Box<dyn AsyncRead + Unpin + Send>,
    Box<dyn AsyncWrite + Unpin + Send>,
) {
    use std::os::fd::AsFd;
    use tokio::net::unix::pipe;
    let input: Box<dyn AsyncRead + Unpin + Send> = match std::io::stdin()
        .as_fd()
        .try_clone_to_owned()
        .map(pipe::Receiver::from_owned_fd)
    {
        Ok(Ok(pipe)) => Box::new(pipe),
        _ => Box::new(tokio::io::stdin()),
    };
    let output: Box<dyn AsyncWrite + Unpin + Send> = match std::io::stdout()
        .as_fd()
        .try_clone_to_owned()
        .map(pipe::Sender::from_owned_fd)
    {
        Ok(Ok(pipe)) => Box::new(pipe),
        _ => Box::new(tokio::io::stdout()),
    };
    (input, output)
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::run_or_spawn;

    /// A request that needs no wait has run when `run_or_spawn` returns; one that waits is
    /// finished by its task once woken, though its first poll saw a no-op waker.
    #[tokio::test]
    async fn requests_run_at_once_or_in_a_task_once_woken() {
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        run_or_spawn(async move { flag.store(true, Ordering::SeqCst) });
        assert!(done.load(Ordering::SeqCst), "ran in the first poll");

        let (tx, rx) = tokio::sync::oneshot::channel::<u32>();
        let (result_tx, result_rx) = tokio::sync::oneshot::channel();
        run_or_spawn(async move {
            let value = rx.await.unwrap();
            result_tx.send(value + 1).unwrap();
        });
        tokio::task::yield_now().await;
        tx.send(41).unwrap();
        let answer = tokio::time::timeout(std::time::Duration::from_secs(5), result_rx)
            .await
            .expect("the task was woken")
            .unwrap();
        assert_eq!(answer, 42);

        // A request that panics ends alone; the next one runs.
        run_or_spawn(async { panic!("a bug in one request") });
        let after = Arc::new(AtomicBool::new(false));
        let flag = after.clone();
        run_or_spawn(async move { flag.store(true, Ordering::SeqCst) });
        assert!(after.load(Ordering::SeqCst));
    }
}
