//! Write [wasmgate](https://github.com/wasmgate/wasmgate) plugins as typed Rust functions,
//! and middleware as typed hooks ([`middleware`]).
//!
//! A plugin is a WASI 0.2 component of the `wasmgate:plugin@0.2.0` world (its WIT
//! travels in this crate, `wit/plugin-0.2/plugin.wit`). With this crate each tool,
//! resource and prompt is a function from an argument type to an output, and the rest is
//! derived: the JSON Schemas from the types (with `schemars`), the argument parsing (with
//! `serde`), the exports. A plugin depends on `serde` and `schemars` (1.x) too, for their
//! derives.
//!
//! ```
//! use schemars::JsonSchema;
//! use serde::{Deserialize, Serialize};
//! use wasmgate_plugin::{Plugin, Structured, Tool, ToolError};
//!
//! #[derive(Deserialize, JsonSchema)]
//! struct CountArgs {
//!     /// The text to count the words of
//!     text: String,
//! }
//!
//! #[derive(Serialize, JsonSchema)]
//! struct Count {
//!     words: usize,
//! }
//!
//! fn count(args: CountArgs) -> Result<Structured<Count>, ToolError> {
//!     let words = args.text.split_whitespace().count();
//!     if words == 0 {
//!         return Err(ToolError::new("the text has no words"));
//!     }
//!     Ok(Structured::new(Count { words }))
//! }
//!
//! fn plugin() -> Plugin {
//!     Plugin::new().tool(Tool::new("count", "Counts the words of `text`.", count).pure())
//! }
//!
//! wasmgate_plugin::export!(plugin);
//! # let listed = plugin().list();
//! # assert_eq!(listed[0].name, "count");
//! # assert!(plugin().call("count", r#"{"text": " "}"#).is_err());
//! ```
//!
//! # Layout
//!
//! - [`Tool`] (`tool.rs`): a function with its name, description and annotations;
//!   arguments parsed into its argument type.
//! - [`Plugin`] and [`export!`] (`plugin.rs`): what a component serves, exported, and
//!   the [`Instance`] mode it declares.
//! - [`IntoOutput`], [`Structured`], [`ToolOutput`] (`output.rs`): what a tool returns:
//!   text, a structured value, content items; `reply.rs` writes it into the gateway's
//!   `reply`, each item checked against the room left.
//! - [`Resource`], [`ResourceTemplate`], [`IntoContents`] (`resource.rs`, matching in
//!   `uri_template.rs`): resources of a URI, or of a URI template's variables.
//! - [`Prompt`], [`IntoPrompt`] ([`prompt`]): prompts from typed arguments.
//! - Completions of prompt arguments and template variables (`complete.rs`), by
//!   [`Prompt::complete`] and [`ResourceTemplate::complete`].
//! - [`ToolError`] (`error.rs`), [`RequestError`] (`request_error.rs`): failures.
//! - [`schema`]: the schemas derived from the types, shaped as MCP wants them.
//! - [`log`], [`progress`], [`config`], [`cancelled`] (`host.rs`): the gateway's `host`
//!   interface; [`client`] (elicitation, sampling, roots), [`store`], [`notify`]: the
//!   other imports. [`testing`] stands in for all of them under `cargo test`.
//! - [`http`] (feature `http`): outbound HTTP through `wasi:http`, a GET or any method
//!   with headers and a body.
//! - [`middleware`]: components of the `wasmgate:middleware` world (`wit/middleware/`),
//!   which see, change or refuse requests, results and lists; [`export_middleware!`].
//! - [`wit`]: the raw bindings of the 0.2 world, for what the rest does not cover, with
//!   [`schema`] and [`parse_arguments`] to use beside them.

pub mod client;
mod complete;
mod error;
mod host;
pub mod middleware;
pub mod notify;
mod output;
mod plugin;
pub mod prompt;
mod reply;
mod request_error;
mod resource;
pub mod schema;
pub mod store;
mod tool;
mod uri_template;

#[cfg(test)]
mod tests_capabilities;
pub mod wit;

#[cfg(feature = "http")]
pub mod http;
#[cfg(not(target_arch = "wasm32"))]
pub mod testing;

pub use error::ToolError;
pub use host::{Level, cancelled, config, config_or, log, progress, traceparent};
pub use output::{IntoOutput, Structured, ToolOutput};
pub use plugin::{Instance, Plugin, completions};
pub use prompt::{IntoPrompt, Prompt};
pub use request_error::RequestError;
pub use resource::{IntoContents, Resource, ResourceTemplate};
pub use tool::{Annotations, Tool, parse_arguments};

/// For argument types with no fields: `Tool::new("now", "...", |_: NoArgs| ...)`.
pub use tool::NoArgs;

/// The `serde_json` this crate is built with (`preserve_order` on), for a tool that
/// takes or returns a `serde_json::Value` without a dependency of its own.
pub use serde_json;
