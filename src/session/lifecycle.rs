//! The lifecycle answers, made by the session and not the router: `initialize` (with its
//! params checked and its typed result), `ping`, and the stateless era's `server/discover`.

use serde::Serialize;
use serde_json::Value;

use super::Session;
use crate::gateway::Gateway;
use crate::peer::ClientPeer;
use crate::protocol::{self, Reply, RpcError};

/// The result of `initialize`, in the order of its fields on the wire.
#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct InitializeResult<'a> {
    protocol_version: &'a str,
    capabilities: Capabilities,
    server_info: ServerInfo<'a>,
    #[serde(skip_serializing_if = "Option::is_none")]
    instructions: Option<String>,
}

/// What the gateway offers for the session's life.
#[derive(Serialize)]
struct Capabilities {
    tools: ListChanged,
    logging: Empty,
    #[serde(skip_serializing_if = "Option::is_none")]
    resources: Option<Resources>,
    #[serde(skip_serializing_if = "Option::is_none")]
    prompts: Option<ListChanged>,
    #[serde(skip_serializing_if = "Option::is_none")]
    completions: Option<Empty>,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct ListChanged {
    list_changed: bool,
}

#[derive(Serialize)]
#[serde(rename_all = "camelCase")]
struct Resources {
    subscribe: bool,
    list_changed: bool,
}

/// `{}`: a capability without options.
#[derive(Serialize)]
struct Empty {}

#[derive(Serialize)]
struct ServerInfo<'a> {
    name: &'a str,
    version: &'static str,
}

impl Session {
    pub(super) fn initialize(&self, params: Option<Value>) -> Result<Reply, RpcError> {
        let (requested, capabilities, info) = initialize_params(params.as_ref())?;
        let version = protocol::negotiate_version(Some(requested));
        if let Err(before) = self
            .peer
            .initialized(version, capabilities.clone(), info.clone())
        {
            return Err(RpcError::new(
                protocol::INVALID_REQUEST,
                format!(
                    "Invalid Request: already initialized (protocol version {before}); initialize is sent once per session"
                ),
            ));
        }
        tracing::info!(session = %self.peer.id, client = %info, version, "client initialized");
        Ok(initialize_result(&self.gateway, &self.peer, version))
    }
}

/// The answer to `ping`.
pub(super) fn pong() -> Reply {
    Reply::from(Value::Object(serde_json::Map::new()))
}

/// The answer to `initialize`: capabilities reflect what the backends offer; the
/// instructions are those of the servers `peer`'s view includes.
fn initialize_result(gateway: &Gateway, peer: &ClientPeer, version: &str) -> Reply {
    let config = gateway.config.load();
    let result = InitializeResult {
        protocol_version: version,
        capabilities: capabilities(gateway),
        server_info: ServerInfo {
            name: &config.gateway.name,
            version: env!("CARGO_PKG_VERSION"),
        },
        instructions: instructions(gateway, peer),
    };
    // Serialising these types cannot fail (no maps with other keys than strings).
    match serde_json::value::to_raw_value(&result) {
        Ok(raw) => Reply::Raw(raw),
        Err(_) => Reply::from(Value::Null),
    }
}

/// The answer to `server/discover` (2026-07-28): what `initialize` would offer this
/// principal, the versions served, and who answers. Cache hints are added with every
/// stateless result's (`super::stateless::finish`).
pub(super) fn discover(gateway: &Gateway, peer: &ClientPeer) -> Reply {
    let mut result = serde_json::json!({
        "supportedVersions": protocol::modern::ALL_VERSIONS,
        // What a session is told of arrives on a `subscriptions/listen` stream (listen.rs).
        "capabilities": capabilities(gateway),
    });
    if let Some(instructions) = instructions(gateway, peer) {
        result["instructions"] = Value::String(instructions);
    }
    Reply::from(result)
}

/// What the gateway offers: what the backends do. Lists that change and resources that
/// update are announced to a session, and on a stateless era's `subscriptions/listen`.
fn capabilities(gateway: &Gateway) -> Capabilities {
    Capabilities {
        tools: ListChanged { list_changed: true },
        logging: Empty {},
        resources: offers(gateway, "resources").then_some(Resources {
            subscribe: true,
            list_changed: true,
        }),
        prompts: offers(gateway, "prompts").then_some(ListChanged { list_changed: true }),
        completions: offers(gateway, "completions").then_some(Empty {}),
    }
}

/// Whether the gateway offers capability `cap`: some backend does, or may.
pub(super) fn offers(gateway: &Gateway, cap: &str) -> bool {
    let config = gateway.config.load();
    let backends = gateway.servers();
    // Servers still starting may offer anything: promise what they might, since the
    // answer to `initialize` does not wait for them. So may a server that an edit of
    // the config file adds later, and capabilities are fixed for the session.
    let may_offer_any = config.source.is_some()
        || backends
            .iter()
            .any(|b| b.discovered().capabilities.is_null());
    may_offer_any
        || backends.iter().any(|b| b.discovered().has_capability(cap))
        || plugins_offer(gateway, cap)
}

/// Whether a 0.2 plugin serves `cap` (resources, prompts, completions), or plugins still
/// loading may. A plugin that becomes 0.2 by a reload is offered to new sessions.
fn plugins_offer(gateway: &Gateway, cap: &str) -> bool {
    let Some(host) = gateway.plugin_host() else {
        return false;
    };
    !host.loading_plugins().is_empty()
        || host.plugins().iter().any(|p| match cap {
            "resources" => !p.resources.is_empty() || !p.templates.is_empty(),
            "prompts" => !p.prompts.is_empty(),
            "completions" => p.completes,
            _ => false,
        })
}

/// The instructions of the servers `peer`'s view includes, each under its name.
fn instructions(gateway: &Gateway, peer: &ClientPeer) -> Option<String> {
    let instructions: Vec<String> = gateway
        .servers()
        .iter()
        .filter(|b| gateway.sees(peer, b.name()))
        .filter_map(|b| {
            b.discovered()
                .instructions
                .clone()
                .map(|i| format!("## {}\n{}", b.name(), i))
        })
        .collect();
    (!instructions.is_empty()).then(|| instructions.join("\n\n"))
}

/// The `initialize` params the schema requires: `protocolVersion` (a string),
/// `capabilities` (an object) and `clientInfo` (an object with string `name` and `version`).
/// Not lenient about their absence: the official TypeScript and Python SDK servers refuse
/// such an `initialize` too, so clients in the field send them. Lenient where the
/// specification is: a version the gateway does not speak is negotiated, not refused, and
/// fields it does not know (in the capabilities too) are accepted.
fn initialize_params(params: Option<&Value>) -> Result<(&str, &Value, &Value), RpcError> {
    let invalid =
        |problem: &str| RpcError::invalid_params(format!("Invalid params: initialize: {problem}"));
    let params = params.ok_or_else(|| {
        invalid("params are required: {\"protocolVersion\", \"capabilities\", \"clientInfo\"}")
    })?;
    let version = params
        .get("protocolVersion")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            invalid("protocolVersion is required and must be a string, e.g. \"2025-06-18\"")
        })?;
    let capabilities = params
        .get("capabilities")
        .filter(|c| c.is_object())
        .ok_or_else(|| invalid("capabilities is required and must be an object ({} for none)"))?;
    let info = params
        .get("clientInfo")
        .filter(|i| ["name", "version"].iter().all(|key| i[key].is_string()))
        .ok_or_else(|| invalid("clientInfo is required: an object with string name and version"))?;
    Ok((version, capabilities, info))
}
