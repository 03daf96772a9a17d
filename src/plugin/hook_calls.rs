//! Running a middleware's hooks: a [`Middleware`] handle holds the version current when it
//! was taken, and each hook goes the way a tool call goes (`Calls::enter`, `Calls::run`:
//! instance modes, turns, limits, the first poll inline, stats), its answer checked.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Instant;

use wasmtime::Store;

use super::calls::{Calls, Entered};
use super::hooks::{
    self, Edit, HookCall, HookContext, HookError, Interest, ListContext, ListEntry, Outcome,
    RequestAction, ResultAction,
};
use super::middleware_bindings as wit;
use super::sandbox::StoreState;
use super::version::{Slot, Version};
use super::{PluginHost, host_impl};

impl PluginHost {
    /// The middleware `name` as loaded now. The handle keeps that version: hooks run on it
    /// even after a reload swaps in another (take a new handle for the new one).
    pub fn middleware(&self, name: &str) -> Result<Middleware, HookError> {
        let slots = self.calls.slots.load();
        let slot = slots
            .get(name)
            .ok_or_else(|| HookError::NotLoaded(name.to_string()))?;
        let version = slot.current.load_full();
        let interest = version
            .code
            .interest
            .clone()
            .ok_or_else(|| HookError::NotMiddleware(name.to_string()))?;
        Ok(Middleware {
            calls: self.calls.clone(),
            slot: slot.clone(),
            version,
            interest,
        })
    }
}

/// Holds the version current when it was taken: a request's hooks all run on one
/// version even when a reload swaps it meanwhile (the issue's "calls in flight finish
/// on the chain they started with").
#[derive(Clone)]
pub struct Middleware {
    calls: Arc<Calls>,
    /// Where its stats and turns are, whatever version is current.
    slot: Arc<Slot>,
    version: Arc<Version>,
    interest: Arc<Interest>,
}

/// What a hook runs on the middleware's instance.
type Hook<R> = Box<
    dyn for<'a> FnOnce(
            &'a mut Store<StoreState>,
            &'a wit::Middleware,
        ) -> Pin<Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>>
        + Send,
>;

impl Middleware {
    pub fn name(&self) -> &str {
        &self.version.name
    }

    /// sha256 of its component, hex.
    pub fn digest(&self) -> &str {
        &self.version.code.digest
    }

    /// What its `describe` answered when this version was loaded.
    pub fn interest(&self) -> &Interest {
        &self.interest
    }

    /// `on-request`: what to do with a request on its way; `params` is its params object.
    pub async fn on_request(
        &self,
        ctx: &HookContext,
        params: &str,
        call: HookCall,
    ) -> Result<RequestAction, HookError> {
        let (ctx, params) = (ctx.to_wit(), params.to_string());
        let action = self
            .run(
                "on-request",
                call,
                Box::new(move |store, hooks| {
                    Box::pin(async move {
                        hooks
                            .wasmgate_middleware_hooks()
                            .call_on_request(store, &ctx, &params)
                            .await
                    })
                }),
            )
            .await?;
        hooks::request_action(action)
            .map_err(|why| self.failed("on-request", format!("on-request {why}")))
    }

    /// `on-result`: what to do with how a request it saw ended.
    pub async fn on_result(
        &self,
        ctx: &HookContext,
        params: &str,
        outcome: &Outcome,
        elapsed_us: u64,
        call: HookCall,
    ) -> Result<ResultAction, HookError> {
        let (ctx, params, outcome) = (ctx.to_wit(), params.to_string(), outcome.to_wit());
        let action = self
            .run(
                "on-result",
                call,
                Box::new(move |store, hooks| {
                    Box::pin(async move {
                        hooks
                            .wasmgate_middleware_hooks()
                            .call_on_result(store, &ctx, &params, &outcome, elapsed_us)
                            .await
                    })
                }),
            )
            .await?;
        hooks::result_action(action)
            .map_err(|why| self.failed("on-result", format!("on-result {why}")))
    }

    /// `on-list`: the edits it makes to a list.
    pub async fn on_list(
        &self,
        ctx: &ListContext,
        entries: &[ListEntry],
        call: HookCall,
    ) -> Result<Vec<Edit>, HookError> {
        let (ctx, wit_entries) = (ctx.to_wit(), hooks::entries_to_wit(entries));
        let edits = self
            .run(
                "on-list",
                call,
                Box::new(move |store, hooks| {
                    Box::pin(async move {
                        hooks
                            .wasmgate_middleware_hooks()
                            .call_on_list(store, &ctx, &wit_entries)
                            .await
                    })
                }),
            )
            .await?;
        hooks::edits_from(edits, entries.len())
            .map_err(|why| self.failed("on-list", format!("on-list {why}")))
    }

    /// Runs `hook` as a tool call runs: a turn and an instance per the `instance` mode,
    /// the limits armed, the first poll on this thread.
    async fn run<R: Send + 'static>(
        &self,
        name: &'static str,
        call: HookCall,
        hook: Hook<R>,
    ) -> Result<R, HookError> {
        let version = &self.version;
        self.slot.stats.calls.fetch_add(1, Ordering::Relaxed);
        let limit = call.timeout.min(version.settings.limits.timeout);
        let started = Instant::now();
        let Entered {
            instance,
            inline,
            keeps,
            turn,
            time,
        } = (self.calls)
            .enter(&self.slot, version, call.session.as_ref(), limit, started)
            .await
            .map_err(|reason| self.failed(name, reason))?;
        let sinks = host_impl::Sinks {
            progress: None,
            log: call.log,
            ..Default::default()
        };
        let outcome = (self.calls)
            .run(
                version.clone(),
                time,
                sinks,
                instance,
                inline,
                move |store, bound| match bound.middleware() {
                    Ok(hooks) => hook(store, hooks),
                    Err(e) => Box::pin(async move { Err(e) }),
                },
            )
            .await;
        drop(turn);
        if !keeps {
            self.calls.refill(version, None);
        }
        outcome.map_err(|reason| self.failed(name, reason))
    }

    /// A hook that gave no usable answer: counted and logged as a tool call's failure is,
    /// and worded for the middleware (the limits' messages name a plugin). `reason` is
    /// the call's failure, or what was wrong with the answer, starting with the hook.
    fn failed(&self, hook: &str, reason: String) -> HookError {
        let middleware = self.name().to_string();
        let own = format!("plugin `{middleware}` ");
        let reason = match reason.strip_prefix(&own) {
            Some(rest) => format!("{rest} (in {hook})"),
            None if reason.starts_with(hook) => reason,
            None => format!("failed in {hook}: {reason}"),
        };
        let error = HookError::Failed { middleware, reason };
        let said = super::calls::cut_error(error.to_string());
        tracing::warn!(middleware = %self.name(), hook, "{said}");
        self.slot.stats.failed(&said);
        error
    }
}
