//! The raw bindings of the `wasmgate:plugin` world, generated from `wit/plugin.wit`: the
//! WIT records as Rust types, the `host` imports, and the `Guest` trait with its export
//! macro. The typed layer of this crate is built on them; use them directly only for what
//! it does not cover (a guest that must answer `list-tools` by hand, say).

wit_bindgen::generate!({
    path: "wit",
    world: "plugin",
    // The export macro runs in the plugin's crate, so it must be public and must name
    // this module by its path from there.
    pub_export_macro: true,
    default_bindings_module: "wasmgate_plugin::wit",
    export_macro_name: "export_raw",
});

pub use exports::wasmgate::plugin::tool::Guest;
pub use wasmgate::plugin::host::Level;
pub use wasmgate::plugin::types::{
    Blob, CallError, Content, EmbeddedResource, ToolInfo, ToolOutput,
};
