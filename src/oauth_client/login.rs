//! The authorization code's trip: the authorization URL, the user's browser (or the
//! URL followed by the gateway itself), the loopback redirect on 127.0.0.1, and the
//! response's checks (state, and the issuer of RFC 9207).

use std::collections::HashMap;
use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use url::Url;

use super::discovery::{ServerMetadata, describe};
use super::{Interaction, OAuthError};

/// How long a browser login may take.
const LOGIN_WAIT: Duration = Duration::from_secs(300);
/// The largest request head the loopback listener reads.
const MAX_HEAD: usize = 16 * 1024;

/// The loopback redirect listener, bound before the authorization URL is made.
pub struct Redirect {
    listener: TcpListener,
    pub uri: String,
}

impl Redirect {
    pub async fn bind() -> Result<Redirect, OAuthError> {
        let listener = TcpListener::bind("127.0.0.1:0")
            .await
            .map_err(|e| OAuthError::Http(format!("cannot listen on 127.0.0.1: {e}")))?;
        let port = listener
            .local_addr()
            .map_err(|e| OAuthError::Http(e.to_string()))?
            .port();
        Ok(Redirect {
            listener,
            uri: format!("http://127.0.0.1:{port}/callback"),
        })
    }
}

/// One authorization request's parameters.
pub struct AuthorizationRequest<'a> {
    pub client_id: &'a str,
    pub redirect_uri: &'a str,
    pub state: &'a str,
    pub challenge: &'a str,
    pub scopes: &'a [String],
    pub resource: &'a str,
}

/// The authorization endpoint's URL with the request in its query.
pub fn authorization_url(
    server: &ServerMetadata,
    request: &AuthorizationRequest<'_>,
) -> Result<Url, OAuthError> {
    let endpoint = server.authorization_endpoint.as_deref().ok_or_else(|| {
        OAuthError::Discovery(format!("`{}` has no authorization_endpoint", server.issuer))
    })?;
    let mut url = Url::parse(endpoint)
        .map_err(|e| OAuthError::Discovery(format!("authorization_endpoint `{endpoint}`: {e}")))?;
    {
        let mut query = url.query_pairs_mut();
        query
            .append_pair("response_type", "code")
            .append_pair("client_id", request.client_id)
            .append_pair("redirect_uri", request.redirect_uri)
            .append_pair("state", request.state)
            .append_pair("code_challenge", request.challenge)
            .append_pair("code_challenge_method", "S256")
            .append_pair("resource", request.resource);
        if !request.scopes.is_empty() {
            query.append_pair("scope", &request.scopes.join(" "));
        }
    }
    Ok(url)
}

/// The code the authorization server sent back to `redirect`, checked.
pub async fn code(
    interaction: Interaction,
    http: &reqwest::Client,
    url: &Url,
    redirect: Redirect,
    state: &str,
    server: &ServerMetadata,
) -> Result<String, OAuthError> {
    let params = match interaction {
        Interaction::Follow => follow(http, url).await?,
        Interaction::Browser => browser(url, redirect).await?,
        Interaction::None => unreachable!("a login without a user is refused before"),
    };
    checked(&params, state, server)
}

/// GETs the authorization URL and reads the code from the redirect it answers with.
async fn follow(http: &reqwest::Client, url: &Url) -> Result<HashMap<String, String>, OAuthError> {
    let response =
        http.get(url.as_str()).send().await.map_err(|e| {
            OAuthError::Http(format!("the authorization request: {}", describe(&e)))
        })?;
    let location = response
        .headers()
        .get("location")
        .and_then(|v| v.to_str().ok())
        .ok_or_else(|| {
            OAuthError::Response(format!(
                "status {} without a redirect (a login page wants a user: use \
                 `wasmgate auth login`)",
                response.status()
            ))
        })?;
    let back = url
        .join(location)
        .map_err(|e| OAuthError::Response(format!("a redirect to `{location}`: {e}")))?;
    Ok(back.query_pairs().into_owned().collect())
}

/// Opens the user's browser (or prints the URL) and waits for the redirect.
async fn browser(url: &Url, redirect: Redirect) -> Result<HashMap<String, String>, OAuthError> {
    eprintln!("Open this URL in a browser to log in:\n\n  {url}\n");
    let opener = if cfg!(target_os = "macos") {
        "open"
    } else {
        "xdg-open"
    };
    let _ = std::process::Command::new(opener)
        .arg(url.as_str())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    tokio::time::timeout(LOGIN_WAIT, accept(&redirect.listener))
        .await
        .map_err(|_| OAuthError::Response(format!("no login within {} s", LOGIN_WAIT.as_secs())))?
}

/// The first request to `/callback`; anything else (a favicon) is answered 404.
async fn accept(listener: &TcpListener) -> Result<HashMap<String, String>, OAuthError> {
    loop {
        let (mut stream, _) = listener
            .accept()
            .await
            .map_err(|e| OAuthError::Http(format!("the loopback listener: {e}")))?;
        let mut head = Vec::new();
        let mut chunk = [0u8; 2048];
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_HEAD {
            match stream.read(&mut chunk).await {
                Ok(0) | Err(_) => break,
                Ok(n) => head.extend_from_slice(&chunk[..n]),
            }
        }
        let text = String::from_utf8_lossy(&head);
        let target = text
            .lines()
            .next()
            .and_then(|line| line.strip_prefix("GET "))
            .and_then(|rest| rest.split(' ').next())
            .unwrap_or("");
        let Some(query) = target.strip_prefix("/callback") else {
            let _ = stream
                .write_all(
                    b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n",
                )
                .await;
            continue;
        };
        let params: HashMap<String, String> =
            url::form_urlencoded::parse(query.trim_start_matches('?').as_bytes())
                .into_owned()
                .collect();
        let page = "<!doctype html><title>wasmgate</title><p>wasmgate: the login is done; \
                    you can close this page.";
        let answer = format!(
            "HTTP/1.1 200 OK\r\ncontent-type: text/html; charset=utf-8\r\ncontent-length: {}\r\n\
             connection: close\r\n\r\n{page}",
            page.len()
        );
        let _ = stream.write_all(answer.as_bytes()).await;
        return Ok(params);
    }
}

/// The code, once the response is this request's (`state`) and from this server: a
/// present `iss` must equal the issuer by simple string comparison, and one the server
/// advertises must be present (RFC 9207).
pub fn checked(
    params: &HashMap<String, String>,
    state: &str,
    server: &ServerMetadata,
) -> Result<String, OAuthError> {
    if let Some(error) = params.get("error") {
        let description = params.get("error_description").map_or("", String::as_str);
        return Err(OAuthError::Response(
            format!("{error} {description}").trim().to_string(),
        ));
    }
    if params.get("state").map(String::as_str) != Some(state) {
        return Err(OAuthError::Response(
            "its state is not the request's (a forged or stale redirect)".into(),
        ));
    }
    match params.get("iss") {
        Some(iss) if *iss != server.issuer => {
            return Err(OAuthError::Response(format!(
                "it names issuer `{iss}`, not `{}`",
                server.issuer
            )));
        }
        None if server.authorization_response_iss_parameter_supported => {
            return Err(OAuthError::Response(
                "it has no iss, though the authorization server says it sends one".into(),
            ));
        }
        _ => {}
    }
    params
        .get("code")
        .cloned()
        .ok_or_else(|| OAuthError::Response("it has no code".into()))
}

#[cfg(test)]
mod tests {
    use super::checked;
    use crate::oauth_client::discovery::ServerMetadata;
    use std::collections::HashMap;

    fn server(iss_supported: bool) -> ServerMetadata {
        serde_json::from_value(serde_json::json!({
            "issuer": "http://as.test",
            "token_endpoint": "http://as.test/token",
            "authorization_response_iss_parameter_supported": iss_supported,
        }))
        .unwrap()
    }

    fn params(pairs: &[(&str, &str)]) -> HashMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn state_and_issuer_are_checked() {
        let ok = params(&[("code", "c"), ("state", "s"), ("iss", "http://as.test")]);
        assert_eq!(checked(&ok, "s", &server(true)).unwrap(), "c");
        assert!(checked(&ok, "other", &server(true)).is_err());
        let no_iss = params(&[("code", "c"), ("state", "s")]);
        assert!(checked(&no_iss, "s", &server(true)).is_err());
        assert!(checked(&no_iss, "s", &server(false)).is_ok());
        let slash = params(&[("code", "c"), ("state", "s"), ("iss", "http://as.test/")]);
        assert!(checked(&slash, "s", &server(false)).is_err());
    }
}
