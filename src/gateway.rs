//! The gateway's shared state and its life: starting backends, turning backend events
//! into catalog swaps and client notifications, applying config changes, shutting down.

mod chain;
mod exclusive;
mod from_plugins;
mod from_servers;
mod rebuild;

pub use crate::relay::calls::CallInFlight;

use std::collections::BTreeMap;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, Weak};
use std::time::Instant;

use arc_swap::{ArcSwap, ArcSwapOption};
use chrono::{DateTime, Utc};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use crate::backend::Backend;
use crate::backend::{BackendEvent, BackendState, ClientRequests};
use crate::catalog::Catalog;
use crate::config::Config;
use crate::middleware::Chain;
use crate::peer::ClientPeer;
use crate::plugin::{PluginEvent, PluginHost};
use crate::protocol;
use crate::relay::Relay;
use crate::telemetry::events::{EventLog, Status};

/// A front's part of `gateway_status`; `None` once the front is gone.
pub type FrontStatus = Box<dyn Fn() -> Option<Value> + Send + Sync>;

pub struct Gateway {
    pub config: ArcSwap<Config>,
    pub events: Arc<EventLog>,
    pub(crate) backends: Mutex<BTreeMap<String, Backend>>,
    pub(crate) catalog: ArcSwap<Catalog>,
    /// Marked changed each time the catalog is swapped: what a call to a tool not yet
    /// known waits on.
    catalog_swapped: tokio::sync::watch::Sender<()>,
    /// Set once the plugin host has loaded its plugins (absent when none are configured).
    plugins: ArcSwapOption<PluginHost>,
    /// True while the plugin host is still loading (the first lists wait for it).
    plugins_loading: tokio::sync::watch::Sender<bool>,
    /// Every server present at start has left `Starting` and the catalog shows it.
    startup_settled: std::sync::atomic::AtomicBool,
    to_gateway: mpsc::UnboundedSender<BackendEvent>,
    /// What the catalog was last built from; held while it is rebuilt.
    rebuild: Mutex<rebuild::Built>,
    /// Who holds each `exclusive = true` server.
    exclusive: exclusive::ExclusiveTurns,
    /// Rate limits, caps, the retry budget and the servers' circuit breakers.
    pub limits: crate::limits::Limits,
    /// What a front other than stdio reports in `gateway_status` (the HTTP listener).
    front_status: Mutex<Option<FrontStatus>>,
    /// What is kept of the clients beyond one message: who hears what servers send, the
    /// calls in flight, progress routes, subscriptions, parked stateless calls.
    pub relay: Relay,
    pub started: Instant,
    pub started_at: DateTime<Utc>,
    /// Each plugin event once the catalog shows it: `wasmgate dev` times its swaps by them.
    pub plugin_news: tokio::sync::broadcast::Sender<PluginEvent>,
    /// Set when the gateway stops: open `subscriptions/listen` streams end with their result.
    listens_end: tokio::sync::watch::Sender<bool>,
    /// The middleware chain in force (empty without `[[middleware]]`).
    middleware: ArcSwap<Chain>,
    /// What that chain was built from; held while it is rebuilt.
    chain_built: Mutex<chain::ChainBuilt>,
}

impl Gateway {
    /// Starts every enabled server (in parallel: each has its own task) and the event hub.
    pub fn start(config: Config) -> Arc<Gateway> {
        let events = Arc::new(EventLog::new(config.gateway.event_buffer));
        if let Some(path) = &config.gateway.events_file {
            open_events_file(&events, path);
        }
        let (to_gateway, from_backends) = mpsc::unbounded_channel();
        let limits = crate::limits::Limits::new(events.clone(), &config);
        let gateway = Arc::new(Gateway {
            config: ArcSwap::from_pointee(config.clone()),
            events,
            backends: Mutex::new(BTreeMap::new()),
            catalog: ArcSwap::from_pointee(Catalog::default()),
            catalog_swapped: tokio::sync::watch::channel(()).0,
            plugins: ArcSwapOption::empty(),
            plugins_loading: tokio::sync::watch::channel(false).0,
            startup_settled: std::sync::atomic::AtomicBool::new(false),
            to_gateway,
            rebuild: Mutex::default(),
            front_status: Mutex::new(None),
            relay: Relay::new(&config),
            exclusive: Default::default(),
            limits,
            started: Instant::now(),
            started_at: Utc::now(),
            plugin_news: tokio::sync::broadcast::channel(64).0,
            listens_end: tokio::sync::watch::channel(false).0,
            middleware: ArcSwap::from_pointee(Chain::default()),
            chain_built: Mutex::default(),
        });
        for server in config.servers.values().filter(|s| !s.disabled) {
            gateway.start_server(server.clone());
        }
        gateway.start_plugins(&config);
        gateway.rebuild_catalog();
        tokio::spawn(hub(Arc::downgrade(&gateway), from_backends));
        tokio::spawn(crate::memory::give_back_when_idle());
        gateway.events.emit(
            "gateway.started",
            "wasmgate",
            Status::Success,
            json!({"version": env!("CARGO_PKG_VERSION"), "servers": config.servers.len(),
                   "config": config.source.as_ref().map(|p| p.display().to_string())}),
        );
        gateway
    }

    fn start_server(&self, server: crate::config::ServerConfig) {
        let name = server.name.clone();
        let config = self.config.load();
        let backend = Backend::start(
            server,
            &config.gateway,
            config.plugins.cache_dir.as_deref(),
            self.events.clone(),
            self.to_gateway.clone(),
        );
        self.backends.lock().unwrap().insert(name, backend);
    }

    pub fn backend(&self, name: &str) -> Option<Backend> {
        self.backends.lock().unwrap().get(name).cloned()
    }

    pub fn servers(&self) -> Vec<Backend> {
        self.backends.lock().unwrap().values().cloned().collect()
    }

    pub fn catalog(&self) -> Arc<Catalog> {
        self.catalog.load_full()
    }

    /// Resolves once the event hub has handled every event the servers sent before this
    /// call (a state change's catalog check included): what a test waits on instead of a
    /// sleep, and a call waits on for the log lines its server sent before its answer.
    pub async fn events_handled(&self) {
        let (done, handled) = tokio::sync::oneshot::channel();
        if self.to_gateway.send(BackendEvent::Barrier { done }).is_ok() {
            let _ = handled.await;
        }
    }

    /// Waits (bounded by `startup_timeout` from gateway start) for servers still starting,
    /// so that the first list a client sees is complete in the common case.
    pub async fn wait_for_startup(&self) {
        let deadline = tokio::time::Instant::from_std(
            self.started + self.config.load().gateway.startup_timeout,
        );
        let _ = tokio::time::timeout_at(deadline, self.wait_for_plugins()).await;
        if self.startup_settled.load(Ordering::Acquire) {
            return;
        }
        let backends = self.servers();
        for backend in &backends {
            backend.wait_started(deadline).await;
        }
        // A server that has just left `Starting` is in the catalog only once the hub has
        // handled its event, so rebuild now, unless that catalog is built already.
        self.rebuild_catalog_if_servers_changed();
        if backends.iter().all(|b| b.state() != BackendState::Starting) {
            self.startup_settled.store(true, Ordering::Release);
        }
    }

    /// [`Self::wait_for_startup`], and with `plugins` the plugins configured at start too,
    /// however long they compile: what a one-shot command (`tools`, `call`) waits for, as no
    /// `list_changed` would reach it later.
    pub async fn wait_for_start(&self, plugins: bool) {
        self.wait_for_startup().await;
        if plugins && self.plugins_loading() {
            eprintln!("waiting for plugins to compile (compiled code is cached for the next run)…");
            self.wait_for_plugins().await;
        }
    }

    /// Waits until `tool` is in the catalog, or [`Self::wait_for_start`] is over: a call to
    /// a tool of a plugin that loaded in 0.2 s does not wait for CPython to compile.
    pub async fn wait_for_tool(&self, tool: &str, plugins: bool) {
        let appears = async {
            // Subscribed before looking: a swap in between is seen by `changed`.
            let mut swapped = self.catalog_swapped.subscribe();
            while self.catalog().tool(tool).is_none() {
                if swapped.changed().await.is_err() {
                    return;
                }
            }
        };
        tokio::select! {
            () = self.wait_for_start(plugins) => {}
            () = appears => {}
        }
    }

    /// Waits until the plugins configured at start are loaded or refused, however long
    /// compiling takes (a new CPython component: half a minute on a small machine).
    pub async fn wait_for_plugins(&self) {
        let _ = self.plugins_loading.subscribe().wait_for(|l| !*l).await;
    }

    /// Whether the plugins configured at start are still being compiled or loaded.
    pub fn plugins_loading(&self) -> bool {
        *self.plugins_loading.borrow()
    }

    /// Waits for `peer`'s turn at the `exclusive = true` server `server`, held for one call.
    pub async fn exclusive_turn(&self, server: &str, peer: &ClientPeer) -> exclusive::Turn<'_> {
        self.exclusive.take(server, &peer.id).await
    }

    pub fn set_front_status(&self, status: FrontStatus) {
        *self.front_status.lock().unwrap() = Some(status);
    }

    /// The HTTP front's listener, sessions and profiles, when one serves.
    pub fn front_status(&self) -> Option<Value> {
        self.front_status.lock().unwrap().as_ref().and_then(|f| f())
    }

    pub fn register_peer(&self, session: &Arc<ClientPeer>) {
        self.relay.peers.register(session);
    }

    pub(crate) fn live_sessions(&self) -> Vec<Arc<ClientPeer>> {
        self.relay.peers.live()
    }

    /// `notifications/message` from the gateway about plugin `logger` to every client that
    /// sees it, unless the client set a level above `level` (`logging/setLevel`). For what a
    /// client's user must act on, such as a plugin build the gateway refused; a plugin's own
    /// log lines wait for a level.
    pub fn tell_clients(&self, level: &str, logger: &str, data: &str) {
        for session in self.sessions_seeing(logger) {
            session.log(level, logger, data, true);
        }
    }

    /// Maps a client's progress token, for a request to `server`, to one that is unique
    /// across sessions and that no other server can guess, for as long as the returned
    /// mapping lives.
    pub fn register_progress(
        &self,
        server: &str,
        peer: &Arc<ClientPeer>,
        request: Option<Arc<str>>,
        token: Value,
    ) -> ProgressMapping<'_> {
        ProgressMapping {
            gateway: self,
            token: self.relay.progress.open(server, peer, request, token),
        }
    }

    /// Records `session`'s subscription to `uri` on `server`; once per session, however
    /// often it asks. `false` when it was subscribed already.
    pub fn subscribe(&self, session: &Arc<ClientPeer>, uri: &str, server: &str) -> bool {
        self.relay.subscriptions.subscribe(session, uri, server)
    }

    /// What a new process of `server` must be told again: the last log level a client
    /// set, and the URIs live sessions subscribed to through it.
    fn client_requests(&self, server: &str) -> ClientRequests {
        ClientRequests {
            log_level: self.server_log_level(server),
            subscriptions: self.relay.subscriptions.through_server(server),
        }
    }

    /// The level `server` should log at: the most verbose one that a live session which
    /// sees it set with `logging/setLevel` (each session gets only what its own level admits).
    pub fn server_log_level(&self, server: &str) -> Option<String> {
        let rank = (self.sessions_seeing(server).iter())
            .filter_map(|peer| peer.log_level())
            .min()?;
        protocol::LOG_LEVELS
            .get(usize::from(rank))
            .map(|level| level.to_string())
    }

    /// Returns true when no session is subscribed to `uri` any more.
    pub fn unsubscribe(&self, session: &Arc<ClientPeer>, uri: &str) -> bool {
        self.relay.subscriptions.unsubscribe(session, uri)
    }

    /// Applies a new configuration: servers added, removed or with a changed process
    /// (command, args, env, cwd) are started, stopped or restarted; the others keep running
    /// and take their new filters, timeouts and namespace at once.
    pub async fn reconfigure(self: &Arc<Self>, next: Config) {
        let previous = self.config.load_full();
        self.config.store(Arc::new(next.clone()));
        self.limits.reconfigure(&next.limits);
        if next.gateway.events_file != previous.gateway.events_file {
            match &next.gateway.events_file {
                Some(path) => open_events_file(&self.events, path),
                None => {
                    let _ = self.events.set_file(None);
                }
            }
        }
        if next.gateway.log_level != previous.gateway.log_level {
            crate::telemetry::config_level_changed(&next.gateway.log_level);
        }
        let mut stopped = Vec::new();
        for (name, old) in &previous.servers {
            let kept = next
                .servers
                .get(name)
                .filter(|new| !new.disabled && old.starts_same_process(new));
            let mut backends = self.backends.lock().unwrap();
            match kept {
                Some(new) => {
                    if let Some(backend) = backends.get(name) {
                        backend.update_config(new.clone());
                    }
                }
                None => stopped.extend(backends.remove(name)),
            }
        }
        for backend in &stopped {
            backend.stop().await;
        }
        for (name, server) in next.servers.iter().filter(|(_, s)| !s.disabled) {
            if self.backend(name).is_none() {
                self.start_server(server.clone());
            }
        }
        match self.plugin_host() {
            Some(host) => host.reconfigure(&next.plugins).await,
            None => self.start_plugins(&next),
        }
        self.rebuild_catalog();
        self.events.emit(
            "config.reloaded",
            "wasmgate",
            Status::Success,
            json!({"servers": next.servers.len()}),
        );
    }

    /// Ends every open `subscriptions/listen` (the gateway stops), now and from now on.
    pub fn end_listens(&self) {
        self.listens_end.send_replace(true);
    }

    /// What an open `subscriptions/listen` waits on: true once [`Self::end_listens`] ran.
    pub fn listens_ending(&self) -> tokio::sync::watch::Receiver<bool> {
        self.listens_end.subscribe()
    }

    pub async fn shutdown(&self) {
        self.end_listens();
        self.events
            .emit("gateway.stopping", "wasmgate", Status::Success, Value::Null);
        // In parallel: each server has its own grace period.
        let mut stops = tokio::task::JoinSet::new();
        for backend in self.servers() {
            stops.spawn(async move { backend.stop().await });
        }
        stops.join_all().await;
        if let Some(host) = self.plugin_host() {
            host.shutdown().await;
        }
    }

    pub fn plugin_host(&self) -> Option<Arc<PluginHost>> {
        self.plugins.load_full()
    }

    /// Loads the plugins in the background: `initialize` is answered at once, and the
    /// first lists wait (bounded by `startup_timeout`) until the plugins are in.
    fn start_plugins(self: &Arc<Self>, config: &Config) {
        let plugins = &config.plugins;
        let wanted = plugins.bundled || plugins.dir.is_some() || !plugins.plugins.is_empty();
        if !wanted || self.plugin_host().is_some() {
            return;
        }
        let bundled = if plugins.bundled {
            crate::bundled::BUNDLED_PLUGINS
        } else {
            &[]
        };
        self.plugins_loading.send_replace(true);
        let (tx, rx) = mpsc::unbounded_channel();
        // The host is in place before any plugin loads: each one joins the catalog (and
        // `gateway_status`) when it is ready, so a Python plugin compiling for half a minute
        // holds up only its own tools.
        let host = match PluginHost::new(plugins, bundled, tx) {
            Ok(host) => host,
            Err(err) => {
                tracing::error!("the plugin host did not start: {err:#}");
                self.events.emit(
                    "plugin.host_failed",
                    "wasmgate",
                    Status::Failure,
                    json!({"error": format!("{err:#}")}),
                );
                self.plugins_loading.send_replace(false);
                return;
            }
        };
        self.plugins.store(Some(host.clone()));
        tokio::spawn(plugin_events(Arc::downgrade(self), rx));
        let gateway = self.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            host.load().await;
            tracing::info!(
                plugins = host.plugins().len(),
                elapsed_ms = started.elapsed().as_millis() as u64,
                "plugins loaded"
            );
            // A config reload meanwhile went to the host, and is applied after this load.
            gateway.rebuild_catalog();
            gateway.plugins_loading.send_replace(false);
        });
    }
}

/// Records what the plugin host reports and swaps the catalog: once for every batch of
/// reports that arrived together (start-up loads many plugins at once).
async fn plugin_events(gateway: Weak<Gateway>, mut rx: mpsc::UnboundedReceiver<PluginEvent>) {
    while let Some(first) = rx.recv().await {
        let Some(gateway) = gateway.upgrade() else {
            return;
        };
        let mut new_code = false;
        let mut batch = Vec::new();
        for event in std::iter::once(first).chain(std::iter::from_fn(|| rx.try_recv().ok())) {
            // What a plugin announced changes no catalog by itself.
            if let PluginEvent::Notice { name, notice } = event {
                gateway.on_plugin_notice(name, notice);
                continue;
            }
            new_code |= matches!(event, PluginEvent::Reloaded { new_code: true, .. });
            batch.push(event.clone());
            record_plugin_event(&gateway, event);
        }
        if batch.is_empty() {
            continue;
        }
        gateway.rebuild_catalog_announcing(new_code);
        for event in batch {
            // No receiver but `dev`'s: an error only says nobody listens.
            let _ = gateway.plugin_news.send(event);
        }
    }
}

/// A client's progress token mapped to the gateway's, for one forwarded request. Dropped
/// with the request's future, as when the client cancels it, it ends the mapping at once:
/// the server may go on sending progress, which must not reach the client after its cancel.
pub struct ProgressMapping<'a> {
    gateway: &'a Gateway,
    pub token: String,
}

impl ProgressMapping<'_> {
    /// Called once the answer is in: progress the server sent before its answer may still
    /// be queued for the hub, so wait until the hub has passed it on, then end the mapping.
    pub async fn end(self) {
        let (done, handled) = tokio::sync::oneshot::channel();
        if self
            .gateway
            .to_gateway
            .send(BackendEvent::Barrier { done })
            .is_ok()
        {
            let _ = handled.await;
        }
    }
}

impl Drop for ProgressMapping<'_> {
    fn drop(&mut self) {
        self.gateway.relay.progress.close(&self.token);
    }
}

fn record_plugin_event(gateway: &Gateway, event: PluginEvent) {
    // A refused build is told to the clients too: a developer rebuilding in one sees why
    // the tools did not change.
    let told = match &event {
        PluginEvent::ReloadFailed { name, reason } => Some((
            name,
            format!(
                "the new build of plugin `{name}` was refused; the previous one keeps serving: \
                 {reason}"
            ),
        )),
        PluginEvent::LoadFailed { name, reason } => {
            Some((name, format!("plugin `{name}` was not loaded: {reason}")))
        }
        _ => None,
    };
    if let Some((name, message)) = told {
        gateway.tell_clients("error", name, &message);
    }
    // The last thing a developer saw was the refusal: say when it is over.
    if let PluginEvent::Recovered { name } = &event {
        let message =
            format!("plugin `{name}` is healthy again: its file is a version that serves");
        gateway.tell_clients("notice", name, &message);
    }
    let (event_type, name, status, fields) = match event {
        PluginEvent::Loaded {
            name,
            tools,
            compile_ms,
            total_ms,
        } => (
            "plugin.loaded",
            name,
            Status::Success,
            json!({"tools": tools, "compile_ms": compile_ms, "cached": compile_ms.is_none(), "total_ms": total_ms}),
        ),
        PluginEvent::Reloaded {
            name,
            tools,
            compile_ms,
            total_ms,
            ..
        } => (
            "plugin.reloaded",
            name,
            Status::Success,
            json!({"tools": tools, "compile_ms": compile_ms, "cached": compile_ms.is_none(), "total_ms": total_ms}),
        ),
        PluginEvent::ReloadFailed { name, reason } => (
            "plugin.reload_failed",
            name,
            Status::Failure,
            json!({"error": reason}),
        ),
        PluginEvent::LoadFailed { name, reason } => (
            "plugin.load_failed",
            name,
            Status::Failure,
            json!({"error": reason}),
        ),
        PluginEvent::Unloaded { name } => ("plugin.unloaded", name, Status::Success, Value::Null),
        PluginEvent::Recovered { name } => ("plugin.recovered", name, Status::Success, Value::Null),
        PluginEvent::Notice { .. } => return,
    };
    gateway.events.emit(event_type, &name, status, fields);
}

/// Events go to `path` from now on; a file that cannot be opened yet (its folder does not
/// exist) is tried again while events come.
fn open_events_file(events: &EventLog, path: &std::path::Path) {
    match events.set_file(Some(path)) {
        Ok(()) => tracing::info!("appending events to {}", path.display()),
        Err(err) => tracing::warn!(
            "cannot append events to {} yet ({err}); tried again once a second while events come",
            path.display()
        ),
    }
}

/// Turns what backends report into catalog swaps and client messages.
async fn hub(gateway: Weak<Gateway>, mut from_backends: mpsc::UnboundedReceiver<BackendEvent>) {
    let mut next = None;
    loop {
        let event = match next.take() {
            Some(event) => event,
            None => match from_backends.recv().await {
                Some(event) => event,
                None => return,
            },
        };
        let Some(gateway) = gateway.upgrade() else {
            return;
        };
        match event {
            BackendEvent::Changed { .. } => {
                // The changes queued behind this one share its rebuild (servers starting
                // together); any other event is handled after it, in order.
                next = loop {
                    match from_backends.try_recv() {
                        Ok(BackendEvent::Changed { .. }) => {}
                        Ok(other) => break Some(other),
                        Err(_) => break None,
                    }
                };
                gateway.rebuild_catalog_if_servers_changed();
            }
            BackendEvent::Handshaken { server, reply } => {
                let _ = reply.send(gateway.client_requests(&server));
            }
            BackendEvent::Barrier { done } => {
                let _ = done.send(());
            }
            BackendEvent::Notification {
                server,
                call,
                method,
                params,
            } => gateway.on_notification(&server, call, &method, params),
            BackendEvent::Request {
                server,
                call,
                method,
                params,
                reply,
            } => {
                tokio::spawn(async move {
                    let result = gateway
                        .forward_to_client(&server, call, reply.id().clone(), &method, params)
                        .await;
                    reply.send(result);
                });
            }
        }
    }
}
