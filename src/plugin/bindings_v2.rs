//! The `bindgen!` of the 0.2 `plugin` world (`wit/plugin-0.2`): exports are called
//! asynchronously as 0.1's are; the `client` imports are async (they wait for the client),
//! the rest plain synchronous functions. The `reply` resource is the host's [`Reply`].
//!
//! [`Reply`]: super::reply::Reply

wasmtime::component::bindgen!({
    world: "wasmgate:plugin/plugin@0.2.0",
    path: "wit/plugin-0.2",
    exports: { default: async },
    imports: { "wasmgate:plugin/client": async },
    with: {
        "wasmgate:plugin/results.reply": super::reply::Reply,
    },
});
