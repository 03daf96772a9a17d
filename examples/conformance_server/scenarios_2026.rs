//! The diagnostic tools and prompt of the suite's 2026-07-28 scenarios (its reference
//! server, `everything-server.ts`), in their 2025-11-25 form: where the reference answers
//! `input_required` and reads `inputResponses` on the retry, these ask the client mid-call
//! (`elicitation/create`, `sampling/createMessage`, `roots/list`) and end with the same
//! final text. A gateway that translates between eras is tested against them: the fixture
//! itself speaks 2025-11-25 only.

use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::{Value, json};

use crate::peer::{Failure, Peer};

/// Where a request's `_meta` names its `inputRequests` key (wasmgate's convention).
const INPUT_KEY: &str = "dev.wasmgate/inputKey";

/// Whether the tool and the prompt that the trigger tools add are listed now: each
/// trigger toggles its own, so that the list it announces as changed has changed.
static DYNAMIC_TOOL: AtomicBool = AtomicBool::new(false);
static DYNAMIC_PROMPT: AtomicBool = AtomicBool::new(false);

/// The MRTR prompt (`input-required-result-non-tool-request`).
pub const PROMPT: &str = "test_input_required_result_prompt";

/// The tools, as `tools/list` shows them: none takes arguments.
#[rustfmt::skip] // one tool a line reads as a table
pub fn tools() -> Vec<Value> {
    [
        ("test_missing_capability", "Test tool requiring sampling"),
        ("test_input_required_result_elicitation", "MRTR: asks the client's name (elicitation)"),
        ("test_input_required_result_sampling", "MRTR: asks the client's model (sampling)"),
        ("test_input_required_result_list_roots", "MRTR: asks the client's roots"),
        ("test_input_required_result_request_state", "MRTR: asks for a confirmation"),
        ("test_input_required_result_multiple_inputs", "MRTR: elicit, sample, list roots at once"),
        ("test_input_required_result_multi_round", "MRTR: two elicitations, one after the other"),
        ("test_input_required_result_tampered_state", "MRTR: asks to confirm (state integrity)"),
        ("test_input_required_result_capabilities", "MRTR: asks only what the client declared"),
        ("test_streaming_elicitation", "Reports progress, then elicits, within one call"),
        ("test_logging_tool", "Sends a log message during the call"),
        ("test_trigger_tool_change", "Adds or removes test_dynamic_tool, then says so"),
        ("test_trigger_prompt_change", "Adds or removes test_dynamic_prompt, then says so"),
    ]
    .iter()
    .chain(DYNAMIC_TOOL.load(Ordering::Relaxed)
        .then_some(&("test_dynamic_tool", "Listed while test_trigger_tool_change added it")))
    .map(|(name, description)| json!({"name": name, "description": description,
        "inputSchema": {"type": "object", "properties": {}}}))
    .chain([header_tool()])
    .collect()
}

/// A tool whose arguments a 2026 client mirrors in `Mcp-Param-*` headers (SEP-2243, the
/// suite's `http-custom-header-server-validation`); it echoes them.
fn header_tool() -> Value {
    json!({"name": "test_header_params", "description": "Echoes its header-mirrored arguments",
        "inputSchema": {"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "verbose": {"type": "boolean", "x-mcp-header": "Verbose"},
            "query": {"type": "string"}},
        "required": ["region"]}})
}

/// [`PROMPT`] as `prompts/list` shows it, and the prompt `test_trigger_prompt_change` adds.
pub fn prompts_listed() -> Vec<Value> {
    let mut prompts = vec![
        json!({"name": PROMPT, "description": "MRTR: prompt that requires elicitation input"}),
    ];
    if DYNAMIC_PROMPT.load(Ordering::Relaxed) {
        prompts.push(json!({"name": "test_dynamic_prompt",
            "description": "Listed while test_trigger_prompt_change added it"}));
    }
    prompts
}

/// `prompts/get` of [`PROMPT`]: the context it elicits, in the prompt's one message.
pub async fn prompt(peer: &Peer) -> Value {
    let asked = elicit(
        peer,
        "user_context",
        "What context should the prompt use?",
        "context",
    )
    .await;
    let context = field(&asked, "context");
    let message = json!({"type": "text", "text": format!("Prompt with context: {context}")});
    json!({"messages": [{"role": "user", "content": message}]})
}

/// `tools/call` of one of [`tools`]; `None` for another name.
pub async fn call(peer: &Peer, name: &str, params: &Value) -> Option<Result<Value, Failure>> {
    let text = match name {
        "test_missing_capability" => {
            match sample(peer, "sample", "Test tool requiring sampling", 10).await {
                Ok(_) => "Success".to_owned(),
                Err(error) => return Some(Ok(failed(&error))),
            }
        }
        "test_input_required_result_elicitation" => {
            let asked = elicit(peer, "user_name", "What is your name?", "name").await;
            format!("Hello, {}!", field(&asked, "name"))
        }
        "test_input_required_result_sampling" => {
            let asked = sample(
                peer,
                "capital_question",
                "What is the capital of France?",
                100,
            )
            .await;
            let text = sampled(&asked).unwrap_or("no response");
            format!("Sampling result: {text}")
        }
        "test_input_required_result_list_roots" => {
            format!("Found {} root(s)", roots(peer, "client_roots").await)
        }
        "test_input_required_result_request_state" => match confirm(peer).await {
            true => "state-ok: requestState validated".to_owned(),
            false => return Some(Ok(failed("the client did not confirm"))),
        },
        "test_input_required_result_multiple_inputs" => {
            // All three at once: the 2025 analogue of one result with three inputRequests.
            let (name, greeting, roots) = tokio::join!(
                elicit(peer, "user_name", "What is your name?", "name"),
                sample(peer, "greeting", "Generate a greeting", 50),
                roots(peer, "client_roots"),
            );
            let greeting = sampled(&greeting).unwrap_or("Hello there!");
            let name = field(&name, "name");
            format!("Name: {name}; Greeting: {greeting}; Roots: {roots}")
        }
        "test_input_required_result_multi_round" => {
            let name = elicit(peer, "user_name", "Step 1: What is your name?", "name").await;
            let color = elicit(
                peer,
                "favorite_color",
                "Step 2: What is your favorite color?",
                "color",
            )
            .await;
            let (name, color) = (field(&name, "name"), field(&color, "color"));
            format!("Multi-round complete for {name} who likes {color}")
        }
        // The 2026 form signs its requestState; here the gateway's handle is what a tamper
        // must break, so the tool itself only asks.
        "test_input_required_result_tampered_state" => match confirm(peer).await {
            true => "integrity-ok: state verified".to_owned(),
            false => return Some(Ok(failed("the client did not confirm"))),
        },
        "test_input_required_result_capabilities" => capabilities(peer).await,
        "test_streaming_elicitation" => {
            let token = &params["_meta"]["progressToken"];
            if !token.is_null() {
                let progress = json!({"progressToken": token, "progress": 50, "total": 100});
                peer.notify("notifications/progress", progress);
            }
            // A 2026 client must get this as input_required, never as a request on the
            // call's stream.
            let _ = elicit(peer, "continue", "Continue streaming?", "continue").await;
            "Streaming complete".to_owned()
        }
        "test_logging_tool" => {
            // Sent whatever the request's log level: the gateway drops it for a 2026
            // request that set none.
            let message = json!({"level": "info", "data": "Diagnostic trace logging activated"});
            peer.notify("notifications/message", message);
            "Logging evaluated".to_owned()
        }
        "test_header_params" => {
            let arguments = &params["arguments"];
            let shown = ["region", "priority", "verbose"].map(|k| format!("{k}={}", arguments[k]));
            shown.join(" ")
        }
        "test_trigger_tool_change" | "test_trigger_prompt_change" => {
            let (list, dynamic) = if name == "test_trigger_tool_change" {
                ("tools", &DYNAMIC_TOOL)
            } else {
                ("prompts", &DYNAMIC_PROMPT)
            };
            // Added, or removed again: either way the list changed before it is announced.
            dynamic.fetch_xor(true, Ordering::Relaxed);
            peer.notify(&format!("notifications/{list}/list_changed"), json!({}));
            "Mutation triggered".to_owned()
        }
        _ => return None,
    };
    Some(Ok(json!({"content": [{"type": "text", "text": text}]})))
}

/// Sampling first, then elicitation, each only if the client declared it; the keys the
/// reference uses for what was answered.
async fn capabilities(peer: &Peer) -> String {
    let mut received = Vec::new();
    if peer.declared("sampling")
        && sample(peer, "sample_input", "Sample request", 50)
            .await
            .is_ok()
    {
        received.push("sample_input");
    }
    if peer.declared("elicitation") {
        let asked = elicit(peer, "elicit_input", "Elicitation input", "value").await;
        if asked.is_ok() {
            received.push("elicit_input");
        }
    }
    match received.is_empty() {
        true => "No supported capabilities declared".to_owned(),
        false => format!("capabilities-ok: received {}", received.join(",")),
    }
}

/// A tool result with `isError`: what went wrong asking the client.
fn failed(why: &str) -> Value {
    json!({"content": [{"type": "text", "text": why}], "isError": true})
}

/// Asks the client, if it declared `capability` at `initialize`; the error says why not.
/// `key` names the request as the reference's `inputRequests` key does: a gateway that
/// turns the request into an `input_required` result uses it (`_meta`).
async fn ask(
    peer: &Peer,
    capability: &str,
    key: &str,
    method: &str,
    mut params: Value,
) -> Result<Value, String> {
    if !peer.declared(capability) {
        return Err(format!("the client did not declare {capability}"));
    }
    params["_meta"] = json!({ INPUT_KEY: key });
    peer.ask(method, params)
        .await
        .map_err(|error| format!("{method} failed: {}", error["message"]))
}

/// Elicits one string `property`.
async fn elicit(peer: &Peer, key: &str, message: &str, property: &str) -> Result<Value, String> {
    let schema = json!({"type": "object", "properties": {property: {"type": "string"}},
        "required": [property]});
    let params = json!({"message": message, "requestedSchema": schema});
    ask(peer, "elicitation", key, "elicitation/create", params).await
}

/// Elicits a boolean `ok`; whether the client accepted with `ok: true`.
async fn confirm(peer: &Peer) -> bool {
    let schema = json!({"type": "object", "properties": {"ok": {"type": "boolean"}},
        "required": ["ok"]});
    let params = json!({"message": "Please confirm", "requestedSchema": schema});
    let answer = ask(
        peer,
        "elicitation",
        "confirmation",
        "elicitation/create",
        params,
    )
    .await;
    answer.is_ok_and(|r| r["action"] == "accept" && r["content"]["ok"] == true)
}

/// Samples one user message.
async fn sample(peer: &Peer, key: &str, text: &str, max_tokens: u32) -> Result<Value, String> {
    let message = json!({"role": "user", "content": {"type": "text", "text": text}});
    let params = json!({"messages": [message], "maxTokens": max_tokens});
    ask(peer, "sampling", key, "sampling/createMessage", params).await
}

/// How many roots the client lists (none when it cannot).
async fn roots(peer: &Peer, key: &str) -> usize {
    let listed = ask(peer, "roots", key, "roots/list", json!({})).await;
    listed.map_or(0, |r| r["roots"].as_array().map_or(0, Vec::len))
}

/// The text a sampling answered, if it did.
fn sampled(asked: &Result<Value, String>) -> Option<&str> {
    asked.as_ref().ok()?["content"]["text"].as_str()
}

/// The elicited `key`, as the reference reads it: "unknown" unless it is a string.
fn field(asked: &Result<Value, String>, key: &str) -> String {
    let value = asked.as_ref().ok().and_then(|r| r["content"][key].as_str());
    value.unwrap_or("unknown").to_owned()
}
