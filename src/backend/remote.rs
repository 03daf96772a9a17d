//! A remote MCP server over Streamable HTTP (or the legacy SSE transport). One run
//! (`run_once`, for the `supervisor`) opens a session (handshake and discovery through
//! `mcp_client`) and serves until the server is unreachable or ends the session; a run's
//! end is a disconnection, and a new session follows with backoff. The tools stay listed
//! meanwhile, and calls fail at once naming the server.

use std::sync::Arc;
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use serde_json::{Value, json};
use tokio::sync::watch;

use super::common::{self, Common, stop_requested};
use super::era::{self, Era};
use super::mcp_client::{self, Answer, HandshakeError, Upstream};
use super::modern;
use super::supervisor::{self, RestartPolicy, Supervised};
use super::{BackendError, BackendState, Discovered, ListKind};
use crate::config::{GatewayConfig, HttpEndpoint, HttpTransport, ServerTransport};
use crate::oauth_client::OAuthClient;

pub mod client;
mod connection;
mod param_mirrors;
mod sse;

use connection::{Closed, Connection};

/// For a new TCP (and TLS) connection; a request's own timeout bounds it too.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

pub struct RemoteBackend {
    common: Common,
    connection: ArcSwapOption<Connection>,
    init_timeout: Duration,
    /// The era the server answered in, for the sessions after the first (`protocol = "auto"`).
    era: std::sync::Mutex<Option<Era>>,
    /// The OAuth client of the server (with the URL and settings it was made for): its
    /// tokens outlive sessions, and a config change makes a new one.
    oauth: std::sync::Mutex<Option<(HttpEndpoint, Arc<OAuthClient>)>>,
    auth_dir: Option<std::path::PathBuf>,
    /// Whether `server.auth_required` was said since the server was last ready.
    auth_reported: std::sync::atomic::AtomicBool,
}

/// The longest a `server/discover` that finds out a remote server's era waits.
const DISCOVER_LIMIT: Duration = Duration::from_secs(10);

common::shares_common!(RemoteBackend);

impl RemoteBackend {
    pub(super) fn new(common: Common, gateway: &GatewayConfig) -> Self {
        RemoteBackend {
            common,
            connection: ArcSwapOption::empty(),
            init_timeout: gateway.init_timeout,
            era: std::sync::Mutex::new(None),
            oauth: std::sync::Mutex::new(None),
            auth_dir: crate::oauth_client::auth_dir(gateway.auth_dir.as_deref()),
            auth_reported: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// The live session; while there is none, an error that says why at once.
    fn ready_connection(&self) -> Result<Arc<Connection>, BackendError> {
        let state = self.state();
        match (state, self.connection.load_full()) {
            (BackendState::Ready, Some(c)) => Ok(c),
            (BackendState::Restarting, _) => Err(BackendError::Unreachable {
                server: self.name.clone(),
                reason: self
                    .last_error()
                    .unwrap_or_else(|| "reconnecting".to_string()),
            }),
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

    fn endpoint(&self) -> HttpEndpoint {
        match &self.config.load().transport {
            ServerTransport::Http(endpoint) => endpoint.clone(),
            ServerTransport::Stdio(_) => unreachable!("a remote backend has a URL"),
        }
    }
}

impl Upstream for RemoteBackend {
    fn server(&self) -> &str {
        &self.name
    }

    /// Forwards a request. Fails at once, saying why, unless the session is live.
    async fn request_raw(&self, method: &str, params: Option<Value>, timeout: Duration) -> Answer {
        let started = tokio::time::Instant::now();
        let connection = self.ready_connection()?;
        let result = connection
            .request_raw(method, params.clone(), timeout)
            .await;
        if !(result.is_err() && connection.expired()) {
            return result;
        }
        // The server forgot the session, so the request never ran: it goes once more on
        // the new session (initialized, and what clients asked restored, first).
        let deadline = started + timeout;
        let mut state = self.state.subscribe();
        let renewed = tokio::time::timeout_at(
            deadline,
            state.wait_for(|s| {
                *s == BackendState::Ready
                    && self
                        .connection
                        .load()
                        .as_ref()
                        .is_some_and(|c| !Arc::ptr_eq(c, &connection))
            }),
        )
        .await
        .is_ok_and(|r| r.is_ok());
        if !renewed {
            return result;
        }
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        self.ready_connection()?
            .request_raw(method, params, left)
            .await
    }

    fn notify(&self, method: &str, params: Option<Value>) {
        common::notify_live(&self.connection, method, params);
    }
}

impl Supervised for RemoteBackend {
    fn policy(&self) -> RestartPolicy {
        RestartPolicy::remote()
    }

    fn run_ended(&self) {
        self.connection.store(None);
    }

    /// One session: handshake, serve until it breaks or the gateway stops it.
    async fn run_once(&self, stopping: &mut watch::Receiver<bool>) -> Result<(), String> {
        let endpoint = self.endpoint();
        let begun = Instant::now();
        let opened = tokio::select! {
            r = self.open_any(&endpoint) => r.map_err(|e| e.to_string()),
            _ = stop_requested(stopping) => Err("stopped during start-up".to_string()),
        };
        let (connection, mut discovered) = match opened {
            Ok(opened) => opened,
            Err(reason) => {
                self.report_auth(&reason);
                return Err(reason);
            }
        };
        self.auth_reported
            .store(false, std::sync::atomic::Ordering::Relaxed);
        discovered.protocol_source = match era::configured(&self.config.load()) {
            Some(_) => era::Source::Config.as_str(),
            None => "discovered",
        };
        self.discovered.store(Arc::new(discovered));
        self.connection.store(Some(connection.clone()));
        let url = crate::config::redact_url(&endpoint.url);
        // A stateless server's own messages come on the listen `ready` opens, a session's
        // on its GET stream.
        let _listening = supervisor::ready(
            self,
            &connection,
            ("url", json!(url)),
            self.init_timeout,
            begun,
        )
        .await;
        let listener = match connection.is_modern() {
            true => tokio::spawn(async {}),
            false => tokio::spawn(connection.clone().listen()),
        };
        let outcome = tokio::select! {
            closed = connection.ended() => match closed {
                Closed::Broken(reason) => Err(reason),
                Closed::Stopped => Ok(()),
            },
            _ = stop_requested(stopping) => {
                connection.close(Closed::Stopped);
                connection.delete().await;
                Ok(())
            }
        };
        listener.abort();
        outcome
    }
}

impl RemoteBackend {
    /// A session over the transport the entry names; with `auto`, Streamable HTTP and then,
    /// when the server refuses its `initialize` with a 4xx, the legacy SSE transport.
    async fn open_any(
        &self,
        endpoint: &HttpEndpoint,
    ) -> Result<(Arc<Connection>, Discovered), OpenError> {
        // The legacy SSE transport is of the session era alone.
        let sse = (endpoint.transport == HttpTransport::Sse).then_some(Era::Legacy);
        let configured = era::configured(&self.config.load());
        let known = configured.or(sse).or(*self.era.lock().unwrap());
        match known {
            Some(Era::Modern) => {
                return self.open_modern(endpoint, self.init_timeout, false).await;
            }
            Some(Era::Legacy) => return self.open_legacy(endpoint).await,
            None => {}
        }
        // The new era first, as a dual-era client does; any answer but a discover result
        // naming 2026-07-28 alone (a 4xx, -32601, -32022 without it) means the session era.
        let limit = self.init_timeout.min(DISCOVER_LIMIT);
        match self.open_modern(endpoint, limit, true).await {
            Ok(opened) => {
                *self.era.lock().unwrap() = Some(Era::Modern);
                Ok(opened)
            }
            Err(OpenError::Refused(reason)) => {
                tracing::debug!(server = %self.name, "speaking 2025-11-25: {reason}");
                let opened = self.open_legacy(endpoint).await?;
                *self.era.lock().unwrap() = Some(Era::Legacy);
                Ok(opened)
            }
            Err(failed) => Err(failed),
        }
    }

    /// A stateless connection: `server/discover` and the lists, with the era's headers.
    async fn open_modern(
        &self,
        endpoint: &HttpEndpoint,
        limit: Duration,
        auto: bool,
    ) -> Result<(Arc<Connection>, Discovered), OpenError> {
        let connection = self.connect(endpoint)?;
        connection.speak_modern();
        let stamped = modern::Stamped::gateway(&*connection);
        let found = stamped
            .request(crate::protocol::modern::DISCOVER, None, limit)
            .await;
        let refused = match &found {
            Ok(result) if auto => !modern::auto_picks_modern(result),
            Ok(result) => !modern::supports_modern(result),
            // Unreachable: a session-era server would fare no better. Anything else
            // (an HTTP error, a JSON-RPC error, no answer in time) is not the new era.
            Err(BackendError::Unreachable { .. }) => false,
            Err(_) => true,
        };
        if let Err(err) = &found
            && !refused
        {
            connection.close(Closed::Stopped);
            return Err(OpenError::Failed(format!("server/discover failed: {err}")));
        }
        if refused {
            connection.close(Closed::Stopped);
            let why = match found {
                Ok(_) => HandshakeError::NotModern.to_string(),
                Err(err) => format!("server/discover: {err}"),
            };
            return Err(OpenError::Refused(why));
        }
        let found = found.unwrap_or_default();
        match modern::after_discover(&*connection, &self.name, &found, self.init_timeout).await {
            Ok(discovered) => Ok((connection, discovered)),
            Err(err) => {
                connection.close(Closed::Stopped);
                Err(OpenError::Failed(err.to_string()))
            }
        }
    }

    /// A connection that reports to the gateway, its listen's messages screened.
    fn connect(&self, endpoint: &HttpEndpoint) -> Result<Arc<Connection>, OpenError> {
        let to_gateway = self.to_gateway.clone();
        let oauth = self.oauth_client(endpoint)?;
        Connection::new(&self.name, endpoint, to_gateway, self.listen.clone(), oauth)
            .map_err(OpenError::Failed)
    }

    /// The server's OAuth client, made again when its URL or settings changed.
    fn oauth_client(&self, endpoint: &HttpEndpoint) -> Result<Option<Arc<OAuthClient>>, OpenError> {
        let Some(settings) = &endpoint.oauth else {
            return Ok(None);
        };
        let mut kept = self.oauth.lock().unwrap();
        if let Some((made_for, client)) = &*kept
            && made_for == endpoint
        {
            return Ok(Some(client.clone()));
        }
        let interaction = crate::oauth_client::interaction();
        // A one-off client (`wasmgate connect`) keeps no tokens.
        let store = match interaction {
            crate::oauth_client::Interaction::Follow => None,
            _ => self
                .auth_dir
                .clone()
                .map(crate::oauth_client::store::Store::new),
        };
        let client = OAuthClient::new(
            &self.name,
            &endpoint.url,
            settings.clone(),
            interaction,
            store,
            endpoint.ca_file.as_deref(),
        )
        .map_err(|e| OpenError::Failed(e.to_string()))?;
        let client = Arc::new(client);
        *kept = Some((endpoint.clone(), client.clone()));
        Ok(Some(client))
    }

    /// Says once (until the server is ready again) that it waits for a login.
    fn report_auth(&self, reason: &str) {
        use std::sync::atomic::Ordering;
        if !reason.contains(crate::oauth_client::LOGIN_HINT) {
            return;
        }
        if !self.auth_reported.swap(true, Ordering::Relaxed) {
            let command = format!("wasmgate auth login {}", self.name);
            self.events.emit(
                "server.auth_required",
                &self.name,
                crate::telemetry::events::Status::Failure,
                json!({"command": command}),
            );
        }
    }

    /// A session-era session, over the transport the entry names.
    async fn open_legacy(
        &self,
        endpoint: &HttpEndpoint,
    ) -> Result<(Arc<Connection>, Discovered), OpenError> {
        match endpoint.transport {
            HttpTransport::Sse => self.open(endpoint, true).await,
            HttpTransport::StreamableHttp => self.open(endpoint, false).await,
            HttpTransport::Auto => match self.open(endpoint, false).await {
                Err(OpenError::Refused(reason)) => {
                    tracing::info!(server = %self.name, "Streamable HTTP refused ({reason}); trying the legacy SSE transport");
                    self.open(endpoint, true).await.map_err(|legacy| {
                        OpenError::Failed(format!(
                            "{reason}; over the legacy SSE transport: {legacy}"
                        ))
                    })
                }
                other => other,
            },
        }
    }

    /// A connection and its handshake.
    async fn open(
        &self,
        endpoint: &HttpEndpoint,
        legacy: bool,
    ) -> Result<(Arc<Connection>, Discovered), OpenError> {
        let connection = self.connect(endpoint)?;
        if legacy && let Err(err) = connection.open_legacy(self.init_timeout).await {
            connection.close(Closed::Stopped);
            return Err(OpenError::Failed(err.to_string()));
        }
        match mcp_client::handshake(&*connection, &self.name, self.init_timeout).await {
            Ok(discovered) => Ok((connection, discovered)),
            Err(err) => {
                let refused = matches!(
                    &err,
                    HandshakeError::Initialize(BackendError::Http {
                        status: 400..=499,
                        ..
                    })
                );
                connection.close(Closed::Stopped);
                connection.delete().await;
                Err(match refused {
                    true => OpenError::Refused(err.to_string()),
                    false => OpenError::Failed(err.to_string()),
                })
            }
        }
    }
}

/// Why a session did not open.
#[derive(Debug, thiserror::Error)]
enum OpenError {
    /// The server refused the `initialize` POST itself (a 4xx): it may speak the legacy
    /// transport.
    #[error("{0}")]
    Refused(String),
    #[error("{0}")]
    Failed(String),
}
