//! The diagnostic tools and prompt of the suite's 2026-07-28 scenarios (its reference
//! server, `everything-server.ts`), and the 2025-11-25 form of every tool that asks the
//! client: where the reference answers `input_required` and reads `inputResponses` on the
//! retry, these ask the client mid-call (`elicitation/create`, `sampling/createMessage`,
//! `roots/list`) the questions of plans.rs and end with the same result. A gateway that
//! translates between eras is tested against them when the fixture speaks 2025-11-25
//! only (its default).

use std::sync::atomic::{AtomicBool, Ordering};

use futures_util::future::join_all;
use serde_json::{Value, json};

use crate::peer::{Failure, Peer};
use crate::plans::{self, Answers, Ask, PROMPT, Plan};

/// Where a request's `_meta` names its `inputRequests` key (wasmgate's convention).
const INPUT_KEY: &str = "dev.wasmgate/inputKey";

/// Whether the tool and the prompt that the trigger tools add are listed now: each
/// trigger toggles its own, so that the list it announces as changed has changed.
static DYNAMIC_TOOL: AtomicBool = AtomicBool::new(false);
static DYNAMIC_PROMPT: AtomicBool = AtomicBool::new(false);

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
    run(peer, plans::prompt()).await
}

/// `tools/call` of a tool that asks the client (the 2025 scenarios' sampling and
/// elicitation tools too) or of one of [`tools`]; `None` for another name. Log messages
/// go out only when `logs`.
pub async fn call(
    peer: &Peer,
    name: &str,
    params: &Value,
    logs: bool,
) -> Option<Result<Value, Failure>> {
    let declared = |capability: &str| peer.declared(capability);
    if let Some(plan) = plans::tool(name, &params["arguments"], &declared) {
        if name == "test_streaming_elicitation" {
            streaming_progress(peer, params);
        }
        return Some(Ok(run(peer, plan).await));
    }
    let text = match name {
        "test_logging_tool" => {
            if logs {
                let message =
                    json!({"level": "info", "data": "Diagnostic trace logging activated"});
                peer.notify("notifications/message", message);
            }
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
            peer.list_changed(list);
            "Mutation triggered".to_owned()
        }
        _ => return None,
    };
    Some(Ok(json!({"content": [{"type": "text", "text": text}]})))
}

/// `test_streaming_elicitation` reports progress before it asks (when given a token).
pub fn streaming_progress(peer: &Peer, params: &Value) {
    let token = &params["_meta"]["progressToken"];
    if !token.is_null() {
        let progress = json!({"progressToken": token, "progress": 50, "total": 100});
        peer.notify("notifications/progress", progress);
    }
}

/// Runs `plan` the 2025 way: each round's questions sent to the client at once, inside
/// the call (so a translating gateway sees them together, as one `input_required`).
async fn run(peer: &Peer, plan: Plan) -> Value {
    let mut answers = Answers::new();
    for round in plan.rounds {
        let asked = join_all(round.into_iter().map(|ask| async move {
            let key = ask.key;
            (key, ask_client(peer, ask).await)
        }))
        .await;
        answers.extend(
            asked
                .into_iter()
                .filter_map(|(k, a)| Some((k.to_owned(), a?))),
        );
    }
    (plan.finish)(&answers)
}

/// Sends `ask` to the client if it declared the capability at `initialize`; its answer,
/// or `None` (undeclared, or an error). The key goes in `_meta`: a gateway that turns the
/// request into an `input_required` result names it so.
async fn ask_client(peer: &Peer, ask: Ask) -> Option<Value> {
    if !peer.declared(ask.capability) {
        return None;
    }
    let mut params = ask.params;
    params["_meta"] = json!({ INPUT_KEY: ask.key });
    peer.ask(ask.method, params).await.ok()
}
