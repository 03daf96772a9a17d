//! The HTTP front: Streamable HTTP at `/mcp` (and `/mcp/{profile}`), the legacy HTTP+SSE
//! transport at `/sse`, and `/healthz`, `/readyz`, `/metrics`, `/ui`. Every client is a
//! transport-independent `Session`; this module only maps HTTP onto it. The admin
//! listener (`serve --admin`) serves `/ui` and `/metrics` alone.

mod admin;
mod connections;
mod forward;
mod guard;
mod legacy;
mod oauth;
mod param_headers;
mod respond;
mod sessions;
mod stateless;
mod streamable;
mod streams;
mod tls;
mod ui;

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::body::Bytes;
use axum::extract::{DefaultBodyLimit, Query, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse as _, Response};
use axum::routing::{get, post};
use serde_json::json;

use crate::config::HttpConfig;
use crate::gateway::Gateway;
pub use admin::token as admin_token;
use connections::{Bounds, Connections};
use sessions::Sessions;

/// What every handler shares.
pub struct Front {
    pub gateway: Arc<Gateway>,
    pub sessions: Arc<Sessions>,
    pub config: HttpConfig,
    /// The address bound, for the default `Host` allow-list and `gateway_status`.
    pub local: SocketAddr,
    /// `[http.oauth]`: access tokens from an authorization server.
    pub oauth: Option<oauth::Oauth>,
    /// The admin listener: `/ui` and `/metrics` only, beside a gateway served elsewhere.
    pub admin: bool,
}

/// Who is asking, as the guard found: the profile of the path, the token's name, the address.
#[derive(Clone, Debug, Default)]
pub struct Caller {
    pub profile: Option<String>,
    pub token: Option<String>,
    /// Its token has the operator scope.
    pub operator: bool,
    pub remote: String,
}

/// A bound listener, ready to serve.
pub struct Listener {
    listener: tokio::net::TcpListener,
    tls: Option<tokio_rustls::TlsAcceptor>,
    front: Arc<Front>,
}

impl Listener {
    /// Binds `listen` (else `[http] listen`) and checks the security rules that depend on it.
    pub async fn bind(gateway: Arc<Gateway>, listen: &str) -> Result<Listener> {
        let mut config = gateway.config.load().http.clone();
        // A config file's validation added WASMGATE_TOKEN already; the built-in config did not.
        if !config
            .tokens
            .iter()
            .any(|t| t.name == crate::config::ENV_TOKEN)
            && let Some(token) = crate::config::env_token(&crate::config::process_env)?
        {
            config.tokens.push(token);
        }
        crate::config::check_listen(listen).map_err(anyhow::Error::msg)?;
        let listener = bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let local = listener.local_addr()?;
        if !local.ip().is_loopback()
            && config.tokens.is_empty()
            && config.oauth.is_none()
            && !config.allow_unauthenticated
        {
            bail!(
                "refusing to serve {local} without a token: anyone who reaches it could call every tool. \
                 Set [http] tokens (or WASMGATE_TOKEN), or allow_unauthenticated = true behind a proxy that authenticates"
            );
        }
        let tls = match &config.tls {
            Some((cert, key)) => Some(tls::acceptor(cert, key)?),
            None => None,
        };
        crate::telemetry::metrics::install();
        let sessions = Sessions::new(&config);
        let oauth = (config.oauth.clone())
            .map(oauth::Oauth::new)
            .transpose()
            .map_err(anyhow::Error::msg)?;
        Ok(Listener {
            listener,
            tls,
            front: Arc::new(Front {
                gateway,
                sessions,
                config,
                local,
                oauth,
                admin: false,
            }),
        })
    }

    /// The URL of the Streamable HTTP endpoint.
    pub fn url(&self) -> String {
        let scheme = if self.front.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        format!("{scheme}://{}/mcp", self.front.local)
    }

    /// Serves until `stop` resolves; then stops taking connections, lets requests in
    /// flight finish within `shutdown_grace`, and ends every session.
    pub async fn serve(self, stop: impl Future<Output = ()> + Send + 'static) -> Result<()> {
        let front = self.front;
        let bounds = Bounds {
            header_timeout: front.config.header_timeout,
            idle_timeout: front.config.idle_timeout,
            max: connections::cap(front.config.max_connections),
        };
        if bounds.max < front.config.max_connections {
            tracing::warn!(
                "max_connections {} lowered to {}: the gateway may open {} files (ulimit -n), \
                 and plugins and servers need their share",
                front.config.max_connections,
                bounds.max,
                crate::descriptors::limit()
            );
        }
        let connections = Connections::new(bounds);
        front.sessions.spawn_expiry();
        tokio::spawn(async {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tick.tick().await;
                crate::telemetry::metrics::upkeep();
            }
        });
        front.gateway.set_front_status(Box::new({
            let front = Arc::downgrade(&front);
            let connections = Arc::downgrade(&connections);
            move || {
                let connections = connections.upgrade().map_or(0, |c| c.len());
                front.upgrade().map(|f| {
                    json!({
                        "listen": f.local.to_string(),
                        "connections": connections,
                        "sessions": f.sessions.len(),
                        "profiles": f.gateway.config.load().profiles.keys().collect::<Vec<_>>(),
                    })
                })
            }
        }));
        let scheme = if front.config.tls.is_some() {
            "https"
        } else {
            "http"
        };
        tracing::info!(
            listen = %front.local,
            scheme,
            max_connections = bounds.max,
            "serving MCP over HTTP: /mcp (Streamable HTTP), /sse (legacy)"
        );
        let (stopping, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(connections.clone().accept(
            self.listener,
            self.tls,
            routes(front.clone()),
            stopped,
        ));
        stop.await;
        let _ = stopping.send(true);
        tracing::info!("shutting down the HTTP front");
        // Listen streams are answered and end; they would hold their connections open.
        front.gateway.end_listens();
        // The sessions' own streams would hold their connections open for ever.
        front.sessions.end_session_streams();
        let grace = front.gateway.config.load().gateway.shutdown_grace;
        let _ = tokio::time::timeout(grace, connections.closed()).await;
        front.sessions.remove_all("the gateway is stopping");
        Ok(())
    }
}

/// Listens with a backlog for bursts of clients connecting at once: past the backlog, the
/// kernel resets connections that it had already accepted in the handshake.
async fn bind(listen: &str) -> std::io::Result<tokio::net::TcpListener> {
    let mut last = None;
    for addr in tokio::net::lookup_host(listen).await? {
        let socket = match addr {
            SocketAddr::V4(_) => tokio::net::TcpSocket::new_v4()?,
            SocketAddr::V6(_) => tokio::net::TcpSocket::new_v6()?,
        };
        socket.set_reuseaddr(true)?;
        match socket.bind(addr).and_then(|()| socket.listen(4096)) {
            Ok(listener) => return Ok(listener),
            Err(e) => last = Some(e),
        }
    }
    Err(last.unwrap_or_else(|| std::io::Error::other("the address resolves to nothing")))
}

fn routes(front: Arc<Front>) -> Router {
    let limit = front.config.max_body;
    // The same endpoints with and without a profile segment (the guard reads it).
    let streamable =
        post(|State(f), caller, headers, body| streamable::post(f, caller, headers, body))
            .get(|State(f), caller, headers| streamable::get(f, caller, headers))
            .delete(|State(f), caller, headers| streamable::delete(f, caller, headers));
    let legacy = get(|State(f), caller| legacy::open(f, caller, "/messages"));
    let mcp = Router::new()
        .route("/mcp", streamable.clone())
        .route("/mcp/{profile}", streamable)
        .route("/sse", legacy.clone())
        .route("/sse/{profile}", legacy)
        .route("/messages", post(legacy_post))
        .route("/metrics", get(metrics))
        .route_layer(axum::middleware::from_fn_with_state(
            front.clone(),
            guard::guard,
        ));
    let ui = ui::routes().route_layer(axum::middleware::from_fn_with_state(
        front.clone(),
        ui::same_origin,
    ));
    Router::new()
        .merge(mcp)
        .route(
            "/.well-known/oauth-protected-resource",
            get(oauth::metadata::root),
        )
        .route(
            "/.well-known/oauth-protected-resource/{*rest}",
            get(oauth::metadata::at),
        )
        .merge(ui)
        .route("/healthz", get(|| async { "ok\n" }))
        .route("/readyz", get(ready))
        .layer(DefaultBodyLimit::max(limit))
        .with_state(front)
}

#[derive(serde::Deserialize)]
struct SessionQuery {
    #[serde(rename = "sessionId")]
    session_id: Option<String>,
}

async fn legacy_post(
    State(front): State<Arc<Front>>,
    caller: Caller,
    Query(query): Query<SessionQuery>,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    legacy::post(front, caller, query.session_id, headers, body).await
}

/// 503 while configured servers are starting or plugins loading, naming them.
async fn ready(State(front): State<Arc<Front>>) -> (StatusCode, String) {
    let mut waiting: Vec<String> = front
        .gateway
        .servers()
        .iter()
        .filter(|b| b.state() == crate::backend::BackendState::Starting)
        .map(|b| format!("server {}", b.name()))
        .collect();
    if front.gateway.plugins_loading() {
        waiting.push("plugins (loading)".into());
    }
    if waiting.is_empty() {
        (StatusCode::OK, "ready\n".into())
    } else {
        (
            StatusCode::SERVICE_UNAVAILABLE,
            format!("starting: {}\n", waiting.join(", ")),
        )
    }
}

async fn metrics(State(front): State<Arc<Front>>) -> Response {
    for backend in front.gateway.servers() {
        crate::telemetry::metrics::backend(backend.name(), backend.state().as_str());
        crate::telemetry::metrics::backend_restarts(backend.name(), backend.restarts());
    }
    if let Some(host) = front.gateway.plugin_host() {
        // Bundled plugins and middleware too; a plugin loading again stays "ready".
        let mut states = std::collections::BTreeMap::new();
        for (name, _) in host.loading_plugins() {
            states.insert(name, "starting");
        }
        for plugin in host.plugins() {
            states.insert(plugin.name, "ready");
        }
        for failed in host.failed_plugins() {
            states.insert(failed.name, "failed");
        }
        for (name, state) in states {
            crate::telemetry::metrics::backend(&name, state);
        }
    }
    crate::telemetry::metrics::sessions_open(front.sessions.len());
    (front.gateway.limits).publish(front.gateway.servers().iter().map(|b| b.name().to_string()));
    let body = crate::telemetry::metrics::render();
    (
        StatusCode::OK,
        [(
            axum::http::header::CONTENT_TYPE,
            "text/plain; version=0.0.4",
        )],
        body,
    )
        .into_response()
}

/// The profile segment of a path, for [`Caller`].
fn profile_of(path: &str) -> Option<String> {
    let rest = path
        .strip_prefix("/mcp/")
        .or_else(|| path.strip_prefix("/sse/"))?;
    (!rest.is_empty()).then(|| rest.trim_end_matches('/').to_string())
}

impl<S: Send + Sync> axum::extract::FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(
        parts: &mut axum::http::request::Parts,
        _: &S,
    ) -> Result<Self, Self::Rejection> {
        Ok(parts
            .extensions
            .get::<Caller>()
            .cloned()
            .unwrap_or_default())
    }
}
