//! The one `bindgen!` of the `plugin` world in `wit/`: exports are called
//! asynchronously (the guest's WASI I/O must not block a runtime thread), the
//! three `host` imports are plain synchronous functions.

wasmtime::component::bindgen!({
    world: "plugin",
    path: "wit",
    exports: { default: async },
});

pub use self::wasmgate::plugin::host::Level;
pub use self::wasmgate::plugin::types::{Blob, Content, EmbeddedResource};
pub use exports::wasmgate::plugin::tool::{CallError, ToolInfo, ToolOutput};
