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
        json!({"sampling": {}, "elicitation": {}, "roots": {}}),
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
    let stamped = Stamped::gateway(upstream);
    let found = stamped
        .request(DISCOVER, None, timeout)
        .await
        .map_err(HandshakeError::Discover)?;
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
    mcp_client::fetch_lists(&stamped, server, discovered, timeout).await
}

/// Whether a `server/discover` result names the stateless version.
pub fn supports_modern(result: &Value) -> bool {
    result["supportedVersions"]
        .as_array()
        .is_some_and(|v| v.iter().any(|v| v == MODERN_VERSION))
}

/// The `server/discover` request of a probe, as one JSON-RPC line.
pub fn discover_request(id: u64) -> Value {
    crate::protocol::request(id.into(), DISCOVER, Some(stamp(None, &gateway_meta())))
}
