//! The issuer's signing keys: found through its metadata (RFC 8414, else OpenID), fetched
//! once, fetched again for an unknown `kid` at most once per `jwks_refresh`.

use std::sync::Arc;
use std::time::Instant;

use jsonwebtoken::DecodingKey;
use jsonwebtoken::jwk::JwkSet;
use serde_json::Value;

use crate::config::OauthFront;

/// The key set and when it was fetched; one fetch at a time.
pub struct Keys {
    config: Arc<OauthFront>,
    state: tokio::sync::Mutex<State>,
}

#[derive(Default)]
struct State {
    jwks_uri: Option<String>,
    set: Option<JwkSet>,
    fetched: Option<Instant>,
}

impl Keys {
    pub fn new(config: Arc<OauthFront>) -> Keys {
        Keys {
            state: tokio::sync::Mutex::new(State {
                jwks_uri: config.jwks_uri.clone(),
                ..State::default()
            }),
            config,
        }
    }

    /// The key `kid` names (or the only key, for a token that names none).
    pub async fn key(
        &self,
        http: &reqwest::Client,
        kid: Option<&str>,
    ) -> Result<DecodingKey, String> {
        let mut state = self.state.lock().await;
        if let Some(key) = state.set.as_ref().and_then(|set| find(set, kid)) {
            return key;
        }
        let due = state
            .fetched
            .is_none_or(|at| at.elapsed() >= self.config.jwks_refresh);
        if due {
            // Counted as a fetch even when it fails: an issuer that is down is not asked
            // once per request.
            state.fetched = Some(Instant::now());
            let set = self.fetch(http, &mut state).await?;
            state.set = Some(set);
            if let Some(key) = state.set.as_ref().and_then(|set| find(set, kid)) {
                return key;
            }
        }
        Err(match kid {
            Some(kid) => format!("no key `{kid}` in the issuer's JWKS"),
            None => "the token names no key (kid), and the issuer has several".into(),
        })
    }

    async fn fetch(&self, http: &reqwest::Client, state: &mut State) -> Result<JwkSet, String> {
        let uri = match &state.jwks_uri {
            Some(uri) => uri.clone(),
            None => {
                let uri = discover(http, &self.config.issuer).await?;
                state.jwks_uri = Some(uri.clone());
                uri
            }
        };
        let set: JwkSet = get_json(http, &uri).await.and_then(|v| {
            serde_json::from_value(v).map_err(|e| format!("{uri} is not a JWK set: {e}"))
        })?;
        tracing::info!(jwks_uri = %uri, keys = set.keys.len(), "fetched the issuer's keys");
        Ok(set)
    }
}

fn find(set: &JwkSet, kid: Option<&str>) -> Option<Result<DecodingKey, String>> {
    let jwk = match kid {
        Some(kid) => set.find(kid)?,
        None if set.keys.len() == 1 => &set.keys[0],
        None => return None,
    };
    Some(DecodingKey::from_jwk(jwk).map_err(|e| format!("the issuer's key cannot be used: {e}")))
}

/// `jwks_uri` from the issuer's RFC 8414 metadata, else its OpenID configuration; either
/// must name the configured issuer (RFC 8414 section 3.3).
async fn discover(http: &reqwest::Client, issuer: &str) -> Result<String, String> {
    let trimmed = issuer.trim_end_matches('/');
    let after_scheme = trimmed.find("://").map_or(0, |i| i + 3);
    let path_at = trimmed[after_scheme..]
        .find('/')
        .map_or(trimmed.len(), |i| after_scheme + i);
    let (origin, path) = trimmed.split_at(path_at);
    let candidates = [
        format!("{origin}/.well-known/oauth-authorization-server{path}"),
        format!("{trimmed}/.well-known/openid-configuration"),
    ];
    let mut why = Vec::new();
    for url in candidates {
        match get_json(http, &url).await {
            Ok(meta) => {
                if meta.get("issuer").and_then(Value::as_str) != Some(issuer) {
                    return Err(format!("{url} names another issuer than `{issuer}`"));
                }
                return meta
                    .get("jwks_uri")
                    .and_then(Value::as_str)
                    .map(str::to_string)
                    .ok_or_else(|| format!("{url} has no jwks_uri"));
            }
            Err(e) => why.push(e),
        }
    }
    Err(format!("cannot find the issuer's keys: {}", why.join("; ")))
}

async fn get_json(http: &reqwest::Client, url: &str) -> Result<Value, String> {
    let response = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| format!("{url}: {e}"))?;
    if !response.status().is_success() {
        return Err(format!("{url} answered {}", response.status()));
    }
    response
        .json()
        .await
        .map_err(|e| format!("{url}: not JSON: {e}"))
}
