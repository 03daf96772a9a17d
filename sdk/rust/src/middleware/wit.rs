//! The raw bindings of the `wasmgate:middleware` world, generated from
//! `wit/middleware/middleware.wit`: its records as Rust types and the `Guest` trait with
//! its export macro, and the `host` of `wasmgate:plugin@0.1.0` the world imports (the
//! plugin side speaks 0.2: [`crate::wit`]).

wit_bindgen::generate!({
    path: ["wit", "wit/middleware"],
    world: "wasmgate:middleware/middleware",
    with: {
        "wasmgate:plugin/host@0.1.0": generate,
    },
    // So that actions holding a denial compare in tests.
    additional_derives: [PartialEq],
    pub_export_macro: true,
    default_bindings_module: "wasmgate_plugin::middleware::wit",
    export_macro_name: "export_raw",
});

pub use exports::wasmgate::middleware::hooks::Guest;
pub use wasmgate::middleware::types::{
    Context, Denial, Direction, Edit, Entry, Interest, ListContext, Outcome, RequestAction,
    ResultAction,
};
