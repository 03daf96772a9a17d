//! Backends: where tools, resources and prompts live. A closed set, dispatched with
//! `match`: subprocess MCP servers (`process`), remote MCP servers over HTTP (`remote`)
//! and WASM plugins (`crate::plugin`).

mod common;
pub mod era;
mod listen;
pub mod mcp_client;
pub mod modern;
pub mod process;
pub mod remote;
mod server;
mod stderr;
mod supervisor;

pub use server::Backend;

use std::time::Duration;

use serde_json::{Value, json};

use crate::protocol::{self, RpcError};

/// The lifecycle of a backend, as `gateway_status` shows it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BackendState {
    Starting,
    Ready,
    Restarting,
    Failed,
    Stopped,
}

impl BackendState {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendState::Starting => "starting",
            BackendState::Ready => "ready",
            BackendState::Restarting => "restarting",
            BackendState::Failed => "failed",
            BackendState::Stopped => "stopped",
        }
    }
}

/// Why a request to a backend did not get the backend's own answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum BackendError {
    #[error("server `{server}` answered with an error: {}", .error.message)]
    Rpc { server: String, error: RpcError },
    #[error("server `{server}` is {state}")]
    Unavailable { server: String, state: &'static str },
    #[error("server `{server}` exited while handling the request")]
    Crashed { server: String },
    #[error(
        "server `{server}` was stopped by the gateway (shutting down, or its config changed) before it answered"
    )]
    Stopped { server: String },
    #[error("server `{server}` answered with a result that is not a JSON object: {result}")]
    NotAnObject { server: String, result: String },
    #[error("server `{server}` did not answer within {} ms", .timeout.as_millis())]
    Timeout { server: String, timeout: Duration },
    #[error("server `{server}` is unreachable: {reason}")]
    Unreachable { server: String, reason: String },
    #[error("server `{server}` answered over HTTP with {detail}")]
    Http {
        server: String,
        /// The HTTP status, when that is what was wrong (else 0).
        status: u16,
        detail: String,
    },
    #[error(
        "server `{server}` is not reading its stdin ({} MiB waiting for it); the request was not sent",
        .backlog >> 20
    )]
    NotReading { server: String, backlog: usize },
}

impl BackendError {
    /// The request may not have reached the server, or it failed on its way (a 5xx): a
    /// retry of an idempotent request may succeed.
    pub fn is_transport_failure(&self) -> bool {
        match self {
            BackendError::Unreachable { .. } => true,
            BackendError::Http { status, .. } => *status == 0 || *status >= 500,
            _ => false,
        }
    }

    /// The one place where backend failures become JSON-RPC errors.
    pub fn to_rpc(&self) -> RpcError {
        match self {
            // A stateless server's -32021 names what the client must declare, a -32042 the
            // URLs the user must open: their data stays where the client looks for it.
            BackendError::Rpc { server, error }
                if error.code == protocol::modern::MISSING_CLIENT_CAPABILITY
                    || error.code == protocol::URL_ELICITATION_REQUIRED =>
            {
                let mut data = match error.data.as_deref() {
                    Some(Value::Object(data)) => data.clone(),
                    _ => serde_json::Map::new(),
                };
                data.insert("server".into(), server.as_str().into());
                RpcError::new(error.code, error.message.clone()).with_data(Value::Object(data))
            }
            BackendError::Rpc { server, error } => RpcError {
                code: error.code,
                message: error.message.clone(),
                data: Some(Box::new(
                    json!({"server": server, "originalError": error.to_value()}),
                )),
                invalid_arguments: false,
            },
            BackendError::Unavailable { server, .. }
            | BackendError::NotReading { server, .. }
            | BackendError::Crashed { server }
            | BackendError::Unreachable { server, .. }
            | BackendError::Http { server, .. }
            | BackendError::Stopped { server } => {
                RpcError::new(protocol::BACKEND_UNAVAILABLE, self.to_string())
                    .with_data(json!({"server": server}))
            }
            BackendError::NotAnObject { server, .. } => {
                RpcError::new(protocol::INTERNAL_ERROR, self.to_string())
                    .with_data(json!({"server": server}))
            }
            BackendError::Timeout { server, timeout } => {
                RpcError::new(protocol::REQUEST_TIMEOUT, "Request timed out")
                    .with_data(json!({"server": server, "timeoutMs": timeout.as_millis() as u64}))
            }
        }
    }
}

/// Answers one request that a server sent to the client, over whatever carries that server.
pub struct Responder {
    id: Value,
    send: Box<dyn FnOnce(Value) + Send>,
}

impl Responder {
    /// `send` gets the JSON-RPC response to deliver to the server.
    pub fn new(id: Value, send: impl FnOnce(Value) + Send + 'static) -> Self {
        Responder {
            id,
            send: Box::new(send),
        }
    }

    /// The server's id for its request.
    pub fn id(&self) -> &Value {
        &self.id
    }

    pub fn send(self, result: Result<Value, RpcError>) {
        (self.send)(protocol::response(self.id, result));
    }
}

impl std::fmt::Debug for Responder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Responder").field("id", &self.id).finish()
    }
}

/// What a server told about itself at start-up, and its lists. Replaced whole when a list changes.
#[derive(Debug, Clone, Default)]
pub struct Discovered {
    pub protocol_version: String,
    /// How the era was decided (`config`, `cached`, `probed`, `discovered`); empty for a
    /// server the gateway did not ask.
    pub protocol_source: &'static str,
    pub server_info: Value,
    pub capabilities: Value,
    pub instructions: Option<String>,
    pub tools: Vec<Value>,
    pub resources: Vec<Value>,
    pub resource_templates: Vec<Value>,
    pub prompts: Vec<Value>,
}

impl Discovered {
    pub fn has_capability(&self, name: &str) -> bool {
        self.capabilities.get(name).is_some_and(|c| !c.is_null())
    }
}

/// Which list of a server changed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ListKind {
    Tools,
    Resources,
    Prompts,
}

/// What the clients asked of a server that a new process of it must be told again.
#[derive(Debug, Default)]
pub struct ClientRequests {
    /// The last `logging/setLevel` a client sent.
    pub log_level: Option<String>,
    /// URIs clients subscribed to through this server.
    pub subscriptions: Vec<String>,
}

tokio::task_local! {
    /// The gateway's number for the client call a backend request is made for (see
    /// `Gateway::begin_call`), set around the request: a remote server's messages that
    /// arrive on that request's own stream name the call they belong to by it.
    pub static CALL: u64;
}

/// The call of [`CALL`], when the code runs inside one.
pub fn current_call() -> Option<u64> {
    CALL.try_with(|call| *call).ok()
}

/// What backends report to the gateway, in order, on one channel.
#[derive(Debug)]
pub enum BackendEvent {
    /// The backend's lists or state changed: rebuild the catalog.
    Changed { server: String },
    /// A notification from the server, for the gateway to rewrite and pass on.
    Notification {
        server: String,
        /// The call whose stream it came on ([`CALL`]); `None` when the transport does not say.
        call: Option<u64>,
        method: String,
        params: Option<Value>,
    },
    /// A request from the server to the client (sampling, elicitation, roots).
    Request {
        server: String,
        /// As for `Notification`.
        call: Option<u64>,
        method: String,
        params: Option<Value>,
        reply: Responder,
    },
    /// A server finished its handshake (its first start or a restart) and is not yet
    /// marked ready: the gateway answers with what clients asked of it before (a log
    /// level, subscriptions), which it gets again before its first call.
    Handshaken {
        server: String,
        reply: tokio::sync::oneshot::Sender<ClientRequests>,
    },
    /// Answered once every event sent before it has been handled.
    Barrier {
        done: tokio::sync::oneshot::Sender<()>,
    },
}
