//! `faulty`: the misbehaving test fixture. Each tool breaks one limit the
//! host must enforce, and `ok` shows the plugin still answers afterwards
//! (every call runs in a fresh instance, so a trap leaves nothing behind).
//!
//! With config `spin_in_list_tools = "true"`, `list-tools` itself never
//! returns; with `string_schema = "true"`, `ok` takes a string, not an object;
//! with `endless_schema = "true"`, `ok`'s schema applies itself to the same value
//! without end (a validator would recurse until memory runs out): the host must
//! refuse to load each of these versions, as one with `extra_tools = "1000"` (1,000
//! more tools than its own).

use plugin_kit::{
    CallError, CallResult, Content, Guest, ToolInfo, ToolInfoExt, ToolOutput, host, structured,
    text, tool, unknown_tool,
};
use serde_json::json;
use std::hint::black_box;

struct Faulty;

impl Guest for Faulty {
    fn list_tools() -> Vec<ToolInfo> {
        if host::config("spin_in_list_tools").as_deref() == Some("true") {
            spin();
        }
        let none = json!({});
        let mut tools = vec![
            tool(
                "spin",
                "Loops forever: stopped only by the host's timeout (epochs or fuel).",
                none.clone(),
                &[],
            ),
            tool(
                "hog",
                "Allocates 1 MiB blocks forever, writing each: stopped by the memory limit.",
                none.clone(),
                &[],
            ),
            tool(
                "trap",
                "Panics, which is a wasm trap (`unreachable`) after the panic message \
                 goes to stderr.",
                none.clone(),
                &[],
            ),
            tool(
                "recurse",
                "Recurses without end: the stack runs off the start of linear memory, a \
                 trap (`out of bounds memory access`).",
                none.clone(),
                &[],
            ),
            tool(
                "handles",
                "Opens host resources (clock pollables) forever and keeps every handle: \
                 each costs the host memory, not the plugin's.",
                none.clone(),
                &[],
            ),
            tool(
                "random",
                "Asks the host for `len` random bytes (default: 1 GiB) at once.",
                json!({"len": {"type": "integer", "minimum": 0}}),
                &[],
            ),
            tool(
                "many_items",
                "Returns `items` empty text items.",
                json!({"items": {"type": "integer", "minimum": 0}}),
                &["items"],
            ),
            tool(
                "fail_long",
                "Fails with a message of `bytes` bytes.",
                json!({"bytes": {"type": "integer", "minimum": 0}}),
                &["bytes"],
            ),
            tool(
                "backtrack",
                "Takes a `q` that a backtracking pattern checks: each of 31 `anyOf` \
                 branches gives up on ordinary text only after many steps.",
                json!({"q": {"anyOf": backtracking_branches()}}),
                &["q"],
            ),
            tool(
                "slow_output",
                "Returns `n` strings that each of 31 backtracking patterns of its output \
                 schema gives up on only after many steps.",
                json!({"n": {"type": "integer", "minimum": 0}}),
                &["n"],
            )
            .output_schema(json!({
                "type": "object",
                "properties": {"s": {"type": "array", "items": {"anyOf": backtracking_branches()}}},
            })),
            tool(
                "linear_output",
                "Returns `len` bytes of `ab` in `t`, which a linear-time pattern of its output \
                 schema (1,009 NFA states, no match) checks slowly: its DFA gives up. The same \
                 pattern checks the argument `t`, which is ignored.",
                json!({
                    "len": {"type": "integer", "minimum": 0},
                    "t": {"type": "string", "pattern": "[ab]*a[ab]{1000}c"},
                }),
                &["len"],
            )
            .output_schema(json!({
                "type": "object",
                "properties": {"t": {"type": "string", "pattern": "[ab]*a[ab]{1000}c"}},
            })),
            tool(
                "control_text",
                "Returns a text of `chars` control characters (U+0001), which JSON writes \
                 six bytes each.",
                json!({"chars": {"type": "integer", "minimum": 0}}),
                &["chars"],
            ),
            tool(
                "numbers",
                "Returns `{\"a\": [0, 0, ...]}`, `n` zeros, as structured output (no output \
                 schema) beside a text item \"numbers\".",
                json!({"n": {"type": "integer", "minimum": 0}}),
                &["n"],
            ),
            tool(
                "checked_numbers",
                "As `numbers`, with an output schema that checks only that it is an object.",
                json!({"n": {"type": "integer", "minimum": 0}}),
                &["n"],
            )
            .output_schema(json!({"type": "object"})),
            tool(
                "off_schema",
                "Returns structured output that breaks its own output schema.",
                none.clone(),
                &[],
            )
            .output_schema(json!({
                "type": "object",
                "properties": {"len": {"type": "integer"}},
                "required": ["len"],
            })),
            ok(none.clone()),
        ];
        let extra: usize = host::config("extra_tools").map_or(0, |n| n.parse().unwrap_or(0));
        let description = match host::config("description_bytes") {
            Some(n) => "d".repeat(n.parse().unwrap_or(0)),
            None => "Does nothing.".into(),
        };
        tools.extend(
            (0..extra).map(|i| tool(&format!("extra_{i}"), &description, none.clone(), &[])),
        );
        tools
    }

    fn call_tool(name: String, arguments: String) -> CallResult {
        match name.as_str() {
            "spin" => spin(),
            "hog" => hog(),
            "handles" => handles(),
            "many_items" => {
                let items = number(&arguments, "items").unwrap_or(0) as usize;
                Ok(ToolOutput {
                    content: vec![Content::Text(String::new()); items],
                    structured: None,
                    is_error: false,
                })
            }
            "fail_long" => Err(CallError::Failed(
                "f".repeat(number(&arguments, "bytes").unwrap_or(0) as usize),
            )),
            "backtrack" => Ok(text("checked")),
            "slow_output" => {
                let strings = vec![
                    "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!";
                    number(&arguments, "n").unwrap_or(0) as usize
                ];
                structured(&json!({ "s": strings }))
            }
            "linear_output" => {
                let len = number(&arguments, "len").unwrap_or(0) as usize;
                structured(&json!({ "t": "ab".repeat(len / 2) }))
            }
            "control_text" => {
                let chars = number(&arguments, "chars").unwrap_or(0) as usize;
                Ok(text("\u{1}".repeat(chars)))
            }
            "numbers" | "checked_numbers" => {
                let n = number(&arguments, "n").unwrap_or(0) as usize;
                let mut zeros = String::with_capacity(2 * n + 8);
                zeros.push_str("{\"a\":[");
                for i in 0..n {
                    zeros.push_str(if i == 0 { "0" } else { ",0" });
                }
                zeros.push_str("]}");
                Ok(ToolOutput {
                    content: vec![Content::Text("numbers".into())],
                    structured: Some(zeros),
                    is_error: false,
                })
            }
            "random" => {
                let len = number(&arguments, "len").unwrap_or(1 << 30);
                let bytes = wasip2::random::random::get_random_bytes(len);
                Ok(text(bytes.len().to_string()))
            }
            "trap" => panic!("faulty.trap: requested panic"),
            "recurse" => Ok(text(recurse(black_box(1)).to_string())),
            "off_schema" => structured(&json!({"len": "nope"})),
            "ok" => Ok(text("ok")),
            _ => Err(unknown_tool(&name)),
        }
    }
}

fn ok(arguments: serde_json::Value) -> ToolInfo {
    let mut ok = tool("ok", "Returns \"ok\".", arguments, &[]);
    if host::config("string_schema").as_deref() == Some("true") {
        ok.input_schema = json!({"type": "string"}).to_string();
    }
    if let Some(n) = host::config("patterns") {
        let properties: serde_json::Map<String, serde_json::Value> = (0..n.parse().unwrap_or(0))
            .map(|i| (format!("p{i}"), json!({"type": "string", "pattern": "^a$"})))
            .collect();
        ok.input_schema = json!({"type": "object", "properties": properties}).to_string();
    }
    if host::config("endless_schema").as_deref() == Some("true") {
        ok.input_schema = json!({"type": "object", "allOf": [{"$ref": "#"}]}).to_string();
    }
    ok
}

fn spin() -> ! {
    let mut n = 0u64;
    loop {
        // black_box: a loop the optimiser cannot prove pointless or remove.
        n = black_box(n.wrapping_add(1));
    }
}

/// A whole-number argument, if given.
fn number(arguments: &str, key: &str) -> Option<u64> {
    let arguments: serde_json::Value = serde_json::from_str(arguments).unwrap_or_default();
    arguments[key].as_u64()
}

/// 31 patterns that backtrack without end on text that has no `x` (`\1` makes them
/// need the backtracking engine), then one any string matches: 32 patterns, the most a
/// schema may have.
fn backtracking_branches() -> serde_json::Value {
    let mut branches = vec![json!({"type": "string", "pattern": "(.*)*\\1x"}); 31];
    branches.push(json!({"type": "string"}));
    serde_json::Value::Array(branches)
}

fn handles() -> ! {
    loop {
        // Forgotten, not dropped: the host's entry stays until the store goes.
        std::mem::forget(wasip2::clocks::monotonic_clock::subscribe_duration(
            u64::MAX,
        ));
    }
}

/// Each frame keeps a buffer on the stack, so the stack is used up in a few thousand calls.
#[inline(never)]
#[allow(unconditional_recursion)] // the point of the tool
fn recurse(depth: u64) -> u64 {
    let frame = black_box([depth; 64]);
    recurse(depth + 1).wrapping_add(frame[(depth % 64) as usize])
}

fn hog() -> ! {
    let mut blocks = Vec::new();
    loop {
        // vec![1; n] writes every byte, so the pages are really used, and
        // black_box keeps the optimiser from eliding the allocation.
        blocks.push(black_box(vec![1u8; 1 << 20]));
    }
}

plugin_kit::export!(Faulty);
