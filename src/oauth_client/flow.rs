//! One remote server's OAuth client: the bearer header its requests carry, refreshed
//! before it expires, and a new token on a challenge (401, or 403 `insufficient_scope`
//! with the union of the scopes asked so far).

use std::collections::HashMap;
use std::path::Path;
use std::sync::Mutex;
use std::time::Duration;

use url::Url;

use super::challenge::Challenge;
use super::discovery::{self, Discovered};
use super::login::{self, AuthorizationRequest, Redirect};
use super::pkce::{self, Pkce};
use super::registration::{self, Registration};
use super::store::{Saved, Store};
use super::tokens::{self, GrantRequest, Tokens};
use super::{Grant, Interaction, OAuthError, OAuthSettings};

/// Bounds each metadata, registration and token request.
const REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
const OFFLINE_ACCESS: &str = "offline_access";
/// Authorizations a one-off client (`wasmgate connect`) makes in all: its server's
/// reconnections must not loop on an authorization server that keeps refusing.
const ONE_OFF_AUTHORIZATIONS: u32 = 3;

pub struct OAuthClient {
    server: String,
    url: Url,
    settings: OAuthSettings,
    interaction: Interaction,
    store: Option<Store>,
    http: reqwest::Client,
    /// The header requests carry now, read without waiting on a token request.
    header: Mutex<Option<http::HeaderValue>>,
    state: tokio::sync::Mutex<State>,
    authorizations: std::sync::atomic::AtomicU32,
}

#[derive(Default)]
struct State {
    saved: Option<Saved>,
    /// Clients registered this run, by issuer: a server that moves to another
    /// authorization server gets a new registration there, never the old one's.
    registrations: HashMap<String, Registration>,
    /// Every scope asked for so far: a step-up asks for these and the new ones.
    scopes: Vec<String>,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("server", &self.server)
            .field("settings", &self.settings)
            .finish_non_exhaustive()
    }
}

impl OAuthClient {
    /// The client of the server `server` at `url`, with the tokens kept in `store`.
    pub fn new(
        server: &str,
        url: &str,
        settings: OAuthSettings,
        interaction: Interaction,
        store: Option<Store>,
        ca_file: Option<&Path>,
    ) -> Result<OAuthClient, OAuthError> {
        let url = Url::parse(url).map_err(|e| OAuthError::Discovery(format!("`{url}`: {e}")))?;
        let mut builder = reqwest::Client::builder()
            .redirect(reqwest::redirect::Policy::none())
            .timeout(REQUEST_TIMEOUT)
            .user_agent(concat!("wasmgate/", env!("CARGO_PKG_VERSION")));
        if let Some(file) = ca_file {
            let pem = std::fs::read(file)
                .map_err(|e| OAuthError::Http(format!("ca_file {}: {e}", file.display())))?;
            for cert in reqwest::Certificate::from_pem_bundle(&pem)
                .map_err(|e| OAuthError::Http(format!("ca_file {}: {e}", file.display())))?
            {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder
            .build()
            .map_err(|e| OAuthError::Http(discovery::describe(&e)))?;
        let mut state = State::default();
        if let Some(store) = &store {
            match store.load(server) {
                Ok(Some(saved)) if saved.url == url.as_str() => {
                    state.scopes = saved.tokens.scopes.clone();
                    state.saved = Some(saved);
                }
                Ok(_) => {}
                Err(err) => tracing::warn!(server, "{err}"),
            }
        }
        let client = OAuthClient {
            server: server.to_string(),
            url,
            settings,
            interaction,
            store,
            http,
            header: Mutex::new(None),
            state: tokio::sync::Mutex::new(state),
            authorizations: std::sync::atomic::AtomicU32::new(0),
        };
        if let Ok(state) = client.state.try_lock() {
            client.show(state.saved.as_ref().map(|s| &s.tokens));
        }
        Ok(client)
    }

    /// The `Authorization` header for the next request, if there is a token.
    pub fn header(&self) -> Option<http::HeaderValue> {
        self.header.lock().unwrap().clone()
    }

    /// Refreshes a token about to expire; a failure leaves it for the 401 to handle.
    pub async fn fresh(&self) {
        let mut state = self.state.lock().await;
        let stale = state.saved.as_ref().is_some_and(|s| s.tokens.stale());
        if stale && let Err(err) = self.refresh(&mut state).await {
            tracing::info!(server = %self.server, "the token was not refreshed: {err}");
        }
    }

    /// After a 401 (or a 403 `insufficient_scope`) answered a request that carried
    /// `sent`: a token to try again with, or why there is none.
    pub async fn challenged(
        &self,
        header: Option<&str>,
        sent: Option<&http::HeaderValue>,
    ) -> Result<(), OAuthError> {
        let mut state = self.state.lock().await;
        // Another request got a new token meanwhile: try that one.
        if self.header().as_ref() != sent && self.header().is_some() {
            return Ok(());
        }
        let challenge = header.and_then(Challenge::parse).unwrap_or_default();
        if !challenge.insufficient_scope()
            && sent.is_some()
            && self.refresh(&mut state).await.is_ok()
        {
            return Ok(());
        }
        let found = discovery::discover(
            &self.http,
            &self.url,
            challenge.resource_metadata.as_deref(),
        )
        .await?;
        let mut scopes = state.scopes.clone();
        let wanted: Vec<String> = match (&challenge.scope, &found.resource_scopes) {
            (Some(scope), _) => scope.split_whitespace().map(str::to_string).collect(),
            (None, Some(supported)) => supported.clone(),
            (None, None) => Vec::new(),
        };
        union(&mut scopes, &wanted);
        union(&mut scopes, &self.settings.scopes);
        self.authorize(&mut state, &found, scopes).await
    }

    /// `wasmgate auth login`: discovery from the server's own challenge (or its
    /// well-known metadata), then the grant.
    pub async fn login(&self) -> Result<(), OAuthError> {
        // A login is asked for even with tokens kept: that is what the user wants.
        self.state.lock().await.saved = None;
        self.show(None);
        let probe = self
            .http
            .post(self.url.as_str())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#)
            .send()
            .await
            .map_err(|e| OAuthError::Http(discovery::describe(&e)))?;
        let header = probe
            .headers()
            .get(http::header::WWW_AUTHENTICATE)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        self.challenged(header.as_deref(), None).await
    }

    async fn authorize(
        &self,
        state: &mut State,
        found: &Discovered,
        mut scopes: Vec<String>,
    ) -> Result<(), OAuthError> {
        let issuer = found.server.issuer.clone();
        let grant = self.settings.grant;
        if grant == Grant::AuthorizationCode && self.interaction == Interaction::None {
            // `wasmgate auth login` may have run since: its tokens are used.
            if self.adopt_stored(state) {
                return Ok(());
            }
            return Err(OAuthError::LoginRequired {
                server: self.server.clone(),
            });
        }
        let made = self
            .authorizations
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        if self.interaction == Interaction::Follow && made >= ONE_OFF_AUTHORIZATIONS {
            return Err(OAuthError::GaveUp {
                server: self.server.clone(),
                attempts: made,
                reason: "no more authorizations for a one-off client".into(),
            });
        }
        // A refresh token where the server offers it (SEP-2207).
        let offline = found
            .server
            .scopes_supported
            .as_ref()
            .is_some_and(|s| s.iter().any(|s| s == OFFLINE_ACCESS));
        let mut asked = scopes.clone();
        if grant == Grant::AuthorizationCode && offline {
            union(&mut asked, &[OFFLINE_ACCESS.to_string()]);
        }
        let redirect = match grant {
            Grant::AuthorizationCode => Some(Redirect::bind().await?),
            Grant::ClientCredentials => None,
        };
        let client = self
            .client_for(state, found, redirect.as_ref().map(|r| r.uri.as_str()))
            .await?;
        let endpoint = &found.server.token_endpoint;
        let tokens = match redirect {
            None => {
                tokens::request(
                    &self.http,
                    endpoint,
                    &client,
                    GrantRequest::ClientCredentials,
                    &asked,
                    &found.resource,
                )
                .await?
            }
            Some(redirect) => {
                let pkce = Pkce::new();
                let csrf = pkce::random_token();
                let redirect_uri = redirect.uri.clone();
                let url = login::authorization_url(
                    &found.server,
                    &AuthorizationRequest {
                        client_id: &client.client_id,
                        redirect_uri: &redirect_uri,
                        state: &csrf,
                        challenge: &pkce.challenge,
                        scopes: &asked,
                        resource: &found.resource,
                    },
                )?;
                let code = login::code(
                    self.interaction,
                    &self.http,
                    &url,
                    redirect,
                    &csrf,
                    &found.server,
                )
                .await?;
                tokens::request(
                    &self.http,
                    endpoint,
                    &client,
                    GrantRequest::Code {
                        code: &code,
                        redirect_uri: &redirect_uri,
                        verifier: &pkce.verifier,
                    },
                    &asked,
                    &found.resource,
                )
                .await?
            }
        };
        asked.retain(|s| s != OFFLINE_ACCESS || offline);
        scopes.clone_from(&asked);
        state.scopes = scopes;
        tracing::info!(server = %self.server, issuer = %issuer, grant = grant.as_str(), "got an access token");
        self.keep(
            state,
            Saved {
                url: self.url.as_str().to_string(),
                resource: found.resource.clone(),
                token_endpoint: endpoint.clone(),
                registration: client,
                tokens,
            },
        );
        Ok(())
    }

    /// This run's registration at the issuer, the stored one if it is that issuer's, or
    /// a new one.
    async fn client_for(
        &self,
        state: &mut State,
        found: &Discovered,
        redirect_uri: Option<&str>,
    ) -> Result<Registration, OAuthError> {
        let issuer = &found.server.issuer;
        if let Some(known) = state.registrations.get(issuer) {
            return Ok(known.clone());
        }
        let stored = state
            .saved
            .as_ref()
            .map(|s| &s.registration)
            .filter(|r| &r.issuer == issuer && self.settings.client_id.is_none());
        // A public client registered for another redirect URI must register again.
        let client = match stored {
            Some(r) if r.client_secret.is_some() || redirect_uri.is_none() => r.clone(),
            _ => {
                registration::register(&self.http, &self.settings, &found.server, redirect_uri)
                    .await?
            }
        };
        state.registrations.insert(issuer.clone(), client.clone());
        Ok(client)
    }

    async fn refresh(&self, state: &mut State) -> Result<(), OAuthError> {
        let Some(saved) = state.saved.clone() else {
            return Err(OAuthError::Refused("no token to refresh".into()));
        };
        let tokens = match (&saved.tokens.refresh_token, self.settings.grant) {
            (Some(refresh), _) => {
                tokens::request(
                    &self.http,
                    &saved.token_endpoint,
                    &saved.registration,
                    GrantRequest::Refresh(refresh),
                    &[],
                    &saved.resource,
                )
                .await?
            }
            // Client credentials need no refresh token: the grant is simply asked again.
            (None, Grant::ClientCredentials) => {
                tokens::request(
                    &self.http,
                    &saved.token_endpoint,
                    &saved.registration,
                    GrantRequest::ClientCredentials,
                    &saved.tokens.scopes,
                    &saved.resource,
                )
                .await?
            }
            (None, Grant::AuthorizationCode) => {
                return Err(OAuthError::Refused("no refresh token".into()));
            }
        };
        let tokens = Tokens {
            // A server may keep the refresh token it gave (RFC 6749 section 6).
            refresh_token: tokens.refresh_token.or(saved.tokens.refresh_token.clone()),
            scopes: match tokens.scopes.is_empty() {
                true => saved.tokens.scopes.clone(),
                false => tokens.scopes,
            },
            ..tokens
        };
        tracing::info!(server = %self.server, "refreshed the access token");
        self.keep(state, Saved { tokens, ..saved });
        Ok(())
    }

    /// Takes up tokens another process stored (a login), if they are new.
    fn adopt_stored(&self, state: &mut State) -> bool {
        let Some(Ok(Some(saved))) = self.store.as_ref().map(|s| s.load(&self.server)) else {
            return false;
        };
        let current = state.saved.as_ref().map(|s| &s.tokens.access_token);
        if saved.url != self.url.as_str() || current == Some(&saved.tokens.access_token) {
            return false;
        }
        state.scopes = saved.tokens.scopes.clone();
        self.show(Some(&saved.tokens));
        state.saved = Some(saved);
        true
    }

    /// Uses `saved` from now on, and stores it.
    fn keep(&self, state: &mut State, saved: Saved) {
        if let Some(store) = &self.store
            && let Err(err) = store.save(&self.server, &saved)
        {
            tracing::warn!(server = %self.server, "the token is used but not kept: {err}");
        }
        self.show(Some(&saved.tokens));
        state.saved = Some(saved);
    }

    fn show(&self, tokens: Option<&Tokens>) {
        let value = tokens.and_then(|t| {
            let mut value =
                http::HeaderValue::from_str(&format!("Bearer {}", t.access_token.expose())).ok()?;
            value.set_sensitive(true);
            Some(value)
        });
        *self.header.lock().unwrap() = value;
    }
}

/// Adds to `scopes` those of `more` it lacks, in order.
fn union(scopes: &mut Vec<String>, more: &[String]) {
    for scope in more {
        if !scopes.contains(scope) {
            scopes.push(scope.clone());
        }
    }
}
