//! `json`: query, format and validate JSON documents, pure compute.
//!
//! Documents arrive as JSON *text* in a string argument, so a document that
//! does not parse is the tool's finding (a `failed` result the model can read
//! and fix), not a malformed call.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use wasmgate_plugin::{Plugin, Structured, Tool, ToolError};

/// `validate` reports at most this many errors: enough to fix a document,
/// bounded for one that is wrong everywhere.
const MAX_ERRORS: usize = 100;

#[derive(Deserialize, JsonSchema)]
struct QueryArgs {
    /// A JSON document, as text
    json: String,
    /// RFC 6901 JSON pointer: empty, or starting with `/`
    #[schemars(regex(pattern = "^(/.*)?$"))]
    pointer: String,
}

#[derive(Deserialize, JsonSchema)]
struct FormatArgs {
    /// A JSON document, as text
    json: String,
    /// Spaces per level; 0 for one compact line
    #[serde(default = "two")]
    #[schemars(range(max = 8))]
    indent: usize,
}

fn two() -> usize {
    2
}

#[derive(Deserialize, JsonSchema)]
struct ValidateArgs {
    /// A JSON document, as text
    json: String,
    /// The JSON Schema, as JSON text
    schema: String,
}

#[derive(Serialize, JsonSchema)]
struct Verdict {
    valid: bool,
    errors: Vec<Problem>,
}

#[derive(Serialize, JsonSchema)]
struct Problem {
    /// JSON pointer to the offending value in the document.
    instance_path: String,
    /// JSON pointer to the schema keyword that rejected it.
    schema_path: String,
    message: String,
}

fn plugin() -> Plugin {
    Plugin::new()
        .tool(
            Tool::new(
                "query",
                "The value at an RFC 6901 JSON pointer in a JSON document, as pretty-printed JSON \
                 (`\"\"` is the whole document, `/a/0` the first item of member `a`; `~1` stands \
                 for `/` and `~0` for `~` in a key). Fails if nothing is there.",
                query,
            )
            .title("Query JSON")
            .pure(),
        )
        .tool(
            Tool::new(
                "format",
                "Re-indents a JSON document, keeping its key order; `indent: 0` makes it compact.",
                format,
            )
            .title("Format JSON")
            .pure(),
        )
        .tool(
            Tool::new(
                "validate",
                "Validates a JSON document against a JSON Schema (drafts 4, 6, 7, 2019-09 and \
                 2020-12; `$schema` picks the draft, 2020-12 otherwise). Returns whether it is \
                 valid and, if not, up to 100 errors, each with the JSON pointer of the \
                 offending value. Remote `$ref`s are not fetched.",
                validate,
            )
            .title("Validate JSON")
            .pure(),
        )
}

wasmgate_plugin::export!(plugin);

fn query(a: QueryArgs) -> Result<String, ToolError> {
    let doc = parse(&a.json, "json")?;
    let found = doc
        .pointer(&a.pointer)
        .ok_or_else(|| ToolError::new(format!("nothing at pointer {:?}", a.pointer)))?;
    Ok(serde_json::to_string_pretty(found)?)
}

fn format(a: FormatArgs) -> Result<String, ToolError> {
    let doc = parse(&a.json, "json")?;
    if a.indent == 0 {
        return Ok(doc.to_string());
    }
    let indent = " ".repeat(a.indent);
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(indent.as_bytes());
    let mut ser = serde_json::Serializer::with_formatter(&mut out, formatter);
    doc.serialize(&mut ser)?;
    // The serializer writes only UTF-8.
    Ok(String::from_utf8(out)?)
}

fn validate(a: ValidateArgs) -> Result<Structured<Verdict>, ToolError> {
    let schema = parse(&a.schema, "schema")?;
    let doc = parse(&a.json, "json")?;
    let validator = jsonschema::validator_for(&schema)
        .map_err(|e| ToolError::new(format!("invalid schema: {e}")))?;
    let errors: Vec<Problem> = validator
        .iter_errors(&doc)
        .take(MAX_ERRORS)
        .map(|e| Problem {
            instance_path: e.instance_path.to_string(),
            schema_path: e.schema_path.to_string(),
            message: e.to_string(),
        })
        .collect();
    Ok(Structured::new(Verdict {
        valid: errors.is_empty(),
        errors,
    }))
}

/// Parses one JSON text argument, naming it in the error.
fn parse(text: &str, what: &str) -> Result<Value, ToolError> {
    serde_json::from_str(text)
        .map_err(|e| ToolError::new(format!("`{what}` is not valid JSON: {e}")))
}
