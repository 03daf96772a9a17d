//! What every wasmgate plugin of this repository shares: the bindings of the
//! `wasmgate:plugin` world, generated once here, and helpers that build the
//! WIT records from JSON so that each plugin is only its tools.
//!
//! A plugin implements [`Guest`] and registers it with `plugin_kit::export!`:
//!
//! ```ignore
//! struct Upper;
//! impl plugin_kit::Guest for Upper {
//!     fn list_tools() -> Vec<ToolInfo> { vec![tool("upper", "...", json!({..}), &["text"])] }
//!     fn call_tool(name: String, arguments: String) -> CallResult { ... }
//! }
//! plugin_kit::export!(Upper);
//! ```

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use std::fmt::Display;

#[cfg(feature = "http")]
pub mod http;

pub mod bindings {
    wit_bindgen::generate!({
        path: "../../wit",
        world: "plugin",
        // The export macro is used from the plugin crates, so it must be
        // public and must name this module by its path from outside.
        pub_export_macro: true,
        default_bindings_module: "plugin_kit::bindings",
    });
}

/// `export!(T)` makes `T: Guest` the component's `tool` export.
pub use bindings::export;
pub use bindings::exports::wasmgate::plugin::tool::Guest;
pub use bindings::wasmgate::plugin::host::{self, Level};
pub use bindings::wasmgate::plugin::types::{
    Blob, CallError, Content, EmbeddedResource, ToolInfo, ToolOutput,
};

/// What `call-tool` returns.
pub type CallResult = Result<ToolOutput, CallError>;

/// A tool whose arguments are one JSON object with `properties`, of which
/// `required` must be present and no others may be. The host validates
/// arguments against this schema before the call, so a strict schema is what
/// lets the plugin trust the shape it receives.
pub fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> ToolInfo {
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    ToolInfo {
        name: name.into(),
        title: None,
        description: description.into(),
        input_schema: schema.to_string(),
        output_schema: None,
        annotations: None,
    }
}

/// Optional parts of a [`ToolInfo`], chained after [`tool`].
pub trait ToolInfoExt: Sized {
    fn title(self, title: &str) -> Self;
    /// JSON Schema of the `structured` result (MCP `outputSchema`).
    fn output_schema(self, schema: Value) -> Self;
    /// MCP tool annotations, e.g. `{"readOnlyHint": true}`.
    fn annotations(self, annotations: Value) -> Self;
    /// A pure function of its arguments: reads nothing, changes nothing,
    /// same answer every time, so a client may call it without asking.
    fn pure(self) -> Self {
        self.annotations(json!({
            "readOnlyHint": true,
            "idempotentHint": true,
            "openWorldHint": false,
        }))
    }
}

impl ToolInfoExt for ToolInfo {
    fn title(mut self, title: &str) -> Self {
        self.title = Some(title.into());
        self
    }
    fn output_schema(mut self, schema: Value) -> Self {
        self.output_schema = Some(schema.to_string());
        self
    }
    fn annotations(mut self, annotations: Value) -> Self {
        self.annotations = Some(annotations.to_string());
        self
    }
}

/// Parses the arguments object into the tool's argument struct. The host has
/// checked them against the input schema already, so a failure here means the
/// schema and the struct disagree, or a value the schema cannot express.
pub fn args<T: DeserializeOwned>(arguments: &str) -> Result<T, CallError> {
    let invalid = |e: serde_json::Error| CallError::InvalidArguments(e.to_string());
    let mut value: serde_json::Value = serde_json::from_str(arguments).map_err(invalid)?;
    whole_numbers_as_integers(&mut value);
    serde_json::from_value(value).map_err(invalid)
}

/// JSON Schema's `integer` is any number without a fractional part, `2.0` too, and the host's
/// check lets it through; serde's integers take only `2`. Such floats become integers here.
fn whole_numbers_as_integers(value: &mut serde_json::Value) {
    use serde_json::Value;
    match value {
        Value::Number(n) if n.is_f64() => {
            if let Some(f) = n.as_f64().filter(|f| f.fract() == 0.0 && f.abs() < 9.0e15) {
                *value = Value::from(f as i64);
            }
        }
        Value::Array(items) => items.iter_mut().for_each(whole_numbers_as_integers),
        Value::Object(fields) => fields.values_mut().for_each(whole_numbers_as_integers),
        _ => {}
    }
}

/// A result of one text item.
pub fn text(text: impl Into<String>) -> ToolOutput {
    ToolOutput {
        content: vec![Content::Text(text.into())],
        structured: None,
        is_error: false,
    }
}

/// A structured result. The same JSON goes into a text item too, as the MCP
/// spec asks, for clients that do not read `structuredContent`.
pub fn structured(value: &impl Serialize) -> CallResult {
    let json = serde_json::to_string(value).map_err(failed)?;
    Ok(ToolOutput {
        content: vec![Content::Text(json.clone())],
        structured: Some(json),
        is_error: false,
    })
}

/// A structured result whose text item says the same thing more plainly
/// than its JSON (a digest, say), for clients that show only the text.
pub fn text_and_structured(text: impl Into<String>, value: &impl Serialize) -> CallResult {
    let json = serde_json::to_string(value).map_err(failed)?;
    Ok(ToolOutput {
        content: vec![Content::Text(text.into())],
        structured: Some(json),
        is_error: false,
    })
}

/// The tool failed; the client sees the message with `isError: true`.
pub fn failed(err: impl Display) -> CallError {
    CallError::Failed(err.to_string())
}

/// The answer for a name that `list-tools` did not announce; it carries the
/// name, and the gateway words the message.
pub fn unknown_tool(name: &str) -> CallError {
    CallError::UnknownTool(name.into())
}

/// A value of the plugin's `[plugins.NAME.config]` table, or `default`.
pub fn config_or(key: &str, default: &str) -> String {
    host::config(key).unwrap_or_else(|| default.to_string())
}
