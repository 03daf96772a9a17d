//! The ready pools' refill: instances made ahead of calls on the plugin threads, within
//! what the instance slots leave to calls; and the discarding of a version's spare
//! instances, ready or kept, when it is replaced or unloaded.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use super::calls::{Calls, TIMEOUT_GRACE};
use super::version::Version;
use super::{engine, limits, pool};
use crate::telemetry::traces;

/// Units the ready pools leave to calls: with many plugins in use, their ready
/// instances could otherwise hold every slot while a call waits for one.
const READY_HEADROOM: usize = (engine::MAX_INSTANCES / 2 * engine::SLOT_UNITS) as usize;

impl Calls {
    /// Whether `version` is what its plugin's calls get now (not replaced or unloaded).
    pub(super) fn is_current(&self, version: &Arc<Version>) -> bool {
        self.slots
            .load()
            .get(&*version.name)
            .is_some_and(|slot| Arc::ptr_eq(&slot.current.load(), version))
    }

    /// Drops `version`'s used stores and tops up its ready instances, in the background
    /// and with instance budget to spare only: calls waiting for a slot come first; and
    /// after the answer of the call that asks for it is written (see below). `cause` is
    /// that call's `traceparent`, which the refill's span links to.
    pub(super) fn refill(&self, version: &Arc<Version>, cause: Option<Arc<str>>) {
        if !self.ready_pool.load(Ordering::Relaxed) {
            // Measuring without the pool: used stores still give their slots back.
            drop(version.pool.take_used());
            return;
        }
        // A version replaced or unloaded meanwhile gets no new instances, only its
        // used stores dropped.
        if !self.is_current(version) {
            self.discard(version);
            return;
        }
        version.pool.note_ask();
        if !version.pool.needs_refill() || !version.pool.start_filling() {
            return;
        }
        let Some(host) = self.this.upgrade() else {
            return;
        };
        let version = version.clone();
        // Waking a plugin thread is a syscall, and the woken thread may take the core from
        // this one before the answer is written (it did, delaying the answer). A task that
        // yields runs only after every task ready now has run,
        // the writer of the call's answer among them.
        tokio::spawn(async move {
            tokio::task::yield_now().await;
            let traced = traces::linked("plugin refill", &version.name, cause.as_deref());
            let fill = host.clone().fill(version);
            host.workers.spawn(async move {
                traces::within(traced.as_ref(), fill).await;
                traces::end(traced, None);
            });
        });
    }

    /// The refill's work on a plugin thread: drops used stores and makes ready instances
    /// until `version`'s pool is full, the instance budget runs low, or a reload replaces it.
    /// A full pool keeps it a moment longer (see [`pool::REFILL_LINGER`]).
    pub(super) async fn fill(self: Arc<Self>, version: Arc<Version>) {
        loop {
            drop(version.pool.take_used());
            // A reload may replace the version while this runs: no instances for it then.
            if !self.is_current(&version) {
                break;
            }
            if version.pool.missing() == 0 {
                if version.pool.wait_for_work(pool::REFILL_LINGER).await {
                    continue;
                }
                break;
            }
            if self.instances.available_permits() <= READY_HEADROOM {
                break;
            }
            let Ok(permit) = self
                .instances
                .clone()
                .try_acquire_many_owned(version.code.units)
            else {
                break;
            };
            let Ok(mut store) = self.new_store(&version) else {
                break;
            };
            let limits = &version.settings.limits;
            if limits::arm(&mut store, limits.timeout, self.fuel_enabled, limits.fuel).is_err() {
                break;
            }
            let busy = self.ticker.busy();
            // The epoch deadline stops guest code; this stops a guest blocked in a host call,
            // so that a stuck warm-up frees its slot and the pool refills.
            let warm_up = async {
                match version.code.pre.instantiate_async(&mut store).await {
                    Ok(instance) if version.code.big_runtime => {
                        instance.warm_up(&mut store).await.map(|()| instance)
                    }
                    other => other,
                }
            };
            let made = tokio::time::timeout(limits.timeout + TIMEOUT_GRACE, warm_up)
                .await
                .unwrap_or_else(|_| Err(wasmtime::Error::msg("the warm-up outran the time limit")));
            drop(busy);
            match made {
                Ok(instance) => version.pool.put(pool::Ready {
                    store,
                    instance,
                    permit,
                }),
                Err(e) => {
                    tracing::debug!(plugin = %version.name, error = %limits::chain(&e), "cannot prepare an instance");
                    break;
                }
            }
        }
        version.pool.done_filling();
        // A call that ended after the last take above saw the refill running and left
        // its store here: drop it now, or it would wait for that version's next call.
        drop(version.pool.take_used());
        // An instance made across a reload would wait in the old version's pool for as
        // long as anything holds that version.
        if !self.is_current(&version) {
            self.discard(&version);
        }
    }

    /// Empties `version`'s ready pool and drops the instances it keeps, resetting their
    /// stores on a plugin thread: a Python store's reset writes megabytes, too slow for
    /// the I/O thread. Calls in flight finish on their instances, which are dropped then.
    pub(super) fn discard(&self, version: &Version) {
        let stores = version.pool.drain();
        let kept = version.kept.close();
        self.workers.spawn(async move { drop((stores, kept)) });
    }
}
