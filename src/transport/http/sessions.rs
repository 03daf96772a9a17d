//! The HTTP front's sessions by `Mcp-Session-Id`: made at `initialize` (or a legacy
//! `GET /sse`), ended by `DELETE`, by the client leaving a legacy stream, or after
//! `session_idle_timeout` without a request or a reader.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use serde_json::json;

use super::streams::Streams;
use crate::config::HttpConfig;
use crate::gateway::Gateway;
use crate::peer::{ClientPeer, Principal};
use crate::session::{RequestBounds, Session};
use crate::telemetry::events::Status;

/// One client of the HTTP front.
pub struct HttpSession {
    pub session: Arc<Session>,
    pub streams: Arc<Streams>,
    pub remote: String,
    /// The legacy HTTP+SSE transport: answers travel on the `GET` stream.
    pub legacy: bool,
    /// When a request last came, in ms since the table was made.
    last_seen: AtomicU64,
    /// What events call it: its number in the table. The id is the session's key, and
    /// whoever read it could use the session.
    pub label: String,
}

impl HttpSession {
    pub fn id(&self) -> &str {
        &self.session.peer.id
    }

    /// Whether `caller`, over the transport `legacy` says, may use this session: only with
    /// the token that opened it, and over Streamable HTTP only on the path (profile) it was
    /// opened on (a legacy session's messages come to `/messages`, which names none).
    pub fn belongs_to(&self, caller: &super::Caller, legacy: bool) -> bool {
        let principal = self.principal();
        self.legacy == legacy
            && principal.token.as_deref() == caller.token.as_deref()
            && (legacy || principal.profile.as_deref() == caller.profile.as_deref())
    }

    /// Who opened it: its token and profile.
    pub fn principal(&self) -> &Principal {
        self.session.peer.principal()
    }

    /// Marks the session as used now (it does not expire while used).
    pub fn seen(&self, sessions: &Sessions) {
        self.last_seen.store(sessions.now(), Ordering::Relaxed);
    }
}

pub struct Sessions {
    map: RwLock<HashMap<String, Arc<HttpSession>>>,
    started: Instant,
    max: usize,
    max_per_token: usize,
    idle: Duration,
    next_label: AtomicU64,
    /// Requests in flight over all sessions, and the bounds on them.
    requests: Arc<RequestBounds>,
}

/// Why no session was made.
pub enum Full {
    /// `max_sessions` are open.
    Gateway,
    /// The token has `max_sessions_per_token` open.
    Token(String),
}

impl Sessions {
    pub fn new(config: &HttpConfig) -> Arc<Sessions> {
        Arc::new(Sessions {
            map: RwLock::new(HashMap::new()),
            started: Instant::now(),
            max: config.max_sessions,
            max_per_token: config.max_sessions_per_token,
            idle: config.session_idle_timeout,
            next_label: AtomicU64::new(1),
            requests: RequestBounds::new(config.max_requests_per_session, config.max_requests),
        })
    }

    /// The bounds on requests in flight, for requests outside a session too.
    pub fn requests(&self) -> Arc<RequestBounds> {
        self.requests.clone()
    }

    fn now(&self) -> u64 {
        self.started.elapsed().as_millis() as u64
    }

    /// A new session, not in the table until [`Self::insert`] (an `initialize` that fails
    /// leaves none behind).
    pub fn create(
        &self,
        gateway: &Arc<Gateway>,
        opener: super::Caller,
        legacy: bool,
    ) -> Result<Arc<HttpSession>, Full> {
        if self.len() >= self.max {
            return Err(Full::Gateway);
        }
        if let Some(token) = &opener.token {
            let map = self.map.read().unwrap();
            let open = map
                .values()
                .filter(|s| s.principal().token.as_deref() == Some(token.as_str()))
                .count();
            if open >= self.max_per_token {
                return Err(Full::Token(token.clone()));
            }
        }
        let streams = Streams::new(legacy);
        let session = Session::new(gateway.clone(), streams.clone());
        session.bound_requests(self.requests.clone());
        session.peer.set_principal(Principal {
            token: opener.token.map(Arc::from),
            profile: opener.profile.map(Arc::from),
            operator: opener.operator,
        });
        Ok(Arc::new(HttpSession {
            session,
            streams,
            remote: opener.remote,
            legacy,
            last_seen: AtomicU64::new(self.now()),
            label: format!("s{}", self.next_label.fetch_add(1, Ordering::Relaxed)),
        }))
    }

    pub fn insert(&self, session: &Arc<HttpSession>) {
        self.map
            .write()
            .unwrap()
            .insert(session.id().to_string(), session.clone());
        crate::telemetry::metrics::sessions_open(self.len());
        let peer = &session.session.peer;
        session.session.gateway.events.emit(
            "session.opened",
            "wasmgate",
            Status::Success,
            json!({
                "session": session.label,
                "transport": if session.legacy { "sse" } else { "streamable-http" },
                "client": peer.client_info(),
                "protocol_version": peer.protocol_version(),
                "profile": session.principal().profile.as_deref(),
                "token": session.principal().token.as_deref(),
                "remote": session.remote,
            }),
        );
    }

    /// The session `id`, if `caller` may use it over the transport `legacy` says (see
    /// [`HttpSession::belongs_to`]); marked as seen now. Another caller's look-up does not
    /// keep it alive.
    pub fn get(&self, id: &str, caller: &super::Caller, legacy: bool) -> Option<Arc<HttpSession>> {
        let session = self.map.read().unwrap().get(id).cloned()?;
        if !session.belongs_to(caller, legacy) {
            return None;
        }
        session.seen(self);
        Some(session)
    }

    /// The clients of the sessions open, for the status page.
    pub fn peers(&self) -> Vec<Arc<ClientPeer>> {
        (self.map.read().unwrap().values())
            .map(|session| session.session.peer.clone())
            .collect()
    }

    pub fn len(&self) -> usize {
        self.map.read().unwrap().len()
    }

    /// Ends session `id`: its requests in flight are cancelled and its streams end.
    pub fn remove(&self, id: &str, why: &str) -> bool {
        let Some(session) = self.map.write().unwrap().remove(id) else {
            return false;
        };
        crate::telemetry::metrics::sessions_open(self.len());
        session.session.close();
        session.streams.close_all();
        session.session.gateway.events.emit(
            "session.closed",
            "wasmgate",
            Status::Success,
            json!({
                "session": session.label,
                "reason": why,
                "profile": session.principal().profile.as_deref(),
                "token": session.principal().token.as_deref(),
            }),
        );
        true
    }

    /// Ends the connections reading sessions' own streams (shutdown: they would stay open
    /// for ever); request streams end with their answers.
    pub fn end_session_streams(&self) {
        for session in self.map.read().unwrap().values() {
            session.streams.end_session_stream();
        }
    }

    /// Ends every session (shutdown).
    pub fn remove_all(&self, why: &str) {
        let ids: Vec<String> = self.map.read().unwrap().keys().cloned().collect();
        for id in ids {
            self.remove(&id, why);
        }
    }

    /// Ends the sessions idle for longer than `session_idle_timeout`: no request and no
    /// reader of their streams.
    pub fn expire(&self) {
        let now = self.now();
        let idle_ms = self.idle.as_millis() as u64;
        let stale: Vec<String> = self
            .map
            .read()
            .unwrap()
            .values()
            .filter(|s| {
                let busy = s.session.requests_in_flight() > 0 || s.streams.has_reader();
                if busy {
                    s.last_seen.store(now, Ordering::Relaxed);
                }
                !busy && now.saturating_sub(s.last_seen.load(Ordering::Relaxed)) > idle_ms
            })
            .map(|s| s.id().to_string())
            .collect();
        for id in stale {
            self.remove(&id, "idle");
        }
    }

    /// Runs [`Self::expire`] until the table is dropped.
    pub fn spawn_expiry(self: &Arc<Self>) {
        let period = (self.idle / 4).clamp(Duration::from_millis(50), Duration::from_secs(30));
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(period);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                match weak.upgrade() {
                    Some(sessions) => sessions.expire(),
                    None => return,
                }
            }
        });
    }
}
