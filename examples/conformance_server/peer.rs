//! The fixture's line to its client: messages out, requests to the client (sampling,
//! elicitation, roots) matched with their responses, and what the client declared.

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

/// A JSON-RPC error: code and message.
pub type Failure = (i64, String);

pub struct Peer {
    out: mpsc::UnboundedSender<String>,
    /// Our requests to the client, waiting for their response.
    pending: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Value>>>>,
    next_id: AtomicU64,
    /// The client's `initialize` capabilities: a 2025-11-25 server asks only for what
    /// its client declared there.
    capabilities: Mutex<Value>,
}

impl Peer {
    /// A peer writing its lines to `out`.
    pub fn new(out: mpsc::UnboundedSender<String>) -> Peer {
        Peer {
            out,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            capabilities: Mutex::new(json!({})),
        }
    }

    pub fn send(&self, message: Value) {
        // Fails only once the writer has stopped, when nobody is left to read it.
        let _ = self.out.send(message.to_string());
    }

    pub fn notify(&self, method: &str, params: Value) {
        self.send(json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Sends a request to the client and waits for its result (or its error).
    pub async fn ask(&self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_id.fetch_add(1, Relaxed);
        let (tx, rx) = oneshot::channel();
        self.pending.lock().unwrap().insert(id, tx);
        self.send(json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        rx.await
            .unwrap_or_else(|_| Err(json!({"message": "no response"})))
    }

    /// A response from the client, to the request of ours that waits for it.
    pub fn on_response(&self, id: &Value, message: &Value) {
        let waiter = id
            .as_u64()
            .and_then(|id| self.pending.lock().unwrap().remove(&id));
        let Some(waiter) = waiter else {
            return eprintln!("conformance_server: response to unknown request {id}");
        };
        let _ = waiter.send(match message.get("error") {
            Some(error) => Err(error.clone()),
            None => Ok(message["result"].clone()),
        });
    }

    /// Keeps the capabilities of the client's `initialize`.
    pub fn remember_capabilities(&self, capabilities: &Value) {
        *self.capabilities.lock().unwrap() = capabilities.clone();
    }

    /// Whether the client declared `capability` (`sampling`, `elicitation`, `roots`).
    pub fn declared(&self, capability: &str) -> bool {
        self.capabilities.lock().unwrap().get(capability).is_some()
    }
}
