//! The call path: a turn and an instance for the call (a ready one, one kept between
//! calls, or one made for it, per the plugin's `instance` mode), the call under its
//! limits, and the result turned into MCP content. [`Calls`] owns what calls need.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::task::Poll;
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use serde_json::Value;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use wasmtime::{Engine, Store};

use super::bindings::{self, CallError};
use super::calls_v2::call_tool;
use super::cancel::Cancel;
use super::kind::Bound;
use super::sandbox::StoreState;
use super::version::{Slot, TimeLimit, Version};
use super::{
    CallContext, PluginError, convert, engine, host_impl, kept, kv, limits, pool, workers,
};
use crate::telemetry::traces;

/// Extra time the async timeout grants over the epoch deadline, which normally
/// fires first; the async timeout catches guests blocked in host I/O.
pub(super) const TIMEOUT_GRACE: Duration = Duration::from_millis(50);

/// Where a call's instance comes from: the ready pool, made for it with a permit from
/// these slots, or kept between calls (the one the lease holds, or made for it).
pub(super) enum Instance {
    Ready(pool::Ready),
    Make(Arc<Semaphore>),
    Kept(kept::Lease, Option<kept::Held>),
}

/// What a call holds once it may run (see [`Calls::enter`]).
pub(super) struct Entered {
    pub(super) instance: Instance,
    /// Whether its first poll runs on the caller's thread.
    pub(super) inline: bool,
    /// Its instance is kept between calls: it took nothing from the ready pool, and
    /// leaves nothing there to refill.
    pub(super) keeps: bool,
    pub(super) turn: OwnedSemaphorePermit,
    pub(super) time: TimeLimit,
}

/// What calls need, shared with loading (which installs versions in the catalog and runs
/// its `list-tools` probes through [`Calls::run`]).
pub(super) struct Calls {
    pub(super) engine: Engine,
    pub(super) fuel_enabled: bool,
    pub(super) ticker: engine::Ticker,
    /// Where calls and instance refills run, off the gateway's I/O thread.
    pub(super) workers: workers::Workers,
    /// The catalog of loaded plugins; replaced whole when one is added or removed.
    pub(super) slots: ArcSwap<BTreeMap<String, Arc<Slot>>>,
    /// Bounds the instances calls keep alive at once to what the pooling allocator holds,
    /// less what loading keeps for validating new versions.
    pub(super) instances: Arc<Semaphore>,
    /// Keep ready instances (see `pool`); on by default.
    pub(super) ready_pool: AtomicBool,
    /// The linear memory of all live instances, against `total_memory`.
    pub(super) memory: Arc<limits::MemoryBudget>,
    /// The 0.2 plugins' key-value stores.
    pub(super) kv: kv::KvStores,
    /// Where 0.2 plugins' announcements go (the loader's events).
    pub(super) events: tokio::sync::mpsc::UnboundedSender<super::PluginEvent>,
    pub(super) this: Weak<Calls>,
}

impl Calls {
    /// Runs one tool in the instance its plugin's `instance` mode gives it. Traps,
    /// exhausted limits and timeouts are results with `isError: true` that name the
    /// plugin and the limit.
    pub(super) async fn call(
        &self,
        plugin: &str,
        tool: &str,
        arguments: Value,
        ctx: CallContext,
    ) -> Result<convert::Reply, PluginError> {
        let slot = self
            .slots
            .load()
            .get(plugin)
            .cloned()
            .ok_or_else(|| PluginError::NotFound(plugin.into()))?;
        let version = slot.current.load_full();
        if !version.has_tool(tool) {
            return Err(PluginError::UnknownTool {
                plugin: plugin.into(),
                tool: tool.into(),
                said: None,
            });
        }
        slot.stats.calls.fetch_add(1, Ordering::Relaxed);
        let arguments = arguments.to_string();
        let limit = ctx.timeout.min(version.settings.limits.timeout);
        let started = Instant::now();
        let entered = match self
            .enter(&slot, &version, ctx.session.as_ref(), limit, started)
            .await
        {
            Ok(entered) => entered,
            Err(reason) => {
                tracing::warn!(plugin, tool, trace_id = %ctx.trace_id, "{reason}");
                slot.stats.failed(&reason);
                return Ok(convert::error_result(reason).into());
            }
        };
        let Entered {
            instance,
            inline,
            keeps,
            turn,
            time,
        } = entered;
        let task_tool = tool.to_string();
        let cancel = Arc::new(Cancel::default());
        let sinks = self.sinks(&slot, &version, ctx.clone(), &cancel);
        let outcome = self
            .run(
                version.clone(),
                time,
                sinks,
                instance,
                inline,
                |store, bound| {
                    Box::pin(async move { call_tool(store, bound, &task_tool, &arguments).await })
                },
            )
            .await;
        // Refilled after the call, not beside it: on few cores a refill that
        // starts first would hold the call up for a whole instantiation. A call on a kept
        // instance took nothing from the ready pool, and left nothing there.
        if !keeps {
            self.refill(&version, ctx.traceparent.clone());
        }
        let elapsed_us = started.elapsed().as_micros() as u64;
        match outcome {
            Ok(Ok(output)) => {
                tracing::debug!(plugin, tool, trace_id = %ctx.trace_id, elapsed_us, "plugin call done");
                let schema = version.code.output_schemas.get(tool).cloned();
                Ok(result_for_client(
                    &slot,
                    schema,
                    plugin,
                    tool,
                    output,
                    turn,
                    time,
                    &ctx.trace_id,
                )
                .await)
            }
            Ok(Err(CallError::UnknownTool(said))) => Err(PluginError::UnknownTool {
                plugin: plugin.into(),
                tool: tool.into(),
                said: Some(cut_error(said)),
            }),
            Ok(Err(CallError::InvalidArguments(message))) => Err(PluginError::InvalidArguments {
                plugin: plugin.into(),
                tool: tool.into(),
                message: cut_error(message),
            }),
            Ok(Err(CallError::Failed(message))) => {
                // The hint after the cut, so that a long message does not lose it.
                let message = super::errno::with_hint(cut_error(message));
                Ok(convert::error_result(message).into())
            }
            Err(reason) => {
                tracing::warn!(plugin, tool, trace_id = %ctx.trace_id, elapsed_us, "{reason}");
                slot.stats.failed(&reason);
                Ok(convert::error_result(reason).into())
            }
        }
    }

    /// Takes what a call of `version` needs before it runs, within `limit` from `started`:
    /// its kept instance's lease (per the `instance` mode), a turn, and an instance (kept,
    /// ready, or one to make). `Err` is why not, in words for the client.
    pub(super) async fn enter(
        &self,
        slot: &Slot,
        version: &Arc<Version>,
        session: Option<&Arc<str>>,
        limit: Duration,
        started: Instant,
    ) -> Result<Entered, String> {
        let name = &*version.name;
        // A session's calls wait for its kept instance before they take a turn: one
        // session's calls queued behind each other hold no turns that others could use.
        let mut evicted = Vec::new();
        let lease = version.kept.lease(session, limit, &mut evicted).await;
        self.drop_kept(evicted);
        let Ok(lease) = lease else {
            return Err(limits::session_busy_message(name, limit));
        };
        // The waits for the instance and a turn count against the call's time; no timer
        // when a turn is free.
        let turn = match slot.turns.clone().try_acquire_owned() {
            Ok(turn) => Ok(turn),
            Err(_) => permits_within(&slot.turns, 1, limit.saturating_sub(started.elapsed())).await,
        };
        let Ok(turn) = turn else {
            let turns = slot.turn_limit.load(Ordering::Relaxed);
            return Err(limits::no_turn_message(name, limit, turns));
        };
        let time = TimeLimit {
            limit,
            since: started,
        };
        let keeps = lease.is_some();
        let (instance, inline) = match lease {
            Some(mut lease) => {
                let held = lease.take();
                let inline = version.may_run_inline(held.is_some());
                (Instance::Kept(lease, held), inline)
            }
            None => {
                let ready = version.pool.take();
                let inline = version.may_run_inline(ready.is_some());
                let instance =
                    ready.map_or_else(|| Instance::Make(self.instances.clone()), Instance::Ready);
                (instance, inline)
            }
        };
        Ok(Entered {
            instance,
            inline,
            keeps,
            turn,
            time,
        })
    }

    /// Runs `f` on an instance of `version` — `ready` if given, else one made
    /// now in a fresh store — armed with the call's limits. With `inline`, its first
    /// poll happens here, on the caller's (I/O) thread, and what is left after it runs
    /// on the plugin threads; without, all of it runs there (see
    /// `Version::may_run_inline`). `Err` is the failure in words for the client.
    pub(super) async fn run<R: Send + 'static>(
        &self,
        version: Arc<Version>,
        time: TimeLimit,
        sinks: host_impl::Sinks,
        instance: Instance,
        inline: bool,
        f: impl for<'a> FnOnce(
            &'a mut Store<StoreState>,
            &'a Bound,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>,
        > + Send
        + 'static,
    ) -> Result<R, String> {
        let host = self
            .this
            .upgrade()
            .ok_or("the plugin host is shutting down")?;
        let started_on = inline.then(|| version.clone());
        let cancel = sinks.cancel.clone();
        let mut task =
            Box::pin(async move { host.run_here(&version, time, sinks, instance, f).await });
        if let Some(version) = started_on {
            let polled_at = Instant::now();
            let first = std::future::poll_fn(|cx| {
                let _context = self.workers.enter();
                Poll::Ready(task.as_mut().poll(cx))
            })
            .await;
            if let Poll::Ready(outcome) = first {
                version.ended_inline();
                return outcome;
            }
            // A guest that waits for host I/O leaves at once. One that computed until an
            // epoch tick stopped it held the I/O thread for up to a tick; a tick that falls
            // inside a short call stops it early, and does not count.
            if polled_at.elapsed() >= engine::EPOCH_TICK / 2 {
                version.polled_long();
            }
        }
        self.workers
            .run(task, cancel)
            .await
            .and_then(|outcome| outcome)
    }

    /// [`Self::run`] on the current thread. A used store goes to the version's pool, for
    /// the refill that follows the call to drop; a kept instance goes back to its lease,
    /// or to a plugin thread to be dropped.
    pub(super) async fn run_here<R>(
        &self,
        version: &Version,
        time: TimeLimit,
        sinks: host_impl::Sinks,
        instance: Instance,
        f: impl for<'a> FnOnce(
            &'a mut Store<StoreState>,
            &'a Bound,
        ) -> std::pin::Pin<
            Box<dyn Future<Output = wasmtime::Result<R>> + Send + 'a>,
        >,
    ) -> Result<R, String> {
        let name = &*version.name;
        let limits = &version.settings.limits;
        let TimeLimit {
            limit: timeout,
            since: started,
        } = time;
        let (mut store, instance, permit, keep) = match instance {
            Instance::Ready(ready) => (ready.store, Some(ready.instance), ready.permit, None),
            Instance::Make(slots) => {
                let (store, permit) = self.fresh_store(version, &slots, time).await?;
                (store, None, permit, None)
            }
            Instance::Kept(lease, Some(held)) => (
                held.store,
                Some(held.instance),
                held.permit,
                Some((lease, held.tag)),
            ),
            Instance::Kept(lease, None) => {
                let (store, permit) = self.fresh_store(version, &self.instances, time).await?;
                let tag = lease.tag();
                (store, None, permit, Some((lease, tag)))
            }
        };
        // The limit the client reads in a message stays the whole `timeout`.
        let remaining = timeout.saturating_sub(started.elapsed());
        limits::arm(&mut store, remaining, self.fuel_enabled, limits.fuel)
            .map_err(|e| limits::chain(&e))?;
        let cause = sinks.traceparent.clone();
        store.data_mut().begin_call(sinks);
        let pre = version.code.pre.clone();
        let busy = self.ticker.busy();
        let paused = store.data().deadline.paused.clone();
        let result = limits::within(remaining + TIMEOUT_GRACE, &paused, async {
            let instance = match instance {
                Some(instance) => instance,
                None => {
                    let traced = traces::linked("plugin instantiate", name, cause.as_deref());
                    let made = pre.instantiate_async(&mut store).await;
                    traces::end(traced, made.as_ref().err().map(|_| "instantiation failed"));
                    made?
                }
            };
            let value = f(&mut store, &instance).await?;
            wasmtime::Result::Ok((value, instance))
        })
        .await;
        drop(busy);
        store.data_mut().end_call();
        let data = store.data();
        let (outcome, instance) = match result {
            Some(Ok((value, instance))) => (Ok(value), Some(instance)),
            Some(Err(error)) => (
                Err(limits::describe_failure(
                    name,
                    &error,
                    data.memory.exceeded,
                    data.deadline.expired,
                    limits,
                    timeout,
                    &data.stderr_tail(),
                )),
                None,
            ),
            None => (Err(limits::time_limit_message(name, timeout)), None),
        };
        // Only an instance whose call ended cleanly is kept: one that trapped, hit a limit
        // or was cut off may have been stopped half-way through changing its memory.
        match (keep, instance) {
            (Some((lease, tag)), Some(instance)) => {
                let held = kept::Held {
                    store,
                    instance,
                    permit,
                    tag,
                };
                if let Some(held) = lease.give_back(held) {
                    self.throw_kept(held.store, held.permit);
                }
            }
            (Some(_), None) => self.throw_kept(store, permit),
            // The refill that follows the call resets the store, on a plugin thread and
            // after the answer: a Python store's reset writes megabytes.
            (None, _) => {
                store.data_mut().memory.release();
                version.pool.throw_away((store, permit));
            }
        }
        outcome
    }

    /// A new store for `version`, with a permit from `slots` waited for within the call's time.
    async fn fresh_store(
        &self,
        version: &Version,
        slots: &Arc<Semaphore>,
        time: TimeLimit,
    ) -> Result<(Store<StoreState>, OwnedSemaphorePermit), String> {
        let name = &*version.name;
        if Arc::ptr_eq(slots, &self.instances) {
            self.make_room(version.code.units);
        }
        // Waiting for a free slot counts against the call's time.
        let left = time.limit.saturating_sub(time.since.elapsed());
        let permit = permits_within(slots, version.code.units, left)
            .await
            .map_err(|no| match no {
                NoPermit::TimedOut => limits::no_instance_message(name, time.limit),
                NoPermit::Closed => format!("plugin `{name}`: the host is shutting down"),
            })?;
        Ok((self.new_store(version)?, permit))
    }

    /// Drops kept instances on a plugin thread: a Python store's reset writes megabytes.
    pub(super) fn drop_kept<T: Send + 'static>(&self, dropped: Vec<T>) {
        if !dropped.is_empty() {
            self.workers.spawn(async move { drop(dropped) });
        }
    }

    /// Drops the store of a kept instance that is not kept any more (its call failed, or
    /// its policy let it go) on a plugin thread, as [`Self::drop_kept`] does; not through
    /// the ready pool's used stores, which only the refill after a pool call drops.
    fn throw_kept(&self, mut store: Store<StoreState>, permit: OwnedSemaphorePermit) {
        store.data_mut().memory.release();
        self.workers.spawn(async move { drop((store, permit)) });
    }

    pub(super) fn new_store(&self, version: &Version) -> Result<Store<StoreState>, String> {
        let state = StoreState::new(&version.name, &version.settings, &self.memory)
            .map_err(|e| format!("plugin `{}`: {e:#}", version.name))?;
        let mut state = state;
        state.host.events = Some(self.events.clone());
        let mut store = Store::new(&self.engine, state);
        store.limiter(|s| &mut s.memory);
        Ok(store)
    }
}

/// Why [`permits_within`] came back without permits.
enum NoPermit {
    TimedOut,
    Closed,
}

/// `n` permits of `semaphore`, waiting for them at most `limit`.
async fn permits_within(
    semaphore: &Arc<Semaphore>,
    n: u32,
    limit: Duration,
) -> Result<OwnedSemaphorePermit, NoPermit> {
    match tokio::time::timeout(limit, semaphore.clone().acquire_many_owned(n)).await {
        Ok(Ok(permit)) => Ok(permit),
        Ok(Err(_closed)) => Err(NoPermit::Closed),
        Err(_elapsed) => Err(NoPermit::TimedOut),
    }
}

/// The plugin's words in an unknown-tool error, unless they only repeat the tool's name.
pub(super) fn said_of(said: &Option<String>, tool: &str) -> String {
    match said {
        Some(words) if !words.is_empty() && words != tool => {
            format!(": it answered unknown-tool({words:?})")
        }
        _ => String::new(),
    }
}

/// A call's output as the client gets it. A check against the plugin's own output schema
/// may take long however small the result (a pattern can be slow on a short text), and a
/// big result takes long to expand: those run on a blocking thread, within what is left of
/// the call's time, holding the call's turn, so the I/O thread serves everyone else
/// meanwhile and a plugin keeps no more of them running than its calls at once.
#[allow(clippy::too_many_arguments)]
pub(super) async fn result_for_client(
    slot: &Slot,
    schema: Option<Arc<convert::OutputSchema>>,
    plugin: &str,
    tool: &str,
    output: bindings::ToolOutput,
    turn: OwnedSemaphorePermit,
    time: TimeLimit,
    trace_id: &str,
) -> convert::Reply {
    let bytes = match convert::result_size(plugin, tool, &output) {
        Ok(bytes) => bytes,
        Err(too_big) => return too_big.into(),
    };
    let checked = schema.is_some() && output.structured.is_some();
    if !checked && bytes <= convert::INLINE_RESULT_BYTES {
        return convert::output_to_mcp(plugin, tool, output, schema.as_deref());
    }
    let what = match checked {
        true => "checked against the tool's output schema",
        false => "made ready for the client",
    };
    let (name, tool_name) = (plugin.to_string(), tool.to_string());
    let check = tokio::task::spawn_blocking(move || {
        let _turn = turn;
        convert::output_to_mcp(&name, &tool_name, output, schema.as_deref())
    });
    let left = time.limit.saturating_sub(time.since.elapsed());
    match tokio::time::timeout(left, check).await {
        Ok(Ok(result)) => result,
        Ok(Err(panicked)) => convert::error_result(format!(
            "plugin `{plugin}` tool `{tool}`: checking its result failed: {panicked}"
        ))
        .into(),
        Err(_) => {
            let reason = format!(
                "{} while its result was {what}",
                limits::time_limit_message(plugin, time.limit)
            );
            tracing::warn!(plugin, tool, trace_id, "{reason}");
            slot.stats.failed(&reason);
            convert::error_result(reason).into()
        }
    }
}

/// A plugin's error text, or a reason that quotes the plugin, cut to
/// [`convert::MAX_ERROR_TEXT`] bytes: it reaches the client (escaped in messages), the
/// log, the status and the events.
pub(super) fn cut_error(text: String) -> String {
    crate::protocol::cut_owned(text, convert::MAX_ERROR_TEXT)
}
