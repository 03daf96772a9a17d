//! One stateless call's `input_required` exchange: the call running on (its future, which
//! outlives the request that started it), the server's requests to the client that wait
//! for the client's retry, and what binds a retry to the call.

use std::collections::HashSet;
use std::pin::Pin;
use std::sync::Arc;

use serde_json::{Map, Value, json};

use crate::peer::{Ask, AskReceiver, ClientPeer};
use crate::protocol::{Reply, RpcError, methods};

/// Where a session-era server may name the key of its request in an `input_required`
/// result (`params._meta`); without it the gateway names it after its kind.
pub const KEY_META: &str = "dev.wasmgate/inputKey";

/// A call in progress. It is polled by the request that carries it, and by none while it
/// waits for a retry: its server is then waiting on the client, and what it sends the call
/// meanwhile (its answer) is kept by the backend until the call is polled again. Dropping
/// it cancels the call (the backend tells the server).
pub type Call = Pin<Box<dyn Future<Output = Result<Reply, RpcError>> + Send>>;

/// What a retry must repeat of the first request.
#[derive(Debug, Clone, PartialEq)]
pub struct Binding {
    pub method: &'static str,
    /// `params.name` or `params.uri`.
    pub target: Option<Value>,
    pub arguments: Option<Value>,
}

impl Binding {
    pub fn of(method: &'static str, params: Option<&Value>) -> Binding {
        let field = |name: &str| params.and_then(|p| p.get(name)).cloned();
        Binding {
            method,
            target: field("name").or_else(|| field("uri")),
            arguments: field("arguments"),
        }
    }
}

/// A stateless call and what it asked the client that is not answered yet.
pub struct Exchange {
    /// The peer the call runs for: the first request's.
    pub peer: Arc<ClientPeer>,
    pub call: Call,
    pub asks: AskReceiver,
    pub binding: Binding,
    /// Put to the client, by key, not answered yet.
    pending: Vec<(String, Ask)>,
    keys: HashSet<String>,
    counted: [u32; 3],
}

impl Exchange {
    pub fn new(peer: Arc<ClientPeer>, call: Call, asks: AskReceiver, binding: Binding) -> Exchange {
        Exchange {
            peer,
            call,
            asks,
            binding,
            pending: Vec::new(),
            keys: HashSet::new(),
            counted: [0; 3],
        }
    }

    /// Cancels the call, then fails what it asked: the server is told its call is
    /// cancelled before it hears that its questions will not be answered (which could
    /// otherwise end the call as if it were done).
    pub fn give_up(self) {
        let Exchange { call, pending, .. } = self;
        drop(call);
        drop(pending);
    }

    /// Whether some of the server's requests wait for the client.
    pub fn waits(&self) -> bool {
        !self.pending.is_empty()
    }

    /// Takes a server's request: answered at once if `responses` (the carrying request's
    /// `inputResponses`) hold a valid answer under its key, else kept for the client.
    pub fn take(&mut self, mut ask: Ask, responses: &Map<String, Value>) {
        let key = self.name(&mut ask);
        self.pending.push((key, ask));
        self.answer_from(responses);
    }

    /// Answers the pending requests that `responses` answer validly; the rest (missing,
    /// or malformed) are asked again.
    pub fn answer_from(&mut self, responses: &Map<String, Value>) {
        let pending = std::mem::take(&mut self.pending);
        for (key, ask) in pending {
            match responses.get(&key).filter(|r| answers(&ask.method, r)) {
                Some(response) => {
                    let _ = ask.reply.send(Ok(response.clone()));
                }
                None => self.pending.push((key, ask)),
            }
        }
    }

    /// Refuses every pending request with `error` (the call cannot wait for its client).
    pub fn refuse_pending(&mut self, error: &RpcError) {
        for (_, ask) in self.pending.drain(..) {
            let _ = ask.reply.send(Err(error.clone()));
        }
    }

    /// The `input_required` result for what waits, carried on by `state`.
    pub fn input_required(&self, state: &str) -> Value {
        let requests: Map<String, Value> = (self.pending.iter())
            .map(|(key, ask)| {
                let mut request = json!({"method": ask.method});
                if let Some(params) = &ask.params {
                    request["params"] = params.clone();
                }
                (key.clone(), request)
            })
            .collect();
        json!({
            "resultType": "input_required",
            "inputRequests": requests,
            "requestState": state,
        })
    }

    /// The request's key: the server's own name for it if it gave one not used yet in this
    /// call, else its kind and a number (`elicitation-1`).
    fn name(&mut self, ask: &mut Ask) -> String {
        let named = (ask.params.as_mut())
            .and_then(|p| p.get_mut("_meta"))
            .and_then(Value::as_object_mut)
            .and_then(|meta| meta.remove(KEY_META));
        if let Some(Value::String(key)) = named
            && self.keys.insert(key.clone())
        {
            return key;
        }
        let (slot, kind) = match ask.method.as_str() {
            methods::ELICITATION_CREATE => (0, "elicitation"),
            methods::SAMPLING_CREATE_MESSAGE => (1, "sampling"),
            _ => (2, "roots"),
        };
        loop {
            self.counted[slot] += 1;
            let key = format!("{kind}-{}", self.counted[slot]);
            if self.keys.insert(key.clone()) {
                return key;
            }
        }
    }
}

/// Whether `response` has the shape of an answer to `method` (an elicitation's action, a
/// sampled message, a list of roots).
fn answers(method: &str, response: &Value) -> bool {
    match method {
        methods::ELICITATION_CREATE => matches!(
            response.get("action").and_then(Value::as_str),
            Some("accept" | "decline" | "cancel")
        ),
        methods::SAMPLING_CREATE_MESSAGE => {
            response.get("content").is_some() && response.get("role").is_some()
        }
        methods::ROOTS_LIST => response.get("roots").is_some_and(Value::is_array),
        _ => response.is_object(),
    }
}
