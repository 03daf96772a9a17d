//! WIT values to MCP JSON: tool descriptions (validated, a plugin that breaks
//! the rules is refused) and tool outputs (`CallToolResult`).

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

use super::bindings::{Blob, Content, EmbeddedResource, ToolInfo, ToolOutput};

/// `[A-Za-z0-9_.-]{1,64}`, the rule of `tool-info.name`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// An MCP `Tool` object (unprefixed name) from a plugin's description, or why
/// it is not acceptable.
pub fn tool_to_mcp(info: &ToolInfo) -> Result<Value, String> {
    if !valid_tool_name(&info.name) {
        return Err(format!(
            "tool name {:?} is not 1-64 characters of letters, digits, `_`, `-`, `.`",
            info.name
        ));
    }
    let mut tool = Map::new();
    tool.insert("name".into(), Value::String(info.name.clone()));
    if let Some(title) = &info.title {
        tool.insert("title".into(), Value::String(title.clone()));
    }
    tool.insert(
        "description".into(),
        Value::String(info.description.clone()),
    );
    tool.insert(
        "inputSchema".into(),
        json_object(&info.name, "input-schema", &info.input_schema)?,
    );
    if let Some(schema) = &info.output_schema {
        tool.insert(
            "outputSchema".into(),
            json_object(&info.name, "output-schema", schema)?,
        );
    }
    if let Some(annotations) = &info.annotations {
        tool.insert(
            "annotations".into(),
            json_object(&info.name, "annotations", annotations)?,
        );
    }
    Ok(Value::Object(tool))
}

fn json_object(tool: &str, field: &str, text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(format!("tool `{tool}`: {field} is not a JSON object")),
        Err(e) => Err(format!("tool `{tool}`: {field} is not valid JSON: {e}")),
    }
}

/// An MCP `CallToolResult` from a tool's output.
pub fn output_to_mcp(plugin: &str, tool: &str, output: ToolOutput) -> Value {
    let mut content: Vec<Value> = output.content.into_iter().map(content_to_mcp).collect();
    let mut result = Map::new();
    if let Some(text) = output.structured {
        match serde_json::from_str::<Value>(&text) {
            Ok(structured) => {
                // Clients that predate `structuredContent` read the text.
                if content.is_empty() {
                    content.push(json!({"type": "text", "text": text}));
                }
                result.insert("structuredContent".into(), structured);
            }
            Err(e) => {
                return error_result(format!(
                    "plugin `{plugin}` tool `{tool}` returned structured output that is not valid JSON: {e}"
                ));
            }
        }
    }
    result.insert("content".into(), Value::Array(content));
    if output.is_error {
        result.insert("isError".into(), Value::Bool(true));
    }
    Value::Object(result)
}

fn content_to_mcp(content: Content) -> Value {
    match content {
        Content::Text(text) => json!({"type": "text", "text": text}),
        Content::Image(blob) => blob_to_mcp("image", blob),
        Content::Audio(blob) => blob_to_mcp("audio", blob),
        Content::Resource(resource) => {
            json!({"type": "resource", "resource": resource_to_mcp(resource)})
        }
    }
}

fn blob_to_mcp(kind: &str, blob: Blob) -> Value {
    json!({"type": kind, "data": BASE64.encode(&blob.data), "mimeType": blob.mime_type})
}

fn resource_to_mcp(resource: EmbeddedResource) -> Value {
    let mut out = Map::new();
    out.insert("uri".into(), Value::String(resource.uri));
    if let Some(mime) = resource.mime_type {
        out.insert("mimeType".into(), Value::String(mime));
    }
    if let Some(text) = resource.text {
        out.insert("text".into(), Value::String(text));
    } else if let Some(blob) = resource.blob {
        out.insert("blob".into(), Value::String(BASE64.encode(&blob)));
    } else {
        // MCP requires one of the two.
        out.insert("text".into(), Value::String(String::new()));
    }
    Value::Object(out)
}

/// A tool result that reports a failure to the model.
pub fn error_result(text: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": text.into()}], "isError": true})
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_names() {
        assert!(valid_tool_name("a.b-c_9"));
        assert!(!valid_tool_name(""));
        assert!(!valid_tool_name("a b"));
        assert!(!valid_tool_name(&"x".repeat(65)));
        assert!(!valid_tool_name("é"));
    }

    #[test]
    fn schemas_must_be_objects() {
        let info = |schema: &str| ToolInfo {
            name: "t".into(),
            title: None,
            description: String::new(),
            input_schema: schema.into(),
            output_schema: None,
            annotations: None,
        };
        assert!(tool_to_mcp(&info(r#"{"type":"object"}"#)).is_ok());
        assert!(
            tool_to_mcp(&info("[]"))
                .unwrap_err()
                .contains("not a JSON object")
        );
        assert!(
            tool_to_mcp(&info("{"))
                .unwrap_err()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn invalid_structured_is_an_error_result() {
        let out = ToolOutput {
            content: vec![],
            structured: Some("{nope".into()),
            is_error: false,
        };
        let v = output_to_mcp("p", "t", out);
        assert_eq!(v["isError"], true);
        assert!(
            v["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("not valid JSON")
        );
    }
}
