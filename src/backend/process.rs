//! A subprocess MCP server: newline-delimited JSON-RPC over its stdin/stdout. One run
//! (`run_once`, for the `supervisor`) spawns it, performs the handshake and discovery
//! and serves until it exits or is stopped; a run's end is a crash, restarted with
//! backoff. One `Connection` per child correlates requests in flight by rewritten ids.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::common::{self, Common, stop_requested};
use super::era::{self, Era, EraCache, Source};
use super::mcp_client::{self, Answer, Upstream};
use super::modern;
use super::supervisor::{self, RestartPolicy, Supervised};
use super::{BackendError, BackendState, ListKind};
use crate::config::GatewayConfig;
use crate::pipe::outbox::{outbox, write_lines};
use crate::telemetry::events::Status;
use child::{describe_exit, exit_soon, spawn};
use connection::{Connection, read_lines};

mod child;
mod connection;
mod probe;

/// The longest a probe of a server's era waits for its `server/discover` answer.
const PROBE_LIMIT: Duration = Duration::from_secs(10);

pub struct ProcessBackend {
    common: Common,
    connection: ArcSwapOption<Connection>,
    pid: AtomicU32,
    max_restarts: u32,
    /// For `initialize` and the first lists of each start.
    init_timeout: Duration,
    shutdown_grace: Duration,
    /// Where probed eras are remembered across starts of the gateway.
    eras: EraCache,
    /// The era found for this entry, for its restarts.
    era: Mutex<Option<(Era, Source)>>,
}

common::shares_common!(ProcessBackend);

impl ProcessBackend {
    pub(super) fn new(
        common: Common,
        gateway: &GatewayConfig,
        cache_dir: Option<&std::path::Path>,
    ) -> Self {
        ProcessBackend {
            common,
            connection: ArcSwapOption::empty(),
            pid: AtomicU32::new(0),
            max_restarts: gateway.max_restarts,
            init_timeout: gateway.init_timeout,
            shutdown_grace: gateway.shutdown_grace,
            eras: EraCache::new(cache_dir),
            era: Mutex::new(None),
        }
    }

    /// Forgets the era found for the server, here and in the cache folder.
    fn forget_era(&self, config: &crate::config::ServerConfig) {
        *self.era.lock().unwrap() = None;
        self.eras.forget(config);
    }

    /// The era to speak to the server in: set in config, found before, or probed now.
    async fn era(&self, config: &crate::config::ServerConfig) -> (Era, Source) {
        if let Some(era) = era::configured(config) {
            return (era, Source::Config);
        }
        if let Some(found) = *self.era.lock().unwrap() {
            return found;
        }
        let found = match self.eras.get(config) {
            Some(era) => (era, Source::Cached),
            None => match probe::probe(config, self.init_timeout.min(PROBE_LIMIT)).await {
                Some(era) => {
                    self.eras.put(config, era);
                    (era, Source::Probed)
                }
                // The probe could not start the server: neither can the start, which says why.
                None => return (Era::Legacy, Source::Probed),
            },
        };
        *self.era.lock().unwrap() = Some(found);
        found
    }

    pub fn pid(&self) -> Option<u32> {
        Some(self.pid.load(Ordering::Relaxed)).filter(|p| *p != 0)
    }

    fn ready_connection(&self) -> Result<Arc<Connection>, BackendError> {
        let state = self.state();
        match (state, self.connection.load_full()) {
            (BackendState::Ready, Some(c)) => Ok(c),
            _ => Err(BackendError::Unavailable {
                server: self.name.clone(),
                state: state.as_str(),
            }),
        }
    }

    /// Re-fetches one list after the server said it changed.
    pub async fn refresh(&self, kind: ListKind) -> Result<(), BackendError> {
        self.common.refresh(self.connection.load_full(), kind).await
    }
}

impl Upstream for ProcessBackend {
    fn server(&self) -> &str {
        &self.name
    }

    /// Forwards a request whose result goes back to a client as the server wrote it.
    async fn request_raw(&self, method: &str, params: Option<Value>, timeout: Duration) -> Answer {
        self.ready_connection()?
            .request_raw(method, params, timeout)
            .await
    }

    fn notify(&self, method: &str, params: Option<Value>) {
        common::notify_live(&self.connection, method, params);
    }
}

impl Supervised for ProcessBackend {
    fn policy(&self) -> RestartPolicy {
        RestartPolicy::process(self.max_restarts)
    }

    fn run_ended(&self) {
        self.connection.store(None);
        self.pid.store(0, Ordering::Relaxed);
    }

    /// One life of the child: spawn, handshake, serve until it exits or we stop it.
    async fn run_once(&self, stopping: &mut watch::Receiver<bool>) -> Result<(), String> {
        let name = &self.name;
        let config = self.config.load_full();
        let (era, source) = tokio::select! {
            found = self.era(&config) => found,
            _ = stop_requested(stopping) => return Err("stopped during start-up".to_string()),
        };
        tracing::debug!(server = %name, era = era.version(), source = source.as_str(), "protocol era");
        let mut child = spawn(&config)
            .map_err(|e| format!("cannot start `{}`: {e}", config.stdio().command))?;
        let pid = child.id().unwrap_or(0);
        self.pid.store(pid, Ordering::Relaxed);
        self.events.emit(
            "backend.started",
            name,
            Status::Pending,
            json!({"pid": pid, "command": config.stdio().command}),
        );

        let (writer_tx, writer_rx) = outbox(format!("server `{name}`"));
        let connection = Arc::new(Connection {
            server: name.clone(),
            writer: writer_tx,
            pending: Mutex::new(HashMap::new()),
            next_id: AtomicU64::new(1),
            closed: AtomicBool::new(false),
            stopped: AtomicBool::new(false),
            listen: self.listen.clone(),
        });
        let stdin = child.stdin.take().expect("piped");
        let stdout = child.stdout.take().expect("piped");
        let stderr = child.stderr.take().expect("piped");
        tokio::spawn(write_lines(stdin, writer_rx));
        let last_stderr = Arc::new(Mutex::new(String::new()));
        let stderr_logger = tokio::spawn(super::stderr::log_stderr(
            name.clone(),
            stderr,
            last_stderr.clone(),
        ));
        let reader = tokio::spawn(read_lines(
            connection.clone(),
            stdout,
            self.to_gateway.clone(),
        ));

        let begun = Instant::now();
        let start = async {
            match era {
                Era::Modern => modern::handshake(&*connection, name, self.init_timeout).await,
                Era::Legacy => mcp_client::handshake(&*connection, name, self.init_timeout).await,
            }
        };
        let handshake = tokio::select! {
            r = start => match r {
                Ok(mut discovered) => {
                    discovered.protocol_source = source.as_str();
                    self.discovered.store(Arc::new(discovered));
                    Ok(())
                }
                // A request fails when the process exits under it: say how it exited.
                Err(_) if let Some(exit) = exit_soon(&mut child).await => {
                    Err(format!("exited during start-up ({exit})"))
                }
                Err(err) => Err(err.to_string()),
            },
            _ = stop_requested(stopping) => {
                connection.stopped.store(true, Ordering::Release);
                Err("stopped during start-up".to_string())
            }
            status = child.wait() => Err(format!("exited during start-up ({})", describe_exit(status))),
        };
        if let Err(mut message) = handshake {
            // A remembered era may be stale (the server was upgraded): the next start probes.
            if source != Source::Config {
                self.forget_era(&config);
            }
            // The reason is often the last thing it wrote to stderr ("command not found").
            let _ = tokio::time::timeout(Duration::from_millis(100), stderr_logger).await;
            let last = last_stderr.lock().unwrap().clone();
            if !last.is_empty() {
                message = format!("{message}; its stderr: {last}");
            }
            connection.close();
            self.terminate(child, &connection).await;
            self.reap_group(pid, reader).await;
            return Err(message);
        }
        self.connection.store(Some(connection.clone()));
        let pid_detail = ("pid", json!(pid));
        let _listening =
            supervisor::ready(self, &connection, pid_detail, self.init_timeout, begun).await;

        let mut reader = reader;
        let result = tokio::select! {
            status = child.wait() => Err(format!("exited unexpectedly ({})", describe_exit(status))),
            _ = stop_requested(stopping) => {
                connection.stopped.store(true, Ordering::Release);
                self.terminate(child, &connection).await;
                Ok(())
            }
            // Its stdout ended: it is exiting, or it closed stdout and runs on, and then
            // nothing it says can reach the gateway any more (as good as a crash).
            _ = &mut reader => match exit_soon(&mut child).await {
                Some(exit) => Err(format!("exited unexpectedly ({exit})")),
                None => {
                    self.terminate(child, &connection).await;
                    Err("closed its stdout while running".to_string())
                }
            },
        };
        connection.close();
        self.reap_group(pid, reader).await;
        result
    }
}
