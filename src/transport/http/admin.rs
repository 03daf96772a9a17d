//! The admin listener (`serve --admin 127.0.0.1:PORT`): `/ui` and `/metrics` for a
//! gateway served over stdio (or beside its HTTP front), on a loopback address only, with
//! one operator token: read from `--admin-token-file`, or made at start and printed.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result, bail};
use axum::Router;
use axum::routing::get;

use super::connections::{Bounds, Connections};
use super::sessions::Sessions;
use super::{Front, Listener, guard, metrics, ui};
use crate::config::{HttpConfig, HttpToken};
use crate::gateway::Gateway;

/// The admin token's name, as logs and the page show it.
pub const TOKEN_NAME: &str = "admin";

/// Connections the admin listener keeps at once: a few browser tabs and a scraper.
const MAX_CONNECTIONS: usize = 64;

/// The admin token: the contents of `file` (trimmed), else a fresh random one.
pub fn token(file: Option<&Path>) -> Result<String> {
    let Some(file) = file else {
        return Ok(format!(
            "{}{}",
            uuid::Uuid::new_v4().simple(),
            uuid::Uuid::new_v4().simple()
        ));
    };
    let text = std::fs::read_to_string(file)
        .with_context(|| format!("cannot read --admin-token-file {}", file.display()))?;
    let token = text.trim();
    if token.len() < 16 {
        bail!(
            "--admin-token-file {}: the token must be at least 16 characters (it has {})",
            file.display(),
            token.len()
        );
    }
    Ok(token.to_string())
}

impl Listener {
    /// Binds the admin listener on `listen`, which must be a loopback address.
    pub async fn bind_admin(
        gateway: Arc<Gateway>,
        listen: &str,
        token: String,
    ) -> Result<Listener> {
        let addresses: Vec<_> = tokio::net::lookup_host(listen)
            .await
            .with_context(|| format!("--admin {listen}: not an address (want 127.0.0.1:PORT)"))?
            .collect();
        if addresses.is_empty() || addresses.iter().any(|a| !a.ip().is_loopback()) {
            bail!(
                "refusing --admin {listen}: the admin listener serves a loopback address only \
                 (127.0.0.1:PORT or [::1]:PORT); to serve the page to others, use the HTTP \
                 front with a token that has the operator scope"
            );
        }
        let listener = super::bind(listen)
            .await
            .with_context(|| format!("cannot listen on {listen}"))?;
        let local = listener.local_addr()?;
        let config = HttpConfig {
            tokens: vec![HttpToken {
                name: TOKEN_NAME.into(),
                token,
                profiles: Vec::new(),
                mcp: false,
                operator: true,
            }],
            max_connections: MAX_CONNECTIONS,
            ..HttpConfig::default()
        };
        crate::telemetry::metrics::install();
        Ok(Listener {
            listener,
            tls: None,
            front: Arc::new(Front {
                gateway,
                sessions: Sessions::new(&config),
                config,
                local,
                // Its one token is made at start; OAuth is for the HTTP front.
                oauth: None,
                admin: true,
            }),
        })
    }

    /// The status page's URL.
    pub fn ui_url(&self) -> String {
        format!("http://{}/ui", self.front.local)
    }

    /// Serves `/ui` and `/metrics` until the process ends.
    pub async fn serve_admin(self) {
        let front = self.front;
        let connections = Connections::new(Bounds {
            header_timeout: front.config.header_timeout,
            idle_timeout: front.config.idle_timeout,
            max: MAX_CONNECTIONS,
        });
        let metrics = Router::new().route("/metrics", get(metrics)).route_layer(
            axum::middleware::from_fn_with_state(front.clone(), guard::guard),
        );
        let ui = ui::routes().route_layer(axum::middleware::from_fn_with_state(
            front.clone(),
            ui::same_origin,
        ));
        let app = Router::new()
            .merge(metrics)
            .merge(ui)
            .route("/healthz", get(|| async { "ok\n" }))
            .with_state(front.clone());
        tracing::info!(listen = %front.local, "serving the status page (/ui) and /metrics");
        let (_stopping, stopped) = tokio::sync::watch::channel(false);
        tokio::spawn(async {
            let mut tick = tokio::time::interval(std::time::Duration::from_secs(5));
            loop {
                tick.tick().await;
                crate::telemetry::metrics::upkeep();
            }
        });
        connections.accept(self.listener, None, app, stopped).await;
    }
}
