//! Integration tests of wasmgate: the real binary, driven over its stdin/stdout as an MCP
//! client drives it, with the example MCP server (and, when installed, real third-party
//! servers) behind it. Each test starts its own gateway in its own temp folder.

mod custom_section;
mod harness;
mod http_client;
mod in_process;

mod chain;
mod cli;
mod config_checks;
mod conformance;
mod connections;
mod containment;
mod dev;
mod events;
mod faults;
mod front_bounds;
mod fuzz;
mod guest_sdks;
mod hardening;
mod http_front;
mod input_required;
mod instances;
mod lifecycle;
mod limits;
mod listen;
mod middleware;
mod middleware_pins;
mod middleware_sdk;
mod modern_front;
mod notifications;
mod oci;
mod param_headers;
mod plugin_author;
mod plugin_cli;
mod plugin_state;
mod plugin_v2;
mod plugins;
mod promises;
mod protocol;
mod reload;
mod remote;
mod remote_bounds;
mod remote_faults;
mod remote_h2;
mod remote_sdk;
mod replicas;
mod replicas_stateless;
mod routing;
mod sdk_cells;
mod sdk_template;
mod stdio_bound;
mod tenancy;
mod third_party;
mod upstream_eras;
