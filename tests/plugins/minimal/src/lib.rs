//! `minimal`: one `echo` tool and nothing else, the smallest plugin a Rust author
//! writes with `plugin-kit`. It is the benchmark's plugin: a call's cost is the
//! host's and the per-instance cost of Rust std's own WASI imports, without the
//! extra imports (wasi:http and the rest) that `echo`'s test tools bring.

use plugin_kit::{CallResult, Guest, ToolInfo, args, text, tool, unknown_tool};
use serde::Deserialize;
use serde_json::json;

struct Minimal;

#[derive(Deserialize)]
struct Text {
    text: String,
}

impl Guest for Minimal {
    fn list_tools() -> Vec<ToolInfo> {
        vec![tool(
            "echo",
            "Returns `text` unchanged.",
            json!({"text": {"type": "string", "description": "Any text"}}),
            &["text"],
        )]
    }

    fn call_tool(name: String, arguments: String) -> CallResult {
        match name.as_str() {
            "echo" => Ok(text(args::<Text>(&arguments)?.text)),
            _ => Err(unknown_tool(&name)),
        }
    }
}

plugin_kit::export!(Minimal);
