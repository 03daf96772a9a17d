//! The MCP client side of a backend: the handshake, discovery of its lists with pagination,
//! which of its tools clients can use, and what clients asked of it restored after a
//! restart; what a server sends of its own accord passed on, results checked, requests
//! given up cancelled. Written against [`Upstream`], so every backend kind uses it as it is.

use std::collections::HashSet;
use std::time::Duration;

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::{BackendError, BackendEvent, ClientRequests, Discovered, ListKind, Responder};
use crate::protocol::{self, Message, RpcError, methods};

/// A server's result as it wrote it (JSON text), or why there is none.
pub type Answer = Result<Box<RawValue>, BackendError>;

/// One live connection to an MCP server, whatever carries it.
pub trait Upstream: Sync {
    /// The server's name, for errors.
    fn server(&self) -> &str;

    /// Sends a request and waits for its result, kept as the server's JSON text.
    fn request_raw(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> impl Future<Output = Answer> + Send;

    /// Sends a request and waits for its result.
    fn request(
        &self,
        method: &str,
        params: Option<Value>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Value, BackendError>> + Send {
        async move {
            let raw = self.request_raw(method, params, timeout).await?;
            super::common::read_result(self.server(), &raw)
        }
    }

    /// Sends a notification, without waiting.
    fn notify(&self, method: &str, params: Option<Value>);

    /// Forgets request `id`, given up before its answer came; says whether the server is
    /// still to be told so (the request was still waiting and the connection lives).
    fn forget(&self, id: u64) -> bool {
        let _ = id;
        true
    }
}

/// Every MCP result is a JSON object; anything else would reach the client as it is, and
/// clients drop such an answer (the call then hangs until their timeout).
pub fn checked(server: &str, result: Box<RawValue>) -> Answer {
    if result.get().trim_start().starts_with('{') {
        return Ok(result);
    }
    Err(BackendError::NotAnObject {
        server: server.to_string(),
        result: result.get().chars().take(100).collect(),
    })
}

/// Tells the server, when dropped before [`CancelOnDrop::answered`], that request `id` is
/// no longer wanted (a timeout, or the client cancelled): `notifications/cancelled`.
pub struct CancelOnDrop<'a, U: Upstream> {
    upstream: &'a U,
    id: u64,
    answered: bool,
}

impl<'a, U: Upstream> CancelOnDrop<'a, U> {
    pub fn new(upstream: &'a U, id: u64) -> Self {
        CancelOnDrop {
            upstream,
            id,
            answered: false,
        }
    }

    /// The request needs no cancelling: it was answered, failed, or is not to be cancelled.
    pub fn answered(&mut self) {
        self.answered = true;
    }
}

impl<U: Upstream> Drop for CancelOnDrop<'_, U> {
    fn drop(&mut self) {
        if !self.answered && self.upstream.forget(self.id) {
            self.upstream.notify(
                methods::CANCELLED,
                Some(json!({"requestId": self.id, "reason": "cancelled by the gateway (timeout or client cancellation)"})),
            );
        }
    }
}

/// Passes what a server sent of its own accord to the gateway: a notification, or a
/// request to the client that `responder` makes the way back for. A response is handed
/// back, for the request it answers. `call` is the client call whose stream it came on.
pub fn dispatch(
    to_gateway: &mpsc::UnboundedSender<BackendEvent>,
    server: &str,
    call: Option<u64>,
    message: Message,
    responder: impl FnOnce(Value) -> Responder,
) -> Option<(Value, Result<Value, RpcError>)> {
    let event = match message {
        Message::Response { id, result } => return Some((id, result)),
        Message::Notification { method, params } => BackendEvent::Notification {
            server: server.to_string(),
            call,
            method,
            params,
        },
        Message::Request { id, method, params } => BackendEvent::Request {
            server: server.to_string(),
            call,
            method,
            params,
            reply: responder(id),
        },
    };
    let _ = to_gateway.send(event);
    None
}

/// Why a start did not get as far as a ready server. The text is what `gateway_status`
/// shows as the server's last error.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HandshakeError {
    #[error("initialize failed: {0}")]
    Initialize(BackendError),
    #[error("discovery failed: {0}")]
    Discovery(BackendError),
    #[error("server/discover failed: {0}")]
    Discover(BackendError),
    #[error("its server/discover does not list version 2026-07-28")]
    NotModern,
}

/// What the gateway offers to forward to its servers. Servers are shared and start
/// before any client connects, so this is what the gateway can do, not what a client can.
pub fn client_capabilities() -> Value {
    let elicitation = json!({"form": {}, "url": {}});
    json!({"sampling": {}, "elicitation": elicitation, "roots": {"listChanged": true}})
}

/// `initialize`, `notifications/initialized`, then every list the server's capabilities
/// promise.
pub async fn handshake(
    upstream: &impl Upstream,
    server: &str,
    timeout: Duration,
) -> Result<Discovered, HandshakeError> {
    let init = upstream
        .request(
            methods::INITIALIZE,
            Some(json!({
                "protocolVersion": protocol::LATEST_VERSION,
                "capabilities": client_capabilities(),
                "clientInfo": {"name": "wasmgate", "version": env!("CARGO_PKG_VERSION")},
            })),
            timeout,
        )
        .await
        .map_err(HandshakeError::Initialize)?;
    upstream.notify(methods::INITIALIZED, None);
    let version = init.get("protocolVersion").and_then(Value::as_str);
    if !version.is_some_and(|v| protocol::SUPPORTED_VERSIONS.contains(&v)) {
        tracing::warn!(server = %server, version, "the server answered initialize with a protocol version the gateway does not speak; going on as if it spoke the latest");
    }
    let discovered = Discovered {
        protocol_version: version.unwrap_or_default().to_string(),
        server_info: init.get("serverInfo").cloned().unwrap_or(Value::Null),
        capabilities: init
            .get("capabilities")
            .cloned()
            .unwrap_or_else(|| json!({})),
        instructions: init
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..Default::default()
    };
    fetch_lists(upstream, server, discovered, timeout).await
}

/// Every list the server's capabilities (in `discovered`) promise, fetched into it.
pub async fn fetch_lists(
    upstream: &impl Upstream,
    server: &str,
    mut discovered: Discovered,
    timeout: Duration,
) -> Result<Discovered, HandshakeError> {
    let err = HandshakeError::Discovery;
    if discovered.has_capability("tools") {
        discovered.tools = usable_tools(
            server,
            list_all(upstream, server, methods::TOOLS_LIST, "tools", timeout)
                .await
                .map_err(err)?,
        );
    }
    if discovered.has_capability("resources") {
        discovered.resources = list_all(
            upstream,
            server,
            methods::RESOURCES_LIST,
            "resources",
            timeout,
        )
        .await
        .map_err(err)?;
        // Templates are optional even for servers with resources.
        discovered.resource_templates = list_all(
            upstream,
            server,
            methods::RESOURCE_TEMPLATES_LIST,
            "resourceTemplates",
            timeout,
        )
        .await
        .unwrap_or_default();
    }
    if discovered.has_capability("prompts") {
        discovered.prompts = list_all(upstream, server, methods::PROMPTS_LIST, "prompts", timeout)
            .await
            .map_err(err)?;
    }
    Ok(discovered)
}

/// `current` with one list fetched again, after the server said it changed.
pub async fn refresh_list(
    upstream: &impl Upstream,
    server: &str,
    current: &Discovered,
    kind: ListKind,
    timeout: Duration,
) -> Result<Discovered, BackendError> {
    let mut next = current.clone();
    match kind {
        ListKind::Tools => {
            next.tools = usable_tools(
                server,
                list_all(upstream, server, methods::TOOLS_LIST, "tools", timeout).await?,
            )
        }
        ListKind::Prompts => {
            next.prompts =
                list_all(upstream, server, methods::PROMPTS_LIST, "prompts", timeout).await?
        }
        ListKind::Resources => {
            next.resources = list_all(
                upstream,
                server,
                methods::RESOURCES_LIST,
                "resources",
                timeout,
            )
            .await?;
            next.resource_templates = list_all(
                upstream,
                server,
                methods::RESOURCE_TEMPLATES_LIST,
                "resourceTemplates",
                timeout,
            )
            .await?;
        }
    }
    Ok(next)
}

/// What the clients asked of `server` before, from the gateway (`None` when it is gone
/// or does not answer in time).
pub async fn client_requests(
    to_gateway: &mpsc::UnboundedSender<BackendEvent>,
    server: &str,
) -> Option<ClientRequests> {
    let (reply, requests) = tokio::sync::oneshot::channel();
    let event = BackendEvent::Handshaken {
        server: server.to_string(),
        reply,
    };
    to_gateway.send(event).ok()?;
    tokio::time::timeout(Duration::from_secs(5), requests)
        .await
        .ok()?
        .ok()
}

/// A new connection knows nothing of what the clients asked before: it gets the last log
/// level and the subscriptions again, before any call reaches it. A failure is logged,
/// and the server serves anyway.
pub async fn restore(
    upstream: &impl Upstream,
    server: &str,
    discovered: &Discovered,
    requests: ClientRequests,
    timeout: Duration,
) {
    // A stateless server keeps nothing: the level and subscriptions go with each request.
    if super::modern::is_modern(discovered) {
        return;
    }
    let mut messages = Vec::new();
    if let Some(level) = requests.log_level
        && discovered.has_capability("logging")
    {
        messages.push((methods::LOGGING_SET_LEVEL, json!({ "level": level })));
    }
    if discovered.capabilities["resources"]["subscribe"] == true {
        for uri in requests.subscriptions {
            messages.push((methods::RESOURCES_SUBSCRIBE, json!({ "uri": uri })));
        }
    }
    for (method, params) in messages {
        match upstream
            .request(method, Some(params.clone()), timeout)
            .await
        {
            Ok(_) => tracing::debug!(server = %server, %params, "{method} again after a start"),
            Err(err) => {
                tracing::warn!(server = %server, %params, "{method} again after a start failed: {err}")
            }
        }
    }
}

/// The tools a client can take. MCP requires a string `name` and an `inputSchema` that is
/// an object schema; clients built on the official SDKs refuse a whole `tools/list` with
/// one tool that breaks this, so it would hide every other server's tools too. Such a
/// tool is left out, with a warning; so is a second tool of the same name.
fn usable_tools(server: &str, tools: Vec<Value>) -> Vec<Value> {
    let mut names = HashSet::new();
    tools
        .into_iter()
        .filter(|tool| {
            let name = tool.get("name").and_then(Value::as_str);
            let problem = match (name, tool.get("inputSchema")) {
                (None | Some(""), _) => Some("it has no name"),
                (Some(name), _) if !names.insert(name.to_string()) => {
                    Some("a tool of that name came before it")
                }
                (_, Some(schema))
                    if schema.get("type").and_then(Value::as_str) == Some("object") =>
                {
                    None
                }
                (_, None) => Some("it has no inputSchema"),
                (_, Some(_)) => {
                    Some("its inputSchema is not an object schema ({\"type\": \"object\", ...})")
                }
            };
            if let Some(problem) = problem {
                let shown = tool.to_string();
                let shown = protocol::cut_short(&shown, 200);
                tracing::warn!(server, "tool left out: {problem}: {shown}");
            } else if let Some(name) = name.filter(|n| !crate::names::follows_mcp_advice(n, 128)) {
                // Served: the specification only advises, but some clients refuse such names.
                tracing::warn!(server, "tool `{name}` has a name some clients refuse (MCP advises 1-128 of A-Z a-z 0-9 _ - .)");
            }
            problem.is_none()
        })
        .collect()
}

/// Fetches every page of a list, following `nextCursor`.
/// One page of a list, retried once after a transport failure if the retry budget allows:
/// lists are idempotent, and a budget keeps retries from multiplying an outage.
async fn list_page(
    upstream: &impl Upstream,
    server: &str,
    method: &str,
    params: Option<Value>,
    timeout: Duration,
) -> Result<Value, BackendError> {
    let budget = crate::limits::list_retries();
    budget.called();
    match upstream.request(method, params.clone(), timeout).await {
        Err(e) if e.is_transport_failure() && budget.try_retry() => {
            tracing::info!(server = %server, "{method} failed ({e}); retried once");
            upstream.request(method, params, timeout).await
        }
        page => page,
    }
}

async fn list_all(
    upstream: &impl Upstream,
    server: &str,
    method: &str,
    key: &str,
    timeout: Duration,
) -> Result<Vec<Value>, BackendError> {
    let mut items = Vec::new();
    let mut cursor: Option<Value> = None;
    let mut seen = HashSet::new();
    // Bounded, so that a server that always answers with a cursor cannot hold start-up forever.
    for _ in 0..1000 {
        let params = cursor.take().map(|c| json!({"cursor": c}));
        let page = list_page(upstream, server, method, params, timeout).await?;
        match page.get(key) {
            Some(Value::Array(list)) => items.extend(list.iter().cloned()),
            None => {}
            Some(other) => {
                let shown = other.to_string();
                let shown = protocol::cut_short(&shown, 100);
                tracing::warn!(server = %server, "{method}: `{key}` is not an array, nothing taken from it: {shown}");
            }
        }
        match page.get("nextCursor") {
            Some(c) if !c.is_null() => {
                if !seen.insert(c.to_string()) {
                    tracing::warn!(server = %server, cursor = %c, "{method}: the server gave a cursor it gave before; stopping there");
                    break;
                }
                cursor = Some(c.clone());
            }
            _ => break,
        }
    }
    Ok(items)
}
