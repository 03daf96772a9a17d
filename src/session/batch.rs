//! JSON-RPC batches (MCP 2025-03-26 and before): refused whole, or each member taken as a
//! single message would be and answered in one array, in the batch's order.

use std::sync::Arc;

use serde_json::Value;
use tokio::task::JoinHandle;

use super::{Handled, Session};
use crate::protocol::{self, Message, RpcError, methods};
use crate::telemetry::traces;

/// A member of a batch: answered at once, or running (its id answers a task that died).
enum Member {
    Answered(String),
    Running(Value, JoinHandle<Option<String>>),
}

impl Session {
    /// Batches are refused whole in a session at a version without them, and when longer
    /// than the session may have requests in flight: one error, id null, since no single
    /// request of the batch is answered.
    fn batch_refused(&self, len: usize) -> Option<RpcError> {
        let version = self.peer.protocol_version();
        if self.peer.is_initialized() && !protocol::batching_allowed(&version) {
            return Some(RpcError::new(
                protocol::INVALID_REQUEST,
                format!(
                    "Invalid Request: JSON-RPC batching was removed in MCP 2025-06-18 and this session uses {version}; send each message on its own"
                ),
            ));
        }
        let most = self.bounds.get()?.per_session;
        (len > most).then(|| {
            RpcError::new(
                protocol::INVALID_REQUEST,
                format!(
                    "Invalid Request: a batch of {len} messages; at most {most} \
                     (max_requests_per_session) are taken in one"
                ),
            )
        })
    }

    /// Runs a batch's requests concurrently, each in flight (cancellable, waited for at
    /// shutdown) from the moment the batch is taken, as a single request is; answers with
    /// one array in the batch's order, where a cancelled member has no entry.
    pub(super) fn handle_batch(
        self: &Arc<Self>,
        items: Vec<Result<Message, (Value, RpcError)>>,
    ) -> Handled {
        if let Some(error) = self.batch_refused(items.len()) {
            return Handled::Refused(protocol::error_response(Value::Null, &error).to_string());
        }
        let mut members = Vec::new();
        for item in items {
            match item {
                Err((id, error)) => members.push(Member::Answered(
                    protocol::error_response(id, &error).to_string(),
                )),
                Ok(Message::Request { id, method, .. }) if method == methods::INITIALIZE => {
                    let error = RpcError::new(
                        protocol::INVALID_REQUEST,
                        "Invalid Request: initialize must not be part of a batch (MCP 2025-03-26); send it on its own",
                    );
                    members.push(Member::Answered(protocol::response_line(&id, Err(error))));
                }
                Ok(message) => {
                    let id = match &message {
                        Message::Request { id, .. } => id.clone(),
                        _ => Value::Null,
                    };
                    match self.take(message) {
                        Handled::Answer(line) | Handled::Refused(line) => {
                            members.push(Member::Answered(line))
                        }
                        // Each member its own task: they run in parallel, and a panic ends one.
                        // The task takes the trace the batch came in (an HTTP header's).
                        Handled::Running(running) => {
                            let running = running.within(traces::current());
                            members.push(Member::Running(id, tokio::spawn(running)))
                        }
                        Handled::Nothing | Handled::Batch(_) => {}
                    }
                }
            }
        }
        Handled::Batch(Box::pin(answer_batch(members)))
    }
}

/// The batch's array once every member is answered; `None` when none has an answer.
async fn answer_batch(members: Vec<Member>) -> Option<String> {
    let mut answers = Vec::new();
    for member in members {
        match member {
            Member::Answered(line) => answers.push(line),
            Member::Running(id, task) => match task.await {
                Ok(Some(line)) => answers.push(line),
                Ok(None) => {}
                Err(_) => answers.push(protocol::response_line(
                    &id,
                    Err(RpcError::new(
                        protocol::INTERNAL_ERROR,
                        "Internal error: the request's task ended without an answer",
                    )),
                )),
            },
        }
    }
    (!answers.is_empty()).then(|| format!("[{}]", answers.join(",")))
}
