//! `fetch`: HTTP GET of a URL the gateway's `allow_hosts` grant lets through.
//! The request itself is the SDK's `http::get`.

use schemars::JsonSchema;
use serde::Deserialize;
use wasmgate_plugin::http::{self, Page};
use wasmgate_plugin::{Annotations, Plugin, Structured, Tool, ToolError};

const DEFAULT_MAX_BYTES: usize = 100_000;
/// Bodies beyond this are more than a model can use, and the copies a result
/// needs must fit the plugin's memory limit.
const MAX_MAX_BYTES: usize = 1_000_000;

#[derive(Deserialize, JsonSchema)]
struct GetArgs {
    /// An http or https URL
    #[schemars(regex(pattern = "^https?://"))]
    url: String,
    /// Keep at most this many bytes of the body
    #[serde(default = "default_max_bytes")]
    #[schemars(range(min = 1, max = MAX_MAX_BYTES))]
    max_bytes: usize,
}

fn default_max_bytes() -> usize {
    DEFAULT_MAX_BYTES
}

fn plugin() -> Plugin {
    Plugin::new().tool(
        Tool::new(
            "get",
            "HTTP GET of a URL; returns the status, content type and body as text, the body \
             cut at `max_bytes`. Only the hosts the gateway's `allow_hosts` grants are \
             reachable. Redirects are not followed: a 3xx answer comes back with `location`.",
            get,
        )
        .title("HTTP GET")
        .annotations(Annotations {
            read_only_hint: Some(true),
            open_world_hint: Some(true),
            ..Annotations::default()
        }),
    )
}

wasmgate_plugin::export!(plugin);

fn get(a: GetArgs) -> Result<Structured<Page>, ToolError> {
    Ok(Structured::new(http::get(
        &a.url,
        a.max_bytes.min(MAX_MAX_BYTES),
    )?))
}
