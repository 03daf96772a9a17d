//! Finding the authorization server: the protected resource's metadata (RFC 9728) from
//! the challenge's URL or its well-known paths, then the server's own metadata (RFC 8414,
//! OpenID Connect discovery), its `issuer` equal to the one its URL was built from.

use serde::Deserialize;
use url::Url;

use super::OAuthError;

/// RFC 9728 metadata, the fields the client reads.
#[derive(Debug, Clone, Deserialize)]
pub struct ResourceMetadata {
    pub resource: Option<String>,
    #[serde(default)]
    pub authorization_servers: Vec<String>,
    pub scopes_supported: Option<Vec<String>>,
}

/// RFC 8414 / OpenID metadata, the fields the client reads.
#[derive(Debug, Clone, Deserialize)]
pub struct ServerMetadata {
    pub issuer: String,
    pub authorization_endpoint: Option<String>,
    pub token_endpoint: String,
    pub registration_endpoint: Option<String>,
    pub scopes_supported: Option<Vec<String>>,
    pub token_endpoint_auth_methods_supported: Option<Vec<String>>,
    pub code_challenge_methods_supported: Option<Vec<String>>,
    #[serde(default)]
    pub authorization_response_iss_parameter_supported: bool,
    #[serde(default)]
    pub client_id_metadata_document_supported: bool,
    pub grant_types_supported: Option<Vec<String>>,
}

/// What discovery found for one protected resource.
#[derive(Debug, Clone)]
pub struct Discovered {
    /// The resource indicator (RFC 8707) to ask tokens for.
    pub resource: String,
    pub resource_scopes: Option<Vec<String>>,
    pub server: ServerMetadata,
}

/// Resource metadata at `hinted` (the challenge's `resource_metadata`), else at the
/// well-known URLs of `mcp_url`: with its path, then at the root.
pub async fn resource_metadata(
    http: &reqwest::Client,
    mcp_url: &Url,
    hinted: Option<&str>,
) -> Result<ResourceMetadata, OAuthError> {
    let candidates: Vec<String> = match hinted {
        Some(url) => vec![url.to_string()],
        None => {
            let origin = origin(mcp_url);
            let path = mcp_url.path().trim_end_matches('/');
            let mut urls = Vec::new();
            if !path.is_empty() {
                urls.push(format!(
                    "{origin}/.well-known/oauth-protected-resource{path}"
                ));
            }
            urls.push(format!("{origin}/.well-known/oauth-protected-resource"));
            urls
        }
    };
    let mut tried = Vec::new();
    for url in &candidates {
        match get_json::<ResourceMetadata>(http, url).await {
            Ok(Some(found)) => return Ok(found),
            Ok(None) => tried.push(url.as_str()),
            Err(err) => return Err(err),
        }
    }
    Err(OAuthError::Discovery(format!(
        "no protected resource metadata at {}",
        tried.join(" or ")
    )))
}

/// The resource a token is for: the metadata's `resource`, which must be the MCP URL or
/// a prefix of it on the same origin (a server may not name another's resource).
pub fn checked_resource(meta: &ResourceMetadata, mcp_url: &Url) -> Result<String, OAuthError> {
    let Some(resource) = &meta.resource else {
        return Ok(mcp_url.as_str().to_string());
    };
    let parsed = Url::parse(resource)
        .map_err(|e| OAuthError::Discovery(format!("resource `{resource}` is not a URL: {e}")))?;
    let prefix = parsed.path().trim_end_matches('/');
    let path = mcp_url.path();
    let within = path == prefix
        || prefix.is_empty()
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'));
    if origin(&parsed) != origin(mcp_url) || !within {
        return Err(OAuthError::Discovery(format!(
            "the protected resource metadata names resource `{resource}`, not this server's \
             URL `{mcp_url}`"
        )));
    }
    Ok(resource.clone())
}

/// The authorization server's metadata at the well-known URLs of `issuer` (RFC 8414
/// section 3.1 with the path after the well-known part, then OpenID's two placements),
/// refused unless its `issuer` is `issuer` itself.
pub async fn server_metadata(
    http: &reqwest::Client,
    issuer: &str,
) -> Result<ServerMetadata, OAuthError> {
    let parsed = Url::parse(issuer)
        .map_err(|e| OAuthError::Discovery(format!("issuer `{issuer}` is not a URL: {e}")))?;
    let origin = origin(&parsed);
    let path = parsed.path().trim_end_matches('/');
    let candidates = match path.is_empty() {
        true => vec![
            format!("{origin}/.well-known/oauth-authorization-server"),
            format!("{origin}/.well-known/openid-configuration"),
        ],
        false => vec![
            format!("{origin}/.well-known/oauth-authorization-server{path}"),
            format!("{origin}/.well-known/openid-configuration{path}"),
            format!("{origin}{path}/.well-known/openid-configuration"),
        ],
    };
    for url in &candidates {
        if let Some(found) = get_json::<ServerMetadata>(http, url).await? {
            if found.issuer != issuer {
                return Err(OAuthError::Discovery(format!(
                    "the metadata at {url} names issuer `{}`, not `{issuer}`",
                    found.issuer
                )));
            }
            return Ok(found);
        }
    }
    Err(OAuthError::Discovery(format!(
        "no authorization server metadata for `{issuer}` at {}",
        candidates.join(", ")
    )))
}

/// Both steps, from a challenge's resource metadata URL (if any).
pub async fn discover(
    http: &reqwest::Client,
    mcp_url: &Url,
    hinted: Option<&str>,
) -> Result<Discovered, OAuthError> {
    let meta = resource_metadata(http, mcp_url, hinted).await?;
    let resource = checked_resource(&meta, mcp_url)?;
    let issuer = meta.authorization_servers.first().ok_or_else(|| {
        OAuthError::Discovery(
            "the protected resource metadata names no authorization server".into(),
        )
    })?;
    let server = server_metadata(http, issuer).await?;
    Ok(Discovered {
        resource,
        resource_scopes: meta.scopes_supported,
        server,
    })
}

/// `scheme://host[:port]`, without a trailing slash.
fn origin(url: &Url) -> String {
    url.origin().ascii_serialization()
}

/// The JSON at `url`; `None` for a 4xx (not there), an error for anything else that fails.
async fn get_json<T: serde::de::DeserializeOwned>(
    http: &reqwest::Client,
    url: &str,
) -> Result<Option<T>, OAuthError> {
    let response = http
        .get(url)
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|e| OAuthError::Http(format!("GET {url}: {}", describe(&e))))?;
    let status = response.status();
    if status.is_client_error() {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(OAuthError::Discovery(format!("GET {url}: status {status}")));
    }
    let text = response
        .text()
        .await
        .map_err(|e| OAuthError::Http(format!("GET {url}: {}", describe(&e))))?;
    serde_json::from_str(&text)
        .map(Some)
        .map_err(|e| OAuthError::Discovery(format!("GET {url}: not the metadata expected: {e}")))
}

/// reqwest's error with its causes, which say what failed ("connection refused").
pub fn describe(err: &reqwest::Error) -> String {
    let mut text = err.to_string();
    let mut source = std::error::Error::source(err);
    while let Some(cause) = source {
        text.push_str(&format!(": {cause}"));
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::{ResourceMetadata, checked_resource};
    use url::Url;

    fn meta(resource: &str) -> ResourceMetadata {
        ResourceMetadata {
            resource: Some(resource.into()),
            authorization_servers: vec![],
            scopes_supported: None,
        }
    }

    #[test]
    fn the_resource_must_be_this_server_or_a_prefix_of_its_url() {
        let url = Url::parse("http://localhost:3000/mcp").unwrap();
        assert!(checked_resource(&meta("http://localhost:3000/mcp"), &url).is_ok());
        assert!(checked_resource(&meta("http://localhost:3000/"), &url).is_ok());
        assert!(checked_resource(&meta("http://localhost:3000/other"), &url).is_err());
        assert!(checked_resource(&meta("http://localhost:3000/mc"), &url).is_err());
        assert!(checked_resource(&meta("https://evil.example.com/mcp"), &url).is_err());
    }
}
