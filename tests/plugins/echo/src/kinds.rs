//! The `kinds` tool: one content item of each kind the WIT can carry, so the
//! host's tests can check how each is turned into MCP content.

use plugin_kit::{Blob, CallResult, Content, EmbeddedResource, ToolOutput};
use serde_json::{Value, json};

/// A 1x1 red PNG.
pub const PNG: &[u8] = include_bytes!("../assets/pixel.png");
/// 10 ms of an 8 kHz, 8-bit mono square wave.
pub const WAV: &[u8] = include_bytes!("../assets/beep.wav");

const KINDS: [&str; 5] = ["text", "image", "audio", "resource-text", "resource-blob"];

pub fn all() -> CallResult {
    let content = vec![
        Content::Text("text item".into()),
        Content::Image(Blob {
            data: PNG.to_vec(),
            mime_type: "image/png".into(),
        }),
        Content::Audio(Blob {
            data: WAV.to_vec(),
            mime_type: "audio/wav".into(),
        }),
        Content::Resource(EmbeddedResource {
            uri: "test://echo/text".into(),
            mime_type: Some("text/plain".into()),
            text: Some("resource text".into()),
            blob: None,
        }),
        Content::Resource(EmbeddedResource {
            uri: "test://echo/blob".into(),
            mime_type: Some("application/octet-stream".into()),
            text: None,
            blob: Some(vec![0, 1, 2, 3, 255]),
        }),
    ];
    let structured = json!({"kinds": KINDS, "count": KINDS.len()});
    Ok(ToolOutput {
        content,
        structured: Some(structured.to_string()),
        is_error: false,
    })
}

pub fn output_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "kinds": {"type": "array", "items": {"type": "string"}},
            "count": {"type": "integer"},
        },
        "required": ["kinds", "count"],
    })
}
