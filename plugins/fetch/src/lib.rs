//! `fetch`: HTTP GET of a URL the gateway's `allow_hosts` grant lets through.
//! The request itself is `plugin_kit::http::get`, shared with the test fixtures.

use plugin_kit::{
    CallResult, Guest, ToolInfo, ToolInfoExt, args, http, structured, tool, unknown_tool,
};
use serde::Deserialize;
use serde_json::json;

struct Fetch;

const DEFAULT_MAX_BYTES: usize = 100_000;
/// Bodies beyond this are more than a model can use, and the copies a result
/// needs must fit the plugin's memory limit.
const MAX_MAX_BYTES: usize = 1_000_000;

#[derive(Deserialize)]
struct GetArgs {
    url: String,
    #[serde(default = "default_max_bytes")]
    max_bytes: usize,
}

fn default_max_bytes() -> usize {
    DEFAULT_MAX_BYTES
}

impl Guest for Fetch {
    fn list_tools() -> Vec<ToolInfo> {
        vec![
            tool(
                "get",
                "HTTP GET of a URL; returns the status, content type and body as text, the body \
                 cut at `max_bytes`. Only the hosts the gateway's `allow_hosts` grants are \
                 reachable. Redirects are not followed: a 3xx answer comes back with `location`.",
                json!({
                    "url": {
                        "type": "string",
                        "pattern": "^https?://",
                        "description": "An http or https URL",
                    },
                    "max_bytes": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_MAX_BYTES,
                        "default": DEFAULT_MAX_BYTES,
                        "description": "Keep at most this many bytes of the body",
                    },
                }),
                &["url"],
            )
            .title("HTTP GET")
            .output_schema(http::page_schema())
            .annotations(json!({"readOnlyHint": true, "openWorldHint": true})),
        ]
    }

    fn call_tool(name: String, arguments: String) -> CallResult {
        match name.as_str() {
            "get" => {
                let a: GetArgs = args(&arguments)?;
                structured(&http::get(&a.url, a.max_bytes.min(MAX_MAX_BYTES))?)
            }
            _ => Err(unknown_tool(&name)),
        }
    }
}

plugin_kit::export!(Fetch);
