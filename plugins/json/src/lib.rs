//! `json`: query, format and validate JSON documents, pure compute.
//!
//! Documents arrive as JSON *text* in a string argument, so a document that
//! does not parse is the tool's finding (a `failed` result the model can read
//! and fix), not a malformed call.

use plugin_kit::{
    CallResult, Guest, ToolInfo, ToolInfoExt, args, failed, structured, text, tool, unknown_tool,
};
use serde::Deserialize;
use serde::Serialize;
use serde_json::{Value, json};

struct Json;

/// `validate` reports at most this many errors: enough to fix a document,
/// bounded for one that is wrong everywhere.
const MAX_ERRORS: usize = 100;

#[derive(Deserialize)]
struct QueryArgs {
    json: String,
    pointer: String,
}

#[derive(Deserialize)]
struct FormatArgs {
    json: String,
    #[serde(default = "two")]
    indent: usize,
}

fn two() -> usize {
    2
}

#[derive(Deserialize)]
struct ValidateArgs {
    json: String,
    schema: String,
}

#[derive(Serialize)]
struct Verdict {
    valid: bool,
    errors: Vec<Problem>,
}

#[derive(Serialize)]
struct Problem {
    /// JSON pointer to the offending value in the document.
    instance_path: String,
    /// JSON pointer to the schema keyword that rejected it.
    schema_path: String,
    message: String,
}

impl Guest for Json {
    fn list_tools() -> Vec<ToolInfo> {
        let document = json!({"type": "string", "description": "A JSON document, as text"});
        vec![
            tool(
                "query",
                "The value at an RFC 6901 JSON pointer in a JSON document, as pretty-printed JSON \
                 (`\"\"` is the whole document, `/a/0` the first item of member `a`; `~1` stands \
                 for `/` and `~0` for `~` in a key). Fails if nothing is there.",
                json!({
                    "json": document,
                    "pointer": {
                        "type": "string",
                        "pattern": "^(/.*)?$",
                        "description": "RFC 6901 JSON pointer: empty, or starting with `/`",
                    },
                }),
                &["json", "pointer"],
            )
            .title("Query JSON")
            .pure(),
            tool(
                "format",
                "Re-indents a JSON document, keeping its key order; `indent: 0` makes it compact.",
                json!({
                    "json": document,
                    "indent": {"type": "integer", "minimum": 0, "maximum": 8, "default": 2,
                               "description": "Spaces per level; 0 for one compact line"},
                }),
                &["json"],
            )
            .title("Format JSON")
            .pure(),
            tool(
                "validate",
                "Validates a JSON document against a JSON Schema (drafts 4, 6, 7, 2019-09 and \
                 2020-12; `$schema` picks the draft, 2020-12 otherwise). Returns whether it is \
                 valid and, if not, up to 100 errors, each with the JSON pointer of the \
                 offending value. Remote `$ref`s are not fetched.",
                json!({
                    "json": document,
                    "schema": {"type": "string", "description": "The JSON Schema, as JSON text"},
                }),
                &["json", "schema"],
            )
            .title("Validate JSON")
            .output_schema(verdict_schema())
            .pure(),
        ]
    }

    fn call_tool(name: String, arguments: String) -> CallResult {
        match name.as_str() {
            "query" => query(args(&arguments)?),
            "format" => format(args(&arguments)?),
            "validate" => validate(args(&arguments)?),
            _ => Err(unknown_tool(&name)),
        }
    }
}

fn query(a: QueryArgs) -> CallResult {
    let doc = parse(&a.json, "json")?;
    let found = doc
        .pointer(&a.pointer)
        .ok_or_else(|| failed(format!("nothing at pointer {:?}", a.pointer)))?;
    Ok(text(serde_json::to_string_pretty(found).map_err(failed)?))
}

fn format(a: FormatArgs) -> CallResult {
    let doc = parse(&a.json, "json")?;
    if a.indent == 0 {
        return Ok(text(doc.to_string()));
    }
    let indent = " ".repeat(a.indent);
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    doc.serialize(&mut ser).map_err(failed)?;
    // The serializer writes only UTF-8.
    Ok(text(String::from_utf8(out).map_err(failed)?))
}

fn validate(a: ValidateArgs) -> CallResult {
    let schema = parse(&a.schema, "schema")?;
    let doc = parse(&a.json, "json")?;
    let validator =
        jsonschema::validator_for(&schema).map_err(|e| failed(format!("invalid schema: {e}")))?;
    let errors: Vec<Problem> = validator
        .iter_errors(&doc)
        .take(MAX_ERRORS)
        .map(|e| Problem {
            instance_path: e.instance_path.to_string(),
            schema_path: e.schema_path.to_string(),
            message: e.to_string(),
        })
        .collect();
    structured(&Verdict {
        valid: errors.is_empty(),
        errors,
    })
}

/// Parses one JSON text argument, naming it in the error.
fn parse(text: &str, what: &str) -> Result<Value, plugin_kit::CallError> {
    serde_json::from_str(text).map_err(|e| failed(format!("`{what}` is not valid JSON: {e}")))
}

fn verdict_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "valid": {"type": "boolean"},
            "errors": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "instance_path": {"type": "string"},
                        "schema_path": {"type": "string"},
                        "message": {"type": "string"},
                    },
                    "required": ["instance_path", "schema_path", "message"],
                },
            },
        },
        "required": ["valid", "errors"],
    })
}

plugin_kit::export!(Json);
