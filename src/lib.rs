//! wasmgate: an MCP gateway for subprocess MCP servers and hot-reloaded WASM plugins.
//!
//! # Layout
//! - `cli`: the commands (`serve`, `check`, `tools`, `call`) and exit codes.
//! - `descriptors`: the open-file limit, raised at start and shared with plugins.
//! - `config`: the file schemas, validation, and the model the rest reads.
//! - `protocol`: the JSON-RPC 2.0 envelope, error codes, version negotiation.
//! - `transport`: how clients reach the gateway (`stdio`).
//! - `pipe`: newline-delimited JSON-RPC over pipes: bounded line reading, bounded outgoing queues.
//! - `session`: one client: lifecycle, requests in flight.
//! - `peer`: what the gateway holds of a client: sending to it, what it negotiated, requests
//!   forwarded to it.
//! - `catalog`: the snapshot of every backend's tools, prompts and resources under their
//!   served names, and where each name routes.
//! - `router`: method dispatch over the catalog, name and token rewriting.
//! - `gateway`: shared state, backend events, catalog swaps, shutdown.
//! - `backend`: where tools live: subprocess MCP servers (`backend::process`).
//! - `plugin`: the WASM plugin host: wasmtime engine, sandbox, limits, cache, hot reload.
//! - `schema`: JSON Schema checks (tool arguments, plugin schemas and structured output).
//! - `bundled`: the shipped plugins' components, compiled into the binary by `build.rs`.
//! - `builtin`: the gateway's own tools, `gateway_status` and `get_events`.
//! - `reload`: config file watching.
//! - `telemetry`: logging to stderr and the event log.
//!
//! A `tools/call` travels transport → session → router → backend and back.
//!
//! # Threads
//! The transport, sessions, routing and server pipes run on one current-thread tokio runtime
//! (`cli`): a message crosses no thread on its way, so a call costs no cross-thread wake-ups.
//! A plugin call starts there too, on an instance made ahead of it, and usually ends within
//! that first poll; at the first epoch tick (1 ms) or wait for host I/O it moves to the plugin
//! threads (`plugin::workers`), which also make and reset instances, so a plugin that computes
//! holds up other messages for a tick at most. The epoch ticker has a thread of its own, idle
//! while no guest code runs. A server's result is passed to the client as the JSON text it sent
//! (`protocol::Reply::Raw`); only the envelope is rewritten.

pub mod backend;
pub mod builtin;
pub mod bundled;
pub mod catalog;
pub mod cli;
pub mod config;
pub mod descriptors;
pub mod file_events;
pub mod gateway;
pub mod memory;
pub mod nesting;
pub mod peer;
pub mod pipe;
pub mod plugin;
pub mod protocol;
pub mod reload;
pub mod router;
pub mod schema;
pub mod session;
pub mod telemetry;
#[cfg(test)]
mod test_support;
pub mod transport;
