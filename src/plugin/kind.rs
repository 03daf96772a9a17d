//! The worlds a component may implement — a tool plugin (`wasmgate:plugin/tool`, of the
//! 0.1 or the 0.2 world) or a middleware (`wasmgate:middleware/hooks`) — as the host holds
//! them: the pre-instance a version instantiates from, and the typed instance a call runs in.

use wasmtime::component::InstancePre;
use wasmtime::{AsContextMut, Store};

use super::bindings::{Plugin, PluginPre};
use super::hooks::PluginKind;
use super::middleware_bindings::{Middleware, MiddlewarePre};
use super::plugin_v2::{PluginV2, PreV2, TOOL_EXPORT_V2};
use super::sandbox::StoreState;

/// The exported interfaces, without their version, as refusals name them.
pub const TOOL_EXPORT: &str = "wasmgate:plugin/tool";
pub const HOOKS_EXPORT: &str = "wasmgate:middleware/hooks";

/// A version's pre-instance, typed by the world its component implements.
#[derive(Clone)]
pub enum Pre {
    Tools(PluginPre<StoreState>),
    ToolsV2(PreV2),
    Middleware(MiddlewarePre<StoreState>),
}

/// An instance, typed by its world; what the ready pool, kept instances and calls hold.
pub enum Bound {
    Tools(Plugin),
    ToolsV2(Box<PluginV2>),
    Middleware(Middleware),
}

impl Pre {
    /// Types `pre` by the world it exports: a 0.1 tool plugin's first, then a 0.2 one's,
    /// then a middleware's. `Err` holds why it is neither a plugin nor a middleware, as
    /// the worlds' checks said (0.2's when it has no 0.1 `tool` export).
    pub fn new(pre: InstancePre<StoreState>) -> Result<Pre, (String, String)> {
        let as_tools = match PluginPre::new(pre.clone()) {
            Ok(tools) => return Ok(Pre::Tools(tools)),
            Err(e) => super::limits::chain(&e),
        };
        let as_tools = match PreV2::new(pre.clone()) {
            Ok(tools) => return Ok(Pre::ToolsV2(tools)),
            Err(e) if as_tools.contains("no exported instance") => super::limits::chain(&e),
            Err(_) => as_tools,
        };
        match MiddlewarePre::new(pre) {
            Ok(middleware) => Ok(Pre::Middleware(middleware)),
            Err(e) => Err((as_tools, super::limits::chain(&e))),
        }
    }

    pub fn kind(&self) -> PluginKind {
        match self {
            Pre::Tools(_) | Pre::ToolsV2(_) => PluginKind::Tools,
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
            Pre::ToolsV2(pre) => Ok(Bound::ToolsV2(Box::new(
                pre.instantiate_async(store.as_context_mut()).await?,
            ))),
            Pre::Middleware(pre) => Ok(Bound::Middleware(
                pre.instantiate_async(store.as_context_mut()).await?,
            )),
        }
    }

    /// Whether its component is of the 0.2 plugin world.
    pub fn is_v2(&self) -> bool {
        matches!(self, Pre::ToolsV2(_))
    }

    /// The tool plugin's pre-instance, for the measurements that call it directly.
    #[cfg(test)]
    pub fn tools(&self) -> &PluginPre<StoreState> {
        match self {
            Pre::Tools(pre) => pre,
            _ => panic!("not a 0.1 tool plugin"),
        }
    }
}

impl Bound {
    /// Its 0.1 tool export; an error otherwise (loading keeps that from happening).
    pub fn tools(&self) -> wasmtime::Result<&Plugin> {
        match self {
            Bound::Tools(plugin) => Ok(plugin),
            _ => Err(wasmtime::Error::msg(format!(
                "not a 0.1 plugin: it does not export {TOOL_EXPORT}@0.1.0"
            ))),
        }
    }

    /// Its 0.2 exports; an error otherwise.
    pub fn v2(&self) -> wasmtime::Result<&PluginV2> {
        match self {
            Bound::ToolsV2(plugin) => Ok(plugin),
            _ => Err(wasmtime::Error::msg(format!(
                "not a 0.2 plugin: it does not export {TOOL_EXPORT_V2}"
            ))),
        }
    }

    /// Its hooks export; an error for a tool plugin.
    pub fn middleware(&self) -> wasmtime::Result<&Middleware> {
        match self {
            Bound::Middleware(middleware) => Ok(middleware),
            _ => Err(wasmtime::Error::msg(format!(
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
            Bound::ToolsV2(plugin) => plugin.warm_up(store).await,
            Bound::Middleware(middleware) => middleware
                .wasmgate_middleware_hooks()
                .call_describe(store)
                .await
                .map(drop),
        }
    }
}
