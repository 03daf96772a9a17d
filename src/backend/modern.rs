//! The 2026-07-28 (stateless) client side of a backend: `server/discover` stands for
//! `initialize`, and every request carries its `_meta` (version, client capabilities and
//! identity, log level) because the server keeps nothing between requests.

use std::time::Duration;

use serde_json::{Map, Value, json};

use super::Discovered;
use super::mcp_client::{self, Answer, HandshakeError, Upstream};
use crate::protocol::modern::{
    self, DISCOVER, META_CAPABILITIES, META_CLIENT_INFO, META_LOG_LEVEL, META_SERVER_INFO,
    META_VERSION, MODERN_VERSION,
};

/// Whether the server was started in the stateless era.
pub fn is_modern(discovered: &Discovered) -> bool {
    discovered.protocol_version == MODERN_VERSION
}

/// The `_meta` of one stateless request made for a client: what that client declared.
pub fn client_meta(capabilities: Value, info: Value, log_level: Option<&str>) -> Value {
    let mut meta = Map::new();
    meta.insert(META_VERSION.into(), MODERN_VERSION.into());
    let capabilities = match capabilities {
        Value::Object(_) => capabilities,
        _ => json!({}),
    };
    meta.insert(META_CAPABILITIES.into(), capabilities);
    if info.is_object() {
        meta.insert(META_CLIENT_INFO.into(), info);
    }
    if let Some(level) = log_level {
        meta.insert(META_LOG_LEVEL.into(), level.into());
    }
    Value::Object(meta)
}

/// The `_meta` of a request the gateway makes itself (discover, lists): what it can
/// forward to some client. Lists do not depend on it, and a server that hides a tool from
/// a client lacking a capability then still shows it to the catalog.
pub fn gateway_meta() -> Value {
    client_meta(
        json!({"sampling": {}, "elicitation": {"form": {}, "url": {}}, "roots": {}}),
        json!({"name": "wasmgate", "version": env!("CARGO_PKG_VERSION")}),
        None,
    )
}

/// `params` with the keys of `meta` in its `_meta`; keys it already has (a progress
/// token, a client's own `_meta`) are kept.
pub fn stamp(params: Option<Value>, meta: &Value) -> Value {
    let mut params = match params {
        Some(Value::Object(map)) => map,
        _ => Map::new(),
    };
    let entry = params
        .entry("_meta")
        .or_insert_with(|| Value::Object(Map::new()));
    if !entry.is_object() {
        *entry = Value::Object(Map::new());
    }
    if let (Some(into), Some(from)) = (entry.as_object_mut(), meta.as_object()) {
        for (key, value) in from {
            into.insert(key.clone(), value.clone());
        }
    }
    Value::Object(params)
}

/// Whether `params` already carry a stateless `_meta` (a client's request, stamped).
pub fn is_stamped(params: Option<&Value>) -> bool {
    modern::body_claim(params).is_some()
}

/// An upstream whose every request is stamped with one `_meta`: the gateway's own requests.
pub struct Stamped<'a, U: Upstream> {
    pub inner: &'a U,
    pub meta: Value,
}

impl<'a, U: Upstream> Stamped<'a, U> {
    /// Stamped with [`gateway_meta`].
    pub fn gateway(inner: &'a U) -> Self {
        Stamped {
            inner,
            meta: gateway_meta(),
        }
    }
}

impl<U: Upstream> Upstream for Stamped<'_, U> {
    fn server(&self) -> &str {
        self.inner.server()
    }

    async fn request_raw(&self, method: &str, params: Option<Value>, timeout: Duration) -> Answer {
        let params = stamp(params, &self.meta);
        self.inner.request_raw(method, Some(params), timeout).await
    }

    fn notify(&self, method: &str, params: Option<Value>) {
        self.inner.notify(method, params)
    }

    fn forget(&self, id: u64) -> bool {
        self.inner.forget(id)
    }
}

/// The stateless start: `server/discover`, then every list its capabilities promise.
pub async fn handshake(
    upstream: &impl Upstream,
    server: &str,
    timeout: Duration,
) -> Result<Discovered, HandshakeError> {
    let found = Stamped::gateway(upstream)
        .request(DISCOVER, None, timeout)
        .await
        .map_err(HandshakeError::Discover)?;
    if !supports_modern(&found) {
        return Err(HandshakeError::NotModern);
    }
    after_discover(upstream, server, &found, timeout).await
}

/// The rest of the stateless start once `found` (a discover result naming the version)
/// is in: every list its capabilities promise.
pub async fn after_discover(
    upstream: &impl Upstream,
    server: &str,
    found: &Value,
    timeout: Duration,
) -> Result<Discovered, HandshakeError> {
    let discovered = Discovered {
        protocol_version: MODERN_VERSION.to_string(),
        server_info: found["_meta"][META_SERVER_INFO].clone(),
        capabilities: found
            .get("capabilities")
            .filter(|c| c.is_object())
            .cloned()
            .unwrap_or_else(|| json!({})),
        instructions: found
            .get("instructions")
            .and_then(Value::as_str)
            .map(str::to_string),
        ..Default::default()
    };
    mcp_client::fetch_lists(&Stamped::gateway(upstream), server, discovered, timeout).await
}

/// Whether a `server/discover` result names the stateless version.
pub fn supports_modern(result: &Value) -> bool {
    lists(result, MODERN_VERSION)
}

/// Whether `protocol = "auto"` speaks the stateless era to a server that answered
/// `server/discover` with `result`: when it names 2026-07-28, whether or not it offers
/// 2025-11-25 too (its list changes and resource updates come on the listen the gateway
/// keeps open, its requests to clients as `input_required` rounds).
pub fn auto_picks_modern(result: &Value) -> bool {
    supports_modern(result)
}

fn lists(result: &Value, version: &str) -> bool {
    result["supportedVersions"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v == version))
}

/// The `server/discover` request of a probe, as one JSON-RPC line.
pub fn discover_request(id: u64) -> Value {
    crate::protocol::request(id.into(), DISCOVER, Some(stamp(None, &gateway_meta())))
}

/// `Mcp-Method`, and `Mcp-Name` when the method has a name, on a stateless POST: what lets
/// intermediaries route without reading the body. `name` is the server's own (the
/// gateway's renaming undone by then).
pub fn mirror_headers(headers: &mut http::HeaderMap, method: &str, name: Option<&str>) {
    if let Ok(value) = http::HeaderValue::from_str(method) {
        headers.insert("mcp-method", value);
    }
    if let Some(name) = name
        && let Ok(value) = http::HeaderValue::from_str(&encode_header(name))
    {
        headers.insert("mcp-name", value);
    }
}

/// A header value as the era sends it: plain when it is visible ASCII (or inner spaces),
/// else the `=?base64?…?=` sentinel.
pub fn encode_header(value: &str) -> String {
    let plain = value.bytes().all(|b| b.is_ascii_graphic() || b == b' ')
        && !value.starts_with(' ')
        && !value.ends_with(' ')
        && !value.starts_with("=?base64?");
    if plain {
        return value.to_string();
    }
    use base64::Engine as _;
    format!(
        "=?base64?{}?=",
        base64::engine::general_purpose::STANDARD.encode(value)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_are_plain_or_base64() {
        assert_eq!(encode_header("echo"), "echo");
        assert_eq!(encode_header("écho"), "=?base64?w6ljaG8=?=");
        assert_eq!(
            crate::protocol::modern::decode_header(&encode_header(" x ")).as_deref(),
            Some(" x ")
        );
    }

    #[test]
    fn a_stamp_keeps_the_callers_meta_keys() {
        let params = json!({"name": "t", "_meta": {"progressToken": "p"}});
        let stamped = stamp(Some(params), &gateway_meta());
        assert_eq!(stamped["_meta"]["progressToken"], "p");
        assert_eq!(stamped["_meta"][META_VERSION], MODERN_VERSION);
        assert!(is_stamped(Some(&stamped)));
    }
}
