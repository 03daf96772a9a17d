//! `v2demo`: a plugin of the 0.2 world, written on the raw bindings, for the host's tests
//! of what 0.2 adds: results through `reply`, resources and a template, a prompt and its
//! completion, requests to the client, the store, announcements, cancellation, the
//! call's trace context, and a declared instance mode (`session` unless its config's
//! `declare` says otherwise: its `count` tool keeps a global).

use std::cell::Cell;

use serde_json::{Value, json};

wit_bindgen::generate!({
    path: "../../../wit/plugin-0.2",
    world: "plugin",
});

use exports::wasmgate::plugin::{completion, meta, prompts, resources, tool};
use wasmgate::plugin::types::{
    About, AskError, CallError, CompletionRef, CompletionRequest, Completions, Content,
    EmbeddedResource, InstanceMode, PromptArgument, PromptInfo, PromptMessage, PromptOutput,
    RequestError, ResourceInfo, ResourceTemplate, Role, ToolInfo,
};
use wasmgate::plugin::{client, host, notify, results::Reply, store};

thread_local! {
    static COUNT: Cell<u64> = const { Cell::new(0) };
}

/// Where `announce` leaves its mark for the next `list-tools` (which runs in a fresh
/// instance): a folder the test grants as `/data`.
const ANNOUNCED: &str = "/data/announced";

struct Demo;

fn tool_info(name: &str, description: &str, schema: Value) -> ToolInfo {
    ToolInfo {
        name: name.into(),
        title: None,
        description: description.into(),
        input_schema: schema.to_string(),
        output_schema: None,
        annotations: None,
    }
}

fn any() -> Value {
    json!({"type": "object"})
}

fn text(reply: &Reply, text: impl Into<String>) -> Result<(), CallError> {
    reply
        .add(&Content::Text(text.into()))
        .map_err(CallError::Failed)
}

fn ask_error(error: AskError) -> String {
    match error {
        AskError::Unsupported(s) => format!("unsupported: {s}"),
        AskError::Refused(s) => format!("refused: {s}"),
        AskError::TimedOut(s) => format!("timed out: {s}"),
        AskError::Cancelled(s) => format!("cancelled: {s}"),
        AskError::Failed(s) => format!("failed: {s}"),
    }
}

impl tool::Guest for Demo {
    fn list_tools() -> Vec<ToolInfo> {
        let mut tools = vec![
            tool_info(
                "echo",
                "Says back `text`.",
                json!({"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}),
            ),
            tool_info(
                "count",
                "Counts its calls in a global (needs a kept instance).",
                any(),
            ),
            tool_info("ask", "Asks the client for a name (elicitation).", any()),
            tool_info("ask_many", "Asks the client `n` times.", any()),
            tool_info("ask_huge", "Asks with a schema far too large.", any()),
            tool_info("ask_all", "Asks `n` roots requests at once.", any()),
            tool_info("sample", "Asks the client's model (sampling).", any()),
            tool_info("roots", "Lists the client's roots.", any()),
            tool_info("note_add", "Keeps `text` under `key` in the store.", any()),
            tool_info("note_get", "Reads `key` from the store.", any()),
            tool_info(
                "wait_for_cancel",
                "Spins until the call is cancelled, then says so in the log.",
                any(),
            ),
            tool_info("flood", "Writes items until the reply refuses one.", any()),
            tool_info(
                "announce",
                "Adds tool `announced` and says the tools changed; updates demo://hello.",
                any(),
            ),
            tool_info("structured", "Gives a structured result.", any()),
            tool_info(
                "traceparent",
                "Says the call's trace context, or `none`.",
                any(),
            ),
        ];
        if std::fs::metadata(ANNOUNCED).is_ok() {
            tools.push(tool_info("announced", "Here after `announce`.", any()));
        }
        tools
    }

    fn call_tool(name: String, arguments: String, reply: &Reply) -> Result<(), CallError> {
        let args: Value = serde_json::from_str(&arguments).unwrap_or_default();
        let arg = |key: &str| args[key].as_str().unwrap_or_default().to_string();
        match name.as_str() {
            "echo" => text(reply, arg("text")),
            "count" => {
                COUNT.set(COUNT.get() + 1);
                text(reply, COUNT.get().to_string())
            }
            "ask" => {
                let params = json!({
                    "message": "Who are you?",
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
                });
                match client::elicit(&params.to_string()) {
                    Ok(answer) => {
                        let answer: Value = serde_json::from_str(&answer).unwrap_or_default();
                        match answer["action"].as_str() {
                            Some("accept") => text(
                                reply,
                                format!(
                                    "Hello, {}!",
                                    answer["content"]["name"].as_str().unwrap_or("?")
                                ),
                            ),
                            other => text(reply, format!("no name: {}", other.unwrap_or("?"))),
                        }
                    }
                    Err(e) => text(reply, ask_error(e)),
                }
            }
            "ask_many" => {
                let n = args["n"].as_u64().unwrap_or(1);
                let mut last = String::new();
                for _ in 0..n {
                    let params = json!({"message": "again?", "requestedSchema": {"type": "object", "properties": {}}});
                    match client::elicit(&params.to_string()) {
                        Ok(_) => last = "answered".into(),
                        Err(e) => {
                            last = ask_error(e);
                            break;
                        }
                    }
                }
                text(reply, last)
            }
            "ask_all" => {
                let n = args["n"].as_u64().unwrap_or(1) as usize;
                let requests = vec![client::Request::Roots; n];
                match client::ask_all(&requests) {
                    Ok(answers) => text(reply, format!("{} answers", answers.len())),
                    Err(e) => text(reply, ask_error(e)),
                }
            }
            "ask_huge" => {
                let big = "x".repeat(100_000);
                let params = json!({"message": big, "requestedSchema": {"type": "object", "properties": {}}});
                match client::elicit(&params.to_string()) {
                    Ok(_) => text(reply, "answered"),
                    Err(e) => text(reply, ask_error(e)),
                }
            }
            "sample" => {
                let params = json!({
                    "messages": [{"role": "user", "content": {"type": "text", "text": "Say hi"}}],
                    "maxTokens": 20,
                });
                match client::sample(&params.to_string()) {
                    Ok(answer) => {
                        let answer: Value = serde_json::from_str(&answer).unwrap_or_default();
                        text(
                            reply,
                            format!(
                                "model said: {}",
                                answer["content"]["text"].as_str().unwrap_or("?")
                            ),
                        )
                    }
                    Err(e) => text(reply, ask_error(e)),
                }
            }
            "roots" => match client::roots() {
                Ok(roots) => text(reply, roots),
                Err(e) => text(reply, ask_error(e)),
            },
            "note_add" => match store::set(&arg("key"), arg("text").as_bytes()) {
                Ok(()) => text(reply, "kept"),
                Err(e) => Err(CallError::Failed(format!("{e:?}"))),
            },
            "note_get" => {
                let value =
                    store::get(&arg("key")).map(|v| String::from_utf8_lossy(&v).into_owned());
                text(reply, value.unwrap_or_else(|| "(none)".into()))
            }
            "wait_for_cancel" => {
                host::log(host::Level::Warning, "waiting for the cancellation");
                while !host::cancelled() {
                    std::hint::spin_loop();
                }
                host::log(host::Level::Warning, "saw the cancellation");
                text(reply, "cancelled")
            }
            "flood" => {
                let chunk = "y".repeat(1 << 20);
                let mut kept = 0;
                loop {
                    if reply.room() < chunk.len() as u64 {
                        break;
                    }
                    if reply.add(&Content::Text(chunk.clone())).is_err() {
                        break;
                    }
                    kept += 1;
                }
                // One more than fits: refused, not kept.
                let refused = reply.add(&Content::Text(chunk)).is_err();
                Err(CallError::Failed(format!(
                    "kept {kept} items; the next refused: {refused}"
                )))
            }
            "announce" => {
                std::fs::write(ANNOUNCED, b"yes").map_err(|e| CallError::Failed(e.to_string()))?;
                notify::tools_changed();
                notify::resource_updated("demo://hello");
                text(reply, "announced")
            }
            "traceparent" => text(reply, host::traceparent().unwrap_or("none".into())),
            "structured" => {
                reply
                    .structured(&json!({"answer": 42}).to_string())
                    .map_err(CallError::Failed)?;
                reply.mark_error();
                Ok(())
            }
            "announced" => text(reply, "yes"),
            other => Err(CallError::UnknownTool(other.into())),
        }
    }
}

impl resources::Guest for Demo {
    fn list_resources() -> Vec<ResourceInfo> {
        vec![ResourceInfo {
            uri: "demo://hello".into(),
            name: "hello".into(),
            title: Some("Hello".into()),
            description: Some("A greeting.".into()),
            mime_type: Some("text/plain".into()),
            size: None,
            annotations: None,
        }]
    }

    fn list_templates() -> Vec<ResourceTemplate> {
        vec![ResourceTemplate {
            uri_template: "demo://items/{id}".into(),
            name: "item".into(),
            title: None,
            description: Some("An item by id.".into()),
            mime_type: Some("application/json".into()),
            annotations: None,
        }]
    }

    fn read_resource(uri: String, reply: &Reply) -> Result<(), RequestError> {
        let body = if uri == "demo://hello" {
            "Hello from a 0.2 plugin".to_string()
        } else if let Some(id) = uri.strip_prefix("demo://items/") {
            json!({"id": id}).to_string()
        } else {
            return Err(RequestError::NotFound(format!("no resource {uri}")));
        };
        let item = Content::Resource(EmbeddedResource {
            uri,
            mime_type: Some("text/plain".into()),
            text: Some(body),
            blob: None,
        });
        reply.add(&item).map_err(RequestError::Failed)
    }
}

impl prompts::Guest for Demo {
    fn list_prompts() -> Vec<PromptInfo> {
        vec![PromptInfo {
            name: "greet".into(),
            title: None,
            description: Some("Greets `name`.".into()),
            arguments: vec![PromptArgument {
                name: "name".into(),
                title: None,
                description: None,
                required: true,
            }],
        }]
    }

    fn get_prompt(
        name: String,
        arguments: Vec<(String, String)>,
    ) -> Result<PromptOutput, RequestError> {
        if name != "greet" {
            return Err(RequestError::NotFound(format!("no prompt {name}")));
        }
        let who = (arguments.iter())
            .find(|(k, _)| k == "name")
            .map(|(_, v)| v.clone())
            .ok_or_else(|| RequestError::InvalidParams("`name` is required".into()))?;
        Ok(PromptOutput {
            description: None,
            messages: vec![PromptMessage {
                role: Role::User,
                content: Content::Text(format!("Please greet {who}.")),
            }],
        })
    }
}

impl completion::Guest for Demo {
    fn complete(request: CompletionRequest) -> Result<Completions, RequestError> {
        let names = ["Ada", "Alan", "Grace"];
        let values = match request.ref_ {
            CompletionRef::Prompt(p) if p == "greet" => names
                .iter()
                .filter(|n| n.starts_with(&request.argument_value))
                .map(|n| n.to_string())
                .collect(),
            _ => Vec::new(),
        };
        Ok(Completions {
            values,
            total: None,
            has_more: false,
        })
    }
}

impl meta::Guest for Demo {
    /// `session`, or what the `declare` config value says (`call`, `shared`, `none`).
    fn describe() -> About {
        let instance = match host::config("declare").as_deref() {
            Some("none") => None,
            Some("call") => Some(InstanceMode::Call),
            Some("shared") => Some(InstanceMode::Shared),
            _ => Some(InstanceMode::Session),
        };
        About { instance }
    }
}

export!(Demo);
