//! The live pipes of one child process: requests in flight matched to their answers
//! by rewritten ids, and the reader of the server's stdout.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::Value;
use serde_json::value::RawValue;
use tokio::io::BufReader;
use tokio::sync::{mpsc, oneshot};

use crate::backend::listen::Listen;
use crate::backend::mcp_client::{self, Answer, CancelOnDrop, Upstream};
use crate::backend::{BackendError, BackendEvent, Responder};
use crate::pipe::lines::{self, Line};
use crate::pipe::outbox::Outbox;
use crate::protocol::{self, RpcError};

/// How long a server may take no line from a full queue before it counts as not reading.
pub(super) const STDIN_STALL: Duration = Duration::from_secs(2);

/// Where the answer to a request in flight goes: the result as JSON text, or the error.
pub(super) type AnswerSender = oneshot::Sender<Result<Box<RawValue>, RpcError>>;

/// The live pipes of one child process.
#[derive(Debug)]
pub(super) struct Connection {
    pub(super) server: String,
    pub(super) writer: Outbox,
    pub(super) pending: Mutex<HashMap<u64, AnswerSender>>,
    pub(super) next_id: AtomicU64,
    pub(super) closed: AtomicBool,
    /// Set before the gateway stops the process, so that requests it cuts short say so.
    pub(super) stopped: AtomicBool,
    /// What the server sends on its listen stream is screened by it first.
    pub(super) listen: Arc<Listen>,
}

impl Connection {
    /// Sends a notification; dropped (and counted) when the server stopped reading.
    pub(super) fn send(&self, message: Value) {
        self.writer.send_or_drop(message.to_string());
    }

    pub(super) fn complete(&self, id: u64, result: Result<Box<RawValue>, RpcError>) {
        match self.pending.lock().unwrap().remove(&id) {
            Some(tx) => {
                let _ = tx.send(result);
            }
            // The answer to a request the stop cut short (`initialize`, when a one-shot
            // command is done before a slow server is up): expected, no warning.
            None if self.stopped.load(Ordering::Acquire) => {
                tracing::debug!(server = %self.server, id, "an answer after the stop; ignored")
            }
            None => tracing::warn!(
                server = %self.server,
                id,
                "an answer to no request waiting for one (a wrong id, a second answer, or after the request timed out); ignored"
            ),
        }
    }

    /// Why a request ended without an answer: the gateway stopped the server, or it died.
    pub(super) fn gone(&self) -> BackendError {
        let server = self.server.clone();
        if self.stopped.load(Ordering::Acquire) {
            BackendError::Stopped { server }
        } else {
            BackendError::Crashed { server }
        }
    }

    /// Fails every request in flight at once: their senders drop.
    pub(super) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.pending.lock().unwrap().clear();
    }
}

impl Upstream for Connection {
    fn server(&self) -> &str {
        &self.server
    }

    /// Sends a request and waits for its answer, kept as the server's JSON text. Dropping
    /// the future (timeout, client cancellation) tells the server with `notifications/cancelled`.
    async fn request_raw(&self, method: &str, params: Option<Value>, timeout: Duration) -> Answer {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        if self.closed.load(Ordering::Acquire) {
            self.pending.lock().unwrap().remove(&id);
            // Gone before this request was sent: it never reached the process.
            return Err(match self.gone() {
                BackendError::Crashed { server } => BackendError::Unavailable {
                    server,
                    state: "not running (its process exited)",
                },
                stopped => stopped,
            });
        }
        // Over budget: wait while the server reads, slowly or not; fail at once when it
        // stopped reading.
        let started = tokio::time::Instant::now();
        while self.writer.is_full() {
            if self.writer.stalled_for() >= STDIN_STALL || started.elapsed() >= timeout {
                self.pending.lock().unwrap().remove(&id);
                return Err(BackendError::NotReading {
                    server: self.server.clone(),
                    backlog: self.writer.backlog(),
                });
            }
            let _ = tokio::time::timeout(STDIN_STALL / 4, self.writer.room()).await;
        }
        let mut cancel = CancelOnDrop::new(self, id);
        self.writer
            .send(protocol::request(id.into(), method, params).to_string());
        let outcome = tokio::time::timeout(timeout, rx).await;
        if outcome.is_ok() {
            cancel.answered();
        }
        match outcome {
            Ok(Ok(Ok(result))) => mcp_client::checked(&self.server, result),
            Ok(Ok(Err(error))) => Err(BackendError::Rpc {
                server: self.server.clone(),
                error,
            }),
            Ok(Err(_)) => Err(self.gone()),
            Err(_) => Err(BackendError::Timeout {
                server: self.server.clone(),
                timeout,
            }),
        }
    }

    fn notify(&self, method: &str, params: Option<Value>) {
        self.send(protocol::notification(method, params));
    }

    fn forget(&self, id: u64) -> bool {
        self.pending.lock().unwrap().remove(&id).is_some()
    }
}

/// Owns the child's stdin; an empty string means "close".
pub(super) async fn read_lines(
    connection: Arc<Connection>,
    stdout: tokio::process::ChildStdout,
    to_gateway: mpsc::UnboundedSender<BackendEvent>,
) {
    let server = connection.server.clone();
    let mut reader = BufReader::with_capacity(64 * 1024, stdout);
    let mut buffer = Vec::new();
    loop {
        lines::reuse(&mut buffer);
        match lines::read_line(&mut reader, &mut buffer, lines::MAX_MESSAGE).await {
            Ok(Line::Read) => {}
            Ok(Line::End) => break,
            Ok(Line::TooLong(len)) => {
                tracing::warn!(server = %server, "skipped a line of {len} bytes or more (the limit is {} MiB); a request it answered will time out", lines::MAX_MESSAGE >> 20);
                continue;
            }
            Err(err) => {
                tracing::warn!(server = %server, "unreadable output: {err}");
                break;
            }
        }
        let line = String::from_utf8_lossy(&buffer);
        let line = line.trim_end_matches(['\n', '\r']);
        if line.trim().is_empty() {
            continue;
        }
        if let Some((id, result)) = protocol::RawEnvelope::fast_response(line) {
            connection.complete(id, Ok(result));
            continue;
        }
        let message = serde_json::from_str::<Value>(line)
            .map_err(|e| e.to_string())
            .and_then(|v| protocol::parse_message(v).map_err(|e| e.message));
        match message {
            // A line on stdout names no call: the gateway works out who may hear it.
            Ok(message) => {
                let Some(message) = connection.listen.screen(&server, message) else {
                    continue;
                };
                let answer = mcp_client::dispatch(&to_gateway, &server, None, message, |id| {
                    let to_server = connection.clone();
                    Responder::new(id, move |response| to_server.send(response))
                });
                let Some((id, result)) = answer else { continue };
                let Some(id) = id.as_u64() else { continue };
                let result = result.and_then(|value| {
                    serde_json::value::to_raw_value(&value)
                        .map_err(|e| RpcError::new(protocol::INTERNAL_ERROR, e.to_string()))
                });
                connection.complete(id, result);
            }
            Err(reason) => {
                let shown = crate::protocol::cut_short(line, 200);
                tracing::warn!(server = %server, "ignored a line that is not JSON-RPC ({reason}): {shown}");
            }
        }
    }
    connection.close();
}
