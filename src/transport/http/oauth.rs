//! The front as an OAuth 2.1 resource server (the MCP authorization spec): access tokens
//! checked as JWTs against the issuer's keys or by introspection, mapped to a principal by
//! `[http.oauth]` rules, and the protected-resource metadata clients discover it by.

mod jwks;
pub mod metadata;
mod rules;
mod validate;

use std::sync::Arc;

use axum::http::{HeaderValue, StatusCode, header};
use axum::response::Response;

use super::respond::rpc_error;
use crate::config::OauthFront;
use crate::protocol;
pub use rules::Principal;

/// The resource server: its settings, the issuer's keys, the introspection cache.
pub struct Oauth {
    config: Arc<OauthFront>,
    keys: jwks::Keys,
    introspected: validate::Introspected,
    http: reqwest::Client,
}

/// Why a request is not let in, as the spec's status and `WWW-Authenticate` say it.
#[derive(Debug, thiserror::Error)]
pub enum Refusal {
    #[error("send Authorization: Bearer <token>")]
    Missing,
    /// 401 `invalid_token`.
    #[error("the bearer token is not valid: {0}")]
    Invalid(String),
    /// 403 `insufficient_scope`: the scopes the path needs.
    #[error("the token lacks the scope {0}")]
    Scope(String),
    /// 403: a valid token whose rules do not give this path.
    #[error("{0}")]
    Forbidden(String),
}

impl Oauth {
    /// The resource server of `[http.oauth]`; fails on an unreadable `ca_file`.
    pub fn new(config: Arc<OauthFront>) -> Result<Oauth, String> {
        let mut builder = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(10))
            // The issuer's endpoints answer directly; a redirect would be someone else's.
            .redirect(reqwest::redirect::Policy::none())
            // Rare requests (keys, uncached introspection): a kept connection the issuer
            // has closed meanwhile would fail a POST, which is not retried.
            .pool_max_idle_per_host(0);
        if let Some(file) = &config.ca_file {
            let pem = std::fs::read(file)
                .map_err(|e| format!("[http.oauth] ca_file {}: {e}", file.display()))?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|e| {
                format!(
                    "[http.oauth] ca_file {}: not PEM certificates: {e}",
                    file.display()
                )
            })?;
            builder = builder.tls_certs_merge(certs);
        }
        let http = builder
            .build()
            .map_err(|e| format!("[http.oauth]: cannot make an HTTPS client: {e}"))?;
        Ok(Oauth {
            keys: jwks::Keys::new(config.clone()),
            introspected: validate::Introspected::default(),
            config,
            http,
        })
    }

    /// The principal of `token` on a path whose resource is one of `resources`.
    pub async fn authenticate(
        &self,
        token: &str,
        resources: &[String],
    ) -> Result<Principal, Refusal> {
        let claims = validate::claims(self, token, resources).await?;
        let principal = rules::principal(&self.config, &claims)?;
        let scopes = rules::scopes(&claims);
        let missing: Vec<&str> = (self.config.scopes.iter())
            .filter(|s| !scopes.contains(&s.as_str()))
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return Err(Refusal::Scope(self.config.scopes.join(" ")));
        }
        Ok(principal)
    }

    /// The resource (RFC 8707 audience) of `/mcp` or of a profile's path.
    pub fn resource(&self, profile: Option<&str>) -> String {
        metadata::resource(&self.config, profile)
    }

    /// Every resource the gateway serves: `/messages` names no profile, its session does.
    pub fn resources<'a>(&self, profiles: impl Iterator<Item = &'a String>) -> Vec<String> {
        std::iter::once(self.resource(None))
            .chain(profiles.map(|p| self.resource(Some(p))))
            .collect()
    }

    /// The 401 or 403 for `refusal` on the path of `profile`.
    pub fn refuse(&self, refusal: &Refusal, profile: Option<&str>) -> Response {
        let metadata = metadata::url(&self.config, profile);
        let scope = self.config.scopes.join(" ");
        let (status, challenge) = match refusal {
            Refusal::Missing => (
                StatusCode::UNAUTHORIZED,
                format!("Bearer resource_metadata=\"{metadata}\", scope=\"{scope}\""),
            ),
            Refusal::Invalid(why) => (
                StatusCode::UNAUTHORIZED,
                format!(
                    "Bearer error=\"invalid_token\", error_description=\"{}\", resource_metadata=\"{metadata}\", scope=\"{scope}\"",
                    quotable(why)
                ),
            ),
            Refusal::Scope(needed) => (
                StatusCode::FORBIDDEN,
                format!(
                    "Bearer error=\"insufficient_scope\", scope=\"{needed}\", resource_metadata=\"{metadata}\""
                ),
            ),
            Refusal::Forbidden(_) => (
                StatusCode::FORBIDDEN,
                format!("Bearer resource_metadata=\"{metadata}\""),
            ),
        };
        let mut response = rpc_error(
            status,
            protocol::INVALID_REQUEST,
            match status {
                StatusCode::UNAUTHORIZED => format!("Unauthorized: {refusal}"),
                _ => format!("Forbidden: {refusal}"),
            },
        );
        if let Ok(value) = HeaderValue::from_str(&challenge) {
            response
                .headers_mut()
                .insert(header::WWW_AUTHENTICATE, value);
        }
        response
    }
}

/// `text` fit for a quoted header parameter.
fn quotable(text: &str) -> String {
    text.chars()
        .filter(|c| c.is_ascii() && !c.is_ascii_control() && *c != '"' && *c != '\\')
        .collect()
}
