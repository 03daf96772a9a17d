//! wasmgate: an MCP gateway for subprocess MCP servers and hot-reloaded WASM plugins.
pub mod config;
pub mod plugin;
