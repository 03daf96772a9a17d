//! The fixtures' shorthand for writing guests on the raw bindings of the 0.1 world
//! (`wit/plugin.wit`, generated here in [`wit`]): the fixtures implement `Guest` by
//! hand, because they test the host with what the SDK's typed layer would never produce
//! (schemas that are not objects, results that break their schema, tools that spin).
//! They stay 0.1 components, the SDK being 0.2, so the gateway's 0.1 path stays tested.
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

/// The raw bindings of `wasmgate:plugin@0.1.0`.
pub mod wit {
    wit_bindgen::generate!({
        path: "../../../wit/plugin.wit",
        world: "wasmgate:plugin/plugin@0.1.0",
        pub_export_macro: true,
        default_bindings_module: "plugin_kit::wit",
        export_macro_name: "export_raw",
    });
}

pub use wit::exports::wasmgate::plugin::tool::Guest;
pub use wit::wasmgate::plugin::host::Level;
pub use wit::wasmgate::plugin::types::{
    Blob, CallError, Content, EmbeddedResource, ToolInfo, ToolOutput,
};

/// `export!(T)` makes `T: Guest` the component's `tool` export.
#[macro_export]
macro_rules! export {
    ($ty:ident) => {
        $crate::wit::export_raw!($ty with_types_in $crate::wit);
    };
}

/// The host's functions of 0.1.
pub mod host {
    pub use crate::wit::wasmgate::plugin::host::{config, log, progress};
}

#[cfg(feature = "http")]
pub mod http {
    pub use wasmgate_plugin::http::{Page, get, request};

    /// JSON Schema of [`Page`], for a tool's output schema.
    pub fn page_schema() -> serde_json::Value {
        wasmgate_plugin::schema::output::<Page>()
    }
}

/// What `call-tool` returns.
pub type CallResult = Result<ToolOutput, CallError>;

/// A tool whose arguments are one JSON object with `properties`, of which
/// `required` must be present and no others may be.
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
    fn output_schema(self, schema: Value) -> Self;
    fn annotations(self, annotations: Value) -> Self;
    /// Read-only, idempotent, closed-world.
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

/// The arguments object, parsed as the SDK's typed tools parse theirs.
pub fn args<T: DeserializeOwned>(arguments: &str) -> Result<T, CallError> {
    Ok(wasmgate_plugin::parse_arguments(arguments)?)
}

/// The SDK's errors (`parse_arguments`, `http`) as 0.1 call errors, for `?`.
impl From<wasmgate_plugin::ToolError> for CallError {
    fn from(e: wasmgate_plugin::ToolError) -> Self {
        if e.is_invalid_arguments() {
            CallError::InvalidArguments(e.message().into())
        } else {
            CallError::Failed(e.message().into())
        }
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

/// A structured result, its JSON in a text item too.
pub fn structured(value: &impl Serialize) -> CallResult {
    let json = serde_json::to_string(value).map_err(failed)?;
    Ok(ToolOutput {
        content: vec![Content::Text(json.clone())],
        structured: Some(json),
        is_error: false,
    })
}

/// The tool failed; the client sees the message with `isError: true`.
pub fn failed(err: impl Display) -> CallError {
    CallError::Failed(err.to_string())
}

pub fn unknown_tool(name: &str) -> CallError {
    CallError::UnknownTool(name.into())
}
