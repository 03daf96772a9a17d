//! Token endpoint requests (authorization code, client credentials, refresh), each with
//! the resource indicator (RFC 8707) and the client's way of authenticating.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine;
use serde::{Deserialize, Serialize};

use super::discovery::describe;
use super::registration::{AuthMethod, Registration, shown};
use super::{OAuthError, Secret};

/// A refresh this long before expiry, so that no request goes out with a dying token.
pub const EARLY: Duration = Duration::from_secs(60);

/// What a token endpoint gave, as kept in the store.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Tokens {
    pub access_token: Secret,
    pub refresh_token: Option<Secret>,
    /// Seconds since the Unix epoch.
    pub expires_at: Option<u64>,
    pub scopes: Vec<String>,
}

impl Tokens {
    /// Expired, or about to.
    pub fn stale(&self) -> bool {
        self.expires_at
            .is_some_and(|at| now() + EARLY.as_secs() >= at)
    }
}

pub fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// One grant's own parameters.
pub enum GrantRequest<'a> {
    Code {
        code: &'a str,
        redirect_uri: &'a str,
        verifier: &'a str,
    },
    ClientCredentials,
    Refresh(&'a Secret),
}

/// Asks `endpoint` for tokens; `scopes` as asked (kept when the answer names none).
pub async fn request(
    http: &reqwest::Client,
    endpoint: &str,
    client: &Registration,
    grant: GrantRequest<'_>,
    scopes: &[String],
    resource: &str,
) -> Result<Tokens, OAuthError> {
    let refreshing = matches!(grant, GrantRequest::Refresh(_));
    let (body, basic_header) = encode(client, &grant, scopes, resource)?;
    let mut builder = http
        .post(endpoint)
        .header("content-type", "application/x-www-form-urlencoded")
        .header("accept", "application/json");
    if let Some(value) = basic_header {
        builder = builder.header("authorization", value);
    }
    let response = builder
        .body(body)
        .send()
        .await
        .map_err(|e| OAuthError::Http(format!("POST {endpoint}: {}", describe(&e))))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        let what = if refreshing {
            "refresh"
        } else {
            "token request"
        };
        return Err(OAuthError::Refused(format!(
            "{what} at {endpoint}: status {status}: {}",
            error_of(&text)
        )));
    }
    #[derive(Deserialize)]
    struct Answer {
        access_token: String,
        refresh_token: Option<String>,
        expires_in: Option<u64>,
        scope: Option<String>,
    }
    let answer: Answer = serde_json::from_str(&text).map_err(|_| {
        OAuthError::Refused(format!(
            "token request at {endpoint}: an answer without access_token"
        ))
    })?;
    Ok(Tokens {
        access_token: Secret(answer.access_token),
        refresh_token: answer.refresh_token.map(Secret),
        expires_at: answer.expires_in.map(|s| now() + s),
        scopes: match answer.scope {
            Some(scope) => scope.split_whitespace().map(str::to_string).collect(),
            None => scopes.to_vec(),
        },
    })
}

/// The form and the `Authorization: Basic` header of a token request (apart from the
/// request: the form serializer may not be held across an await).
fn encode(
    client: &Registration,
    grant: &GrantRequest<'_>,
    scopes: &[String],
    resource: &str,
) -> Result<(String, Option<http::HeaderValue>), OAuthError> {
    let mut form = url::form_urlencoded::Serializer::new(String::new());
    match grant {
        GrantRequest::Code {
            code,
            redirect_uri,
            verifier,
        } => {
            form.append_pair("grant_type", "authorization_code")
                .append_pair("code", code)
                .append_pair("redirect_uri", redirect_uri)
                .append_pair("code_verifier", verifier);
        }
        GrantRequest::ClientCredentials => {
            form.append_pair("grant_type", "client_credentials");
        }
        GrantRequest::Refresh(token) => {
            form.append_pair("grant_type", "refresh_token")
                .append_pair("refresh_token", token.expose());
        }
    }
    if !scopes.is_empty() && !matches!(grant, GrantRequest::Code { .. }) {
        form.append_pair("scope", &scopes.join(" "));
    }
    form.append_pair("resource", resource);
    let mut basic_header = None;
    match (client.auth_method, &client.client_secret) {
        (AuthMethod::ClientSecretBasic, Some(secret)) => {
            // RFC 6749 section 2.3.1: each part form-encoded before joining.
            let encode =
                |s: &str| url::form_urlencoded::byte_serialize(s.as_bytes()).collect::<String>();
            let pair = format!("{}:{}", encode(&client.client_id), encode(secret.expose()));
            let basic = base64::engine::general_purpose::STANDARD.encode(pair);
            let mut value = http::HeaderValue::from_str(&format!("Basic {basic}"))
                .map_err(|_| OAuthError::Refused("a client ID HTTP cannot carry".into()))?;
            value.set_sensitive(true);
            basic_header = Some(value);
        }
        (AuthMethod::ClientSecretPost, Some(secret)) => {
            form.append_pair("client_id", &client.client_id)
                .append_pair("client_secret", secret.expose());
        }
        _ => {
            form.append_pair("client_id", &client.client_id);
        }
    }
    Ok((form.finish(), basic_header))
}

/// An OAuth error answer's `error` and description; never the body itself beyond that
/// (a misbehaving server could echo a secret).
fn error_of(text: &str) -> String {
    let parsed: Option<serde_json::Value> = serde_json::from_str(text).ok();
    let field = |name: &str| {
        parsed
            .as_ref()
            .and_then(|v| v.get(name))
            .and_then(|v| v.as_str())
            .map(shown)
    };
    match (field("error"), field("error_description")) {
        (Some(error), Some(description)) => format!("{error}: {description}"),
        (Some(error), None) => error,
        _ => "no OAuth error in the answer".into(),
    }
}

#[cfg(test)]
mod tests {
    use super::{EARLY, Tokens, now};
    use crate::oauth_client::Secret;

    fn expiring_at(at: Option<u64>) -> Tokens {
        Tokens {
            access_token: Secret("t".into()),
            refresh_token: None,
            expires_at: at,
            scopes: vec![],
        }
    }

    #[test]
    fn a_token_is_refreshed_a_minute_before_it_expires() {
        assert!(!expiring_at(None).stale());
        assert!(!expiring_at(Some(now() + EARLY.as_secs() + 30)).stale());
        assert!(expiring_at(Some(now() + EARLY.as_secs() - 1)).stale());
        assert!(expiring_at(Some(now().saturating_sub(5))).stale());
    }
}
