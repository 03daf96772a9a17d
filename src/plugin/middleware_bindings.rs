//! The `bindgen!` of the `middleware` world (`wit/middleware`): its exports are called
//! asynchronously as the plugin world's are, and its `host` import is the plugin world's
//! own (`with`), so one linker serves both worlds.

wasmtime::component::bindgen!({
    world: "wasmgate:middleware/middleware",
    path: ["wit", "wit/middleware"],
    exports: { default: async },
    with: {
        "wasmgate:plugin/host": super::bindings::wasmgate::plugin::host,
    },
});

pub use self::wasmgate::middleware::types::{
    Context, Denial, Direction, Edit, Entry, Interest, ListContext, Outcome, RequestAction,
    ResultAction,
};
