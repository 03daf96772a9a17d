//! The tools: content of every kind, logs and progress through `host`, a tool error, a
//! 2020-12 input schema, header-mirrored arguments, the trigger tools, and (asks.rs) those
//! that ask the client mid-call.

use std::time::Duration;

use serde_json::{Map, Value, json};

use crate::dynamic::Toggle;
use crate::wasmgate::plugin::host::{self, Level};
use crate::wasmgate::plugin::notify;
use crate::wasmgate::plugin::results::Reply;
use crate::wasmgate::plugin::types::{Blob, CallError, Content, EmbeddedResource, ToolInfo};
use crate::{asks, plans};

/// The suite's own 1x1 PNG and minimal WAV, as the fixture serves them.
pub const PNG: &[u8] = include_bytes!("../assets/pixel.png");
const WAV: &[u8] = include_bytes!("../assets/beep.wav");
/// SEP-1613's schema, shared with the fixture and the 0.1 plugin.
const SEP1613_SCHEMA: &str = include_str!("../../conformance/sep1613_schema.json");
/// Between the notifications of the logging and progress tools: the suite checks that a
/// client receives several messages spread over a call, not one burst.
const STEP: Duration = Duration::from_millis(50);

/// The tools, each with an object schema over `props` (names of string arguments, all
/// required), then those with a schema of their own.
#[rustfmt::skip] // one tool a line reads as a table
pub fn list() -> Vec<ToolInfo> {
    let listed = [
        ("test_simple_text", "Tests simple text content response", &[][..]),
        ("test_image_content", "Tests image content response", &[]),
        ("test_audio_content", "Tests audio content response", &[]),
        ("test_embedded_resource", "Tests embedded resource content response", &[]),
        ("test_multiple_content_types", "Tests response with text, image and resource", &[]),
        ("test_tool_with_logging", "Tests a tool that emits log messages", &[]),
        ("test_tool_with_progress", "Tests a tool that reports progress", &[]),
        ("test_error_handling", "Tests error response handling", &[]),
        ("test_reconnection", "Tests SSE stream reconnection (SEP-1699)", &[]),
        ("test_sampling", "Tests server-initiated sampling", &["prompt"]),
        ("test_elicitation", "Tests server-initiated elicitation", &["message"]),
        ("test_elicitation_sep1034_defaults", "Tests elicitation defaults (SEP-1034)", &[]),
        ("test_elicitation_sep1330_enums", "Tests elicitation enums (SEP-1330)", &[]),
        ("test_missing_capability", "Test tool requiring sampling", &[]),
        ("test_input_required_result_elicitation", "MRTR: asks the client's name (elicitation)", &[]),
        ("test_input_required_result_sampling", "MRTR: asks the client's model (sampling)", &[]),
        ("test_input_required_result_list_roots", "MRTR: asks the client's roots", &[]),
        ("test_input_required_result_request_state", "MRTR: asks for a confirmation", &[]),
        ("test_input_required_result_multiple_inputs", "MRTR: elicit, sample, list roots at once", &[]),
        ("test_input_required_result_multi_round", "MRTR: two elicitations, one after the other", &[]),
        ("test_input_required_result_tampered_state", "MRTR: asks to confirm (state integrity)", &[]),
        ("test_input_required_result_capabilities", "MRTR: asks only what the client declared", &[]),
        ("test_streaming_elicitation", "Reports progress, then elicits, within one call", &[]),
        ("test_logging_tool", "Sends a log message during the call", &[]),
        ("test_trigger_tool_change", "Adds or removes test_dynamic_tool, then says so", &[]),
        ("test_trigger_prompt_change", "Adds or removes test_dynamic_prompt, then says so", &[]),
    ];
    let dynamic = Toggle::Tool.on().then_some(
        ("test_dynamic_tool", "Listed while test_trigger_tool_change added it", &[][..]));
    let mut tools: Vec<ToolInfo> = listed.iter().copied().chain(dynamic)
        .map(|(name, description, props)| {
            let properties: Map<String, Value> =
                props.iter().map(|p| (p.to_string(), json!({"type": "string"}))).collect();
            let schema = json!({"type": "object", "properties": properties, "required": props});
            info(name, description, schema.to_string())
        })
        .collect();
    tools.push(info("json_schema_2020_12_tool",
        "Tool with JSON Schema 2020-12 features (SEP-1613)", SEP1613_SCHEMA.to_owned()));
    tools.push(header_tool());
    tools
}

fn info(name: &str, description: &str, input_schema: String) -> ToolInfo {
    ToolInfo {
        name: name.to_owned(),
        title: None,
        description: description.to_owned(),
        input_schema,
        output_schema: None,
        annotations: None,
    }
}

/// A tool whose arguments a 2026 client mirrors in `Mcp-Param-*` headers (SEP-2243, the
/// suite's `http-custom-header-server-validation`); it echoes them.
fn header_tool() -> ToolInfo {
    let schema = json!({"type": "object", "properties": {
        "region": {"type": "string", "x-mcp-header": "Region"},
        "priority": {"type": "integer", "x-mcp-header": "Priority"},
        "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
        "query": {"type": "string"}},
    "required": ["region"]});
    info(
        "test_header_params",
        "Echoes its header-mirrored arguments",
        schema.to_string(),
    )
}

/// Runs tool `name`; its result goes to `reply`.
pub fn call(name: &str, arguments: &str, reply: &Reply) -> Result<(), CallError> {
    let args: Value = serde_json::from_str(arguments)
        .map_err(|e| CallError::InvalidArguments(format!("arguments are not JSON: {e}")))?;
    // The client's capabilities are the gateway's to check: every question is asked.
    if let Some(plan) = plans::tool(name, &args, &|_| true) {
        if name == "test_streaming_elicitation" {
            host::progress(50.0, Some(100.0), None);
        }
        let result = asks::run(plan);
        let texts = result["content"].as_array().into_iter().flatten();
        let content = texts.map(|c| text(c["text"].as_str().unwrap_or_default()));
        add_all(reply, content.collect())?;
        if result["isError"] == true {
            reply.mark_error();
        }
        return Ok(());
    }
    let image = || Content::Image(blob(PNG, "image/png"));
    let content = match name {
        "test_simple_text" => vec![text("This is a simple text response for testing.")],
        "test_image_content" => vec![image()],
        "test_audio_content" => vec![Content::Audio(blob(WAV, "audio/wav"))],
        "test_embedded_resource" => vec![embedded(
            "test://embedded-resource",
            "text/plain",
            "This is an embedded resource content.",
        )],
        "test_multiple_content_types" => vec![
            text("Multiple content types test:"),
            image(),
            embedded(
                "test://mixed-content-resource",
                "application/json",
                r#"{"test":"data","value":123}"#,
            ),
        ],
        "test_tool_with_logging" => {
            for (i, step) in ["started", "processing data", "completed"]
                .iter()
                .enumerate()
            {
                if i > 0 {
                    std::thread::sleep(STEP);
                }
                host::log(Level::Info, &format!("Tool execution {step}"));
            }
            vec![text("Tool with logging executed successfully")]
        }
        "test_tool_with_progress" => {
            for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                if i > 0 {
                    std::thread::sleep(STEP);
                }
                let message = format!("Completed step {progress} of 100");
                host::progress(progress, Some(100.0), Some(&message));
            }
            // Unlike the fixture's text, so a test can tell who served the call.
            vec![text("Progress reported by the 0.2 plugin")]
        }
        "test_error_handling" => {
            let message = "This tool intentionally returns an error for testing";
            add_all(reply, vec![text(message)])?;
            reply.mark_error();
            return Ok(());
        }
        // A plugin has no stream to close; the gateway owns it.
        "test_reconnection" => vec![text("Reconnection test completed successfully.")],
        "json_schema_2020_12_tool" => vec![text(&format!(
            "JSON Schema 2020-12 tool called with: {arguments}"
        ))],
        "test_logging_tool" => {
            host::log(Level::Info, "Diagnostic trace logging activated");
            vec![text("Logging evaluated")]
        }
        "test_header_params" => {
            let shown = ["region", "priority", "verbose"].map(|k| format!("{k}={}", args[k]));
            vec![text(&shown.join(" "))]
        }
        "test_trigger_tool_change" => {
            Toggle::Tool.flip();
            notify::tools_changed();
            vec![text("Mutation triggered")]
        }
        "test_trigger_prompt_change" => {
            Toggle::Prompt.flip();
            notify::prompts_changed();
            vec![text("Mutation triggered")]
        }
        "test_dynamic_tool" if Toggle::Tool.on() => vec![text("Dynamic tool called")],
        _ => return Err(CallError::UnknownTool(format!("Unknown tool: {name}"))),
    };
    add_all(reply, content)
}

fn add_all(reply: &Reply, content: Vec<Content>) -> Result<(), CallError> {
    for item in content {
        reply.add(&item).map_err(CallError::Failed)?;
    }
    Ok(())
}

pub fn text(text: &str) -> Content {
    Content::Text(text.to_owned())
}

pub fn blob(data: &[u8], mime_type: &str) -> Blob {
    Blob {
        data: data.to_vec(),
        mime_type: mime_type.to_owned(),
    }
}

pub fn embedded(uri: &str, mime_type: &str, body: &str) -> Content {
    Content::Resource(EmbeddedResource {
        uri: uri.to_owned(),
        mime_type: Some(mime_type.to_owned()),
        text: Some(body.to_owned()),
        blob: None,
    })
}
