//! [`Plugin`]: the tools, resources, prompts and completions of one component, and the
//! [`export!`](crate::export) that makes them its exports.

use crate::complete::{Completers, cut};
use crate::output::ToolOutput;
use crate::reply::{self, Sink};
use crate::wit::{
    About, CallError, CompletionRef, CompletionRequest, Completions, EmbeddedResource,
    InstanceMode, PromptInfo, PromptOutput, Reply, ResourceInfo, ToolInfo,
};
use crate::{Prompt, RequestError, Resource, ResourceTemplate, Tool, wit};

/// The instance a plugin's calls run in: [`Plugin::instance`].
pub type Instance = InstanceMode;

/// What a plugin serves. A function returning it is what [`export!`](crate::export)
/// takes; tests call [`Plugin::call`] and the others on it as the gateway would.
#[derive(Default)]
pub struct Plugin {
    tools: Vec<Tool>,
    resources: Vec<Resource>,
    templates: Vec<ResourceTemplate>,
    prompts: Vec<Prompt>,
    instance: Option<Instance>,
}

impl Plugin {
    pub fn new() -> Self {
        Self::default()
    }

    pub fn tool(mut self, tool: Tool) -> Self {
        self.tools.push(tool);
        self
    }

    pub fn resource(mut self, resource: Resource) -> Self {
        self.resources.push(resource);
        self
    }

    pub fn template(mut self, template: ResourceTemplate) -> Self {
        self.templates.push(template);
        self
    }

    pub fn prompt(mut self, prompt: Prompt) -> Self {
        self.prompts.push(prompt);
        self
    }

    /// The instance mode the plugin's state needs: [`Instance::Session`] when its tools
    /// keep state in globals (a `static`) between the calls of one client. Left unset,
    /// the operator's choice holds (`call` by default: a fresh instance per call). State
    /// that must outlive an instance goes in [`store`](crate::store) instead.
    pub fn instance(mut self, instance: Instance) -> Self {
        self.instance = Some(instance);
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

    /// `call-tool` as the export runs it: the output written into the gateway's `reply`.
    pub fn call_into(&self, name: &str, arguments: &str, reply: &Reply) -> Result<(), CallError> {
        reply::write_output(reply, self.call(name, arguments)?)
    }

    /// What `list-resources` answers.
    pub fn resources(&self) -> Vec<ResourceInfo> {
        self.resources.iter().map(Resource::info).collect()
    }

    /// What `list-templates` answers.
    pub fn templates(&self) -> Vec<wit::ResourceTemplate> {
        self.templates.iter().map(ResourceTemplate::info).collect()
    }

    /// What `read-resource` answers: the resource of that URI, else the first template
    /// it matches, else `not-found`.
    pub fn read(&self, uri: &str) -> Result<Vec<EmbeddedResource>, RequestError> {
        if let Some(resource) = self.resources.iter().find(|r| r.uri() == uri) {
            return resource.read();
        }
        self.templates
            .iter()
            .find_map(|t| t.read(uri))
            .unwrap_or_else(|| Err(RequestError::not_found(format!("no resource {uri}"))))
    }

    /// `read-resource` as the export runs it: the contents written into `reply`.
    pub fn read_into(&self, uri: &str, reply: &Reply) -> Result<(), wit::RequestError> {
        self.read_to(uri, reply)
    }

    fn read_to(&self, uri: &str, sink: &impl Sink) -> Result<(), wit::RequestError> {
        reply::write_contents(sink, self.read(uri)?)
    }

    /// What `list-prompts` answers.
    pub fn prompts(&self) -> Vec<PromptInfo> {
        self.prompts.iter().map(Prompt::info).collect()
    }

    /// What `get-prompt` answers.
    pub fn get_prompt(
        &self,
        name: &str,
        arguments: &[(String, String)],
    ) -> Result<PromptOutput, RequestError> {
        match self.prompts.iter().find(|p| p.name() == name) {
            Some(prompt) => prompt.get(arguments),
            None => Err(RequestError::not_found(format!("no prompt {name}"))),
        }
    }

    /// What `complete` answers: the values of the prompt's or template's completion
    /// function for the argument, none if it has no such function.
    pub fn complete(&self, request: &CompletionRequest) -> Result<Completions, RequestError> {
        let completers: &Completers = match &request.ref_ {
            CompletionRef::Prompt(name) => self
                .prompts
                .iter()
                .find(|p| p.name() == name)
                .map(|p| &p.completers)
                .ok_or_else(|| RequestError::not_found(format!("no prompt {name}")))?,
            CompletionRef::ResourceTemplate(template) => self
                .templates
                .iter()
                .find(|t| t.uri_template() == template)
                .map(|t| &t.completers)
                .ok_or_else(|| {
                    RequestError::not_found(format!("no resource template {template}"))
                })?,
        };
        Ok(completers.complete(&request.argument_name, &request.argument_value))
    }

    /// What `describe` answers.
    pub fn describe(&self) -> About {
        About {
            instance: self.instance,
        }
    }
}

/// Completions from a list of values: the first 100, with the total.
pub fn completions(values: Vec<String>) -> Completions {
    cut(values)
}

/// Makes the [`Plugin`] a function returns the component's exports (`tool`, `resources`,
/// `prompts`, `completion`, `meta`): `wasmgate_plugin::export!(plugin);` after
/// `fn plugin() -> Plugin`.
///
/// The function runs for each list and each call, so keep it to building the lists
/// (schemas are derived only when listed). What a tool keeps between calls goes in
/// [`store`](crate::store), or, in a `static` with [`Plugin::instance`] declared.
#[macro_export]
macro_rules! export {
    ($plugin:path) => {
        const _: () = {
            use ::std::result::Result;
            use ::std::string::String;
            use ::std::vec::Vec;
            use $crate::wit;

            struct WasmgatePluginExport;

            impl wit::Guest for WasmgatePluginExport {
                fn list_tools() -> Vec<wit::ToolInfo> {
                    $crate::Plugin::list(&$plugin())
                }

                fn call_tool(
                    name: String,
                    arguments: String,
                    reply: &wit::Reply,
                ) -> Result<(), wit::CallError> {
                    $crate::Plugin::call_into(&$plugin(), &name, &arguments, reply)
                }
            }

            impl wit::ResourcesGuest for WasmgatePluginExport {
                fn list_resources() -> Vec<wit::ResourceInfo> {
                    $crate::Plugin::resources(&$plugin())
                }

                fn list_templates() -> Vec<wit::ResourceTemplate> {
                    $crate::Plugin::templates(&$plugin())
                }

                fn read_resource(uri: String, reply: &wit::Reply) -> Result<(), wit::RequestError> {
                    $crate::Plugin::read_into(&$plugin(), &uri, reply)
                }
            }

            impl wit::PromptsGuest for WasmgatePluginExport {
                fn list_prompts() -> Vec<wit::PromptInfo> {
                    $crate::Plugin::prompts(&$plugin())
                }

                fn get_prompt(
                    name: String,
                    arguments: Vec<(String, String)>,
                ) -> Result<wit::PromptOutput, wit::RequestError> {
                    Ok($crate::Plugin::get_prompt(&$plugin(), &name, &arguments)?)
                }
            }

            impl wit::CompletionGuest for WasmgatePluginExport {
                fn complete(
                    request: wit::CompletionRequest,
                ) -> Result<wit::Completions, wit::RequestError> {
                    Ok($crate::Plugin::complete(&$plugin(), &request)?)
                }
            }

            impl wit::MetaGuest for WasmgatePluginExport {
                fn describe() -> wit::About {
                    $crate::Plugin::describe(&$plugin())
                }
            }

    $crate::wit::export_raw!(WasmgatePluginExport with_types_in $crate::wit);
        };
    };
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ToolOutput;
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
