//! `conformance`: the tools of the conformance fixture (examples/conformance_server/)
//! that the plugin WIT can serve, so the official MCP conformance suite can call them in
//! a plugin (tests/gateway/conformance.rs). The fixture's other tools ask the client
//! something mid-call (sampling, elicitation), which the WIT's `host` cannot do.

use plugin_kit::{
    Blob, CallResult, Content, EmbeddedResource, Guest, Level, ToolInfo, ToolOutput, host, text,
    tool, unknown_tool,
};
use serde_json::json;
use std::time::Duration;

/// The echo fixture's 1x1 PNG and short WAV: the suite checks the kind, data and MIME type.
const PNG: &[u8] = include_bytes!("../../echo/assets/pixel.png");
const WAV: &[u8] = include_bytes!("../../echo/assets/beep.wav");
/// Between the notifications of the logging and progress tools, as in the fixture.
const STEP: Duration = Duration::from_millis(50);

struct Conformance;

#[rustfmt::skip] // one tool a line reads as a table
const TOOLS: [(&str, &str); 9] = [
    ("test_simple_text", "Tests simple text content response"),
    ("test_image_content", "Tests image content response"),
    ("test_audio_content", "Tests audio content response"),
    ("test_embedded_resource", "Tests embedded resource content response"),
    ("test_multiple_content_types", "Tests response with text, image and resource"),
    ("test_tool_with_logging", "Tests a tool that emits log messages"),
    ("test_tool_with_progress", "Tests a tool that reports progress"),
    ("test_error_handling", "Tests error response handling"),
    ("test_reconnection", "Tests SSE stream reconnection (SEP-1699)"),
];

impl Guest for Conformance {
    fn list_tools() -> Vec<ToolInfo> {
        let mut tools: Vec<ToolInfo> = TOOLS
            .iter()
            .map(|(name, description)| tool(name, description, json!({}), &[]))
            .collect();
        // SEP-1613: a 2020-12 schema that must reach clients as written (the fixture's too).
        let mut schema_tool = tool(
            "json_schema_2020_12_tool",
            "Tool with JSON Schema 2020-12 features (SEP-1613)",
            json!({}),
            &[],
        );
        schema_tool.input_schema = include_str!("../sep1613_schema.json").into();
        tools.push(schema_tool);
        tools
    }

    fn call_tool(name: String, arguments: String) -> CallResult {
        let image = || Content::Image(blob(PNG, "image/png"));
        let content = match name.as_str() {
            "test_simple_text" => return Ok(text("This is a simple text response for testing.")),
            "test_image_content" => vec![image()],
            "test_audio_content" => vec![Content::Audio(blob(WAV, "audio/wav"))],
            "test_embedded_resource" => vec![embedded(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            )],
            "test_multiple_content_types" => vec![
                Content::Text("Multiple content types test:".into()),
                image(),
                embedded(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                ),
            ],
            "test_tool_with_logging" => {
                for step in ["started", "processing data", "completed"] {
                    host::log(Level::Info, &format!("Tool execution {step}"));
                    std::thread::sleep(STEP);
                }
                return Ok(text("Tool with logging executed successfully"));
            }
            "test_tool_with_progress" => {
                for progress in [0.0, 50.0, 100.0] {
                    let message = format!("Completed step {progress} of 100");
                    host::progress(progress, Some(100.0), Some(&message));
                    std::thread::sleep(STEP);
                }
                // Unlike the fixture's text, so a test can tell who served the call.
                return Ok(text("Progress reported by the plugin"));
            }
            "test_error_handling" => {
                let mut output = text("This tool intentionally returns an error for testing");
                output.is_error = true;
                return Ok(output);
            }
            // A plugin has no stream to close; the gateway owns it.
            "test_reconnection" => return Ok(text("Reconnection test completed successfully.")),
            "json_schema_2020_12_tool" => {
                return Ok(text(format!(
                    "JSON Schema 2020-12 tool called with: {arguments}"
                )));
            }
            _ => return Err(unknown_tool(&name)),
        };
        Ok(ToolOutput {
            content,
            structured: None,
            is_error: false,
        })
    }
}

fn blob(data: &[u8], mime_type: &str) -> Blob {
    Blob {
        data: data.to_vec(),
        mime_type: mime_type.into(),
    }
}

fn embedded(uri: &str, mime_type: &str, body: &str) -> Content {
    Content::Resource(EmbeddedResource {
        uri: uri.into(),
        mime_type: Some(mime_type.into()),
        text: Some(body.into()),
        blob: None,
    })
}

plugin_kit::export!(Conformance);
