//! The vocabulary of MCP 2026-07-28 (the stateless era): its version, the `_meta` keys a
//! request carries instead of a session, its error codes, and the methods it has.

use base64::Engine as _;
use serde_json::{Value, json};

use super::RpcError;

/// The stateless revision the gateway serves its clients.
pub const MODERN_VERSION: &str = "2026-07-28";

/// Every version the gateway serves, newest first: what `server/discover` lists, and what
/// an unsupported-version error offers (one list, so the two never disagree).
pub const ALL_VERSIONS: &[&str] = &[
    MODERN_VERSION,
    "2025-11-25",
    "2025-06-18",
    "2025-03-26",
    "2024-11-05",
];

/// The `_meta` keys of a stateless request and result.
pub const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
pub const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
pub const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
pub const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
pub const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// An HTTP header does not match the body (or a required one is missing).
pub const HEADER_MISMATCH: i64 = -32020;
/// The request needs a client capability it did not declare.
pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
/// The request's protocol version is not served.
pub const UNSUPPORTED_VERSION: i64 = -32022;

pub const DISCOVER: &str = "server/discover";
/// The stream of list changes and resource updates a client opts in to.
pub const LISTEN: &str = "subscriptions/listen";

/// A listen's `notifications` filter (what a request asks, what an acknowledgement
/// honours): the list changes that are on, and the resource URIs when there are some.
pub fn listen_filter(
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Option<&[String]>,
) -> Value {
    let mut filter = json!({});
    for (key, on) in [
        ("toolsListChanged", tools),
        ("promptsListChanged", prompts),
        ("resourcesListChanged", resources),
    ] {
        if on {
            filter[key] = Value::Bool(true);
        }
    }
    if let Some(uris) = uris {
        filter["resourceSubscriptions"] = json!(uris);
    }
    filter
}
/// The first message of a listen stream.
pub const ACKNOWLEDGED: &str = "notifications/subscriptions/acknowledged";
/// The `_meta` key that ties a notification to its listen request.
pub const META_SUBSCRIPTION_ID: &str = "io.modelcontextprotocol/subscriptionId";

/// The client requests of the stateless era that the gateway serves.
pub const METHODS: &[&str] = &[
    DISCOVER,
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    LISTEN,
];

/// Methods whose result carries cache hints (`ttlMs`, `cacheScope`).
pub const CACHEABLE: &[&str] = &[
    DISCOVER,
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// The version a body claims in `params._meta`, if any (a string or not).
pub fn body_claim(params: Option<&Value>) -> Option<&Value> {
    params?.get("_meta")?.get(META_VERSION)
}

/// Whether `version` is one of the stateless era (versions are dates, so they order as text).
pub fn is_modern(version: &str) -> bool {
    version >= MODERN_VERSION && ALL_VERSIONS.contains(&version)
}

/// -32022 for `requested`, offering [`ALL_VERSIONS`].
pub fn unsupported_version(requested: &str) -> RpcError {
    RpcError::new(
        UNSUPPORTED_VERSION,
        format!("Unsupported protocol version \"{requested}\""),
    )
    .with_data(json!({"supported": ALL_VERSIONS, "requested": requested}))
}

/// -32020 naming what differs.
pub fn header_mismatch(message: impl Into<String>) -> RpcError {
    RpcError::new(HEADER_MISMATCH, message)
}

/// A header value as sent: plain, or the `=?base64?…?=` sentinel of a value that is not
/// plain ASCII, decoded. `None` when the sentinel does not decode to UTF-8.
pub fn decode_header(value: &str) -> Option<String> {
    let Some(inner) = value
        .strip_prefix("=?base64?")
        .and_then(|v| v.strip_suffix("?="))
    else {
        return Some(value.to_string());
    };
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(inner)
        .ok()?;
    String::from_utf8(bytes).ok()
}

/// The body field that `Mcp-Name` mirrors for `method`, if it has one.
pub fn name_field(method: &str) -> Option<&'static str> {
    match method {
        "tools/call" | "prompts/get" => Some("name"),
        "resources/read" => Some("uri"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_values_decode_plain_and_base64() {
        assert_eq!(decode_header("echo").as_deref(), Some("echo"));
        assert_eq!(
            decode_header("=?base64?w6ljaG8=?=").as_deref(),
            Some("écho")
        );
        assert_eq!(decode_header("=?base64?!!?="), None);
    }

    #[test]
    fn only_the_stateless_versions_are_modern() {
        assert!(is_modern(MODERN_VERSION));
        assert!(!is_modern("2025-11-25"));
        assert!(!is_modern("v999.0.0"));
    }
}
