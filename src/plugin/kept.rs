//! Instances kept between calls, for plugins whose `instance` is `"session"` (one per
//! client session) or `"shared"` (a few for everyone). A kept instance serves one call at a
//! time; it is dropped after a call that trapped, hit a limit or was cut off (its memory
//! may be half-written), when its version is replaced or unloaded, and per its policy
//! (a session ended or idle, a shared instance's `max_calls_per_instance`). An idle one
//! also goes when a call of any plugin finds every instance slot taken (see
//! [`Calls::make_room`]): idle, it would hold its slot for nothing.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::sync::{Mutex as AsyncMutex, OwnedMutexGuard, OwnedSemaphorePermit};
use wasmtime::Store;

use super::calls::Calls;
use super::kind::Bound;
use super::lock;
use super::sandbox::StoreState;
use crate::config::{InstanceMode, InstancePolicy, MAX_CALLS_AT_ONCE};

/// Sessions of one plugin version that keep an instance at most: each holds an instance
/// slot for as long as it lives. A session past these takes the instance of the session
/// that called least recently.
pub const MAX_SESSION_INSTANCES: usize = MAX_CALLS_AT_ONCE;

/// An instance between calls: its store, its slot, and its tag.
pub struct Held {
    pub store: Store<StoreState>,
    pub instance: Bound,
    pub permit: OwnedSemaphorePermit,
    pub tag: Tag,
}

/// What a kept instance carries from call to call besides its store: the calls it served,
/// when its last call ended, and its count among the live ones.
pub struct Tag {
    calls: u64,
    last_used: Instant,
    _live: Live,
}

/// Counts an instance among its version's live ones for as long as it exists.
struct Live(Arc<AtomicUsize>);

impl Drop for Live {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

/// One session's instance, and when the session last called.
struct Place {
    held: Arc<AsyncMutex<Option<Held>>>,
    /// ms since [`Kept::created`].
    last_used: AtomicU64,
}

pub struct Kept {
    policy: InstancePolicy,
    /// `shared`: the instances no call holds, the warmest last.
    idle: Mutex<Vec<Held>>,
    /// `session`: by session id.
    sessions: Mutex<HashMap<Arc<str>, Arc<Place>>>,
    live: Arc<AtomicUsize>,
    /// Set when the version is replaced or unloaded: nothing is kept from then on.
    closed: AtomicBool,
    created: Instant,
}

/// Why no kept instance could be had.
pub enum Busy {
    /// The session's instance stayed in use by another of its calls.
    Session,
}

/// A call's claim on a kept instance: the one it takes, if any (else it makes one), and
/// where that instance goes back after a clean call.
pub struct Lease {
    kept: Arc<Kept>,
    /// The session's place, locked for the call: its other calls wait.
    place: Option<(Arc<str>, OwnedMutexGuard<Option<Held>>)>,
    shared: bool,
}

impl Kept {
    pub fn new(policy: InstancePolicy) -> Kept {
        Kept {
            policy,
            idle: Mutex::default(),
            sessions: Mutex::default(),
            live: Arc::default(),
            closed: AtomicBool::new(false),
            created: Instant::now(),
        }
    }

    pub fn mode(&self) -> InstanceMode {
        self.policy.mode
    }

    /// Instances alive now, idle or serving a call.
    pub fn live(&self) -> usize {
        self.live.load(Ordering::Relaxed)
    }

    fn now_ms(&self) -> u64 {
        self.created.elapsed().as_millis() as u64
    }

    /// A lease for a call of `session`, waiting at most `wait` for the session's other
    /// call; `None` when this mode keeps nothing for the call (`call`, or `session`
    /// outside any session). With `evicted`, the instances to drop that made room.
    pub async fn lease(
        self: &Arc<Self>,
        session: Option<&Arc<str>>,
        wait: Duration,
        evicted: &mut Vec<Held>,
    ) -> Result<Option<Lease>, Busy> {
        match (self.policy.mode, session) {
            (InstanceMode::Shared, _) => Ok(Some(Lease {
                kept: self.clone(),
                place: None,
                shared: true,
            })),
            (InstanceMode::Session, Some(id)) => {
                let place = self.place(id, evicted);
                let guard = tokio::time::timeout(wait, place.held.clone().lock_owned())
                    .await
                    .map_err(|_| Busy::Session)?;
                Ok(Some(Lease {
                    kept: self.clone(),
                    place: Some((id.clone(), guard)),
                    shared: false,
                }))
            }
            _ => Ok(None),
        }
    }

    /// Session `id`'s place, made if new; a new one past [`MAX_SESSION_INSTANCES`] takes
    /// the instance of the idle session that called least recently.
    fn place(&self, id: &Arc<str>, evicted: &mut Vec<Held>) -> Arc<Place> {
        let mut sessions = lock(&self.sessions);
        if let Some(place) = sessions.get(id) {
            place.last_used.store(self.now_ms(), Ordering::Relaxed);
            return place.clone();
        }
        if self.live() >= MAX_SESSION_INSTANCES {
            let oldest = sessions
                .values()
                .filter_map(|p| {
                    Some((p.last_used.load(Ordering::Relaxed), p.held.try_lock().ok()?))
                })
                .filter(|(_, held)| held.is_some())
                .min_by_key(|(used, _)| *used);
            if let Some((_, mut held)) = oldest {
                evicted.extend(held.take());
            }
        }
        let place = Arc::new(Place {
            held: Arc::default(),
            last_used: AtomicU64::new(self.now_ms()),
        });
        sessions.insert(id.clone(), place.clone());
        place
    }

    /// Takes what session `id` keeps: the session ended.
    pub fn end_session(&self, id: &str) -> Option<Held> {
        let place = lock(&self.sessions).remove(id)?;
        // A call in flight gives its instance back to a place no longer listed: it is
        // dropped then (see `Lease::give_back`).
        let mut held = place.held.try_lock().ok()?;
        held.take()
    }

    /// Takes the instances of sessions idle for longer than `instance_idle`, and forgets
    /// those sessions.
    pub fn sweep(&self) -> Vec<Held> {
        let idle_ms = self.policy.idle.as_millis() as u64;
        let now = self.now_ms();
        let mut taken = Vec::new();
        lock(&self.sessions).retain(|_, place| {
            if now.saturating_sub(place.last_used.load(Ordering::Relaxed)) < idle_ms {
                return true;
            }
            match place.held.try_lock() {
                Ok(mut held) => {
                    taken.extend(held.take());
                    false
                }
                Err(_in_use) => true,
            }
        });
        taken
    }

    /// When each instance no call holds was last used, with where it is kept: the shared
    /// ones (`None`), or a session's place.
    fn idle_ones(&self) -> Vec<(Instant, Option<Arc<Place>>)> {
        let mut found: Vec<_> = (lock(&self.idle).iter())
            .map(|held| (held.tag.last_used, None))
            .collect();
        for place in lock(&self.sessions).values() {
            if let Ok(held) = place.held.try_lock()
                && let Some(held) = &*held
            {
                found.push((held.tag.last_used, Some(place.clone())));
            }
        }
        found
    }

    /// Takes an idle instance found by [`Self::idle_ones`], if no call took it since: the
    /// session's, or the shared one used least recently.
    fn take_idle(&self, place: Option<&Place>) -> Option<Held> {
        match place {
            Some(place) => place.held.try_lock().ok()?.take(),
            None => {
                let mut idle = lock(&self.idle);
                (!idle.is_empty()).then(|| idle.remove(0))
            }
        }
    }

    /// Takes every instance not in a call, and keeps none from now on: the version is
    /// replaced or unloaded.
    pub fn close(&self) -> Vec<Held> {
        self.closed.store(true, Ordering::Release);
        let mut taken = std::mem::take(&mut *lock(&self.idle));
        for (_, place) in lock(&self.sessions).drain() {
            if let Ok(mut held) = place.held.try_lock() {
                taken.extend(held.take());
            }
        }
        taken
    }
}

impl Lease {
    /// The instance to run the call in, if one is kept.
    pub fn take(&mut self) -> Option<Held> {
        if self.shared {
            return lock(&self.kept.idle).pop();
        }
        self.place.as_mut().and_then(|(_, held)| held.take())
    }

    /// The tag of an instance made for this lease's call.
    pub fn tag(&self) -> Tag {
        self.kept.live.fetch_add(1, Ordering::Relaxed);
        Tag {
            calls: 0,
            last_used: Instant::now(),
            _live: Live(self.kept.live.clone()),
        }
    }

    /// Keeps `held` after a clean call; what it does not keep (the version closed, the
    /// session ended, a shared instance at its call limit) comes back, to be dropped.
    pub fn give_back(self, mut held: Held) -> Option<Held> {
        held.tag.calls += 1;
        held.tag.last_used = Instant::now();
        let kept = &self.kept;
        if kept.closed.load(Ordering::Acquire) {
            return Some(held);
        }
        if self.shared {
            if kept
                .policy
                .max_calls
                .is_some_and(|max| held.tag.calls >= max)
            {
                return Some(held);
            }
            lock(&kept.idle).push(held);
            return None;
        }
        let (id, mut guard) = self.place?;
        let listed = lock(&kept.sessions)
            .get(&id)
            .is_some_and(|place| Arc::ptr_eq(&place.held, OwnedMutexGuard::mutex(&guard)));
        if !listed {
            return Some(held);
        }
        *guard = Some(held);
        None
    }
}

/// How often kept sessions' idle time is checked, with a session-kept plugin loaded and
/// without: an idle instance goes at most this late.
const SWEEP_EVERY: Duration = Duration::from_secs(1);
const SWEEP_EVERY_UNUSED: Duration = Duration::from_secs(5);

impl Calls {
    /// Client session `id` ended: the instances kept for it go.
    pub(super) fn end_session(&self, id: &str) {
        let held: Vec<Held> = (self.slots.load().values())
            .filter_map(|slot| slot.current.load().kept.end_session(id))
            .collect();
        self.drop_kept(held);
    }

    /// Drops idle kept instances of any plugin, the least recently used first, until
    /// `units` instance slots are free or no idle one is left. Kept instances hold their
    /// slots between calls: without this, sessions that keep instances of a few plugins
    /// took every slot, and calls of other plugins waited for one until they timed out.
    pub(super) fn make_room(&self, units: u32) {
        let mut free = self.instances.available_permits();
        if free >= units as usize {
            return;
        }
        let mut idle: Vec<(Instant, Arc<Kept>, Option<Arc<Place>>)> = Vec::new();
        for slot in self.slots.load().values() {
            let kept = slot.current.load().kept.clone();
            let found = kept.idle_ones();
            idle.extend(
                found
                    .into_iter()
                    .map(|(at, place)| (at, kept.clone(), place)),
            );
        }
        idle.sort_by_key(|(at, ..)| *at);
        let mut taken = Vec::new();
        for (_, kept, place) in idle {
            if free >= units as usize {
                break;
            }
            if let Some(held) = kept.take_idle(place.as_deref()) {
                free += held.permit.num_permits();
                taken.push(held);
            }
        }
        if !taken.is_empty() {
            tracing::debug!(
                dropped = taken.len(),
                "idle kept instances dropped to free instance slots for a call"
            );
        }
        // Their slots come back once they are dropped, on a plugin thread; the call waits
        // for them as for any slot.
        self.drop_kept(taken);
    }

    /// Drops the instances of sessions idle past their plugin's `instance_idle`, for as
    /// long as the host lives.
    pub(super) fn start_sweeping(&self) {
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return;
        };
        let host = self.this.clone();
        runtime.spawn(async move {
            loop {
                let Some(host) = host.upgrade() else {
                    return;
                };
                let mut any = false;
                let mut idle = Vec::new();
                for slot in host.slots.load().values() {
                    let kept = &slot.current.load().kept;
                    if kept.mode() == InstanceMode::Session {
                        any = true;
                        idle.extend(kept.sweep());
                    }
                }
                host.drop_kept(idle);
                drop(host);
                tokio::time::sleep(if any { SWEEP_EVERY } else { SWEEP_EVERY_UNUSED }).await;
            }
        });
    }
}
