//! RFC 9728 protected-resource metadata: `/.well-known/oauth-protected-resource` for
//! `/mcp`, and `…/mcp/NAME` for a profile; and the resource URL of each path.

use std::sync::Arc;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse as _, Response};
use serde_json::json;

use crate::config::OauthFront;
use crate::transport::http::Front;

const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// `RESOURCE/mcp`, or `RESOURCE/mcp/NAME` for a profile.
pub fn resource(config: &OauthFront, profile: Option<&str>) -> String {
    match profile {
        Some(name) => format!("{}/mcp/{name}", config.resource),
        None => format!("{}/mcp", config.resource),
    }
}

/// Where the metadata of a path's resource is: the well-known segment goes between the
/// origin and the path (RFC 9728 section 3.1).
pub fn url(config: &OauthFront, profile: Option<&str>) -> String {
    let resource = resource(config, profile);
    let after_scheme = resource.find("://").map_or(0, |i| i + 3);
    let path_at = resource[after_scheme..]
        .find('/')
        .map_or(resource.len(), |i| after_scheme + i);
    format!(
        "{}{WELL_KNOWN}{}",
        &resource[..path_at],
        &resource[path_at..]
    )
}

/// `GET /.well-known/oauth-protected-resource`: the metadata of `/mcp`.
pub async fn root(State(front): State<Arc<Front>>) -> Response {
    document(&front, None)
}

/// `GET /.well-known/oauth-protected-resource/…/mcp[/NAME]`.
pub async fn at(State(front): State<Arc<Front>>, Path(rest): Path<String>) -> Response {
    let rest = rest.trim_end_matches('/');
    if rest == "mcp" || rest.ends_with("/mcp") {
        return document(&front, None);
    }
    match rest.rsplit_once("/") {
        Some((before, name)) if before == "mcp" || before.ends_with("/mcp") => {
            document(&front, Some(name))
        }
        _ => not_found(),
    }
}

fn document(front: &Front, profile: Option<&str>) -> Response {
    let Some(config) = front.config.oauth.as_deref() else {
        return not_found();
    };
    if let Some(name) = profile
        && !front.gateway.config.load().profiles.contains_key(name)
    {
        return not_found();
    }
    let mut scopes = config.scopes.clone();
    scopes.extend(config.operator_scope.clone());
    let body = json!({
        "resource": resource(config, profile),
        "authorization_servers": [config.issuer],
        "scopes_supported": scopes,
        "bearer_methods_supported": ["header"],
        "resource_name": match profile {
            Some(name) => format!("wasmgate profile {name}"),
            None => "wasmgate".to_string(),
        },
    });
    (
        [(axum::http::header::CONTENT_TYPE, "application/json")],
        body.to_string(),
    )
        .into_response()
}

fn not_found() -> Response {
    (
        StatusCode::NOT_FOUND,
        "no protected-resource metadata here\n",
    )
        .into_response()
}

#[cfg(test)]
mod tests {
    use super::url;
    use crate::config::OauthFront;

    fn config(resource: &str) -> OauthFront {
        OauthFront {
            issuer: "https://as.example.com".into(),
            resource: resource.into(),
            jwks_uri: None,
            introspection: None,
            scopes: vec!["mcp".into()],
            operator_scope: None,
            ca_file: None,
            claim: "sub".into(),
            jwks_refresh: std::time::Duration::from_secs(30),
            rules: Vec::new(),
        }
    }

    #[test]
    fn the_well_known_segment_goes_before_the_path() {
        let c = config("https://mcp.example.com");
        assert_eq!(
            url(&c, Some("eng")),
            "https://mcp.example.com/.well-known/oauth-protected-resource/mcp/eng"
        );
        let c = config("https://example.com/gw");
        assert_eq!(
            url(&c, None),
            "https://example.com/.well-known/oauth-protected-resource/gw/mcp"
        );
    }
}
