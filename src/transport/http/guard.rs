//! What every request to `/mcp`, `/sse`, `/messages` and `/metrics` passes first: the
//! `Host` and `Origin` allow-lists (DNS rebinding), the bearer token, the profile, and
//! the request's count in `/metrics`.
// A refusal is the response itself, built once on a path that ends the request: boxing
// it (what `result_large_err` asks) would add an allocation and change nothing.
#![allow(clippy::result_large_err)]

use std::sync::Arc;

use axum::extract::{ConnectInfo, MatchedPath, Request, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use subtle::ConstantTimeEq;

use super::oauth::{Principal, Refusal};
use super::respond::{self, rpc_error};
use super::{Caller, Front, profile_of};
use crate::config::RatePer;
use crate::protocol;

const LOCAL_NAMES: &[&str] = &["localhost", "127.0.0.1", "::1", "[::1]"];

pub async fn guard(State(front): State<Arc<Front>>, mut request: Request, next: Next) -> Response {
    let method: &'static str = match *request.method() {
        axum::http::Method::GET => "GET",
        axum::http::Method::POST => "POST",
        axum::http::Method::DELETE => "DELETE",
        _ => "other",
    };
    let path: &'static str = match request
        .extensions()
        .get::<MatchedPath>()
        .map(MatchedPath::as_str)
    {
        Some("/mcp") => "/mcp",
        Some("/mcp/{profile}") => "/mcp/{profile}",
        Some("/sse") => "/sse",
        Some("/sse/{profile}") => "/sse/{profile}",
        Some("/messages") => "/messages",
        Some("/metrics") => "/metrics",
        _ => "other",
    };
    let remote = request
        .extensions()
        .get::<ConnectInfo<super::connections::Remote>>()
        .map(|c| c.0.0.to_string())
        .unwrap_or_default();
    // Checked before the rest, as it waits (for the issuer's keys, or its introspection);
    // the request itself cannot be held across the wait.
    let oauth = match (&front.oauth, bearer(request.headers())) {
        (Some(oauth), Some(token)) if static_token(&front, token).is_none() => {
            let token = token.to_string();
            let resources = match path {
                "/messages" => oauth.resources(front.gateway.config.load().profiles.keys()),
                _ => vec![oauth.resource(profile_of(request.uri().path()).as_deref())],
            };
            Some(oauth.authenticate(&token, &resources).await)
        }
        _ => None,
    };
    let (response, token) = match check(&front, &request, path, remote, oauth) {
        Ok(caller) => {
            // A static token by name; OAuth principals are as many as the users, so one label.
            let token = match &caller.token {
                Some(name) if front.config.tokens.iter().any(|t| &t.name == name) => name.clone(),
                Some(_) => "oauth".to_string(),
                None => String::new(),
            };
            match over_rate(&front, &caller, method, path) {
                Some(refused) => (refused, token),
                None => {
                    request.extensions_mut().insert(caller);
                    (next.run(request).await, token)
                }
            }
        }
        Err(refused) => (refused, String::new()),
    };
    let status = status_label(response.status());
    crate::telemetry::metrics::http_request(method, path, status, &token);
    response
}

/// 429 with `Retry-After` for a message over its principal's or profile's rate limit,
/// before it reaches a session. Each `POST` counts (each round of an `input_required`
/// exchange too); streams (`GET`) and `DELETE` do not.
fn over_rate(front: &Front, caller: &Caller, method: &str, path: &str) -> Option<Response> {
    let limits = &front.gateway.limits;
    let counted = method == "POST" && path != "/metrics";
    if !counted || !(limits.counts(RatePer::Principal) || limits.counts(RatePer::Profile)) {
        return None;
    }
    let principal = caller.token.as_deref().unwrap_or(ANONYMOUS);
    let refusal = limits
        .admit_request(principal, caller.profile.as_deref())
        .err()?;
    let body = protocol::error_response(serde_json::Value::Null, &refusal.to_rpc()).to_string();
    let retry_after = HeaderValue::from(refusal.retry_after_secs());
    let headers = [
        (
            header::CONTENT_TYPE,
            HeaderValue::from_static("application/json"),
        ),
        (header::RETRY_AFTER, retry_after),
    ];
    Some((StatusCode::TOO_MANY_REQUESTS, headers, body).into_response())
}

/// The principal of a request without a token (a front without `tokens`).
const ANONYMOUS: &str = "anonymous";

/// The statuses the front answers with, as static labels.
fn status_label(status: StatusCode) -> &'static str {
    match status.as_u16() {
        200 => "200",
        202 => "202",
        400 => "400",
        401 => "401",
        403 => "403",
        404 => "404",
        406 => "406",
        409 => "409",
        413 => "413",
        415 => "415",
        429 => "429",
        500 => "500",
        503 => "503",
        _ => "other",
    }
}

fn check(
    front: &Front,
    request: &Request,
    path: &str,
    remote: String,
    oauth: Option<Result<Principal, Refusal>>,
) -> Result<Caller, Response> {
    let headers = request.headers();
    let host = respond::header(headers, header::HOST.as_str()).unwrap_or_default();
    if !host_allowed(front, host) {
        return Err(rpc_error(
            StatusCode::FORBIDDEN,
            protocol::INVALID_REQUEST,
            format!("Forbidden: Host \"{host}\" is not allowed ([http] allowed_hosts)"),
        ));
    }
    if let Some(origin) = respond::header(headers, header::ORIGIN.as_str())
        && !origin_allowed(front, origin)
    {
        return Err(rpc_error(
            StatusCode::FORBIDDEN,
            protocol::INVALID_REQUEST,
            format!("Forbidden: Origin \"{origin}\" is not allowed ([http] allowed_origins)"),
        ));
    }
    if request.method() == axum::http::Method::GET
        && path != "/metrics"
        && let Err(refused) = stream_requested_by_script(headers)
    {
        return Err(refused);
    }
    let profile = profile_of(request.uri().path());
    if let Some(name) = &profile
        && !front.gateway.config.load().profiles.contains_key(name)
    {
        // Not 404: behind a balancer a 404 means "not my session, ask the next replica",
        // and every replica shares the config, so asking another would not help.
        return Err(rpc_error(
            StatusCode::BAD_REQUEST,
            protocol::INVALID_REQUEST,
            format!(
                "Bad Request: no profile `{name}` on this gateway; use /mcp, or /mcp/NAME for a \
                 [profiles.NAME] of its config"
            ),
        ));
    }
    let token = match authenticate(front, headers, profile.as_deref(), oauth)? {
        Some(Who::Principal(principal)) => {
            let (name, operator) =
                admit(front, principal, profile.as_deref(), path).map_err(|refusal| {
                    let oauth = front
                        .oauth
                        .as_ref()
                        .expect("a principal comes from [http.oauth]");
                    oauth.refuse(&refusal, profile.as_deref())
                })?;
            return Ok(Caller {
                profile,
                token: Some(name),
                operator,
                remote,
            });
        }
        Some(Who::Token(name)) => Some(name),
        None => None,
    };
    let presented = token
        .as_ref()
        .and_then(|name| front.config.tokens.iter().find(|t| &t.name == name));
    if let Some(token) = presented {
        let forbidden = |why: String| {
            Err(rpc_error(
                StatusCode::FORBIDDEN,
                protocol::INVALID_REQUEST,
                format!("Forbidden: {why}"),
            ))
        };
        if path == "/metrics" {
            // The metrics name every server and tool: the operator's, or a token's that
            // sees them all anyway.
            if !(token.operator || token.mcp && token.profiles.is_empty()) {
                return forbidden(format!(
                    "token `{}` may not read /metrics; give it scopes = [\"operator\"]",
                    token.name
                ));
            }
        } else if !token.mcp {
            return forbidden(format!(
                "token `{}` has only the operator scope (/metrics); use a token with scope \"mcp\"",
                token.name
            ));
        }
        // A legacy session's messages come to `/messages`, which names no profile: the
        // session, bound to its token and profile when it opened, decides.
        let allowed = token.profiles.is_empty()
            || path == "/metrics"
            || path == "/messages"
            || profile.as_ref().is_some_and(|p| token.profiles.contains(p));
        if !allowed {
            return Err(rpc_error(
                StatusCode::FORBIDDEN,
                protocol::INVALID_REQUEST,
                format!(
                    "Forbidden: token `{}` may only use the profiles {}",
                    token.name,
                    token.profiles.join(", ")
                ),
            ));
        }
    }
    Ok(Caller {
        profile,
        // Without tokens there are no principals to keep apart: anyone who reaches the
        // front (loopback, or behind a proxy that authenticates) is its operator.
        operator: presented.map_or(
            front.config.tokens.is_empty() && front.oauth.is_none(),
            |t| t.operator,
        ),
        token,
        remote,
    })
}

/// A `GET` that opens an event stream must come from a client that asked for one: a page
/// of another site that merely loads the URL (an image, a script) sends no `Origin`, and
/// would otherwise open a session, take a slot and hold a connection.
fn stream_requested_by_script(headers: &axum::http::HeaderMap) -> Result<(), Response> {
    if respond::header(headers, header::ORIGIN.as_str()).is_some() {
        return Ok(());
    }
    let cross_site = respond::header(headers, "sec-fetch-site").is_some_and(|site| {
        site.eq_ignore_ascii_case("cross-site") || site.eq_ignore_ascii_case("same-site")
    });
    let asks_for_stream = respond::header(headers, header::ACCEPT.as_str())
        .is_some_and(|accept| accept.contains("text/event-stream"));
    if cross_site || !asks_for_stream {
        return Err(rpc_error(
            StatusCode::FORBIDDEN,
            protocol::INVALID_REQUEST,
            "Forbidden: opening an event stream takes Accept: text/event-stream, and a \
             cross-site request must send its Origin",
        ));
    }
    Ok(())
}

/// Who presented the bearer.
enum Who {
    /// A static token, by name.
    Token(String),
    /// An OAuth access token's principal.
    Principal(Principal),
}

/// The bearer token of `Authorization`, if any.
fn bearer(headers: &axum::http::HeaderMap) -> Option<&str> {
    respond::header(headers, header::AUTHORIZATION.as_str())
        .and_then(|v| {
            v.strip_prefix("Bearer ")
                .or_else(|| v.strip_prefix("bearer "))
        })
        .map(str::trim)
}

/// The name of the static token `presented` is.
fn static_token(front: &Front, presented: &str) -> Option<String> {
    // Every token is compared, so the time taken tells nothing of which one nearly matched.
    let mut found = None;
    for token in &front.config.tokens {
        if bool::from(token.token.as_bytes().ct_eq(presented.as_bytes())) {
            found = Some(token.name.clone());
        }
    }
    found
}

/// Who presented the bearer, `None` when neither tokens nor OAuth are configured.
fn authenticate(
    front: &Front,
    headers: &axum::http::HeaderMap,
    profile: Option<&str>,
    oauth: Option<Result<Principal, Refusal>>,
) -> Result<Option<Who>, Response> {
    if front.config.tokens.is_empty() && front.oauth.is_none() {
        return Ok(None);
    }
    let presented = bearer(headers);
    if let Some(name) = presented.and_then(|p| static_token(front, p)) {
        return Ok(Some(Who::Token(name)));
    }
    if let Some(resource_server) = &front.oauth {
        return match oauth {
            Some(Ok(principal)) => Ok(Some(Who::Principal(principal))),
            Some(Err(refusal)) => Err(resource_server.refuse(&refusal, profile)),
            None => Err(resource_server.refuse(&Refusal::Missing, profile)),
        };
    }
    let mut response = rpc_error(
        StatusCode::UNAUTHORIZED,
        protocol::INVALID_REQUEST,
        if presented.is_some() {
            "Unauthorized: the bearer token is not valid"
        } else {
            "Unauthorized: send Authorization: Bearer <token>"
        },
    );
    response.headers_mut().insert(
        header::WWW_AUTHENTICATE,
        HeaderValue::from_static("Bearer realm=\"wasmgate\""),
    );
    Err(response)
}

/// An OAuth principal on `path`: the operator for `/metrics`, its rules' profiles
/// elsewhere. Its name and whether it is the operator.
fn admit(
    front: &Front,
    principal: Principal,
    profile: Option<&str>,
    path: &str,
) -> Result<(String, bool), Refusal> {
    // Sessions, the store and events know a principal by name: a static token's name
    // taken by a token of the issuer would be that token.
    if front.config.tokens.iter().any(|t| t.name == principal.name) {
        return Err(Refusal::Invalid(format!(
            "its principal `{}` is the name of a static token",
            principal.name
        )));
    }
    let allowed = match path {
        "/metrics" => principal.operator,
        "/messages" => true,
        _ => match (&principal.profiles, profile) {
            (None, _) => true,
            (Some(profiles), Some(p)) => profiles.iter().any(|q| q == p),
            (Some(_), None) => false,
        },
    };
    if !allowed {
        let may = match &principal.profiles {
            _ if path == "/metrics" => "not /metrics (it is not the operator)".to_string(),
            Some(list) if list.is_empty() => "no profile".to_string(),
            Some(list) => format!("only the profiles {}", list.join(", ")),
            None => "every profile".to_string(),
        };
        return Err(Refusal::Forbidden(format!(
            "principal `{}` may use {may}",
            principal.name
        )));
    }
    Ok((principal.name, principal.operator))
}

/// The host part of `Host` (without the port).
fn host_name(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split(']').next().unwrap_or_default();
    }
    host.rsplit_once(':').map_or(host, |(name, _)| name)
}

pub(super) fn host_allowed(front: &Front, host: &str) -> bool {
    let name = host_name(host);
    match &front.config.allowed_hosts {
        Some(allowed) => allowed
            .iter()
            .any(|a| a == "*" || a.eq_ignore_ascii_case(host) || a.eq_ignore_ascii_case(name)),
        // Behind a loopback address only local names reach it legitimately: a browser page
        // that rebinds its own name to 127.0.0.1 sends its name, and is refused.
        None if front.local.ip().is_loopback() => {
            LOCAL_NAMES.iter().any(|l| l.eq_ignore_ascii_case(name))
        }
        None => true,
    }
}

fn origin_allowed(front: &Front, origin: &str) -> bool {
    match &front.config.allowed_origins {
        Some(allowed) => allowed
            .iter()
            .any(|a| a == "*" || a.trim_end_matches('/').eq_ignore_ascii_case(origin)),
        None => {
            let rest = origin
                .strip_prefix("http://")
                .or_else(|| origin.strip_prefix("https://"));
            rest.is_some_and(|authority| {
                let name = host_name(authority.trim_end_matches('/'));
                LOCAL_NAMES.iter().any(|l| l.eq_ignore_ascii_case(name))
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::host_name;

    #[test]
    fn host_names_lose_their_port() {
        assert_eq!(host_name("localhost:8787"), "localhost");
        assert_eq!(host_name("[::1]:8787"), "::1");
        assert_eq!(host_name("example.com"), "example.com");
    }
}
