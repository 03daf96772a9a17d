//! `subscriptions/listen` toward a stateless-era (2026-07-28) server: such a server sends
//! list changes and resource updates only on a listen stream, so each run of it keeps one
//! open, asking for what its `server/discover` offers and for the URIs clients subscribed
//! to through it. What comes on it enters the gateway as a session-era server's
//! notifications do (untagged), so fan-out, views and the security rule stay one path.

use std::collections::BTreeSet;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use serde_json::value::RawValue;
use serde_json::{Value, json};
use tokio::sync::{mpsc, watch};
use tokio::task::{JoinError, JoinHandle};

use super::mcp_client::{Answer, Upstream};
use super::modern::Stamped;
use super::supervisor::{HEALTHY_RUN, MAX_BACKOFF};
use super::{BackendError, BackendEvent, Discovered};
use crate::protocol::modern::{ACKNOWLEDGED, LISTEN, META_SUBSCRIPTION_ID, listen_filter};
use crate::protocol::{self, Message, RpcError, methods};

/// How long a listen may stay open: in effect for ever (the server or the run ends it).
const OPEN_FOR: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// The last acknowledgement a server sent: its listen is the one whose notifications count.
#[derive(Debug, Clone, Default)]
struct Ack {
    /// Acknowledgements so far.
    count: u64,
    /// The listen's id (`subscriptionId`).
    id: Value,
    /// Which generation of the wanted URIs the listen asked for.
    generation: u64,
    /// The URIs it honoured.
    uris: Vec<String>,
}

/// One server's listen, across its runs: what clients want of it, and what it honoured.
#[derive(Debug)]
pub struct Listen {
    /// URIs subscribed to through this server (a `resources/subscribe` that reached it).
    uris: Mutex<BTreeSet<String>>,
    /// Bumped when `uris` change: the open listen is replaced by one asking for them.
    wanted: watch::Sender<u64>,
    /// The generation the listen being opened asks for.
    opening: Mutex<u64>,
    acked: watch::Sender<Ack>,
    /// The server of this run answered a listen with -32601: it serves none.
    refused: AtomicBool,
}

impl Default for Listen {
    fn default() -> Self {
        Listen {
            uris: Mutex::new(BTreeSet::new()),
            wanted: watch::channel(0).0,
            opening: Mutex::new(0),
            acked: watch::channel(Ack::default()).0,
            refused: AtomicBool::new(false),
        }
    }
}

/// What a server's `server/discover` offers to send on a listen.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Offered {
    tools: bool,
    prompts: bool,
    resources: bool,
    updates: bool,
}

impl Offered {
    fn of(discovered: &Discovered) -> Offered {
        let caps = &discovered.capabilities;
        Offered {
            tools: caps["tools"]["listChanged"] == true,
            prompts: caps["prompts"]["listChanged"] == true,
            resources: caps["resources"]["listChanged"] == true,
            updates: caps["resources"]["subscribe"] == true,
        }
    }

    /// `params.notifications` of a listen for `uris`; `None` when it would ask for nothing.
    fn filter(self, uris: &BTreeSet<String>) -> Option<Value> {
        let uris: Vec<String> = uris.iter().cloned().collect();
        let uris = (self.updates && !uris.is_empty()).then_some(uris.as_slice());
        let filter = listen_filter(self.tools, self.prompts, self.resources, uris);
        (filter.as_object().is_some_and(|f| !f.is_empty())).then_some(filter)
    }

    /// The list changes it offers, as the notifications a session-era server sends.
    fn list_changes(self) -> impl Iterator<Item = &'static str> {
        [
            (self.tools, methods::TOOLS_LIST_CHANGED),
            (self.prompts, methods::PROMPTS_LIST_CHANGED),
            (self.resources, methods::RESOURCES_LIST_CHANGED),
        ]
        .into_iter()
        .filter_map(|(on, method)| on.then_some(method))
    }
}

/// The listen's id a notification is tagged with, if any.
fn tag_of(params: Option<&Value>) -> Option<&Value> {
    params?.get("_meta")?.get(META_SUBSCRIPTION_ID)
}

/// `params` without the listen's tag (an empty `_meta` goes too): the gateway's clients
/// get its own tag, or none.
fn untagged(params: Option<Value>) -> Option<Value> {
    let mut params = params?;
    if let Some(meta) = params.get_mut("_meta").and_then(Value::as_object_mut) {
        meta.remove(META_SUBSCRIPTION_ID);
        if meta.is_empty() {
            params.as_object_mut().map(|p| p.remove("_meta"));
        }
    }
    Some(params)
}

impl Listen {
    /// What of a server's own `message` goes on to the gateway. An acknowledgement is kept
    /// here; a notification tagged as a listen's is taken from the listen open now alone,
    /// untagged, and only of the kinds a listen carries (the spec keeps log lines and
    /// progress off listen streams). Anything else passes as it is.
    pub(super) fn screen(&self, server: &str, message: Message) -> Option<Message> {
        let Message::Notification { method, params } = message else {
            return Some(message);
        };
        if method == ACKNOWLEDGED {
            self.acknowledged(server, params.as_ref());
            return None;
        }
        let Some(tag) = tag_of(params.as_ref()) else {
            return Some(Message::Notification { method, params });
        };
        if *tag != self.acked.borrow().id {
            tracing::debug!(server, %tag, method, "a notification of a listen no longer open; dropped");
            return None;
        }
        let carried = matches!(
            method.as_str(),
            methods::TOOLS_LIST_CHANGED
                | methods::PROMPTS_LIST_CHANGED
                | methods::RESOURCES_LIST_CHANGED
                | methods::RESOURCES_UPDATED
        );
        if !carried {
            tracing::debug!(
                server,
                method,
                "a notification a listen stream does not carry; dropped"
            );
            return None;
        }
        let params = untagged(params);
        Some(Message::Notification { method, params })
    }

    fn acknowledged(&self, server: &str, params: Option<&Value>) {
        let id = tag_of(params).cloned().unwrap_or(Value::Null);
        let uris = (params.and_then(|p| p["notifications"]["resourceSubscriptions"].as_array()))
            .map(|uris| {
                (uris.iter())
                    .filter_map(|u| u.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let generation = *self.opening.lock().unwrap();
        tracing::debug!(server, %id, ?uris, "listen acknowledged");
        self.acked.send_modify(|ack| {
            *ack = Ack {
                count: ack.count + 1,
                id,
                generation,
                uris,
            }
        });
    }

    /// The URIs of a new run: those live clients subscribed to through the server.
    pub(super) fn restore(&self, uris: Vec<String>) {
        let uris: BTreeSet<String> = uris.into_iter().collect();
        let mut wanted = self.uris.lock().unwrap();
        if *wanted != uris {
            *wanted = uris;
            self.wanted.send_modify(|g| *g += 1);
        }
    }

    /// `resources/subscribe` or `unsubscribe` to a stateless server (which has neither):
    /// the URI joins or leaves the listen's filter. A subscription is answered once the
    /// server acknowledged a listen with it (an error when it left the URI out), or at
    /// `timeout` while no listen is open (the next one asks for it).
    pub(super) async fn subscription(
        &self,
        server: &str,
        discovered: &Discovered,
        method: &str,
        params: Option<&Value>,
        timeout: Duration,
    ) -> Answer {
        let refused = |message: String| BackendError::Rpc {
            server: server.to_string(),
            error: RpcError::new(protocol::INVALID_PARAMS, message),
        };
        let Some(uri) = params.and_then(|p| p.get("uri")).and_then(Value::as_str) else {
            return Err(refused(format!("{method} needs a string `uri`")));
        };
        if !Offered::of(discovered).updates || self.refused.load(Ordering::Acquire) {
            return Err(BackendError::Rpc {
                server: server.to_string(),
                error: RpcError::new(
                    protocol::METHOD_NOT_FOUND,
                    format!(
                        "server `{server}` offers no resource subscriptions (on subscriptions/listen)"
                    ),
                ),
            });
        }
        let empty = || RawValue::from_string("{}".into()).map_err(|e| refused(e.to_string()));
        if method == methods::RESOURCES_UNSUBSCRIBE {
            if self.uris.lock().unwrap().remove(uri) {
                self.wanted.send_modify(|g| *g += 1);
            }
            return empty();
        }
        let mut acked = self.acked.subscribe();
        let generation = {
            let mut uris = self.uris.lock().unwrap();
            if uris.insert(uri.to_string()) {
                self.wanted.send_modify(|g| *g += 1);
            }
            *self.wanted.borrow()
        };
        let answer = tokio::time::timeout(timeout, acked.wait_for(|a| a.generation >= generation));
        match answer.await {
            Ok(Ok(ack)) if !ack.uris.iter().any(|u| u == uri) => {
                self.uris.lock().unwrap().remove(uri);
                Err(refused(format!(
                    "server `{server}` did not take a subscription to {uri}"
                )))
            }
            _ => empty(),
        }
    }
}

/// Keeps a listen open for one run; dropping it (the run ended) closes it.
pub(super) struct Listening {
    task: JoinHandle<()>,
    /// Set once the first listen was acknowledged or failed.
    settled: watch::Receiver<bool>,
}

impl Listening {
    /// Resolves once the first listen is open (or failed), or at `limit`.
    pub(super) async fn settled(&self, limit: Duration) {
        let mut settled = self.settled.clone();
        let _ = tokio::time::timeout(limit, settled.wait_for(|s| *s)).await;
    }
}

impl Drop for Listening {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Opens the listen of a ready run over `upstream`, when the server is of the stateless
/// era and offers something to listen for.
pub(super) fn start<U: Upstream + Send + 'static>(
    listen: &Arc<Listen>,
    upstream: Arc<U>,
    discovered: &Discovered,
    to_gateway: &mpsc::UnboundedSender<BackendEvent>,
) -> Option<Listening> {
    if !super::modern::is_modern(discovered) {
        return None;
    }
    listen.refused.store(false, Ordering::Release);
    let (settled, settled_rx) = watch::channel(false);
    let keeper = Keeper {
        listen: listen.clone(),
        offered: Offered::of(discovered),
        server: upstream.server().to_string(),
        to_gateway: to_gateway.clone(),
        settled,
    };
    Some(Listening {
        task: tokio::spawn(keeper.keep(upstream)),
        settled: settled_rx,
    })
}

struct Keeper {
    listen: Arc<Listen>,
    offered: Offered,
    server: String,
    to_gateway: mpsc::UnboundedSender<BackendEvent>,
    settled: watch::Sender<bool>,
}

/// One listen request, open until the server answers it or the stream breaks; on a task
/// of its own, so that an old listen is still read while its successor opens. Dropping it
/// closes the listen (the request is given up, as a client's would be).
struct Request(JoinHandle<Answer>);

impl Request {
    fn open<U: Upstream + Send + 'static>(upstream: Arc<U>, filter: Value) -> Request {
        Request(tokio::spawn(async move {
            let params = json!({ "notifications": filter });
            (Stamped::gateway(&*upstream))
                .request_raw(LISTEN, Some(params), OPEN_FOR)
                .await
        }))
    }
}

impl Future for Request {
    type Output = Result<Answer, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.0).poll(cx)
    }
}

impl Drop for Request {
    fn drop(&mut self) {
        self.0.abort();
    }
}

impl Keeper {
    /// Keeps one listen open with the wanted filter: a new one replaces it when the URIs
    /// change (the old one closed once the new one is acknowledged, so nothing falls in
    /// between), and one that ends is opened again after the supervisor's backoff, the
    /// lists it may have missed changes of fetched again.
    async fn keep<U: Upstream + Send + 'static>(self, upstream: Arc<U>) {
        let mut wanted = self.listen.wanted.subscribe();
        let mut current: Option<Request> = None;
        let mut failures: u32 = 0;
        let mut missed = false;
        loop {
            let generation = *wanted.borrow_and_update();
            let uris = self.listen.uris.lock().unwrap().clone();
            let Some(filter) = self.offered.filter(&uris) else {
                self.settled.send_replace(true);
                drop(current.take());
                if wanted.changed().await.is_err() {
                    return;
                }
                continue;
            };
            *self.listen.opening.lock().unwrap() = generation;
            let before = self.listen.acked.borrow().count;
            let mut acks = self.listen.acked.subscribe();
            let mut next = Request::open(upstream.clone(), filter);
            let ended = tokio::select! {
                _ = acks.wait_for(|a| a.count > before) => None,
                ended = &mut next => Some(ended),
            };
            self.settled.send_replace(true);
            if let Some(ended) = ended {
                if let Ok(Err(BackendError::Rpc { error, .. })) = &ended
                    && error.code == protocol::METHOD_NOT_FOUND
                {
                    tracing::info!(server = %self.server, "the server does not serve subscriptions/listen: its changes will not reach clients");
                    self.listen.refused.store(true, Ordering::Release);
                    return;
                }
                failures += 1;
                missed = true;
                self.pause(failures, "opening it", ended).await;
                continue;
            }
            // The old listen (if any) closes now that the new one hears everything.
            current = Some(next);
            if std::mem::take(&mut missed) {
                self.fetch_again();
            }
            let since = Instant::now();
            let open_now = current.as_mut().expect("just opened");
            tokio::select! {
                ended = open_now => {
                    drop(current.take());
                    missed = true;
                    if since.elapsed() >= HEALTHY_RUN {
                        failures = 0;
                    }
                    failures += 1;
                    self.pause(failures, "while open", ended).await;
                }
                changed = wanted.changed() => if changed.is_err() {
                    return;
                },
            }
        }
    }

    /// Waits out the backoff after the `failures`th listen in a row that ended.
    async fn pause(&self, failures: u32, when: &str, ended: Result<Answer, JoinError>) {
        // The run itself ending (stopped, crashed, unreachable) is the supervisor's to say.
        let run_ends = matches!(
            ended,
            Ok(Err(BackendError::Stopped { .. }
                | BackendError::Crashed { .. }
                | BackendError::Unreachable { .. }))
        );
        let why = match ended {
            Ok(Ok(_)) => "the server ended it".to_string(),
            Ok(Err(err)) => err.to_string(),
            Err(err) => err.to_string(),
        };
        let backoff = Duration::from_millis(100 << (failures - 1).min(12)).min(MAX_BACKOFF);
        let backoff_ms = backoff.as_millis() as u64;
        let message = format!("subscriptions/listen ended {when} ({why}); opening it again");
        match run_ends {
            true => tracing::debug!(server = %self.server, backoff_ms, "{message}"),
            false => tracing::info!(server = %self.server, backoff_ms, "{message}"),
        }
        tokio::time::sleep(backoff).await;
    }

    /// After a gap in listening: each list the server offers changes of is fetched again,
    /// as if it had said it changed.
    fn fetch_again(&self) {
        for method in self.offered.list_changes() {
            let _ = self.to_gateway.send(BackendEvent::Notification {
                server: self.server.clone(),
                call: None,
                method: method.to_string(),
                params: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn notification(method: &str, params: Value) -> Message {
        Message::Notification {
            method: method.into(),
            params: Some(params),
        }
    }

    /// The acknowledgement is kept; the open listen's notifications pass untagged, an
    /// older listen's and log lines do not; untagged ones pass as they are.
    #[test]
    fn a_listens_messages_are_screened() {
        let listen = Listen::default();
        let tag = |id: u64| json!({ META_SUBSCRIPTION_ID: id });
        let ack = json!({"_meta": tag(3), "notifications": {"resourceSubscriptions": ["a://x"]}});
        assert!(
            listen
                .screen("s", notification(ACKNOWLEDGED, ack))
                .is_none()
        );
        assert_eq!(listen.acked.borrow().uris, ["a://x"]);
        let updated = json!({"uri": "a://x", "_meta": tag(3)});
        let passed = listen.screen("s", notification(methods::RESOURCES_UPDATED, updated));
        let Some(Message::Notification { params, .. }) = passed else {
            panic!("dropped")
        };
        assert_eq!(params, Some(json!({"uri": "a://x"})));
        let stale = json!({"_meta": tag(2)});
        let stale = notification(methods::TOOLS_LIST_CHANGED, stale);
        assert!(listen.screen("s", stale).is_none());
        let log = json!({"level": "info", "data": "x", "_meta": tag(3)});
        assert!(
            listen
                .screen("s", notification(methods::MESSAGE, log))
                .is_none()
        );
        let plain = notification(methods::MESSAGE, json!({"level": "info", "data": "x"}));
        assert!(listen.screen("s", plain).is_some());
    }

    #[test]
    fn a_filter_asks_only_for_what_is_offered() {
        let mut discovered = Discovered {
            capabilities: json!({"tools": {"listChanged": true}, "resources": {"subscribe": true}}),
            ..Default::default()
        };
        let offered = Offered::of(&discovered);
        let none = BTreeSet::new();
        assert_eq!(
            offered.filter(&none),
            Some(json!({"toolsListChanged": true}))
        );
        let uris = BTreeSet::from(["a://x".to_string()]);
        assert_eq!(
            offered.filter(&uris),
            Some(json!({"toolsListChanged": true, "resourceSubscriptions": ["a://x"]}))
        );
        discovered.capabilities = json!({"tools": {}});
        assert_eq!(Offered::of(&discovered).filter(&uris), None);
    }
}
