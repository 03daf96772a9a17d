//! What each tool and prompt that needs the client asks of it, round by round, and the
//! result it ends with: one definition that every form runs. The conformance fixture
//! (examples/conformance_server/, which includes this file) has two: its 2025-11-25 form
//! (scenarios_2026.rs) sends each round's questions as requests mid-call; its 2026-07-28
//! form (native.rs) answers `input_required` with them and reads `inputResponses` on the
//! retry. The 0.2 plugin `conformance2` asks them through its `client` import (asks.rs).
//! Keys, questions and final texts are those of the suite's reference server.

use serde_json::{Map, Value, json};

/// One question to the client, under the key its answer comes back by.
pub struct Ask {
    pub key: &'static str,
    /// The client capability the question needs (`sampling`, `elicitation`, `roots`).
    pub capability: &'static str,
    pub method: &'static str,
    pub params: Value,
}

/// The client's answers so far, by key; a question the client could not answer is absent.
pub type Answers = Map<String, Value>;

/// A tool's (or prompt's) questions and how its result is made of the answers.
pub struct Plan {
    /// Asked one round after the other; the questions of one round all at once.
    pub rounds: Vec<Vec<Ask>>,
    /// The whole result (a tool's or a prompt's), from every round's answers.
    pub finish: fn(&Answers) -> Value,
}

/// The MRTR prompt (`input-required-result-non-tool-request`).
pub const PROMPT: &str = "test_input_required_result_prompt";

/// The plan of tool `name` called with `args`, for a client that declared what
/// `declared` says; `None` for a tool that asks nothing.
pub fn tool(name: &str, args: &Value, declared: &dyn Fn(&str) -> bool) -> Option<Plan> {
    let one = |ask: Ask, finish: fn(&Answers) -> Value| Plan {
        rounds: vec![vec![ask]],
        finish,
    };
    Some(match name {
        "test_sampling" => {
            let prompt = args["prompt"].as_str().unwrap_or_default();
            one(sample("sample", prompt, 100), |a| {
                let text = sampled(a, "sample").unwrap_or("No response");
                tool_text(&format!("LLM response: {text}"))
            })
        }
        "test_elicitation" => {
            let message = args["message"].as_str().unwrap_or_default();
            let schema = json!({"type": "object", "required": ["response"], "properties": {
                "response": {"type": "string", "description": "User's response"}}});
            one(elicit_schema("elicit", message, schema), elicited)
        }
        "test_elicitation_sep1034_defaults" => {
            let message = "Please review and update the form fields with defaults";
            one(elicit_schema("elicit", message, sep1034_schema()), elicited)
        }
        "test_elicitation_sep1330_enums" => {
            let message = "Please select options from the enum fields";
            one(elicit_schema("elicit", message, sep1330_schema()), elicited)
        }
        "test_missing_capability" => one(
            sample("sample", "Test tool requiring sampling", 10),
            |a| match a.contains_key("sample") {
                true => tool_text("Success"),
                false => failed("sampling was not answered"),
            },
        ),
        "test_input_required_result_elicitation" => {
            one(elicit("user_name", "What is your name?", "name"), |a| {
                tool_text(&format!("Hello, {}!", field(a, "user_name", "name")))
            })
        }
        "test_input_required_result_sampling" => one(
            sample("capital_question", "What is the capital of France?", 100),
            |a| {
                let text = sampled(a, "capital_question").unwrap_or("no response");
                tool_text(&format!("Sampling result: {text}"))
            },
        ),
        "test_input_required_result_list_roots" => one(roots("client_roots"), |a| {
            tool_text(&format!("Found {} root(s)", root_count(a, "client_roots")))
        }),
        "test_input_required_result_request_state" => one(confirm(), |a| match confirmed(a) {
            true => tool_text("state-ok: requestState validated"),
            false => failed("the client did not confirm"),
        }),
        "test_input_required_result_tampered_state" => one(confirm(), |a| match confirmed(a) {
            true => tool_text("integrity-ok: state verified"),
            false => failed("the client did not confirm"),
        }),
        "test_input_required_result_multiple_inputs" => Plan {
            rounds: vec![vec![
                elicit("user_name", "What is your name?", "name"),
                sample("greeting", "Generate a greeting", 50),
                roots("client_roots"),
            ]],
            finish: |a| {
                let greeting = sampled(a, "greeting").unwrap_or("Hello there!");
                let name = field(a, "user_name", "name");
                let roots = root_count(a, "client_roots");
                tool_text(&format!(
                    "Name: {name}; Greeting: {greeting}; Roots: {roots}"
                ))
            },
        },
        "test_input_required_result_multi_round" => Plan {
            rounds: vec![
                vec![elicit("step1", "Step 1: What is your name?", "name")],
                vec![elicit(
                    "step2",
                    "Step 2: What is your favorite color?",
                    "color",
                )],
            ],
            finish: |a| {
                let (name, color) = (field(a, "step1", "name"), field(a, "step2", "color"));
                tool_text(&format!(
                    "Multi-round complete for {name} who likes {color}"
                ))
            },
        },
        // Only what the client declared is asked (`input-required-result-capability-check`).
        "test_input_required_result_capabilities" => {
            let mut asks = Vec::new();
            if declared("sampling") {
                asks.push(sample("sample_input", "Sample request", 50));
            }
            if declared("elicitation") {
                asks.push(elicit("elicit_input", "Elicitation input", "value"));
            }
            Plan {
                rounds: if asks.is_empty() { vec![] } else { vec![asks] },
                finish: |a| {
                    let received: Vec<&str> = ["sample_input", "elicit_input"]
                        .into_iter()
                        .filter(|k| a.contains_key(*k))
                        .collect();
                    tool_text(&match received.is_empty() {
                        true => "No supported capabilities declared".to_owned(),
                        false => format!("capabilities-ok: received {}", received.join(",")),
                    })
                },
            }
        }
        "test_streaming_elicitation" => one(
            elicit("continue", "Continue streaming?", "continue"),
            |_| tool_text("Streaming complete"),
        ),
        _ => return None,
    })
}

/// The plan of `prompts/get` of [`PROMPT`]: the context it elicits, in its one message.
pub fn prompt() -> Plan {
    Plan {
        rounds: vec![vec![elicit(
            "user_context",
            "What context should the prompt use?",
            "context",
        )]],
        finish: |a| {
            let text = format!(
                "Prompt with context: {}",
                field(a, "user_context", "context")
            );
            json!({"messages": [{"role": "user", "content": {"type": "text", "text": text}}]})
        },
    }
}

fn tool_text(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// A tool result with `isError`: what went wrong asking the client.
fn failed(why: &str) -> Value {
    json!({"content": [{"type": "text", "text": why}], "isError": true})
}

/// Elicits one string `property`.
fn elicit(key: &'static str, message: &str, property: &str) -> Ask {
    let schema = json!({"type": "object", "properties": {property: {"type": "string"}},
        "required": [property]});
    elicit_schema(key, message, schema)
}

fn elicit_schema(key: &'static str, message: &str, schema: Value) -> Ask {
    Ask {
        key,
        capability: "elicitation",
        method: "elicitation/create",
        params: json!({"message": message, "requestedSchema": schema}),
    }
}

/// Asks for a boolean `ok` (the reference's `confirm`).
fn confirm() -> Ask {
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"]});
    elicit_schema("confirm", "Please confirm", schema)
}

/// Samples one user message.
fn sample(key: &'static str, text: &str, max_tokens: u32) -> Ask {
    let message = json!({"role": "user", "content": {"type": "text", "text": text}});
    Ask {
        key,
        capability: "sampling",
        method: "sampling/createMessage",
        params: json!({"messages": [message], "maxTokens": max_tokens}),
    }
}

fn roots(key: &'static str) -> Ask {
    Ask {
        key,
        capability: "roots",
        method: "roots/list",
        params: json!({}),
    }
}

/// An elicitation's answer, as the 2025 scenarios' reference writes it.
fn elicited(a: &Answers) -> Value {
    tool_text(&match a.get("elicit") {
        Some(answer) => format!(
            "Elicitation completed: action={}, content={}",
            answer["action"].as_str().unwrap_or_default(),
            answer.get("content").unwrap_or(&json!({}))
        ),
        None => "Elicitation not supported or error: not answered".to_owned(),
    })
}

/// The text a sampling answered, if it did.
fn sampled<'a>(a: &'a Answers, key: &str) -> Option<&'a str> {
    a.get(key)?["content"]["text"].as_str()
}

/// How many roots the client listed (none when it did not answer).
fn root_count(a: &Answers, key: &str) -> usize {
    a.get(key)
        .and_then(|r| r["roots"].as_array())
        .map_or(0, Vec::len)
}

/// Whether the client accepted the confirmation with `ok: true`.
fn confirmed(a: &Answers) -> bool {
    a.get("confirm")
        .is_some_and(|r| r["action"] == "accept" && r["content"]["ok"] == true)
}

/// The elicited `property` of `key`, as the reference reads it: "unknown" unless a string.
fn field(a: &Answers, key: &str, property: &str) -> String {
    let value = a.get(key).and_then(|r| r["content"][property].as_str());
    value.unwrap_or("unknown").to_owned()
}

fn sep1034_schema() -> Value {
    json!({"type": "object", "required": [], "properties": {
        "name": {"type": "string", "description": "User name", "default": "John Doe"},
        "age": {"type": "integer", "description": "User age", "default": 30},
        "score": {"type": "number", "description": "User score", "default": 95.5},
        "status": {"type": "string", "description": "User status",
            "enum": ["active", "inactive", "pending"], "default": "active"},
        "verified": {"type": "boolean", "description": "Verification status", "default": true},
    }})
}

/// SEP-1330's five enum shapes: untitled and titled single-select, legacy `enumNames`,
/// untitled and titled multi-select.
fn sep1330_schema() -> Value {
    let titled = |label: &str| -> Vec<Value> {
        (1..=3)
            .map(|i| json!({"const": format!("value{i}"), "title": format!("{} {label}", ["First", "Second", "Third"][i - 1])}))
            .collect()
    };
    let options = json!(["option1", "option2", "option3"]);
    json!({"type": "object", "required": [], "properties": {
        "untitledSingle": {"type": "string", "description": "Select one option", "enum": options},
        "titledSingle": {"type": "string", "description": "Select one option with titles",
            "oneOf": titled("Option")},
        "legacyEnum": {"type": "string", "description": "Select one option (legacy)",
            "enum": ["opt1", "opt2", "opt3"],
            "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array", "description": "Select multiple options",
            "minItems": 1, "maxItems": 3, "items": {"type": "string", "enum": options}},
        "titledMulti": {"type": "array", "description": "Select multiple options with titles",
            "minItems": 1, "maxItems": 3, "items": {"anyOf": titled("Choice")}},
    }})
}
