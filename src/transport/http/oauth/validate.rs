//! An access token to its claims: a JWT checked against the issuer's keys (`iss`, `aud`
//! = the path's resource, `exp`, `nbf`), or an opaque token asked of the RFC 7662
//! introspection endpoint, its answer kept briefly.

use std::collections::HashMap;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::{Map, Value};
use sha2::{Digest as _, Sha256};

use super::{Oauth, Refusal};

/// Seconds of clock difference between the issuer and the gateway forgiven.
const LEEWAY: u64 = 60;
/// How long an introspection answer is kept (never past the token's `exp`).
const INTROSPECTED_FOR: Duration = Duration::from_secs(30);
/// Answers kept at most; past it the cache starts over.
const INTROSPECTED_MAX: usize = 10_000;

/// An introspection answer and until when it is kept.
type Answer = (Instant, Map<String, Value>);

/// Introspection answers by the token's hash, so the cache holds no token.
#[derive(Default)]
pub struct Introspected(Mutex<HashMap<[u8; 32], Answer>>);

/// The claims of `token`, valid for one of `resources`.
pub async fn claims(
    oauth: &Oauth,
    token: &str,
    resources: &[String],
) -> Result<Map<String, Value>, Refusal> {
    match jsonwebtoken::decode_header(token) {
        Ok(header) => jwt(oauth, token, header, resources).await,
        Err(_) if oauth.config.introspection.is_some() => introspect(oauth, token, resources).await,
        Err(_) => Err(Refusal::Invalid("it is not a JWT".into())),
    }
}

async fn jwt(
    oauth: &Oauth,
    token: &str,
    header: jsonwebtoken::Header,
    resources: &[String],
) -> Result<Map<String, Value>, Refusal> {
    // A shared-secret algorithm would let whoever knows a public key sign with it.
    if matches!(
        header.alg,
        Algorithm::HS256 | Algorithm::HS384 | Algorithm::HS512
    ) {
        return Err(Refusal::Invalid(format!(
            "algorithm {:?} is not accepted",
            header.alg
        )));
    }
    let key = oauth
        .keys
        .key(&oauth.http, header.kid.as_deref())
        .await
        .map_err(Refusal::Invalid)?;
    let mut validation = Validation::new(header.alg);
    validation.set_issuer(&[&oauth.config.issuer]);
    validation.set_audience(resources);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation.leeway = LEEWAY;
    validation.validate_nbf = true;
    match jsonwebtoken::decode::<Map<String, Value>>(token, &key, &validation) {
        Ok(data) => Ok(data.claims),
        Err(e) => Err(Refusal::Invalid(match e.kind() {
            ErrorKind::ExpiredSignature => "it has expired".into(),
            ErrorKind::ImmatureSignature => "it is not valid yet (nbf)".into(),
            ErrorKind::InvalidIssuer => "another issuer made it".into(),
            ErrorKind::InvalidAudience => format!("it is not for this resource ({})", resources[0]),
            ErrorKind::InvalidSignature => "its signature does not match".into(),
            ErrorKind::MissingRequiredClaim(claim) => format!("it has no `{claim}` claim"),
            other => format!("{other:?}"),
        })),
    }
}

async fn introspect(
    oauth: &Oauth,
    token: &str,
    resources: &[String],
) -> Result<Map<String, Value>, Refusal> {
    let Some(config) = &oauth.config.introspection else {
        return Err(Refusal::Invalid("it is not a JWT".into()));
    };
    let hash: [u8; 32] = Sha256::digest(token.as_bytes()).into();
    let cached = (oauth.introspected.0.lock().ok()).and_then(|cache| {
        cache
            .get(&hash)
            .filter(|(until, _)| *until > Instant::now())
            .map(|(_, c)| c.clone())
    });
    let claims = match cached {
        Some(claims) => claims,
        None => {
            let body = form_urlencoded::Serializer::new(String::new())
                .append_pair("token", token)
                .append_pair("token_type_hint", "access_token")
                .finish();
            let answer = oauth
                .http
                .post(&config.endpoint)
                .basic_auth(&config.client_id, Some(&config.client_secret))
                .header("content-type", "application/x-www-form-urlencoded")
                .header("accept", "application/json")
                .body(body)
                .send()
                .await
                .map_err(|e| Refusal::Invalid(format!("introspection failed: {}", causes(&e))))?;
            if !answer.status().is_success() {
                return Err(Refusal::Invalid(format!(
                    "introspection answered {}",
                    answer.status()
                )));
            }
            let claims: Map<String, Value> = answer
                .json()
                .await
                .map_err(|e| Refusal::Invalid(format!("introspection answered no JSON: {e}")))?;
            let now = now();
            let left = claims
                .get("exp")
                .and_then(Value::as_u64)
                .map_or(INTROSPECTED_FOR, |exp| {
                    Duration::from_secs(exp.saturating_sub(now))
                });
            if let Ok(mut cache) = oauth.introspected.0.lock() {
                if cache.len() >= INTROSPECTED_MAX {
                    cache.clear();
                }
                cache.insert(
                    hash,
                    (Instant::now() + left.min(INTROSPECTED_FOR), claims.clone()),
                );
            }
            claims
        }
    };
    if claims.get("active") != Some(&Value::Bool(true)) {
        return Err(Refusal::Invalid("the issuer says it is not active".into()));
    }
    if let Some(iss) = claims.get("iss").and_then(Value::as_str)
        && iss != oauth.config.issuer
    {
        return Err(Refusal::Invalid("another issuer made it".into()));
    }
    if claims
        .get("exp")
        .and_then(Value::as_u64)
        .is_some_and(|exp| exp + LEEWAY < now())
    {
        return Err(Refusal::Invalid("it has expired".into()));
    }
    let audience_ok = match claims.get("aud") {
        None => true,
        Some(Value::String(a)) => resources.contains(a),
        Some(Value::Array(list)) => list
            .iter()
            .filter_map(Value::as_str)
            .any(|a| resources.iter().any(|r| r == a)),
        Some(_) => false,
    };
    if !audience_ok {
        return Err(Refusal::Invalid(format!(
            "it is not for this resource ({})",
            resources[0]
        )));
    }
    Ok(claims)
}

/// An error with its causes: reqwest's own message rarely says what went wrong.
pub fn causes(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        text.push_str(": ");
        text.push_str(&cause.to_string());
        source = cause.source();
    }
    text
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}
