//! The `Mcp-Param-*` headers of a client's stateless `tools/call`
//! (`protocol::param_headers`): the gateway processes the body, so it checks each mirror
//! against the body before any backend sees the request.

use axum::http::HeaderMap;
use serde_json::Value;

use super::respond;
use crate::catalog::view::{Kind, View};
use crate::gateway::Gateway;
use crate::protocol::RpcError;
use crate::protocol::modern::{self, header_mismatch};
use crate::protocol::param_headers::{mirrored, same};

/// Checks the `Mcp-Param-*` headers of a stateless `tools/call` (`params`) against its
/// arguments, for the tool as `profile`'s view shows it; -32020 naming the first that
/// is missing, left over or different. A tool the view does not show is the router's to
/// refuse.
pub async fn check(
    gateway: &Gateway,
    profile: Option<&str>,
    headers: &HeaderMap,
    params: Option<&Value>,
) -> Result<(), RpcError> {
    let Some(name) = params.and_then(|p| p.get("name")).and_then(Value::as_str) else {
        return Ok(());
    };
    let mut route = gateway.catalog().tool(name).cloned();
    if route.is_none() {
        // A server still starting may serve it: the call would wait for it too.
        gateway.wait_for_startup().await;
        route = gateway.catalog().tool(name).cloned();
    }
    let Some(route) = route else {
        return Ok(());
    };
    if !View::of(profile, &gateway.config.load()).shows(Kind::Tools, name, Some(&route.target)) {
        return Ok(());
    }
    let arguments = params.and_then(|p| p.get("arguments"));
    for (property, header) in mirrored(route.input_schema()) {
        let body = arguments
            .and_then(|a| a.get(property))
            .filter(|v| !v.is_null());
        let field = format!("mcp-param-{}", header.to_ascii_lowercase());
        let sent = respond::header(headers, &field).map(str::trim);
        match (body, sent) {
            (None, None) => {}
            (Some(_), None) => {
                return Err(header_mismatch(format!(
                    "Header mismatch: Mcp-Param-{header} is required: the body's argument {property} is set"
                )));
            }
            (None, Some(_)) => {
                return Err(header_mismatch(format!(
                    "Header mismatch: Mcp-Param-{header} is sent but the body has no argument {property}"
                )));
            }
            (Some(body), Some(sent)) => {
                let decoded = modern::decode_header(sent).ok_or_else(|| {
                    header_mismatch(format!(
                        "Header mismatch: Mcp-Param-{header}'s base64 value does not decode"
                    ))
                })?;
                if !same(&decoded, body) {
                    return Err(header_mismatch(format!(
                        "Header mismatch: Mcp-Param-{header} is \"{decoded}\" but the body's argument {property} is {body}"
                    )));
                }
            }
        }
    }
    Ok(())
}
