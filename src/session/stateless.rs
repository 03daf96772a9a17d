//! Requests of the stateless era (MCP 2026-07-28), whatever the transport: the checks of
//! a request's `_meta` in the specification's order, the transient session that runs one
//! request through the same router as a session's, and what every result then carries
//! (`resultType`, the server's identity, cache hints).

mod stamp;

use std::sync::Arc;

use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::{RequestBounds, Session};
use crate::gateway::Gateway;
use crate::peer::{ClientPeer, ClientSink, Principal};
use crate::protocol::modern::{self, META_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL};
use crate::protocol::{self, Reply, RpcError, methods};

/// What a stateless request's `_meta` says instead of a handshake.
#[derive(Debug, Clone)]
pub struct RequestMeta {
    pub capabilities: Value,
    pub info: Value,
    /// The rank of its `logLevel`, if it set one: it gets log lines at or above it, else none.
    pub log_rank: Option<u8>,
}

/// Checks a stateless request's version and `_meta`; `header`: the version a transport
/// header named (HTTP's `MCP-Protocol-Version`). The order is the specification's: an
/// unsupported header version, a header that differs from the body, an unsupported body
/// version, then a missing or invalid field.
pub fn check_meta(params: Option<&Value>, header: Option<&str>) -> Result<RequestMeta, RpcError> {
    if let Some(version) = header
        && !modern::ALL_VERSIONS.contains(&version)
    {
        return Err(modern::unsupported_version(version));
    }
    let claim = modern::body_claim(params);
    if let (Some(header), Some(claim)) = (header, claim)
        && claim.as_str() != Some(header)
    {
        return Err(modern::header_mismatch(format!(
            "Header mismatch: MCP-Protocol-Version is \"{header}\" but _meta protocolVersion is {claim}"
        )));
    }
    let invalid = |problem: &str| RpcError::invalid_params(format!("Invalid params: {problem}"));
    let meta = params
        .and_then(|p| p.get("_meta"))
        .and_then(Value::as_object)
        .ok_or_else(|| invalid("params._meta is required (protocolVersion, clientCapabilities)"))?;
    let version = meta
        .get(modern::META_VERSION)
        .ok_or_else(|| invalid("_meta needs io.modelcontextprotocol/protocolVersion"))?
        .as_str()
        .ok_or_else(|| invalid("_meta protocolVersion must be a string"))?;
    if !modern::ALL_VERSIONS.contains(&version) {
        return Err(modern::unsupported_version(version));
    }
    if !modern::is_modern(version) {
        return Err(invalid(&format!(
            "protocol version {version} has no stateless requests: send initialize first"
        )));
    }
    let capabilities = meta
        .get(META_CAPABILITIES)
        .filter(|c| c.is_object())
        .ok_or_else(|| {
            invalid("_meta needs io.modelcontextprotocol/clientCapabilities, an object")
        })?
        .clone();
    let info = meta.get(META_CLIENT_INFO).cloned().unwrap_or(Value::Null);
    let log_rank = match meta.get(META_LOG_LEVEL) {
        None => None,
        Some(level) => Some(
            level
                .as_str()
                .and_then(protocol::log_rank)
                .ok_or_else(|| invalid("_meta logLevel must be one of MCP's log levels"))?,
        ),
    };
    Ok(RequestMeta {
        capabilities,
        info,
        log_rank,
    })
}

/// -32601 for a method the stateless era does not have (removed ones like `initialize`
/// and `ping` included); HTTP answers it with 404.
pub fn check_method(method: &str) -> Result<(), RpcError> {
    if modern::METHODS.contains(&method) {
        return Ok(());
    }
    Err(RpcError::new(
        protocol::METHOD_NOT_FOUND,
        format!(
            "Method not found: {method} (not a method of protocol version {})",
            modern::MODERN_VERSION
        ),
    ))
}

impl Session {
    /// The session of one stateless request: its peer is made from the request's `_meta`
    /// and `principal`, and is never registered where servers' notifications fan out.
    pub fn stateless(
        gateway: Arc<Gateway>,
        out: impl ClientSink,
        principal: Principal,
        meta: RequestMeta,
        bounds: Option<Arc<RequestBounds>>,
    ) -> Arc<Session> {
        let peer =
            ClientPeer::stateless(out, principal, meta.capabilities, meta.info, meta.log_rank);
        let session = Session::with_peer(gateway, Arc::new(peer));
        if let Some(bounds) = bounds {
            session.bound_requests(bounds);
        }
        session
    }
}

/// A stateless request's answer as the era wants it: `resultType` (an upstream's own
/// kept), the gateway's identity in `_meta`, cache hints on discover, lists and reads;
/// resource-not-found as -32602 with the URI.
pub(super) fn finish(
    gateway: &Gateway,
    principal: &Principal,
    method: &str,
    uri: Option<String>,
    answer: Result<Reply, RpcError>,
) -> Result<Reply, RpcError> {
    let mut reply = match answer {
        Err(error)
            if method == methods::RESOURCES_READ && error.code == protocol::RESOURCE_NOT_FOUND =>
        {
            return Err(RpcError::invalid_params(format!(
                "Resource not found: {}",
                uri.as_deref().unwrap_or_default()
            ))
            .with_data(json!({"uri": uri})));
        }
        other => other?,
    };
    // What a profile or a token sees is its own; the gateway re-reads its servers, so it
    // promises no freshness.
    let private = principal.profile.is_some() || principal.token.is_some();
    let cache_scope =
        modern::CACHEABLE
            .contains(&method)
            .then_some(if private { "private" } else { "public" });
    // A server's result passed through as text gets the fields written into its text.
    if let Reply::Raw(raw) | Reply::Written { raw, .. } = &mut reply
        && let Some(text) = stamped(raw, &server_info_text(gateway), cache_scope)
    {
        *raw = text;
        return Ok(reply);
    }
    let mut value = reply.into_value();
    let Some(result) = value.as_object_mut() else {
        return Ok(Reply::from(value));
    };
    result
        .entry("resultType")
        .or_insert_with(|| Value::String("complete".into()));
    with_server_info(result, server_info(gateway));
    // An `input_required` result (a stateless server's, relayed) carries no cache hints.
    let complete = result.get("resultType").and_then(Value::as_str) == Some("complete");
    if let Some(scope) = cache_scope.filter(|_| complete) {
        result.insert("ttlMs".into(), json!(0));
        result.insert("cacheScope".into(), json!(scope));
    }
    Ok(Reply::from(value))
}

/// The gateway's identity, as a stateless result's `_meta` names it.
fn server_info(gateway: &Gateway) -> Value {
    identity(&gateway.config.load().gateway.name)
}

/// [`server_info`] as JSON text.
fn server_info_text(gateway: &Gateway) -> String {
    identity_text(&gateway.config.load().gateway.name)
}

fn identity(name: &str) -> Value {
    json!({"name": name, "version": env!("CARGO_PKG_VERSION")})
}

/// [`identity`] written as text without building the tree: the same members in the same
/// order, escaped as serde_json escapes them (a test holds the two equal).
fn identity_text(name: &str) -> String {
    let name = serde_json::to_string(name).unwrap_or_else(|_| "null".into());
    format!(
        "{{\"name\":{name},\"version\":\"{}\"}}",
        env!("CARGO_PKG_VERSION")
    )
}

/// Puts the gateway's identity in a stateless result's `_meta`.
pub(super) fn stamp_server_info(gateway: &Gateway, result: &mut Map<String, Value>) {
    with_server_info(result, server_info(gateway));
}

fn with_server_info(result: &mut Map<String, Value>, server_info: Value) {
    let meta = result
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if let Some(meta) = meta.as_object_mut() {
        meta.insert(modern::META_SERVER_INFO.into(), server_info);
    }
}

/// `raw` with [`finish`]'s fields written in ([`stamp::stamp`]), if its text allows.
fn stamped(raw: &RawValue, server_info: &str, cache_scope: Option<&str>) -> Option<Box<RawValue>> {
    let text = stamp::stamp(raw.get(), server_info, cache_scope)?;
    RawValue::from_string(text).ok()
}

#[cfg(test)]
mod tests {
    use super::{identity, identity_text};

    #[test]
    fn the_identity_text_is_the_tree_written_out() {
        for name in [
            "wasmgate",
            "",
            "a \"quoted\" \\ name",
            "tab\there",
            "ünï\u{1F600}",
            "\u{7}",
        ] {
            assert_eq!(identity_text(name), identity(name).to_string(), "{name:?}");
        }
    }
}
