//! What MCP adds to JSON-RPC that the gateway reads: the protocol versions and how they
//! differ (batching, argument errors), log levels, and the shape of a tool error result.

use serde_json::{Value, json};

/// Protocol versions the gateway speaks, oldest first.
pub const SUPPORTED_VERSIONS: &[&str] = &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
pub const LATEST_VERSION: &str = "2025-11-25";

/// The client's version if the gateway speaks it, else the latest (the client then decides).
pub fn negotiate_version(requested: Option<&str>) -> &'static str {
    requested
        .and_then(|v| SUPPORTED_VERSIONS.iter().find(|s| **s == v).copied())
        .unwrap_or(LATEST_VERSION)
}

/// MCP's log levels (`logging/setLevel`, `notifications/message`), least severe first.
pub const LOG_LEVELS: [&str; 8] = [
    "debug",
    "info",
    "notice",
    "warning",
    "error",
    "critical",
    "alert",
    "emergency",
];

/// Where `level` stands in [`LOG_LEVELS`]: a message at or above a client's level is sent.
pub fn log_rank(level: &str) -> Option<u8> {
    LOG_LEVELS.iter().position(|l| *l == level).map(|r| r as u8)
}

/// A tool result that reports a failure to the model.
pub fn error_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": true})
}

/// The first version that answers a tool's invalid arguments with a tool error result
/// (`isError: true`, which the model reads and can correct), not a JSON-RPC error.
const ARGUMENT_ERRORS_AS_RESULTS: &str = "2025-11-25";

/// Whether a session at `version` gets invalid arguments as a tool error result.
pub fn argument_errors_are_results(version: &str) -> bool {
    version >= ARGUMENT_ERRORS_AS_RESULTS
}

/// The first version without JSON-RPC batching (added in 2025-03-26, removed again here).
const BATCHING_REMOVED: &str = "2025-06-18";

/// Whether a session at `version` may send batches. Versions are dates, so they order as text.
pub fn batching_allowed(version: &str) -> bool {
    version < BATCHING_REMOVED
}

/// MCP method names the gateway reads or sends, in one place.
pub mod methods {
    pub const INITIALIZE: &str = "initialize";
    pub const PING: &str = "ping";
    pub const INITIALIZED: &str = "notifications/initialized";
    pub const CANCELLED: &str = "notifications/cancelled";
    pub const PROGRESS: &str = "notifications/progress";
    pub const MESSAGE: &str = "notifications/message";
    pub const TOOLS_LIST: &str = "tools/list";
    pub const TOOLS_CALL: &str = "tools/call";
    pub const TOOLS_LIST_CHANGED: &str = "notifications/tools/list_changed";
    pub const PROMPTS_LIST: &str = "prompts/list";
    pub const PROMPTS_GET: &str = "prompts/get";
    pub const PROMPTS_LIST_CHANGED: &str = "notifications/prompts/list_changed";
    pub const RESOURCES_LIST: &str = "resources/list";
    pub const RESOURCE_TEMPLATES_LIST: &str = "resources/templates/list";
    pub const RESOURCES_READ: &str = "resources/read";
    pub const RESOURCES_SUBSCRIBE: &str = "resources/subscribe";
    pub const RESOURCES_UNSUBSCRIBE: &str = "resources/unsubscribe";
    pub const RESOURCES_LIST_CHANGED: &str = "notifications/resources/list_changed";
    pub const RESOURCES_UPDATED: &str = "notifications/resources/updated";
    pub const COMPLETION_COMPLETE: &str = "completion/complete";
    pub const LOGGING_SET_LEVEL: &str = "logging/setLevel";
    pub const SAMPLING_CREATE_MESSAGE: &str = "sampling/createMessage";
    pub const ELICITATION_CREATE: &str = "elicitation/create";
    pub const ROOTS_LIST: &str = "roots/list";
    pub const ROOTS_LIST_CHANGED: &str = "notifications/roots/list_changed";
}
