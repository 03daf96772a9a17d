//! The raw bindings of the `wasmgate:plugin@0.2.0` world, generated from
//! `wit/plugin-0.2/plugin.wit`: the WIT records as Rust types, the imports (`host`,
//! `results`, `client`, `notify`, `store`), and the `Guest` traits of the exports with
//! their export macro. The typed layer of this crate is built on them; use them directly
//! only for what it does not cover.

wit_bindgen::generate!({
    path: "wit/plugin-0.2",
    world: "wasmgate:plugin/plugin@0.2.0",
    // The export macro runs in the plugin's crate, so it must be public and must name
    // this module by its path from there.
    // So that results and prompts compare in tests.
    additional_derives: [PartialEq],
    pub_export_macro: true,
    default_bindings_module: "wasmgate_plugin::wit",
    export_macro_name: "export_raw",
});

pub use crate::output::ToolOutput;
pub use exports::wasmgate::plugin::completion::Guest as CompletionGuest;
pub use exports::wasmgate::plugin::meta::Guest as MetaGuest;
pub use exports::wasmgate::plugin::prompts::Guest as PromptsGuest;
pub use exports::wasmgate::plugin::resources::Guest as ResourcesGuest;
pub use exports::wasmgate::plugin::tool::Guest;
pub use wasmgate::plugin::host::Level;
pub use wasmgate::plugin::results::Reply;
pub use wasmgate::plugin::types::{
    About, AskError, Blob, CallError, CompletionRef, CompletionRequest, Completions, Content,
    EmbeddedResource, InstanceMode, PromptArgument, PromptInfo, PromptMessage, PromptOutput,
    RequestError, ResourceInfo, ResourceTemplate, Role, StoreError, ToolInfo,
};
