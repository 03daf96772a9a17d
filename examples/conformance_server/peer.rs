//! The fixture's line to its client: messages out, requests to the client (sampling,
//! elicitation, roots) matched with their responses, what the client declared, and where
//! list changes go (a 2025 session, 2026 listens).

use std::collections::HashMap;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};

use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot};

use crate::listen::Listens;

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
    /// Whether a client began a 2025-11-25 session (`initialize`): only it is sent list
    /// changes unasked.
    session: AtomicBool,
    /// The 2026-07-28 listens, which get the list changes they asked for.
    pub listens: Listens,
}

impl Peer {
    /// A peer writing its lines to `out`.
    pub fn new(out: mpsc::UnboundedSender<String>) -> Peer {
        Peer {
            out,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            capabilities: Mutex::new(json!({})),
            session: AtomicBool::new(false),
            listens: Listens::default(),
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
        self.session.store(true, Relaxed);
    }

    /// Tells the clients that `list` (`tools`, `prompts`, `resources`) changed: a 2025
    /// session, and each listen that asked for it.
    pub fn list_changed(&self, list: &str) {
        let method = format!("notifications/{list}/list_changed");
        if self.session.load(Relaxed) {
            self.notify(&method, json!({}));
        }
        let flag = format!("{list}ListChanged");
        self.listens.announce(&flag, &method, &|m| self.send(m));
    }

    /// Whether the client declared `capability` (`sampling`, `elicitation`, `roots`).
    pub fn declared(&self, capability: &str) -> bool {
        self.capabilities.lock().unwrap().get(capability).is_some()
    }
}
