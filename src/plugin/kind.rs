//! The two worlds a component may implement — a tool plugin (`wasmgate:plugin/tool`) or a
//! middleware (`wasmgate:middleware/hooks`) — as the host holds them: the pre-instance a
//! version instantiates from, and the typed instance a call runs in.

use wasmtime::component::InstancePre;
use wasmtime::{AsContextMut, Store};

use super::bindings::{Plugin, PluginPre};
use super::hooks::PluginKind;
use super::middleware_bindings::{Middleware, MiddlewarePre};
use super::sandbox::StoreState;

/// The exported interfaces, without their version, as refusals name them.
pub const TOOL_EXPORT: &str = "wasmgate:plugin/tool";
pub const HOOKS_EXPORT: &str = "wasmgate:middleware/hooks";

/// A version's pre-instance, typed by the world its component implements.
#[derive(Clone)]
pub enum Pre {
    Tools(PluginPre<StoreState>),
    Middleware(MiddlewarePre<StoreState>),
}

/// An instance, typed by its world; what the ready pool, kept instances and calls hold.
pub enum Bound {
    Tools(Plugin),
    Middleware(Middleware),
}

impl Pre {
    /// Types `pre` by the world it exports: a tool plugin's first, then a middleware's.
    /// `Err` holds why it is neither, as each world's check said.
    pub fn new(pre: InstancePre<StoreState>) -> Result<Pre, (String, String)> {
        let as_tools = match PluginPre::new(pre.clone()) {
            Ok(tools) => return Ok(Pre::Tools(tools)),
            Err(e) => super::limits::chain(&e),
        };
        match MiddlewarePre::new(pre) {
            Ok(middleware) => Ok(Pre::Middleware(middleware)),
            Err(e) => Err((as_tools, super::limits::chain(&e))),
        }
    }

    pub fn kind(&self) -> PluginKind {
        match self {
            Pre::Tools(_) => PluginKind::Tools,
            Pre::Middleware(_) => PluginKind::Middleware,
        }
    }

    pub async fn instantiate_async(
        &self,
        mut store: impl AsContextMut<Data = StoreState>,
    ) -> wasmtime::Result<Bound> {
        match self {
            Pre::Tools(pre) => Ok(Bound::Tools(
                pre.instantiate_async(store.as_context_mut()).await?,
            )),
            Pre::Middleware(pre) => Ok(Bound::Middleware(
                pre.instantiate_async(store.as_context_mut()).await?,
            )),
        }
    }

    /// The tool plugin's pre-instance, for the measurements that call it directly.
    #[cfg(test)]
    pub fn tools(&self) -> &PluginPre<StoreState> {
        match self {
            Pre::Tools(pre) => pre,
            Pre::Middleware(_) => panic!("a middleware, not a tool plugin"),
        }
    }
}

impl Bound {
    /// Its tool export; an error for a middleware (loading keeps that from happening).
    pub fn tools(&self) -> wasmtime::Result<&Plugin> {
        match self {
            Bound::Tools(plugin) => Ok(plugin),
            Bound::Middleware(_) => Err(wasmtime::Error::msg(format!(
                "a middleware does not export {TOOL_EXPORT}"
            ))),
        }
    }

    /// Its hooks export; an error for a tool plugin.
    pub fn middleware(&self) -> wasmtime::Result<&Middleware> {
        match self {
            Bound::Middleware(middleware) => Ok(middleware),
            Bound::Tools(_) => Err(wasmtime::Error::msg(format!(
                "a tool plugin does not export {HOOKS_EXPORT}"
            ))),
        }
    }

    /// The call that warms a fresh instance of a big runtime without effect and without
    /// client data: `list-tools`, or a middleware's `describe`.
    pub async fn warm_up(&self, store: &mut Store<StoreState>) -> wasmtime::Result<()> {
        match self {
            Bound::Tools(plugin) => plugin
                .wasmgate_plugin_tool()
                .call_list_tools(store)
                .await
                .map(drop),
            Bound::Middleware(middleware) => middleware
                .wasmgate_middleware_hooks()
                .call_describe(store)
                .await
                .map(drop),
        }
    }
}
