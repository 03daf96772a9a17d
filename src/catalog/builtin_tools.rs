//! The gateway's own tools, `gateway_status` and `get_events`, as the catalog lists them
//! (`builtin` answers their calls).

use serde_json::{Value, json};

/// The definitions of the gateway's own tools, as `tools/list` shows them.
pub fn definitions() -> Vec<Value> {
    vec![
        json!({
            "name": "gateway_status",
            "title": "Gateway status",
            "description": "Status of the wasmgate gateway and of every backend (servers and plugins): state, namespace, tool counts, restarts, last error.",
            "inputSchema": {"type": "object", "properties": {}, "required": [], "additionalProperties": false},
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
        json!({
            "name": "get_events",
            "title": "Gateway events",
            "description": "Query the gateway's event log (newest first): backend lifecycle, tool calls, catalog and config changes.",
            "inputSchema": {
                "type": "object",
                "properties": {
                    "trace_id": {"type": "string", "description": "Only events of this trace"},
                    "event_type": {"type": "string", "description": "e.g. tool.called, backend.crashed, plugin.reloaded"},
                    "status": {"type": "string", "enum": ["success", "failure", "pending"]},
                    "since": {"type": "string", "description": "RFC 3339 timestamp: only events at or after it"},
                    "limit": {"type": "integer", "minimum": 1, "maximum": 10000, "default": 100}
                },
                "required": [],
                // A misspelt filter must not quietly return every event.
                "additionalProperties": false
            },
            "annotations": {"readOnlyHint": true, "openWorldHint": false}
        }),
    ]
}
