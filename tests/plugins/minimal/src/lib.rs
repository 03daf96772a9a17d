//! `minimal`: one `echo` tool and nothing else, the smallest plugin a Rust author
//! writes with the SDK (`wasmgate-plugin`). It is the benchmark's plugin: a call's
//! cost is the host's and the per-instance cost of Rust std's own WASI imports,
//! without the extra imports (wasi:http and the rest) that `echo`'s test tools bring.

use schemars::JsonSchema;
use serde::Deserialize;
use wasmgate_plugin::{Plugin, Tool};

#[derive(Deserialize, JsonSchema)]
struct Text {
    /// Any text
    text: String,
}

fn plugin() -> Plugin {
    Plugin::new().tool(Tool::new("echo", "Returns `text` unchanged.", |a: Text| {
        Ok(a.text)
    }))
}

wasmgate_plugin::export!(plugin);
