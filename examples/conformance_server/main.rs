//! The conformance fixture: a stdio MCP server providing what the official MCP
//! conformance suite's server scenarios (npm `@modelcontextprotocol/conformance`) call,
//! so the suite can run against wasmgate fronting it (tests/gateway/conformance.rs).
//!
//! It mirrors the suite's own reference server (its `everything-server.ts`):
//! - tools `test_simple_text`, `test_image_content`, `test_audio_content`,
//!   `test_embedded_resource`, `test_multiple_content_types`, `test_tool_with_logging`,
//!   `test_tool_with_progress`, `test_error_handling`, `test_reconnection`,
//!   `test_sampling`, `test_elicitation`, `test_elicitation_sep1034_defaults`,
//!   `test_elicitation_sep1330_enums` and `json_schema_2020_12_tool`;
//! - resources `test://static-text`, `test://static-binary`, `test://watched-resource`
//!   and the template `test://template/{id}/data`, with subscriptions;
//! - prompts `test_simple_prompt`, `test_prompt_with_arguments`,
//!   `test_prompt_with_embedded_resource`, `test_prompt_with_image`;
//! - `logging/setLevel`, `completion/complete` and `ping`;
//! - the 2026-07-28 scenarios' diagnostic tools and prompt, written as a 2025-11-25
//!   server would (scenarios_2026.rs), so a gateway translating between eras is tested
//!   against a server of the old era only.
//!
//! With `--eras both` it also speaks 2026-07-28 (native.rs): `server/discover`, stateless
//! requests, `input_required` rounds and `subscriptions/listen`, as the reference does;
//! `initialize` still begins a 2025-11-25 session. Without it, 2025-11-25 only.
//!
//! Newline-delimited JSON-RPC on stdin/stdout, logs on stderr; every request is answered
//! in its own task, so a call waiting on the client (sampling, elicitation) blocks nothing.
//! It exits when stdin closes. No environment variables.

mod listen;
mod native;
mod peer;
// Shared with the 0.2 plugin that serves the same tools (tests/plugins/conformance2).
#[path = "../../tests/plugins/conformance2/src/plans.rs"]
mod plans;
mod scenarios_2026;
mod state;

use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::sync::mpsc;

use peer::{Failure, Peer};

/// A 1x1 red PNG, the suite's own test image.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV file, the suite's own test sound.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";
/// SEP-1613's schema with `$schema`, `$defs` and `additionalProperties`, which must reach
/// clients as written; shared with the conformance plugin.
const SEP1613_SCHEMA: &str = include_str!("../../tests/plugins/conformance/sep1613_schema.json");
const VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
/// Between the notifications of the logging and progress tools: the suite checks that
/// a client receives several messages spread over a call, not one burst.
const STEP: Duration = Duration::from_millis(50);

struct Fixture {
    peer: Peer,
    /// `--eras both`: requests of 2026-07-28 are served too.
    both_eras: bool,
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let both_eras = match args.iter().map(String::as_str).collect::<Vec<_>>()[..] {
        [] | ["--eras", "2025"] => false,
        ["--eras", "both"] => true,
        _ => {
            eprintln!("usage: conformance_server [--eras 2025|both]");
            std::process::exit(2);
        }
    };
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(both_eras));
}

async fn run(both_eras: bool) {
    let (input, mut output) = wasmgate::transport::stdio::std_streams();
    let (out, mut lines) = mpsc::unbounded_channel::<String>();
    let writer = tokio::spawn(async move {
        while let Some(mut line) = lines.recv().await {
            line.push('\n');
            if output.write_all(line.as_bytes()).await.is_err() || output.flush().await.is_err() {
                return;
            }
        }
    });
    let fixture: &'static Fixture = Box::leak(Box::new(Fixture {
        peer: Peer::new(out),
        both_eras,
    }));
    eprintln!("conformance_server: ready");
    let mut input = BufReader::new(input).lines();
    while let Ok(Some(line)) = input.next_line().await {
        if !line.trim().is_empty() {
            fixture.on_line(&line);
        }
    }
    // stdin closed: the client is gone, and nothing queued is wanted any more.
    writer.abort();
}

impl Fixture {
    fn on_line(&'static self, line: &str) {
        let Ok(message) = serde_json::from_str::<Value>(line) else {
            return self.peer.send(json!({"jsonrpc": "2.0", "id": null,
                "error": {"code": -32700, "message": "Parse error"}}));
        };
        let id = message.get("id").cloned();
        match (message["method"].as_str(), id) {
            (Some(method), Some(id))
                if self.both_eras && native::is_modern(method, &message["params"]) =>
            {
                let (method, params) = (method.to_owned(), message["params"].clone());
                tokio::spawn(async move {
                    let reply = match native::handle(self, &id, &method, &params).await {
                        Some(Ok(result)) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                        Some(Err(error)) => json!({"jsonrpc": "2.0", "id": id, "error": error}),
                        None => return,
                    };
                    self.peer.send(reply);
                });
            }
            (Some(method), Some(id)) => {
                let (method, params) = (method.to_owned(), message["params"].clone());
                tokio::spawn(async move {
                    let reply = match self.handle(&method, &params).await {
                        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
                        Err((code, text)) => json!({"jsonrpc": "2.0", "id": id,
                            "error": {"code": code, "message": text}}),
                    };
                    self.peer.send(reply);
                });
            }
            // A 2026 listen ends with its cancellation; other notifications (initialized,
            // another cancellation) ask nothing of this server.
            (Some("notifications/cancelled"), None) => {
                self.peer.listens.cancel(&message["params"]["requestId"]);
            }
            (Some(_), None) => {}
            (None, Some(id)) => self.peer.on_response(&id, &message),
            (None, None) => eprintln!("conformance_server: ignored {line}"),
        }
    }

    async fn handle(&self, method: &str, params: &Value) -> Result<Value, Failure> {
        match method {
            "initialize" => {
                self.peer.remember_capabilities(&params["capabilities"]);
                Ok(initialize(params))
            }
            "ping" | "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel" => {
                Ok(json!({}))
            }
            "tools/list" => {
                let mut tools = tools();
                tools.extend(scenarios_2026::tools());
                Ok(json!({ "tools": tools }))
            }
            "tools/call" => self.call(params, true).await,
            "resources/list" => Ok(json!({ "resources": resources() })),
            "resources/templates/list" => Ok(json!({"resourceTemplates": [{
                "uriTemplate": "test://template/{id}/data", "name": "template",
                "title": "Resource Template", "mimeType": "application/json",
                "description": "A resource template with parameter substitution"}]})),
            "resources/read" => read(params["uri"].as_str().unwrap_or_default()),
            "prompts/list" => {
                let mut prompts = prompts();
                prompts.extend(scenarios_2026::prompts_listed());
                Ok(json!({ "prompts": prompts }))
            }
            "prompts/get" if params["name"] == plans::PROMPT => {
                Ok(scenarios_2026::prompt(&self.peer).await)
            }
            "prompts/get" => prompt(params),
            "completion/complete" => Ok(complete(params)),
            _ => Err((-32601, format!("Method not found: {method}"))),
        }
    }

    /// `tools/call`; log messages go out only when `logs`.
    async fn call(&self, params: &Value, logs: bool) -> Result<Value, Failure> {
        let (name, args) = (
            params["name"].as_str().unwrap_or_default(),
            &params["arguments"],
        );
        let image = json!({"type": "image", "data": PNG, "mimeType": "image/png"});
        let content = match name {
            "test_simple_text" => vec![text("This is a simple text response for testing.")],
            "test_image_content" => vec![image],
            "test_audio_content" => {
                vec![json!({"type": "audio", "data": WAV, "mimeType": "audio/wav"})]
            }
            "test_embedded_resource" => vec![embedded(
                "test://embedded-resource",
                "text/plain",
                "This is an embedded resource content.",
            )],
            "test_multiple_content_types" => vec![
                text("Multiple content types test:"),
                image,
                embedded(
                    "test://mixed-content-resource",
                    "application/json",
                    r#"{"test":"data","value":123}"#,
                ),
            ],
            "test_tool_with_logging" => {
                for (i, step) in ["started", "processing data", "completed"]
                    .iter()
                    .enumerate()
                {
                    if i > 0 {
                        tokio::time::sleep(STEP).await;
                    }
                    let data = format!("Tool execution {step}");
                    if logs {
                        self.peer.notify(
                            "notifications/message",
                            json!({"level": "info", "data": data}),
                        );
                    }
                }
                vec![text("Tool with logging executed successfully")]
            }
            "test_tool_with_progress" => {
                let token = params["_meta"]["progressToken"].clone();
                for progress in [0, 50, 100] {
                    if progress > 0 {
                        tokio::time::sleep(STEP).await;
                    }
                    // Without a token the client asked for no progress (the spec's rule).
                    if !token.is_null() {
                        self.peer.notify(
                            "notifications/progress",
                            json!({"progressToken": token, "progress": progress, "total": 100,
                                "message": format!("Completed step {progress} of 100")}),
                        );
                    }
                }
                vec![text(&token.to_string())]
            }
            "test_error_handling" => {
                let message = "This tool intentionally returns an error for testing";
                return Ok(json!({"content": [text(message)], "isError": true}));
            }
            // The reference server closes the call's SSE stream here; a stdio server has no
            // stream to close (the gateway owns it), so this only answers a little later.
            "test_reconnection" => {
                tokio::time::sleep(Duration::from_millis(100)).await;
                vec![text("Reconnection test completed successfully.")]
            }
            "json_schema_2020_12_tool" => vec![text(&format!(
                "JSON Schema 2020-12 tool called with: {args}"
            ))],
            _ => {
                return match scenarios_2026::call(&self.peer, name, params, logs).await {
                    Some(result) => result,
                    None => Err((-32602, format!("Unknown tool: {name}"))),
                };
            }
        };
        Ok(json!({ "content": content }))
    }
}

fn initialize(params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or_default();
    let version = VERSIONS
        .iter()
        .find(|&&v| v == asked)
        .unwrap_or(&VERSIONS[3]);
    json!({
        "protocolVersion": version,
        "capabilities": {"logging": {}, "completions": {}, "tools": {"listChanged": true},
            "prompts": {"listChanged": true}, "resources": {"subscribe": true, "listChanged": true}},
        "serverInfo": {"name": "wasmgate-conformance-fixture", "version": env!("CARGO_PKG_VERSION")},
    })
}

fn text(text: &str) -> Value {
    json!({"type": "text", "text": text})
}

fn embedded(uri: &str, mime: &str, body: &str) -> Value {
    json!({"type": "resource", "resource": {"uri": uri, "mimeType": mime, "text": body}})
}

/// The tools, each with an object schema over `props` (names of string arguments, all
/// required), except the SEP-1613 tool whose 2020-12 schema must reach clients untouched.
#[rustfmt::skip] // one tool a line reads as a table
fn tools() -> Vec<Value> {
    let listed = [
        ("test_simple_text", "Tests simple text content response", &[][..]),
        ("test_image_content", "Tests image content response", &[]),
        ("test_audio_content", "Tests audio content response", &[]),
        ("test_embedded_resource", "Tests embedded resource content response", &[]),
        ("test_multiple_content_types", "Tests response with text, image and resource", &[]),
        ("test_tool_with_logging", "Tests a tool that emits log messages", &[]),
        ("test_tool_with_progress", "Tests a tool that reports progress", &[]),
        ("test_error_handling", "Tests error response handling", &[]),
        ("test_reconnection", "Tests SSE stream reconnection (SEP-1699)", &[]),
        ("test_sampling", "Tests server-initiated sampling", &["prompt"]),
        ("test_elicitation", "Tests server-initiated elicitation", &["message"]),
        ("test_elicitation_sep1034_defaults", "Tests elicitation defaults (SEP-1034)", &[]),
        ("test_elicitation_sep1330_enums", "Tests elicitation enums (SEP-1330)", &[]),
    ];
    let mut tools: Vec<Value> = listed.iter().map(|(name, description, props)| {
        let properties: serde_json::Map<String, Value> =
            props.iter().map(|p| (p.to_string(), json!({"type": "string"}))).collect();
        json!({"name": name, "description": description, "inputSchema":
            {"type": "object", "properties": properties, "required": props}})
    }).collect();
    let schema: Value = serde_json::from_str(SEP1613_SCHEMA).expect("the schema is JSON");
    tools.push(json!({"name": "json_schema_2020_12_tool", "inputSchema": schema,
        "description": "Tool with JSON Schema 2020-12 features (SEP-1613)"}));
    tools
}

fn resources() -> Vec<Value> {
    [
        ("test://static-text", "static-text", "text/plain", "A static text resource"),
        ("test://static-binary", "static-binary", "image/png", "A static binary resource"),
        ("test://watched-resource", "watched-resource", "text/plain", "A resource to subscribe to"),
    ]
    .iter()
    .map(|(uri, name, mime, description)| {
        json!({"uri": uri, "name": name, "mimeType": mime, "description": description})
    })
    .collect()
}

fn read(uri: &str) -> Result<Value, Failure> {
    let content = match uri {
        "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
            "text": "This is the content of the static text resource."}),
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
        "test://watched-resource" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content"})
        }
        _ => {
            let id = uri
                .strip_prefix("test://template/")
                .and_then(|r| r.strip_suffix("/data"));
            let Some(id) = id.filter(|id| !id.is_empty() && !id.contains('/')) else {
                return Err((-32002, format!("Resource not found: {uri}")));
            };
            let body =
                json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            json!({"uri": uri, "mimeType": "application/json", "text": body.to_string()})
        }
    };
    Ok(json!({ "contents": [content] }))
}

fn prompts() -> Vec<Value> {
    let argument = |name: &str, description: &str| json!({"name": name, "description": description, "required": true});
    vec![
        json!({"name": "test_simple_prompt", "title": "Simple Test Prompt",
            "description": "A simple prompt without arguments"}),
        json!({"name": "test_prompt_with_arguments", "title": "Prompt With Arguments",
            "description": "A prompt with required arguments", "arguments":
            [argument("arg1", "First test argument"), argument("arg2", "Second test argument")]}),
        json!({"name": "test_prompt_with_embedded_resource", "title": "Prompt With Embedded Resource",
            "description": "A prompt that includes an embedded resource",
            "arguments": [argument("resourceUri", "URI of the resource to embed")]}),
        json!({"name": "test_prompt_with_image", "title": "Prompt With Image",
            "description": "A prompt that includes image content"}),
    ]
}

fn prompt(params: &Value) -> Result<Value, Failure> {
    let args = &params["arguments"];
    let arg = |key: &str| args[key].as_str().unwrap_or_default().to_owned();
    let user = |content: Value| json!({"role": "user", "content": content});
    let messages = match params["name"].as_str().unwrap_or_default() {
        "test_simple_prompt" => vec![user(text("This is a simple prompt for testing."))],
        "test_prompt_with_arguments" => vec![user(text(&format!(
            "Prompt with arguments: arg1='{}', arg2='{}'",
            arg("arg1"),
            arg("arg2")
        )))],
        "test_prompt_with_embedded_resource" => vec![
            user(embedded(
                &arg("resourceUri"),
                "text/plain",
                "Embedded resource content for testing.",
            )),
            user(text("Please process the embedded resource above.")),
        ],
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
            user(text("Please analyze the image above.")),
        ],
        other => return Err((-32602, format!("Unknown prompt: {other}"))),
    };
    Ok(json!({ "messages": messages }))
}

/// Completions for the prompt arguments and the template's `id`, by prefix.
fn complete(params: &Value) -> Value {
    let candidates: &[&str] = match params["argument"]["name"].as_str() {
        Some("arg1" | "arg2") => &["paris", "park", "party"],
        Some("id") => &["1", "2", "123"],
        _ => &[],
    };
    let prefix = params["argument"]["value"].as_str().unwrap_or_default();
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|v| v.starts_with(prefix))
        .collect();
    json!({"completion": {"values": values, "total": values.len(), "hasMore": false}})
}
