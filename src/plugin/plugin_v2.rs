//! A 0.2 plugin (`wasmgate:plugin@0.2.0`) as the host holds it: `tool` is required, the
//! other exports (`resources`, `prompts`, `completion`, `meta`) are optional, so each is
//! looked up on its own rather than through the world's all-or-nothing pre-instance.

use wasmtime::component::{Instance, InstancePre};
use wasmtime::{AsContextMut, Store};

use super::bindings_v2::exports::wasmgate::plugin::{completion, meta, prompts, resources, tool};
use super::sandbox::StoreState;

/// The exported interfaces of 0.2, as refusals name them.
pub const TOOL_EXPORT_V2: &str = "wasmgate:plugin/tool@0.2.0";

/// A version's pre-instance and where its exports are.
#[derive(Clone)]
pub struct PreV2 {
    pre: InstancePre<StoreState>,
    tool: tool::GuestIndices,
    resources: Option<resources::GuestIndices>,
    prompts: Option<prompts::GuestIndices>,
    completion: Option<completion::GuestIndices>,
    meta: Option<meta::GuestIndices>,
}

/// One instance's exports, typed (checked against the 0.2 WIT when it is made).
pub struct PluginV2 {
    pub tool: tool::Guest,
    pub resources: Option<resources::Guest>,
    pub prompts: Option<prompts::Guest>,
    pub completion: Option<completion::Guest>,
    pub meta: Option<meta::Guest>,
}

impl PreV2 {
    /// `Err`: it does not export the 0.2 `tool` interface.
    pub fn new(pre: InstancePre<StoreState>) -> wasmtime::Result<PreV2> {
        Ok(PreV2 {
            tool: tool::GuestIndices::new(&pre)?,
            resources: resources::GuestIndices::new(&pre).ok(),
            prompts: prompts::GuestIndices::new(&pre).ok(),
            completion: completion::GuestIndices::new(&pre).ok(),
            meta: meta::GuestIndices::new(&pre).ok(),
            pre,
        })
    }

    pub async fn instantiate_async(
        &self,
        mut store: impl AsContextMut<Data = StoreState>,
    ) -> wasmtime::Result<PluginV2> {
        let instance = self.pre.instantiate_async(store.as_context_mut()).await?;
        self.load(store, &instance)
    }

    /// The typed exports of `instance`; an export of the right name but the wrong
    /// type is an error here, so a version that has one is refused when it loads.
    fn load(
        &self,
        mut store: impl AsContextMut<Data = StoreState>,
        instance: &Instance,
    ) -> wasmtime::Result<PluginV2> {
        let mut store = store.as_context_mut();
        Ok(PluginV2 {
            tool: self.tool.load(&mut store, instance)?,
            resources: (self.resources.as_ref())
                .map(|i| i.load(&mut store, instance))
                .transpose()?,
            prompts: (self.prompts.as_ref())
                .map(|i| i.load(&mut store, instance))
                .transpose()?,
            completion: (self.completion.as_ref())
                .map(|i| i.load(&mut store, instance))
                .transpose()?,
            meta: (self.meta.as_ref())
                .map(|i| i.load(&mut store, instance))
                .transpose()?,
        })
    }
}

impl PluginV2 {
    /// The call that warms a fresh instance without effect: `list-tools`.
    pub async fn warm_up(&self, store: &mut Store<StoreState>) -> wasmtime::Result<()> {
        self.tool.call_list_tools(store).await.map(drop)
    }
}
