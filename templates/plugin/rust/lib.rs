//! `{{name}}`: a wasmgate plugin. `list_tools` says what the tools are (with JSON Schemas
//! for their arguments), `call_tool` runs one. The gateway checks the arguments against
//! the input schema before the call, so `call_tool` sees only valid ones.

wit_bindgen::generate!({ path: "wit", world: "plugin" });

use exports::wasmgate::plugin::tool::Guest;
use wasmgate::plugin::host::{self, Level};
use wasmgate::plugin::types::{CallError, Content, ToolInfo, ToolOutput};

use serde_json::{Value, json};

struct Plugin;

impl Guest for Plugin {
    fn list_tools() -> Vec<ToolInfo> {
        vec![ToolInfo {
            name: "greet".into(),
            title: Some("Greet".into()),
            description: "Says hello to `name`, `times` times.".into(),
            input_schema: json!({
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "Who to greet"},
                    "times": {"type": "integer", "minimum": 1, "maximum": 10, "default": 1}
                },
                "required": ["name"],
                "additionalProperties": false
            })
            .to_string(),
            output_schema: None,
            annotations: Some(json!({"readOnlyHint": true, "openWorldHint": false}).to_string()),
        }]
    }

    fn call_tool(name: String, arguments: String) -> Result<ToolOutput, CallError> {
        let arguments: Value = serde_json::from_str(&arguments)
            .map_err(|e| CallError::InvalidArguments(e.to_string()))?;
        match name.as_str() {
            "greet" => {
                host::log(Level::Info, "greet called");
                let text = greet(&arguments).map_err(CallError::InvalidArguments)?;
                Ok(ToolOutput {
                    content: vec![Content::Text(text)],
                    structured: None,
                    is_error: false,
                })
            }
            _ => Err(CallError::UnknownTool(name)),
        }
    }
}

/// The tool itself, apart from the bindings, so that `cargo test` runs it on the host.
fn greet(arguments: &Value) -> Result<String, String> {
    let name = arguments["name"].as_str().ok_or("`name` must be a string")?;
    let times = arguments["times"].as_u64().unwrap_or(1) as usize;
    Ok(vec![format!("Hello, {name}!"); times].join("\n"))
}

export!(Plugin);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn greets_as_often_as_asked() {
        assert_eq!(greet(&json!({"name": "Ada"})).unwrap(), "Hello, Ada!");
        assert_eq!(
            greet(&json!({"name": "Ada", "times": 2})).unwrap(),
            "Hello, Ada!\nHello, Ada!"
        );
        assert!(greet(&json!({})).is_err());
    }
}
