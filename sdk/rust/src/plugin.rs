//! [`Plugin`]: the tools of one component, and the [`export!`](crate::export) that makes
//! them its `tool` export.

use crate::Tool;
use crate::wit::{CallError, ToolInfo, ToolOutput};

/// The tools of a plugin. A function returning it is what [`export!`](crate::export)
/// takes; tests call [`Plugin::call`] on it as the gateway would.
#[derive(Default)]
pub struct Plugin {
    tools: Vec<Tool>,
}

impl Plugin {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    /// What `list-tools` answers.
    pub fn list(&self) -> Vec<ToolInfo> {
        self.tools.iter().map(Tool::info).collect()
    }

    /// What `call-tool` answers: the named tool run on the arguments' JSON text, or
    /// `unknown-tool`.
    pub fn call(&self, name: &str, arguments: &str) -> Result<ToolOutput, CallError> {
        match self.tools.iter().find(|t| t.name() == name) {
            Some(tool) => tool.call(arguments),
            None => Err(CallError::UnknownTool(name.into())),
        }
    }
}

/// Makes the [`Plugin`] a function returns the component's `tool` export:
/// `wasmgate_plugin::export!(plugin);` after `fn plugin() -> Plugin`.
///
/// The function runs for each `list-tools` and for each call, so keep it to building the
/// list (schemas are derived only for `list-tools`). What a tool keeps between calls, in
/// the instance modes that keep instances (`session`, `shared`), goes in a `static`.
#[macro_export]
macro_rules! export {
    ($plugin:path) => {
        const _: () = {
            struct WasmgatePluginExport;

            impl $crate::wit::Guest for WasmgatePluginExport {
                fn list_tools() -> ::std::vec::Vec<$crate::wit::ToolInfo> {
                    $crate::Plugin::list(&$plugin())
                }

                fn call_tool(
                    name: ::std::string::String,
                    arguments: ::std::string::String,
                ) -> ::std::result::Result<$crate::wit::ToolOutput, $crate::wit::CallError>
                {
                    $crate::Plugin::call(&$plugin(), &name, &arguments)
                }
            }

    $crate::wit::export_raw!(WasmgatePluginExport with_types_in $crate::wit);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wit::Content;
    use crate::{Level, NoArgs, Structured, ToolError, testing};
    use schemars::JsonSchema;
    use serde::{Deserialize, Serialize};
    use serde_json::{Value, json};

    #[derive(Deserialize, JsonSchema)]
    struct Repeat {
        text: String,
        #[serde(default)]
        times: Option<u8>,
    }

    #[derive(Serialize, JsonSchema)]
    struct Length {
        chars: usize,
    }

    fn repeat(args: Repeat) -> Result<String, ToolError> {
        let times = args.times.unwrap_or(1);
        if times == 0 {
            return Err(ToolError::invalid_arguments("`times` must be at least 1"));
        }
        crate::log(Level::Info, format!("repeat {times}"));
        Ok(args.text.repeat(times.into()))
    }

    fn length(args: Repeat) -> Result<Structured<Length>, ToolError> {
        crate::progress(1.0, Some(1.0), Some("counted"));
        Ok(Structured::new(Length {
            chars: args.text.chars().count(),
        }))
    }

    fn plugin() -> Plugin {
        Plugin::new()
            .tool(Tool::new("repeat", "Repeats `text`.", repeat).title("Repeat"))
            .tool(Tool::new("length", "Counts characters.", length).pure())
            .tool(Tool::new("root", "Reads a file.", |_: NoArgs| {
                let root = crate::config_or("root", "/data");
                Ok(std::fs::read_to_string(format!("{root}/none"))?)
            }))
    }

    // Expands here as in a plugin; the bindings' exports build on the host too.
    crate::export!(plugin);

    fn text(output: &ToolOutput) -> &str {
        match &output.content[..] {
            [Content::Text(text)] => text,
            _ => panic!("not one text item"),
        }
    }

    #[test]
    fn lists_each_tool_with_its_derived_schemas() {
        let tools = plugin().list();
        let names: Vec<&str> = tools.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["repeat", "length", "root"]);
        let input: Value = serde_json::from_str(&tools[0].input_schema).unwrap();
        assert_eq!(input["required"], json!(["text"]));
        assert_eq!(tools[0].title.as_deref(), Some("Repeat"));
        assert_eq!(tools[0].output_schema, None);
        let output: Value = serde_json::from_str(tools[1].output_schema.as_ref().unwrap()).unwrap();
        assert_eq!(output["properties"]["chars"]["type"], "integer");
        let annotations: Value =
            serde_json::from_str(tools[1].annotations.as_ref().unwrap()).unwrap();
        assert_eq!(
            annotations,
            json!({"readOnlyHint": true, "idempotentHint": true, "openWorldHint": false})
        );
        let none: Value = serde_json::from_str(&tools[2].input_schema).unwrap();
        assert_eq!(
            none,
            json!({"type": "object", "additionalProperties": false})
        );
    }

    #[test]
    fn a_call_parses_its_arguments_and_returns_the_output() {
        let out = plugin()
            .call("repeat", r#"{"text": "ab", "times": 2.0}"#)
            .unwrap();
        assert_eq!(text(&out), "abab");
        assert!(!out.is_error && out.structured.is_none());
        assert_eq!(
            testing::take_logs(),
            [(Level::Info, "repeat 2".to_string())]
        );

        let out = plugin().call("length", r#"{"text": "né"}"#).unwrap();
        assert_eq!(out.structured.as_deref(), Some(r#"{"chars":2}"#));
        assert_eq!(text(&out), r#"{"chars":2}"#);
        assert_eq!(
            testing::take_progress(),
            [(1.0, Some(1.0), Some("counted".to_string()))]
        );
    }

    #[test]
    fn errors_become_the_call_errors_the_wit_tells_apart() {
        let p = plugin();
        assert!(matches!(
            p.call("nope", "{}"),
            Err(CallError::UnknownTool(name)) if name == "nope"
        ));
        assert!(matches!(
            p.call("repeat", r#"{"text": 3}"#),
            Err(CallError::InvalidArguments(m)) if m.contains("expected a string")
        ));
        assert!(matches!(
            p.call("repeat", r#"{"text": "a", "times": 0}"#),
            Err(CallError::InvalidArguments(m)) if m == "`times` must be at least 1"
        ));
        testing::set_config("root", "/nonexistent-wasmgate-root");
        assert!(matches!(
            p.call("root", "{}"),
            Err(CallError::Failed(m)) if m.contains("No such file")
        ));
    }

    #[test]
    fn structured_output_may_carry_a_plainer_text() {
        let out = Structured::new(Length { chars: 3 }).with_text("3 characters");
        let out = crate::IntoOutput::into_output(out).unwrap();
        assert_eq!(text(&out), "3 characters");
        assert_eq!(out.structured.as_deref(), Some(r#"{"chars":3}"#));
    }

    #[test]
    #[should_panic(expected = "tool `bad`: its argument type must be a struct")]
    fn a_tool_whose_arguments_are_not_an_object_is_refused_by_name() {
        Tool::new("bad", "", |s: String| Ok(s)).info();
    }
}
