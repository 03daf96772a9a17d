//! What a tool function may return, and what each becomes in the result: [`IntoOutput`],
//! implemented for text, [`Structured`] values and raw content.

use schemars::JsonSchema;
use serde::Serialize;
use serde_json::Value;

use crate::ToolError;
use crate::schema;
use crate::wit::Content;

/// A tool's result, item by item (MCP `CallToolResult`), as [`Plugin::call`](crate::Plugin::call)
/// gives it to a test; the export writes it into the call's `reply`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolOutput {
    pub content: Vec<Content>,
    /// The structured result, as JSON text (MCP `structuredContent`).
    pub structured: Option<String>,
    /// The tool ran and failed (MCP `isError`): return a [`ToolError`] rather than set it.
    pub is_error: bool,
}

/// A tool function's success value. The type decides the tool's output schema too.
pub trait IntoOutput {
    /// The tool's output schema (MCP `outputSchema`), if its results are structured.
    fn output_schema() -> Option<Value> {
        None
    }

    fn into_output(self) -> Result<ToolOutput, ToolError>;
}

/// One text item.
impl IntoOutput for String {
    fn into_output(self) -> Result<ToolOutput, ToolError> {
        Ok(content(vec![Content::Text(self)]))
    }
}

/// One text item.
impl IntoOutput for &str {
    fn into_output(self) -> Result<ToolOutput, ToolError> {
        self.to_owned().into_output()
    }
}

/// Content items as they are: images, audio, embedded resources.
impl IntoOutput for Vec<Content> {
    fn into_output(self) -> Result<ToolOutput, ToolError> {
        Ok(content(self))
    }
}

/// The result as it is, for what the other forms cannot say. Its `is-error` is not
/// the way to fail: return a [`ToolError`].
impl IntoOutput for ToolOutput {
    fn into_output(self) -> Result<ToolOutput, ToolError> {
        Ok(self)
    }
}

fn content(items: Vec<Content>) -> ToolOutput {
    ToolOutput {
        content: items,
        structured: None,
        is_error: false,
    }
}

/// A structured result (MCP `structuredContent`): `value` serialized, and the tool's
/// output schema derived from `T`, which must serialize to a JSON object (a struct or a
/// map). The same JSON goes into a text item for clients that do not read structured
/// content, unless [`Structured::with_text`] gives a plainer text.
pub struct Structured<T> {
    value: T,
    text: Option<String>,
}

impl<T> Structured<T> {
    pub fn new(value: T) -> Self {
        Self { value, text: None }
    }

    /// The text item clients that show only text see, instead of the JSON: the digest
    /// of a hash, say, rather than an object holding it.
    pub fn with_text(self, text: impl Into<String>) -> Self {
        Self {
            text: Some(text.into()),
            ..self
        }
    }
}

impl<T: Serialize + JsonSchema> IntoOutput for Structured<T> {
    fn output_schema() -> Option<Value> {
        Some(schema::output::<T>())
    }

    fn into_output(self) -> Result<ToolOutput, ToolError> {
        let json = serde_json::to_string(&self.value)?;
        Ok(ToolOutput {
            content: vec![Content::Text(self.text.unwrap_or_else(|| json.clone()))],
            structured: Some(json),
            is_error: false,
        })
    }
}
