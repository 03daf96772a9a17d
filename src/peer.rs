//! The gateway's handle on one client, whatever the transport: how to send it messages,
//! what it negotiated, the log level and lists it asked for, and the requests forwarded to it
//! on a server's behalf. A session makes one; the gateway, router and backends hold it.

mod handoff;

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use serde_json::{Value, json};
use tokio::sync::oneshot;

use crate::pipe::outbox::Outbox;
use crate::protocol::methods;
use crate::protocol::{self, RpcError};
pub use handoff::{Ask, AskReceiver, AskSender, Handoff, asks};

/// What a client said about itself at `initialize`.
#[derive(Debug, Clone, Default)]
struct ClientState {
    initialized: bool,
    protocol_version: String,
    capabilities: Value,
    info: Value,
}

/// A request the gateway forwarded to the client on a server's behalf.
struct Forwarded {
    server: String,
    server_request_id: Value,
    reply: oneshot::Sender<Result<Value, RpcError>>,
}

/// Where a client's messages go: a queue of lines (stdio) or the HTTP front's streams.
pub trait ClientSink: Send + Sync + 'static {
    /// Sends `line`, which belongs to the client's request `related` (the key of its id), if
    /// any. `droppable`: a notification, which a client that stopped reading may miss.
    fn deliver(&self, line: String, related: Option<&Arc<str>>, droppable: bool);
}

impl ClientSink for Outbox {
    fn deliver(&self, line: String, related: Option<&Arc<str>>, droppable: bool) {
        if droppable {
            self.send_or_drop_related(line, related.cloned());
        } else {
            self.send_related(line, related.cloned());
        }
    }
}

/// One client, as the gateway, the router and the backends see it.
pub struct ClientPeer {
    /// Unguessable: the HTTP front looks sessions up by it.
    pub id: String,
    out: Box<dyn ClientSink>,
    client: Mutex<ClientState>,
    forwarded: Mutex<HashMap<u64, Forwarded>>,
    next_request_id: AtomicU64,
    /// The client's `logging/setLevel`, as a rank from debug (0) to emergency (7);
    /// `NO_LOG_LEVEL` until it sets one.
    log_level: AtomicU8,
    /// Which lists the client has asked for ([`list_bit`]): a list change is announced
    /// only to a client that holds a list it makes stale.
    listed: AtomicU8,
    /// Who the client is, set once before its first request.
    principal: OnceLock<Principal>,
    /// One request of the stateless era (2026-07-28): it gets nothing unsolicited, log
    /// lines only at the level the request set, and no requests from servers.
    stateless: bool,
    /// A stateless request's call needed a capability the request did not declare: the
    /// error the request then ends with, whatever the server made of it.
    missing_capability: Mutex<Option<RpcError>>,
    /// A stateless peer's output, which a retry can take over (see [`Handoff`]).
    handoff: Option<Handoff>,
    /// Where a server's requests to a stateless client go to become an `input_required`
    /// result; `None` where the request's method cannot have one.
    asks: Mutex<Option<AskSender>>,
    /// Its call waits between the rounds of an `input_required` exchange.
    parked: AtomicBool,
}

/// Who a client is: the token it authenticated with, the profile whose view it gets, and
/// whether it is the operator. A transport knows it; each request's `RequestContext`
/// carries it, resolved, to what the request does.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Principal {
    /// The name of the HTTP bearer token it authenticated with.
    pub token: Option<Arc<str>>,
    /// The `[profiles.NAME]` whose view of the catalog it gets (HTTP `/mcp/NAME`).
    pub profile: Option<Arc<str>>,
    /// May see what the gateway runs (commands, URLs, pids) and every principal's
    /// events: the local user (stdio, the command line) or a token with the operator scope.
    pub operator: bool,
}

impl Principal {
    /// The local user who started the gateway (stdio, the command line).
    pub fn operator() -> Principal {
        Principal {
            operator: true,
            ..Principal::default()
        }
    }
}

/// The principal of a client that a transport named none for: no token, no profile.
static NOBODY: Principal = Principal {
    token: None,
    profile: None,
    operator: false,
};

const NO_LOG_LEVEL: u8 = u8::MAX;

/// The bit of [`ClientPeer::listed`] for a list request or its change notification.
/// A capability path as the object that declares it: `elicitation.url` is
/// `{"elicitation": {"url": {}}}`.
fn nested(capability: &str) -> Value {
    (capability.rsplit('.')).fold(json!({}), |inner, part| json!({ part: inner }))
}

fn list_bit(method: &str) -> Option<u8> {
    match method {
        methods::TOOLS_LIST | methods::TOOLS_LIST_CHANGED => Some(1),
        methods::PROMPTS_LIST | methods::PROMPTS_LIST_CHANGED => Some(2),
        methods::RESOURCES_LIST
        | methods::RESOURCE_TEMPLATES_LIST
        | methods::RESOURCES_LIST_CHANGED => Some(4),
        _ => None,
    }
}

/// Requests from servers one client may have unanswered at once.
const MAX_FORWARDED: usize = 64;

impl ClientPeer {
    /// `out` receives every line to send to the client, in order.
    pub fn new(out: impl ClientSink) -> ClientPeer {
        ClientPeer::with_id(out, uuid::Uuid::new_v4().to_string())
    }

    fn with_id(out: impl ClientSink, id: String) -> ClientPeer {
        ClientPeer {
            id,
            out: Box::new(out),
            client: Mutex::new(ClientState::default()),
            forwarded: Mutex::new(HashMap::new()),
            next_request_id: AtomicU64::new(1),
            log_level: AtomicU8::new(NO_LOG_LEVEL),
            listed: AtomicU8::new(0),
            principal: OnceLock::new(),
            stateless: false,
            missing_capability: Mutex::new(None),
            handoff: None,
            asks: Mutex::new(None),
            parked: AtomicBool::new(false),
        }
    }

    /// The peer of one stateless request: what its `_meta` declared stands for the
    /// handshake (`log_rank`: its `logLevel`, if set). Never registered for fan-out.
    pub fn stateless(
        out: impl ClientSink,
        principal: Principal,
        capabilities: Value,
        info: Value,
        log_rank: Option<u8>,
    ) -> ClientPeer {
        // Never looked up by its id (it is not a session): a counter spares each request
        // the system call a random id costs.
        static STATELESS: AtomicU64 = AtomicU64::new(1);
        let id = format!("stateless-{}", STATELESS.fetch_add(1, Ordering::Relaxed));
        let handoff = Handoff::new(Arc::new(out));
        let peer = ClientPeer {
            stateless: true,
            handoff: Some(handoff.clone()),
            ..ClientPeer::with_id(handoff, id)
        };
        peer.set_principal(principal);
        let _ = peer.initialized(protocol::modern::MODERN_VERSION, capabilities, info);
        if let Some(rank) = log_rank {
            peer.set_log_level(rank);
        }
        peer
    }

    /// Whether this is the peer of one stateless request ([`Self::stateless`]).
    pub fn is_stateless(&self) -> bool {
        self.stateless
    }

    /// A stateless peer's output, which a retry takes over.
    pub fn handoff(&self) -> Option<&Handoff> {
        self.handoff.as_ref()
    }

    /// From now on a server's request to this stateless client is sent to `asks`, to be
    /// put to the client in an `input_required` result.
    pub fn accept_asks(&self, asks: AskSender) {
        *self.asks.lock().unwrap() = Some(asks);
    }

    /// Marks the call waiting for (or no longer waiting for) its client's retry.
    pub fn set_parked(&self, parked: bool) {
        self.parked.store(parked, Ordering::Release);
    }

    /// Whether its call waits for its client's retry (so a server's request now is not its).
    pub fn is_parked(&self) -> bool {
        self.parked.load(Ordering::Acquire)
    }

    /// A retry carries this stateless call on: what the retry's `_meta` declared (its
    /// capabilities, client info, log level) stands from now on.
    pub fn carry_on_from(&self, retry: &ClientPeer) {
        let declared = retry.client.lock().unwrap().clone();
        {
            let mut client = self.client.lock().unwrap();
            client.capabilities = declared.capabilities;
            client.info = declared.info;
        }
        self.log_level
            .store(retry.log_level.load(Ordering::Relaxed), Ordering::Relaxed);
        self.missing_capability.lock().unwrap().take();
    }

    /// Says who the client is, once, before its first request.
    pub fn set_principal(&self, principal: Principal) {
        let _ = self.principal.set(principal);
    }

    pub fn principal(&self) -> &Principal {
        self.principal.get().unwrap_or(&NOBODY)
    }

    pub fn is_operator(&self) -> bool {
        self.principal().operator
    }

    pub fn profile(&self) -> Option<&str> {
        self.principal().profile.as_deref()
    }

    pub fn token(&self) -> Option<&str> {
        self.principal().token.as_deref()
    }

    /// Records what `initialize` negotiated; `Err` with the version already in force when
    /// the client initialized before.
    pub fn initialized(
        &self,
        version: &str,
        capabilities: Value,
        info: Value,
    ) -> Result<(), String> {
        let mut client = self.client.lock().unwrap();
        // Renegotiating mid-session would change the rules under requests in flight.
        if client.initialized {
            return Err(client.protocol_version.clone());
        }
        client.initialized = true;
        client.protocol_version = version.to_string();
        client.capabilities = capabilities;
        client.info = info;
        Ok(())
    }

    pub fn is_initialized(&self) -> bool {
        self.client.lock().unwrap().initialized
    }

    /// The `clientInfo` of its `initialize`.
    pub fn client_info(&self) -> Value {
        self.client.lock().unwrap().info.clone()
    }

    /// The capabilities of its `initialize` (a stateless request's: of its `_meta`).
    pub fn capabilities(&self) -> Value {
        self.client.lock().unwrap().capabilities.clone()
    }

    /// The protocol version negotiated; empty before `initialize`.
    pub fn protocol_version(&self) -> String {
        self.client.lock().unwrap().protocol_version.clone()
    }

    /// Sends a message that belongs to the client's request `related` (progress, a log line
    /// of its call): a transport with a stream per request sends it there.
    pub fn send_related(&self, message: Value, related: Option<&Arc<str>>) {
        let droppable = message.get("id").is_none();
        self.out.deliver(message.to_string(), related, droppable);
    }

    pub fn send(&self, message: Value) {
        // A notification to a client that stopped reading is dropped (and counted); answers
        // and requests always queue, and the reader stops taking requests meanwhile.
        self.send_related(message, None);
    }

    /// An answer line (never dropped).
    pub fn send_line(&self, line: String) {
        self.out.deliver(line, None, false);
    }

    /// [`Self::send_line`] for the answer to the client's request `related`.
    pub fn send_line_related(&self, line: String, related: Option<&Arc<str>>) {
        self.out.deliver(line, related, false);
    }

    /// Sends a notification once the client is past `initialize`.
    pub fn notify(&self, method: &str, params: Option<Value>) {
        // A stateless request's stream carries only what belongs to it.
        if !self.stateless && self.client.lock().unwrap().initialized {
            self.send(protocol::notification(method, params));
        }
    }

    /// Sends `notifications/{tools,prompts,resources}/list_changed`, if the client has
    /// listed what changed. A client that lists later gets the new list anyway; before its
    /// first list (while plugins load at start-up, say) the notice would only make it list twice.
    pub fn notify_list_changed(&self, method: &str) {
        let listed = self.listed.load(Ordering::Acquire);
        if list_bit(method).is_none_or(|bit| listed & bit != 0) {
            self.notify(method, None);
        }
    }

    /// The client is about to read a list (`method`): changes to it are announced from now on.
    pub fn mark_listed(&self, method: &str) {
        if let Some(bit) = list_bit(method) {
            self.listed.fetch_or(bit, Ordering::AcqRel);
        }
    }

    pub fn set_log_level(&self, rank: u8) {
        self.log_level.store(rank, Ordering::Relaxed);
    }

    /// The rank of the client's `logging/setLevel`, if it set one.
    pub fn log_level(&self) -> Option<u8> {
        Some(self.log_level.load(Ordering::Relaxed)).filter(|&r| r != NO_LOG_LEVEL)
    }

    /// Whether the level the client set admits a message at `level`; `unset`: the answer
    /// when it set none.
    pub fn admits_log(&self, level: &str, unset: bool) -> bool {
        let rank = protocol::log_rank(level);
        match self.log_level() {
            Some(min) => rank >= Some(min),
            // The stateless era sends no log line to a request that set no level.
            None => unset && !self.stateless,
        }
    }

    /// Sends `notifications/message` if the client's level admits `level`; `unset`: whether
    /// a client that set no level gets it.
    pub fn log(&self, level: &str, logger: &str, data: &str, unset: bool) {
        self.log_related(level, logger, data, unset, None);
    }

    /// [`Self::log`] for a line of the client's request `related` (a plugin call's log).
    pub fn log_related(
        &self,
        level: &str,
        logger: &str,
        data: &str,
        unset: bool,
        related: Option<&Arc<str>>,
    ) {
        if self.admits_log(level, unset) && self.is_initialized() {
            let params = json!({"level": level, "logger": logger, "data": data});
            self.send_related(
                protocol::notification(methods::MESSAGE, Some(params)),
                related,
            );
        }
    }

    /// Whether this client gets a tool's invalid arguments as a tool error result (its
    /// protocol version is 2025-11-25 or later), not as error -32602.
    pub fn argument_errors_are_results(&self) -> bool {
        protocol::argument_errors_are_results(&self.client.lock().unwrap().protocol_version)
    }

    /// Whether the client declared `capability`, a path into its capabilities
    /// (`elicitation.url`).
    pub fn client_has(&self, capability: &str) -> bool {
        let client = self.client.lock().unwrap();
        let mut declared = &client.capabilities;
        for part in capability.split('.') {
            match declared.get(part) {
                Some(inner) if !inner.is_null() => declared = inner,
                _ => return false,
            }
        }
        true
    }

    /// Sends a request to the client on behalf of `server` and waits for the answer.
    pub async fn request_client(
        &self,
        server: &str,
        server_request_id: Value,
        method: &str,
        params: Option<Value>,
        limit: Duration,
        related: Option<&Arc<str>>,
    ) -> Result<Value, RpcError> {
        if self.stateless {
            return self.ask(method, params).await;
        }
        let id = self.next_request_id.fetch_add(1, Ordering::Relaxed);
        let (reply, answer) = oneshot::channel();
        {
            let mut forwarded = self.forwarded.lock().unwrap();
            if forwarded.len() >= MAX_FORWARDED {
                return Err(RpcError::new(
                    protocol::BACKEND_UNAVAILABLE,
                    format!(
                        "the client has {MAX_FORWARDED} requests from servers still unanswered; \
                         {method} was not sent to it"
                    ),
                ));
            }
            forwarded.insert(
                id,
                Forwarded {
                    server: server.to_string(),
                    server_request_id,
                    reply,
                },
            );
        }
        self.send_related(
            protocol::request(json!(format!("wg-{id}")), method, params),
            related,
        );
        // A client that never answers: the server's call would time out anyway, and the
        // entry would stay for the session's life.
        match tokio::time::timeout(limit, answer).await {
            Ok(answer) => answer.unwrap_or_else(|_| {
                Err(RpcError::new(
                    protocol::INTERNAL_ERROR,
                    "the client went away",
                ))
            }),
            Err(_) => {
                if self.forwarded.lock().unwrap().remove(&id).is_some() {
                    self.send(protocol::notification(
                        methods::CANCELLED,
                        Some(json!({"requestId": format!("wg-{id}"), "reason": "timed out"})),
                    ));
                }
                Err(RpcError::new(
                    protocol::REQUEST_TIMEOUT,
                    format!(
                        "the client did not answer {method} within {} ms",
                        limit.as_millis()
                    ),
                ))
            }
        }
    }

    /// The error a server's request gets when this client did not declare `capability`
    /// (a path: `elicitation.url`). A stateless request then ends with -32021 naming it
    /// (the era says so).
    pub fn lacks_capability(&self, server: &str, capability: &str) -> RpcError {
        if !self.stateless {
            return RpcError::new(
                protocol::METHOD_NOT_FOUND,
                format!("the client that called server `{server}` does not support {capability}"),
            );
        }
        let error = RpcError::new(
            protocol::modern::MISSING_CLIENT_CAPABILITY,
            format!("Missing required client capability: {capability}"),
        )
        .with_data(json!({"requiredCapabilities": nested(capability)}));
        *self.missing_capability.lock().unwrap() = Some(error.clone());
        error
    }

    /// The -32021 a stateless request must end with, if its call needed an undeclared capability.
    pub fn take_missing_capability(&self) -> Option<RpcError> {
        self.missing_capability.lock().unwrap().take()
    }

    /// A server's request to a stateless client: it waits for the client's retry to
    /// answer it. The exchange bounds the wait (the handle's expiry gives the call up).
    async fn ask(&self, method: &str, params: Option<Value>) -> Result<Value, RpcError> {
        let refused = || {
            RpcError::new(
                protocol::INTERNAL_ERROR,
                format!(
                    "{method} cannot reach this {} request: its method has no input_required result",
                    protocol::modern::MODERN_VERSION
                ),
            )
        };
        let Some(asks) = self.asks.lock().unwrap().clone() else {
            return Err(refused());
        };
        let (reply, answer) = oneshot::channel();
        let ask = Ask {
            method: method.to_string(),
            params,
            reply,
        };
        if asks.send(ask).is_err() {
            return Err(refused());
        }
        answer.await.unwrap_or_else(|_| {
            Err(RpcError::new(
                protocol::INTERNAL_ERROR,
                format!("the client did not retry to answer {method}"),
            ))
        })
    }

    /// The client's answer to a request forwarded to it.
    pub fn client_answered(&self, id: &Value, result: Result<Value, RpcError>) {
        let Some(n) = id
            .as_str()
            .and_then(|s| s.strip_prefix("wg-"))
            .and_then(|n| n.parse::<u64>().ok())
        else {
            tracing::debug!(%id, "answer to no request of ours");
            return;
        };
        if let Some(forwarded) = self.forwarded.lock().unwrap().remove(&n) {
            let _ = forwarded.reply.send(result);
        }
    }

    /// The server `server` cancelled its request `request_id`: pass that on if it came through here.
    pub fn cancel_forwarded(&self, server: &str, request_id: &Value) {
        let mut forwarded = self.forwarded.lock().unwrap();
        let found = forwarded
            .iter()
            .find(|(_, f)| f.server == server && &f.server_request_id == request_id)
            .map(|(id, _)| *id);
        if let Some(id) = found {
            forwarded.remove(&id);
            self.send(protocol::notification(
                methods::CANCELLED,
                Some(json!({"requestId": format!("wg-{id}")})),
            ));
        }
    }
}
