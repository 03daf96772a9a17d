//! The fixture's open `subscriptions/listen` requests (2026-07-28): over stdio one stays
//! open until the client cancels it, and each gets only the notifications it asked for,
//! tagged with its id.

use std::sync::Mutex;

use serde_json::{Map, Value, json};
use tokio::sync::oneshot;

const SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// One open listen: its request id, what it asked for, and how its request ends.
struct Listen {
    id: Value,
    filter: Map<String, Value>,
    ended: oneshot::Sender<()>,
}

#[derive(Default)]
pub struct Listens {
    open: Mutex<Vec<Listen>>,
}

/// `params` with the listen's id in their `_meta`.
fn tagged(id: &Value, mut params: Map<String, Value>) -> Value {
    params.insert("_meta".into(), json!({ SUBSCRIPTION_ID: id }));
    Value::Object(params)
}

impl Listens {
    /// Opens listen `id` for `filter` and acknowledges it through `send`; the receiver
    /// fires when the client cancels it.
    pub fn open(
        &self,
        id: Value,
        filter: Map<String, Value>,
        send: &dyn Fn(Value),
    ) -> oneshot::Receiver<()> {
        let (ended, receiver) = oneshot::channel();
        let mut open = self.open.lock().unwrap();
        // Under the lock: no notification of this listen can go out before its ack.
        let ack = Map::from_iter([("notifications".to_owned(), Value::Object(filter.clone()))]);
        send(
            json!({"jsonrpc": "2.0", "method": "notifications/subscriptions/acknowledged",
            "params": tagged(&id, ack)}),
        );
        open.push(Listen { id, filter, ended });
        receiver
    }

    /// Ends listen `id` (`notifications/cancelled`); another id is no listen of ours.
    pub fn cancel(&self, id: &Value) {
        let mut open = self.open.lock().unwrap();
        if let Some(at) = open.iter().position(|l| &l.id == id) {
            let _ = open.swap_remove(at).ended.send(());
        }
    }

    /// Sends `method` to every listen whose filter sets `flag`.
    pub fn announce(&self, flag: &str, method: &str, send: &dyn Fn(Value)) {
        let open = self.open.lock().unwrap();
        for listen in open
            .iter()
            .filter(|l| l.filter.get(flag) == Some(&json!(true)))
        {
            send(json!({"jsonrpc": "2.0", "method": method,
                "params": tagged(&listen.id, Map::new())}));
        }
    }
}
