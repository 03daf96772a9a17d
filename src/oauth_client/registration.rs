//! Who the gateway is to an authorization server, in the spec's order of preference: a
//! pre-registered client ID (and secret), a client ID metadata document's URL, or a
//! client registered on the spot (RFC 7591).

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::discovery::{ServerMetadata, describe};
use super::{Grant, OAuthError, OAuthSettings, Secret};

/// How the client proves itself at the token endpoint.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum AuthMethod {
    ClientSecretBasic,
    ClientSecretPost,
    None,
}

impl AuthMethod {
    fn parse(text: &str) -> Option<AuthMethod> {
        match text {
            "client_secret_basic" => Some(AuthMethod::ClientSecretBasic),
            "client_secret_post" => Some(AuthMethod::ClientSecretPost),
            "none" => Some(AuthMethod::None),
            _ => None,
        }
    }

    fn as_str(self) -> &'static str {
        match self {
            AuthMethod::ClientSecretBasic => "client_secret_basic",
            AuthMethod::ClientSecretPost => "client_secret_post",
            AuthMethod::None => "none",
        }
    }
}

/// The client at one authorization server (kept with its tokens, by issuer).
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Registration {
    pub issuer: String,
    pub client_id: String,
    pub client_secret: Option<Secret>,
    pub auth_method: AuthMethod,
}

/// The way to the server's token endpoint for a client with (or without) a secret: the
/// first the server supports of basic, post (with a secret), none (without); RFC 8414's
/// default, basic, when it lists none.
fn pick_method(server: &ServerMetadata, has_secret: bool) -> AuthMethod {
    let supported: Vec<AuthMethod> = match &server.token_endpoint_auth_methods_supported {
        Some(list) => list.iter().filter_map(|m| AuthMethod::parse(m)).collect(),
        None => vec![AuthMethod::ClientSecretBasic],
    };
    let order: &[AuthMethod] = match has_secret {
        true => &[AuthMethod::ClientSecretBasic, AuthMethod::ClientSecretPost],
        false => &[AuthMethod::None],
    };
    order
        .iter()
        .copied()
        .find(|m| supported.contains(m))
        .unwrap_or(match has_secret {
            true => AuthMethod::ClientSecretBasic,
            false => AuthMethod::None,
        })
}

/// The client for `server`: configured, by metadata document, or registered now.
pub async fn register(
    http: &reqwest::Client,
    settings: &OAuthSettings,
    server: &ServerMetadata,
    redirect_uri: Option<&str>,
) -> Result<Registration, OAuthError> {
    if let Some(client_id) = &settings.client_id {
        let method = pick_method(server, settings.client_secret.is_some());
        return Ok(Registration {
            issuer: server.issuer.clone(),
            client_id: client_id.clone(),
            client_secret: settings.client_secret.clone(),
            auth_method: method,
        });
    }
    if let Some(url) = &settings.client_metadata_url
        && server.client_id_metadata_document_supported
    {
        return Ok(Registration {
            issuer: server.issuer.clone(),
            client_id: url.clone(),
            client_secret: None,
            auth_method: AuthMethod::None,
        });
    }
    let Some(endpoint) = &server.registration_endpoint else {
        return Err(OAuthError::Discovery(format!(
            "`{}` offers no dynamic registration: set client_id (and client_secret) in \
             [servers.NAME.oauth], or client_metadata_url where it supports client ID \
             metadata documents",
            server.issuer
        )));
    };
    dynamic(http, endpoint, settings, server, redirect_uri).await
}

/// RFC 7591: asks for the way of authenticating the server prefers.
async fn dynamic(
    http: &reqwest::Client,
    endpoint: &str,
    settings: &OAuthSettings,
    server: &ServerMetadata,
    redirect_uri: Option<&str>,
) -> Result<Registration, OAuthError> {
    let (grants, method) = match settings.grant {
        Grant::AuthorizationCode => (
            vec!["authorization_code", "refresh_token"],
            pick_method(server, false),
        ),
        Grant::ClientCredentials => (vec!["client_credentials"], pick_method(server, true)),
    };
    // A public client unless the server takes public clients not at all.
    let method = match (
        settings.grant,
        &server.token_endpoint_auth_methods_supported,
    ) {
        (Grant::AuthorizationCode, Some(list)) if !list.iter().any(|m| m == "none") => {
            pick_method(server, true)
        }
        _ => method,
    };
    let mut body = json!({
        "client_name": "wasmgate",
        // A client on the user's machine with a loopback redirect (SEP-837, OpenID DCR).
        "application_type": "native",
        "grant_types": grants,
        "token_endpoint_auth_method": method.as_str(),
    });
    if let Some(uri) = redirect_uri {
        body["redirect_uris"] = json!([uri]);
        body["response_types"] = json!(["code"]);
    }
    if !settings.scopes.is_empty() {
        body["scope"] = json!(settings.scopes.join(" "));
    }
    let response = http
        .post(endpoint)
        .json(&body)
        .send()
        .await
        .map_err(|e| OAuthError::Http(format!("POST {endpoint}: {}", describe(&e))))?;
    let status = response.status();
    let text = response.text().await.unwrap_or_default();
    if !status.is_success() {
        return Err(OAuthError::Refused(format!(
            "registration at {endpoint}: status {status}: {}",
            shown(&text)
        )));
    }
    #[derive(Deserialize)]
    struct Registered {
        client_id: String,
        client_secret: Option<String>,
        token_endpoint_auth_method: Option<String>,
    }
    let found: Registered = serde_json::from_str(&text).map_err(|e| {
        OAuthError::Refused(format!(
            "registration at {endpoint}: an answer without client_id: {e}"
        ))
    })?;
    let auth_method = found
        .token_endpoint_auth_method
        .as_deref()
        .and_then(AuthMethod::parse)
        .unwrap_or(match found.client_secret {
            Some(_) => method,
            None => AuthMethod::None,
        });
    Ok(Registration {
        issuer: server.issuer.clone(),
        client_id: found.client_id,
        client_secret: found.client_secret.map(Secret),
        auth_method,
    })
}

/// The start of an error page, for an error message (never a token: these are errors).
pub fn shown(text: &str) -> String {
    text.chars().take(200).collect()
}
