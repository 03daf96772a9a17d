//! The status page at `/ui`: a login that turns an operator token into a signed cookie (a
//! browser sends no bearer header on a page load or an `EventSource`), the page and its
//! script, the status as JSON (`gateway_status`'s), and a live feed of events over SSE.

mod cookie;
mod latency;

use std::collections::BTreeMap;
use std::convert::Infallible;
use std::sync::Arc;

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::middleware::Next;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};
use tokio::sync::broadcast::error::RecvError;

use super::Front;
use super::respond;
use crate::config::HttpToken;
use crate::peer::ClientPeer;

const INDEX: &str = include_str!("ui/assets/index.html");
const LOGIN: &str = include_str!("ui/assets/login.html");
const SCRIPT: &str = include_str!("ui/assets/app.js");
const STYLE: &str = include_str!("ui/assets/ui.css");
const ICON: &str = include_str!("ui/assets/favicon.svg");

/// No inline script or style, nothing from elsewhere, never in a frame.
const CSP: &str = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; \
                   connect-src 'self'; form-action 'self'; base-uri 'none'; frame-ancestors 'none'";

/// `/ui` and what the page loads.
pub fn routes() -> Router<Arc<Front>> {
    Router::new()
        .route("/ui", get(page))
        .route("/ui/", get(page))
        .route(
            "/ui/app.js",
            get(|| async { asset("text/javascript", SCRIPT) }),
        )
        .route("/ui/ui.css", get(|| async { asset("text/css", STYLE) }))
        .route(
            "/ui/favicon.svg",
            get(|| async { asset("image/svg+xml", ICON) }),
        )
        .route("/ui/login", post(login))
        .route("/ui/logout", post(logout))
        .route("/ui/status.json", get(status))
        .route("/ui/events", get(events))
}

/// What every `/ui` request passes first: the `Host` allow-list, and a request from the
/// page's own origin only (a `POST` must say its `Origin`); the answer gets the headers
/// that keep it out of other sites' frames and caches.
pub async fn same_origin(
    State(front): State<Arc<Front>>,
    request: Request,
    next: Next,
) -> Response {
    let page_load = request.method() == Method::GET
        && matches!(
            request.uri().path(),
            "/ui" | "/ui/" | "/ui/app.js" | "/ui/ui.css" | "/ui/favicon.svg"
        );
    let mut response = match check_origin(&front, request.method(), request.headers(), page_load) {
        Ok(()) => next.run(request).await,
        Err(why) => (StatusCode::FORBIDDEN, format!("Forbidden: {why}\n")).into_response(),
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CSP),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    // Not `no-referrer`: with it a browser sends `Origin: null` on the login form's POST.
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    response
}

/// `page_load`: the page and its files, which a link from another site may open (its
/// `SameSite=Strict` cookie is not sent then: the login form shows).
fn check_origin(
    front: &Front,
    method: &Method,
    headers: &HeaderMap,
    page_load: bool,
) -> Result<(), String> {
    let host = respond::header(headers, header::HOST.as_str()).unwrap_or_default();
    if !super::guard::host_allowed(front, host) {
        return Err(format!(
            "Host \"{host}\" is not allowed ([http] allowed_hosts)"
        ));
    }
    let own = format!("{}://{host}", scheme(front));
    match respond::header(headers, header::ORIGIN.as_str()) {
        Some(origin) if !origin.eq_ignore_ascii_case(&own) => {
            return Err(format!("Origin \"{origin}\" is not this page's ({own})"));
        }
        None if method == Method::POST => {
            return Err("a POST to /ui must send its Origin".into());
        }
        _ => {}
    }
    // A browser says where a request comes from even when it sends no `Origin` (a `GET`).
    let site = respond::header(headers, "sec-fetch-site").unwrap_or("same-origin");
    if !(page_load || site.eq_ignore_ascii_case("same-origin") || site.eq_ignore_ascii_case("none"))
    {
        return Err(format!("a {site} request may not use /ui"));
    }
    Ok(())
}

fn scheme(front: &Front) -> &'static str {
    if front.config.tls.is_some() {
        "https"
    } else {
        "http"
    }
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type)], body).into_response()
}

fn html(status: StatusCode, body: String) -> Response {
    (
        status,
        [(header::CONTENT_TYPE, "text/html; charset=utf-8")],
        body,
    )
        .into_response()
}

/// Who the request's cookie logged in: the token, or `None` without a valid login. Without
/// any token configured the front serves anyone who reaches it (loopback, or behind a
/// proxy that authenticates), and so does the page.
fn operator<'a>(front: &'a Front, headers: &HeaderMap) -> Result<Option<&'a HttpToken>, ()> {
    if front.config.tokens.is_empty() {
        return Ok(None);
    }
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(cookie::find)
        .find_map(|value| cookie::verify(value, &front.config.tokens))
        .map(Some)
        .ok_or(())
}

fn unauthorized() -> Response {
    (
        StatusCode::UNAUTHORIZED,
        "Unauthorized: log in at /ui with a token that has the operator scope\n",
    )
        .into_response()
}

async fn page(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    match operator(&front, &headers) {
        Ok(_) => html(StatusCode::OK, INDEX.to_string()),
        Err(()) => html(StatusCode::OK, LOGIN.replace("<!--error-->", "")),
    }
}

async fn login(State(front): State<Arc<Front>>, body: Bytes) -> Response {
    let presented = form_urlencoded::parse(&body)
        .find(|(key, _)| key == "token")
        .map(|(_, value)| value.trim().to_string())
        .unwrap_or_default();
    let Some(token) = cookie::operator_token(&presented, &front.config.tokens) else {
        let why = "That token is not valid here, or lacks the operator scope.";
        return html(
            StatusCode::UNAUTHORIZED,
            LOGIN.replace(
                "<!--error-->",
                &format!("<p class=\"error\" role=\"alert\">{why}</p>"),
            ),
        );
    };
    tracing::info!(token = %token.name, "status page: logged in");
    let secure = if front.config.tls.is_some() {
        "; Secure"
    } else {
        ""
    };
    let set = format!(
        "{}={}; HttpOnly; SameSite=Strict; Path=/ui; Max-Age={}{secure}",
        cookie::NAME,
        cookie::issue(token),
        cookie::LIFETIME.as_secs()
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/ui".to_string()),
            (header::SET_COOKIE, set),
        ],
    )
        .into_response()
}

async fn logout(headers: HeaderMap) -> Response {
    for value in headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .filter_map(cookie::find)
    {
        cookie::revoke(value);
    }
    let clear = format!(
        "{}=; HttpOnly; SameSite=Strict; Path=/ui; Max-Age=0",
        cookie::NAME
    );
    (
        StatusCode::SEE_OTHER,
        [
            (header::LOCATION, "/ui".to_string()),
            (header::SET_COOKIE, clear),
        ],
    )
        .into_response()
}

/// `gateway_status` as the operator reads it, with the page's own parts: who is logged
/// in, the HTTP sessions by principal and profile, latency percentiles, recent events.
async fn status(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    let Ok(token) = operator(&front, &headers) else {
        return unauthorized();
    };
    let gateway = &front.gateway;
    let mut status = crate::builtin::status(gateway);
    // The admin listener of a stdio gateway has no HTTP session: it shows the gateway's
    // own clients, named by the name they gave.
    let sessions = if front.admin {
        let clients = gateway.live_sessions().into_iter();
        sessions_by_principal(
            clients.filter(|p| p.is_initialized() && !p.is_stateless()),
            true,
        )
    } else {
        sessions_by_principal(front.sessions.peers().into_iter(), false)
    };
    let recent: Vec<Value> = gateway
        .events
        .query(&crate::telemetry::events::Query {
            limit: 50,
            ..Default::default()
        })
        .into_iter()
        .map(feed_entry)
        .collect();
    status["ui"] = json!({
        "principal": token.map(|t| t.name.as_str()),
        "admin": front.admin,
        "sessions": sessions,
        "latency": latency::percentiles(gateway),
        "latency_window_s": latency::WINDOW.num_seconds(),
        "events": recent,
    });
    (
        [(header::CONTENT_TYPE, "application/json")],
        status.to_string(),
    )
        .into_response()
}

/// How many of `peers` each principal (token name, profile) has, and with `by_client`
/// each client name (`clientInfo.name`) too; the page shows no session ids.
fn sessions_by_principal(
    peers: impl Iterator<Item = Arc<ClientPeer>>,
    by_client: bool,
) -> Vec<Value> {
    let mut counts = BTreeMap::new();
    for peer in peers {
        let principal = peer.principal();
        let client = by_client
            .then(|| peer.client_info()["name"].as_str().map(str::to_string))
            .flatten();
        let key = (
            principal.token.as_deref().map(str::to_string),
            principal.profile.as_deref().map(str::to_string),
            client,
        );
        *counts.entry(key).or_insert(0) += 1;
    }
    (counts.into_iter())
        .map(|((token, profile, client), count)| {
            let mut row = json!({"token": token, "profile": profile, "count": count});
            if by_client {
                row["client"] = json!(client);
            }
            row
        })
        .collect()
}

/// An event as the feed shows it: without the session it names (a session's label is
/// not its id, but the page shows principals and profiles only).
fn feed_entry(mut event: Value) -> Value {
    if let Some(fields) = event.as_object_mut() {
        fields.remove("session");
    }
    event
}

/// Every event from now on, as `data:` lines of JSON; a reader too slow for the bus gets
/// an `event: lagged` saying how many it missed.
async fn events(State(front): State<Arc<Front>>, headers: HeaderMap) -> Response {
    if operator(&front, &headers).is_err() {
        return unauthorized();
    }
    let subscription = front.gateway.events.subscribe();
    // The gateway stopping ends the stream, which would hold its connection open.
    let ending = front.gateway.listens_ending();
    let stream = futures_util::stream::unfold(
        (subscription, ending),
        |(mut subscription, mut ending)| async move {
            let next = tokio::select! {
                next = subscription.recv() => next,
                _ = ending.wait_for(|ended| *ended) => return None,
            };
            let event = match next {
                Ok(event) => SseEvent::default().data(feed_entry(event.to_json()).to_string()),
                Err(RecvError::Lagged(missed)) => {
                    SseEvent::default().event("lagged").data(missed.to_string())
                }
                Err(RecvError::Closed) => return None,
            };
            Some((Ok::<_, Infallible>(event), (subscription, ending)))
        },
    );
    Sse::new(stream)
        .keep_alive(KeepAlive::new().interval(front.config.keep_alive))
        .into_response()
}
