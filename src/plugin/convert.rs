//! WIT values to MCP JSON: tool descriptions (validated, a plugin that breaks
//! the rules is refused) and tool outputs (`CallToolResult`).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::{Map, Value, json};

use super::bindings::{Blob, Content, EmbeddedResource, ToolInfo, ToolOutput};

/// Bytes a tool result may carry (texts, binary data before base64, structured JSON) and
/// content items: a result is expanded several times over in the gateway's memory on its
/// way to the client (JSON values, escapes, base64). A 50 MB structured result peaked at
/// 3.6 GB. (A server's message is capped at 64 MiB as it is read.)
pub const MAX_RESULT_BYTES: usize = 16 << 20;
pub const MAX_RESULT_ITEMS: usize = 10_000;

/// Bytes of a plugin's `list-tools` answer (names, descriptions, schemas), at most: the
/// catalog keeps it for good and sends it with every list.
pub const MAX_LISTING_BYTES: usize = 4 << 20;

/// Bytes of an error's text from a plugin that are kept: the rest is cut, with the length.
pub const MAX_ERROR_TEXT: usize = 16 << 10;

/// The bytes of a result (texts, binary data before base64, structured JSON), or, when
/// it is too big to pass on, the error result that says so.
pub fn result_size(plugin: &str, tool: &str, output: &ToolOutput) -> Result<usize, Value> {
    let too_big = |size: String| {
        error_result(format!(
            "plugin `{plugin}` tool `{tool}` returned a result too big to pass on: {size}"
        ))
    };
    if output.content.len() > MAX_RESULT_ITEMS {
        return Err(too_big(format!(
            "{} content items (a result may hold {MAX_RESULT_ITEMS})",
            output.content.len()
        )));
    }
    let blob = |b: &Blob| b.data.len() + b.mime_type.len();
    let bytes = output.structured.as_ref().map_or(0, String::len)
        + output
            .content
            .iter()
            .map(|item| match item {
                Content::Text(text) => text.len(),
                Content::Image(b) | Content::Audio(b) => blob(b),
                Content::Resource(r) => {
                    r.uri.len()
                        + r.text.as_ref().map_or(0, String::len)
                        + r.blob.as_ref().map_or(0, Vec::len)
                }
            })
            .sum::<usize>();
    if bytes > MAX_RESULT_BYTES {
        return Err(too_big(format!(
            "{bytes} bytes (a result may hold {} MiB)",
            MAX_RESULT_BYTES >> 20
        )));
    }
    Ok(bytes)
}

/// The bytes of a `list-tools` answer.
pub fn listing_bytes(infos: &[ToolInfo]) -> usize {
    let text = |t: &Option<String>| t.as_ref().map_or(0, String::len);
    infos
        .iter()
        .map(|i| {
            i.name.len()
                + i.description.len()
                + i.input_schema.len()
                + text(&i.title)
                + text(&i.output_schema)
                + text(&i.annotations)
        })
        .sum()
}

/// `[A-Za-z0-9_.-]{1,64}`, the rule of `tool-info.name`.
pub fn valid_tool_name(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// A plugin's tool as the host keeps it.
pub struct CheckedTool {
    /// The MCP `Tool` object, unprefixed name.
    pub mcp: Value,
    /// What its structured output must match, when it declares an output schema.
    pub output_schema: Option<Arc<OutputSchema>>,
    /// The regular expressions of its schemas, each compiled by the gateway.
    pub patterns: usize,
}

/// Patterns a plugin's schemas may have in all: each is compiled in the gateway's memory
/// (up to 256 KiB, see `schema`), once at load and once per catalog at its first call.
pub const MAX_PLUGIN_PATTERNS: usize = 256;

/// A tool's output schema, compiled.
pub struct OutputSchema {
    pub validator: jsonschema::Validator,
    /// Its patterns that need the backtracking engine (a backreference or a lookaround):
    /// each match may take up to the step limit (see `schema`, ~0.2 ms here), so a result
    /// is refused when its strings times these patterns exceed [`MAX_BACKTRACKING_MATCHES`].
    pub backtracking_patterns: usize,
    /// NFA states of its other patterns: a result is refused when its structured output's
    /// bytes times these exceed [`MAX_PATTERN_WORK`].
    pub pattern_states: u64,
}

/// Strings times backtracking patterns a result may ask to check: ~2 s at the step limit.
pub const MAX_BACKTRACKING_MATCHES: usize = 10_000;

/// Bytes of structured output times NFA states of the output schema's linear-time patterns
/// a result may ask to check: ~2 s where the patterns' DFA gives up (~5 ns per state and
/// byte), a few ms where it does not. A check cannot be stopped once it runs, so what it
/// may cost is bounded before it starts.
pub const MAX_PATTERN_WORK: u64 = 400_000_000;

/// Results bigger than this are converted (parsed, checked, expanded) off the I/O thread,
/// as are all results checked against an output schema.
pub const INLINE_RESULT_BYTES: usize = 64 << 10;

/// A tool from a plugin's description, or why it is not acceptable: a name clients
/// refuse, or a schema that is not an object schema that compiles (a broken input schema
/// would refuse every call or check nothing).
pub fn tool_to_mcp(info: &ToolInfo) -> Result<CheckedTool, String> {
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
    let (input, _, input_patterns) = object_schema(&info.name, "input-schema", &info.input_schema)?;
    let mut patterns = input_patterns.count;
    tool.insert("inputSchema".into(), input);
    let mut output_schema = None;
    if let Some(text) = &info.output_schema {
        let (schema, validator, output_patterns) =
            object_schema(&info.name, "output-schema", text)?;
        patterns += output_patterns.count;
        tool.insert("outputSchema".into(), schema);
        output_schema = Some(Arc::new(OutputSchema {
            validator,
            backtracking_patterns: output_patterns.backtracking,
            pattern_states: output_patterns.states,
        }));
    }
    if let Some(annotations) = &info.annotations {
        tool.insert(
            "annotations".into(),
            json_object(&info.name, "annotations", annotations)?,
        );
    }
    Ok(CheckedTool {
        mcp: Value::Object(tool),
        output_schema,
        patterns,
    })
}

/// A schema MCP accepts for tool arguments and structured output: `"type": "object"`,
/// valid JSON Schema, within the budget of a plugin's schema; with its patterns.
fn object_schema(
    tool: &str,
    field: &str,
    text: &str,
) -> Result<(Value, jsonschema::Validator, crate::schema::Patterns), String> {
    let schema = json_object(tool, field, text)?;
    let patterns = crate::schema::budget(&schema, text.len())
        .map_err(|e| format!("tool `{tool}`: {field} {e}"))?;
    if schema.get("type") != Some(&json!("object")) {
        return Err(format!(
            "tool `{tool}`: {field} must have \"type\": \"object\" (MCP passes arguments and \
             structured results as JSON objects)"
        ));
    }
    let validator =
        crate::schema::compile(&schema).map_err(|e| format!("tool `{tool}`: {field} {e}"))?;
    Ok((schema, validator, patterns))
}

fn json_object(tool: &str, field: &str, text: &str) -> Result<Value, String> {
    match serde_json::from_str::<Value>(text) {
        Ok(value @ Value::Object(_)) => Ok(value),
        Ok(_) => Err(format!("tool `{tool}`: {field} is not a JSON object")),
        Err(e) => Err(format!("tool `{tool}`: {field} is not valid JSON: {e}")),
    }
}

/// An MCP `CallToolResult` from a tool's output. A tool with an output schema must
/// return structured output that matches it (MCP: servers MUST); one that does not
/// gets an error result that says why, so its author learns it before a strict client does.
/// Its size was checked already ([`result_size`]).
pub fn output_to_mcp(
    plugin: &str,
    tool: &str,
    output: ToolOutput,
    schema: Option<&OutputSchema>,
) -> Value {
    if let (Some(schema), Some(text)) = (schema, &output.structured)
        && schema.backtracking_patterns > 0
    {
        // Every string is at most one per two quotes: an upper bound, counted fast.
        let strings = text.bytes().filter(|&b| b == b'"').count() / 2;
        if strings.saturating_mul(schema.backtracking_patterns) > MAX_BACKTRACKING_MATCHES {
            return error_result(format!(
                "plugin `{plugin}` tool `{tool}` returned structured output too costly to check: \
                 up to {strings} strings against {} backtracking patterns of its output schema \
                 (at most {MAX_BACKTRACKING_MATCHES} matches)",
                schema.backtracking_patterns
            ));
        }
    }
    if let (Some(schema), Some(text)) = (schema, &output.structured)
        && (text.len() as u64).saturating_mul(schema.pattern_states) > MAX_PATTERN_WORK
    {
        return error_result(format!(
            "plugin `{plugin}` tool `{tool}` returned structured output too costly to check: \
             {} bytes against patterns of its output schema that compile to {} states (bytes \
             times states may be at most {MAX_PATTERN_WORK})",
            text.len(),
            schema.pattern_states
        ));
    }
    let schema = schema.map(|s| &s.validator);
    let content: Result<Vec<Value>, String> =
        output.content.into_iter().map(content_to_mcp).collect();
    let mut content = match content {
        Ok(content) => content,
        Err(why) => return error_result(format!("plugin `{plugin}` tool `{tool}` {why}")),
    };
    let mut result = Map::new();
    let schema = schema.filter(|_| !output.is_error);
    if output.structured.is_none() && schema.is_some() {
        return error_result(format!(
            "plugin `{plugin}` tool `{tool}` has an output schema but returned no structured output"
        ));
    }
    if let Some(text) = output.structured {
        match serde_json::from_str::<Value>(&text) {
            Ok(structured) if !structured.is_object() => {
                return error_result(format!(
                    "plugin `{plugin}` tool `{tool}` returned structured output that is not a \
                     JSON object (MCP's structuredContent is one)"
                ));
            }
            Ok(structured) => {
                if let Some(why) = schema.and_then(|s| crate::schema::mismatch(s, &structured)) {
                    return error_result(format!(
                        "plugin `{plugin}` tool `{tool}` returned structured output that does \
                         not match its output schema: {why}"
                    ));
                }
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

/// MCP content from the plugin's; `Err` says what breaks the WIT's rules.
fn content_to_mcp(content: Content) -> Result<Value, String> {
    Ok(match content {
        Content::Text(text) => json!({"type": "text", "text": text}),
        Content::Image(blob) => blob_to_mcp("image", blob),
        Content::Audio(blob) => blob_to_mcp("audio", blob),
        Content::Resource(resource) => {
            json!({"type": "resource", "resource": resource_to_mcp(resource)?})
        }
    })
}

fn blob_to_mcp(kind: &str, blob: Blob) -> Value {
    json!({"type": kind, "data": BASE64.encode(&blob.data), "mimeType": blob.mime_type})
}

fn resource_to_mcp(resource: EmbeddedResource) -> Result<Value, String> {
    let mut out = Map::new();
    let (key, value) = match (resource.text, resource.blob) {
        (Some(text), None) => ("text", text),
        (None, Some(blob)) => ("blob", BASE64.encode(&blob)),
        // MCP requires exactly one of the two.
        (text, _) => {
            let has = if text.is_some() {
                "both `text` and `blob`"
            } else {
                "neither `text` nor `blob`"
            };
            return Err(format!(
                "returned an embedded resource ({}) with {has}: give one",
                resource.uri
            ));
        }
    };
    out.insert("uri".into(), Value::String(resource.uri));
    if let Some(mime) = resource.mime_type {
        out.insert("mimeType".into(), Value::String(mime));
    }
    out.insert(key.into(), Value::String(value));
    Ok(Value::Object(out))
}

pub use crate::protocol::error_result;

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
        let refused = |schema: &str| tool_to_mcp(&info(schema)).err().unwrap();
        assert!(refused(r#"{"type":"string"}"#).contains(r#"must have "type": "object""#));
        assert!(refused("{}").contains(r#"must have "type": "object""#));
        let invalid = refused(r#"{"type":"object","properties":{"a":{"type":"nonsense"}}}"#);
        assert!(
            invalid.contains("input-schema is not a valid JSON Schema at /properties/a/type"),
            "{invalid}"
        );
        assert!(refused("[]").contains("not a JSON object"));
        assert!(refused("{").contains("not valid JSON"));
    }

    #[test]
    fn structured_output_must_match_the_output_schema() {
        let tool = tool_to_mcp(&ToolInfo {
            name: "t".into(),
            title: None,
            description: String::new(),
            input_schema: r#"{"type":"object"}"#.into(),
            output_schema: Some(
                r#"{"type":"object","properties":{"len":{"type":"integer"}},"required":["len"]}"#
                    .into(),
            ),
            annotations: None,
        })
        .unwrap();
        let schema = tool.output_schema.as_deref();
        let out = |structured: Option<&str>, is_error| ToolOutput {
            content: vec![],
            structured: structured.map(String::from),
            is_error,
        };
        let good = output_to_mcp("p", "t", out(Some(r#"{"len":3}"#), false), schema);
        assert_eq!(good["structuredContent"], json!({"len": 3}));
        assert_eq!(good.get("isError"), None);
        let bad = output_to_mcp("p", "t", out(Some(r#"{"len":"nope"}"#), false), schema);
        assert_eq!(bad["isError"], true);
        let text = bad["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("does not match its output schema: /len: "),
            "{text}"
        );
        let missing = output_to_mcp("p", "t", out(None, false), schema);
        assert!(
            missing["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("returned no structured output")
        );
        // A tool error needs no structured output, and its own is passed as it is.
        let error = output_to_mcp("p", "t", out(Some(r#"{"len":"?"}"#), true), schema);
        assert_eq!(error["structuredContent"], json!({"len": "?"}));
    }

    #[test]
    fn invalid_structured_is_an_error_result() {
        let out = ToolOutput {
            content: vec![],
            structured: Some("{nope".into()),
            is_error: false,
        };
        let v = output_to_mcp("p", "t", out, None);
        assert_eq!(v["isError"], true);
        assert!(
            v["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("not valid JSON")
        );
    }

    #[test]
    fn structured_output_that_is_not_an_object_is_an_error_result() {
        let out = ToolOutput {
            content: vec![],
            structured: Some("[1,2]".into()),
            is_error: false,
        };
        let v = output_to_mcp("p", "t", out, None);
        assert_eq!(v["isError"], true, "{v}");
        assert!(v.get("structuredContent").is_none(), "{v}");
        let text = v["content"][0]["text"].as_str().unwrap();
        assert!(text.contains("not a JSON object"), "{text}");
    }

    #[test]
    fn a_resource_needs_text_or_blob_not_both() {
        let resource = |text: Option<&str>, blob: Option<&[u8]>| ToolOutput {
            content: vec![Content::Resource(EmbeddedResource {
                uri: "mem://r".into(),
                mime_type: None,
                text: text.map(String::from),
                blob: blob.map(<[u8]>::to_vec),
            })],
            structured: None,
            is_error: false,
        };
        let one = output_to_mcp("p", "t", resource(Some("hi"), None), None);
        assert_eq!(one["content"][0]["resource"]["text"], "hi", "{one}");
        let blob = output_to_mcp("p", "t", resource(None, Some(b"\x01")), None);
        assert_eq!(blob["content"][0]["resource"]["blob"], "AQ==", "{blob}");
        for (bad, words) in [
            (
                resource(Some("hi"), Some(b"x")),
                "with both `text` and `blob`",
            ),
            (resource(None, None), "with neither `text` nor `blob`"),
        ] {
            let v = output_to_mcp("p", "t", bad, None);
            assert_eq!(v["isError"], true, "{v}");
            let text = v["content"][0]["text"].as_str().unwrap();
            assert!(text.contains(words), "{text}");
        }
    }
}
