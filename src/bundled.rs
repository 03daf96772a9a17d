//! The shipped plugins compiled into the binary by `build.rs` (empty when the
//! wasm32-wasip2 target was missing at build time).

include!(concat!(env!("OUT_DIR"), "/bundled_plugins.rs"));
