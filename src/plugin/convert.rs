//! WIT values to MCP JSON: tool descriptions (validated, a plugin that breaks
//! the rules is refused) and tool outputs (`CallToolResult`).

use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde_json::value::RawValue;
use serde_json::{Map, Value, json};

use super::bindings::{Blob, Content, EmbeddedResource, ToolInfo, ToolOutput};

/// Bytes a tool result may carry (texts, binary data before base64, structured JSON) and
/// content items: a result is expanded several times over in the gateway's memory on its
/// way to the client (JSON values, escapes, base64), to many times its size. (A server's
/// message is capped at 64 MiB as it is read.)
pub const MAX_RESULT_BYTES: usize = 16 << 20;
pub const MAX_RESULT_ITEMS: usize = 10_000;

/// Bytes of a plugin's `list-tools` answer (names, descriptions, schemas), at most: the
/// catalog keeps it for good and sends it with every list.
pub const MAX_LISTING_BYTES: usize = 4 << 20;

/// Bytes of an error's text from a plugin that are kept: the rest is cut, with the length.
pub const MAX_ERROR_TEXT: usize = 16 << 10;

/// The bytes of a result (texts, binary data before base64, structured JSON), or, when
/// it is too big to pass on, the error result that says so. Counted fast, for the choice
/// of thread; escaped as JSON, texts can be six times bigger ([`answer_too_big`]).
pub fn result_size(plugin: &str, tool: &str, output: &ToolOutput) -> Result<usize, Value> {
    if output.content.len() > MAX_RESULT_ITEMS {
        let items = output.content.len();
        return Err(too_big(
            plugin,
            tool,
            format!("{items} content items (a result may hold {MAX_RESULT_ITEMS})"),
        ));
    }
    let bytes = result_bytes(output, str::len);
    if bytes > MAX_RESULT_BYTES {
        let limit = MAX_RESULT_BYTES >> 20;
        return Err(too_big(
            plugin,
            tool,
            format!("{bytes} bytes (a result may hold {limit} MiB)"),
        ));
    }
    Ok(bytes)
}

/// The error result for a result over the limit once its texts are escaped as JSON (a
/// control character takes six bytes) and structured output alone gets its text copy.
/// Only a result over a sixth of the limit can be: it is converted off the I/O thread.
fn answer_too_big(plugin: &str, tool: &str, output: &ToolOutput) -> Option<Value> {
    if result_bytes(output, str::len).saturating_mul(6) <= MAX_RESULT_BYTES {
        return None;
    }
    let copy = match (&output.structured, output.content.is_empty()) {
        (Some(text), true) => json_len(text),
        _ => 0,
    };
    let bytes = result_bytes(output, json_len) + copy;
    let limit = MAX_RESULT_BYTES >> 20;
    (bytes > MAX_RESULT_BYTES).then(|| {
        too_big(
            plugin,
            tool,
            format!("{bytes} bytes with its texts escaped as JSON (a result may hold {limit} MiB)"),
        )
    })
}

fn too_big(plugin: &str, tool: &str, size: String) -> Value {
    error_result(format!(
        "plugin `{plugin}` tool `{tool}` returned a result too big to pass on: {size}"
    ))
}

/// A result's bytes, its texts measured with `text`.
fn result_bytes(output: &ToolOutput, text: fn(&str) -> usize) -> usize {
    let blob = |b: &Blob| b.data.len() + text(&b.mime_type);
    let item = |item: &Content| match item {
        Content::Text(t) => text(t),
        Content::Image(b) | Content::Audio(b) => blob(b),
        Content::Resource(r) => {
            text(&r.uri) + r.text.as_deref().map_or(0, text) + r.blob.as_ref().map_or(0, Vec::len)
        }
    };
    output.structured.as_ref().map_or(0, String::len)
        + output.content.iter().map(item).sum::<usize>()
}

/// The length of `text` written as a JSON string, quotes aside: `"` and `\` take two
/// bytes, and control characters two (`\n`) or six (`\u0001`).
fn json_len(text: &str) -> usize {
    text.len()
        + text
            .bytes()
            .map(|b| match b {
                b'"' | b'\\' | b'\n' | b'\r' | b'\t' | 0x08 | 0x0c => 1,
                0..=0x1f => 5,
                _ => 0,
            })
            .sum::<usize>()
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

/// A tool's output schema, compiled, and its patterns: what checking a result may cost
/// is bounded by [`crate::schema::BLOCKING_CHECK`] before the check starts.
pub struct OutputSchema {
    pub validator: jsonschema::Validator,
    pub patterns: crate::schema::Patterns,
}

/// JSON values (and keys) structured output checked against an output schema may hold:
/// checking builds each in memory, at 80 bytes or more apiece. Structured output without
/// a schema is read as JSON text and passed on as it is, never built.
pub const MAX_STRUCTURED_VALUES: usize = 250_000;

/// Results bigger than this are converted (parsed, checked, expanded) off the I/O thread,
/// as are all results checked against an output schema.
pub const INLINE_RESULT_BYTES: usize = 64 << 10;

/// A tool from a plugin's description, or why it is not acceptable: a name clients
/// refuse, or a schema that is not an object schema that compiles (a broken input schema
/// would refuse every call or check nothing).
pub fn tool_to_mcp(info: &ToolInfo) -> Result<CheckedTool, String> {
    if !crate::names::follows_mcp_advice(&info.name, crate::names::PORTABLE_LEN) {
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
            patterns: output_patterns,
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
) -> Reply {
    let failed = |why: String| {
        Reply::Built(error_result(format!(
            "plugin `{plugin}` tool `{tool}` {why}"
        )))
    };
    if let Some(too_big) = answer_too_big(plugin, tool, &output) {
        return Reply::Built(too_big);
    }
    // A tool error needs no structured output, and its own is passed as it is.
    let schema = schema.filter(|_| !output.is_error);
    if let (Some(schema), Some(text)) = (schema, &output.structured)
        && let Some(why) = too_costly_to_check(schema, text)
    {
        return failed(format!(
            "returned structured output too costly to check: {why}"
        ));
    }
    if schema.is_some() && output.structured.is_none() {
        return failed("has an output schema but returned no structured output".into());
    }
    let content: Result<Vec<Value>, String> =
        output.content.into_iter().map(content_to_mcp).collect();
    let mut content = match content {
        Ok(content) => content,
        Err(why) => return failed(why),
    };
    let mut result = Map::new();
    let mut written = None;
    if let Some(text) = output.structured {
        let not_valid = |e| format!("returned structured output that is not valid JSON: {e}");
        let not_an_object = "returned structured output that is not a JSON object (MCP's \
                             structuredContent is one)";
        let built = match schema {
            // Checked against the schema: built in memory.
            Some(schema) => match serde_json::from_str::<Value>(&text) {
                Err(e) => return failed(not_valid(e)),
                Ok(value) if !value.is_object() => return failed(not_an_object.into()),
                Ok(value) => {
                    if let Some(why) = crate::schema::mismatch(&schema.validator, &value) {
                        return failed(format!(
                            "returned structured output that does not match its output schema: \
                             {why}"
                        ));
                    }
                    Some(value)
                }
            },
            // Otherwise read through as JSON text, and passed on as it is.
            None => match serde_json::from_str::<&RawValue>(&text) {
                Err(e) => return failed(not_valid(e)),
                Ok(raw) if !raw.get().starts_with('{') => return failed(not_an_object.into()),
                Ok(_) => None,
            },
        };
        // Clients that predate `structuredContent` read the text.
        if content.is_empty() {
            content.push(json!({"type": "text", "text": text}));
        }
        match built {
            Some(value) => {
                result.insert("structuredContent".into(), value);
            }
            None => written = Some(text),
        }
    }
    result.insert("content".into(), Value::Array(content));
    if output.is_error {
        result.insert("isError".into(), Value::Bool(true));
    }
    match written {
        None => Reply::Built(Value::Object(result)),
        Some(text) => with_structured_text(result, &text),
    }
}

/// `result` with `"structuredContent"` first, written as `text` (a JSON object already
/// read through) rather than built: the answer's text is made around it.
fn with_structured_text(result: Map<String, Value>, text: &str) -> Reply {
    let is_error = result.get("isError") == Some(&Value::Bool(true));
    let first_text = result["content"][0]["text"]
        .as_str()
        .map(|t| crate::protocol::cut_short(t, MAX_ERROR_TEXT).into_owned());
    // Serialising a map of strings and values cannot fail.
    let rest = serde_json::to_string(&result).unwrap_or_default();
    let mut json = String::with_capacity(text.len() + rest.len() + 24);
    json.push_str("{\"structuredContent\":");
    json.push_str(text.trim());
    json.push(',');
    json.push_str(&rest[1..]);
    match RawValue::from_string(json) {
        Ok(raw) => Reply::Written {
            raw,
            is_error,
            first_text,
        },
        Err(e) => Reply::Built(error_result(format!(
            "the result could not be written: {e}"
        ))),
    }
}

/// Why checking `text` against `schema` would cost more than the gateway takes on, if it would.
fn too_costly_to_check(schema: &OutputSchema, text: &str) -> Option<String> {
    use crate::schema::TooCostly;
    let patterns = &schema.patterns;
    // Every string is at most one per two quotes: an upper bound, counted fast.
    let strings = match patterns.backtracking {
        0 => 0,
        _ => text.bytes().filter(|&b| b == b'"').count() as u64 / 2,
    };
    let bytes = text.len() as u64;
    match patterns.too_costly(strings, bytes, crate::schema::BLOCKING_CHECK) {
        Some(TooCostly::Matches { patterns, max, .. }) => {
            return Some(format!(
                "up to {strings} strings against {patterns} backtracking patterns of its output \
                 schema (at most {max} matches)"
            ));
        }
        Some(TooCostly::Work { states, max, .. }) => {
            return Some(format!(
                "{bytes} bytes against patterns of its output schema that compile to {states} \
                 states (bytes times states may be at most {max})"
            ));
        }
        None => {}
    }
    let values = json_values(text);
    (values > MAX_STRUCTURED_VALUES).then(|| {
        format!(
            "up to {values} JSON values, each built in memory to be checked against its output \
             schema (at most {MAX_STRUCTURED_VALUES})"
        )
    })
}

/// An upper bound on the values and keys of JSON `text`: each follows `[`, `{`, `,` or
/// `:`, or starts the text. Counted over the bytes, outside strings.
fn json_values(text: &str) -> usize {
    let (mut count, mut in_string, mut escaped) = (1, false, false);
    for b in text.bytes() {
        if in_string {
            match b {
                _ if escaped => escaped = false,
                b'\\' => escaped = true,
                b'"' => in_string = false,
                _ => {}
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'[' | b'{' | b',' | b':' => count += 1,
                _ => {}
            }
        }
    }
    count
}

/// MCP content from the plugin's; `Err` says what breaks the WIT's rules.
pub fn content_to_mcp(content: Content) -> Result<Value, String> {
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

pub use crate::protocol::{Reply, error_result};

/// Binary data as MCP carries it.
pub fn base64(data: &[u8]) -> String {
    BASE64.encode(data)
}

#[cfg(test)]
mod tests {
    use super::*;

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
        let good = output_to_mcp("p", "t", out(Some(r#"{"len":3}"#), false), schema).into_value();
        assert_eq!(good["structuredContent"], json!({"len": 3}));
        assert_eq!(good.get("isError"), None);
        let bad =
            output_to_mcp("p", "t", out(Some(r#"{"len":"nope"}"#), false), schema).into_value();
        assert_eq!(bad["isError"], true);
        let text = bad["content"][0]["text"].as_str().unwrap();
        assert!(
            text.contains("does not match its output schema: /len: "),
            "{text}"
        );
        let missing = output_to_mcp("p", "t", out(None, false), schema).into_value();
        assert!(
            missing["content"][0]["text"]
                .as_str()
                .unwrap()
                .contains("returned no structured output")
        );
        // A tool error needs no structured output, and its own is passed as it is.
        let error = output_to_mcp("p", "t", out(Some(r#"{"len":"?"}"#), true), schema).into_value();
        assert_eq!(error["structuredContent"], json!({"len": "?"}));
    }

    #[test]
    fn structured_output_without_a_schema_is_passed_on_as_its_text() {
        let out = |is_error| ToolOutput {
            content: vec![],
            structured: Some(" {\"b\": 1, \"a\": [1,2]}\n".into()),
            is_error,
        };
        let Reply::Written { raw, is_error, .. } = output_to_mcp("p", "t", out(false), None) else {
            panic!("built, not passed on");
        };
        assert!(!is_error);
        assert_eq!(
            raw.get(),
            r#"{"structuredContent":{"b": 1, "a": [1,2]},"content":[{"type":"text","text":" {\"b\": 1, \"a\": [1,2]}\n"}]}"#
        );
        let error = output_to_mcp("p", "t", out(true), None);
        assert!(error.is_error_result());
        assert_eq!(
            error.first_text().as_deref(),
            Some(" {\"b\": 1, \"a\": [1,2]}\n")
        );
        let error = error.into_value();
        assert_eq!(error["isError"], true, "{error}");
        assert_eq!(error["structuredContent"]["a"], json!([1, 2]), "{error}");
    }

    #[test]
    fn texts_are_sized_as_the_answer_carries_them() {
        assert_eq!(json_len("plain é"), 8);
        assert_eq!(json_len("a\"b\\\n"), 8);
        assert_eq!(json_len("\u{1}\u{1f}"), 12);
        assert_eq!(
            json_len("\u{1}\u{1f}"),
            serde_json::to_string("\u{1}\u{1f}").unwrap().len() - 2
        );
        let out = |content: Vec<Content>, structured: Option<&str>| ToolOutput {
            content,
            structured: structured.map(String::from),
            is_error: false,
        };
        let sixth = MAX_RESULT_BYTES / 6;
        let text = |len| vec![Content::Text("\u{1}".repeat(len))];
        assert!(answer_too_big("p", "t", &out(text(sixth), None)).is_none());
        let over = answer_too_big("p", "t", &out(text(sixth + 1), None)).unwrap();
        let message = over["content"][0]["text"].as_str().unwrap();
        assert!(
            message.ends_with(
                "too big to pass on: 16777218 bytes with its texts escaped as JSON (a result \
                 may hold 16 MiB)"
            ),
            "{message}"
        );
        // Structured output alone gets a text copy for clients that predate it.
        let quotes = format!("{{\"a\":\"{}\"}}", "\\\"".repeat(MAX_RESULT_BYTES / 6));
        assert!(answer_too_big("p", "t", &out(vec![], Some(&quotes))).is_some());
        assert!(answer_too_big("p", "t", &out(text(1), Some(&quotes))).is_none());
    }

    #[test]
    fn json_values_are_counted_outside_strings() {
        assert_eq!(json_values("[0,0,0]"), 4);
        assert_eq!(json_values(r#"{"a":0,"b":[]}"#), 6);
        assert_eq!(json_values(r#"{"s":"[,:{\"\\"}"#), 3);
    }

    #[test]
    fn invalid_structured_is_an_error_result() {
        let out = ToolOutput {
            content: vec![],
            structured: Some("{nope".into()),
            is_error: false,
        };
        let v = output_to_mcp("p", "t", out, None).into_value();
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
        let v = output_to_mcp("p", "t", out, None).into_value();
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
        let one = output_to_mcp("p", "t", resource(Some("hi"), None), None).into_value();
        assert_eq!(one["content"][0]["resource"]["text"], "hi", "{one}");
        let blob = output_to_mcp("p", "t", resource(None, Some(b"\x01")), None).into_value();
        assert_eq!(blob["content"][0]["resource"]["blob"], "AQ==", "{blob}");
        for (bad, words) in [
            (
                resource(Some("hi"), Some(b"x")),
                "with both `text` and `blob`",
            ),
            (resource(None, None), "with neither `text` nor `blob`"),
        ] {
            let v = output_to_mcp("p", "t", bad, None).into_value();
            assert_eq!(v["isError"], true, "{v}");
            let text = v["content"][0]["text"].as_str().unwrap();
            assert!(text.contains(words), "{text}");
        }
    }
}
