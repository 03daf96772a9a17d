//! wasmgate: an MCP gateway for subprocess MCP servers and hot-reloaded WASM plugins.
//!
//! # Layout
//! From the top layer down (docs/architecture.md draws them, with the path of a call):
//! - `cli`: the commands (`serve`, `check`, `tools`, `call`, `dev`) and exit codes.
//! - `plugin_cli`: the plugin authors' commands (`plugin new`, `build`, `inspect`, `call`)
//!   and `dev`'s rebuilds.
//! - `auth_cli`: `wasmgate auth status|login|logout` and `wasmgate connect URL`.
//! - `pins`: `wasmgate pins list|approve`, over the files of the bundled `pin` middleware.
//! - `transport`: how clients reach the gateway (`stdio`, `http`).
//! - `session`: one client: lifecycle, requests in flight.
//! - `router`: method dispatch over the catalog, name and token rewriting.
//! - `builtin`: the gateway's own tools, `gateway_status` and `get_events`.
//! - `reload`: config file watching.
//! - `gateway`: shared state, backend events, catalog swaps, shutdown.
//! - `limits`: rate limits, caps on calls at once, the retry budget, circuit breakers.
//! - `middleware`: the `[[middleware]]` chain: which links apply to a request, their
//!   request and result hooks around it, and the lists they edit.
//! - `relay`: what is kept of the clients beyond one message, for what servers send:
//!   who hears it, calls in flight, progress routes, subscriptions, and stateless calls
//!   parked between the rounds of their `input_required` exchange.
//! - `catalog`: the snapshot of every backend's tools, prompts and resources under their
//!   served names, and where each name routes.
//! - `backend`: subprocess MCP servers (`backend::process`), remote ones over HTTP
//!   (`backend::remote`), and the MCP client side both share (`backend::mcp_client`).
//! - `plugin`: the WASM plugin host: wasmtime engine, sandbox, limits, cache, hot reload.
//! - `config`: the file schemas, validation, and the model the rest reads.
//! - `peer`: what the gateway holds of a client: sending to it, what it negotiated, requests
//!   forwarded to it.
//! - `pipe`: newline-delimited JSON-RPC over pipes: bounded line reading, bounded queues.
//! - `schema`: JSON Schema checks (tool arguments, plugin schemas and structured output).
//! - `names`: every rule about names: served names, what clients accept, namespaces.
//! - `protocol`: the JSON-RPC 2.0 envelope, error codes, version negotiation.
//! - `telemetry`: logging to stderr, the event log, `/metrics`, report budgets.
//! - `descriptors`: the open-file limit, raised at start and shared with plugins.
//! - `memory`: memory given back to the system after bursts.
//! - `nesting`: a gateway refusing to start itself through its own config.
//! - `oauth_client`: OAuth 2.1 toward remote servers: discovery, registration, PKCE,
//!   tokens kept in a private file and refreshed.
//! - `bundled`: the shipped plugins' components, compiled into the binary by `build.rs`.
//! - `file_events`: what a file watcher's events mean for a watched path.

pub mod auth_cli;
pub mod backend;
pub mod builtin;
pub mod bundled;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod descriptors;
pub mod file_events;
pub mod gateway;
pub mod limits;
pub mod memory;
pub mod middleware;
pub mod names;
pub mod nesting;
pub mod oauth_client;
pub mod oci;
pub mod oci_sources;
pub mod peer;
pub mod pins;
pub mod pipe;
pub mod plugin;
pub mod plugin_cli;
pub mod protocol;
pub mod relay;
pub mod reload;
pub mod router;
pub mod schema;
pub mod session;
pub mod telemetry;
#[cfg(test)]
mod test_support;
pub mod transport;
