//! `Mcp-Param-*` headers (SEP-2243, MCP 2026-07-28): a tool whose `inputSchema` property
//! carries `x-mcp-header: NAME` has that argument mirrored in header `Mcp-Param-NAME`, so
//! that what sits between client and server can route on it. The gateway processes the
//! body, so it checks each mirror against the body before any backend sees the request.

use axum::http::HeaderMap;
use serde_json::Value;

use super::respond;
use crate::catalog::view::{Kind, View};
use crate::gateway::Gateway;
use crate::protocol::RpcError;
use crate::protocol::modern::{self, header_mismatch};

/// The JSON Schema types an `x-mcp-header` may annotate (numbers that are not integers
/// have no single text form, so the specification leaves them out).
const MIRRORED_TYPES: &[&str] = &["string", "integer", "boolean"];

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

/// The properties of `schema` that are mirrored in a header, with the header's name.
/// An annotation that is not valid (an empty name, or one that no header can carry, or on
/// a type that cannot be mirrored) is no mirror: clients drop such a tool.
fn mirrored(schema: &Value) -> Vec<(&str, &str)> {
    let Some(properties) = schema.get("properties").and_then(Value::as_object) else {
        return Vec::new();
    };
    properties
        .iter()
        .filter_map(|(property, definition)| {
            let header = definition.get("x-mcp-header")?.as_str()?;
            let kind = definition.get("type")?.as_str()?;
            let valid = !header.is_empty()
                && header.bytes().all(|b| b.is_ascii_graphic() && b != b':')
                && MIRRORED_TYPES.contains(&kind);
            valid.then_some((property.as_str(), header))
        })
        .collect()
}

/// Whether a header's text stands for `body`: a string as itself, a number by its value,
/// a boolean as `true` or `false`.
fn same(text: &str, body: &Value) -> bool {
    match body {
        Value::String(s) => text == s,
        Value::Number(n) => text.parse::<f64>().ok() == n.as_f64(),
        Value::Bool(b) => text == if *b { "true" } else { "false" },
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn only_valid_annotations_on_mirrored_types_count() {
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "priority": {"type": "integer", "x-mcp-header": "Priority"},
            "score": {"type": "number", "x-mcp-header": "Score"},
            "spaced": {"type": "string", "x-mcp-header": "My Region"},
            "empty": {"type": "string", "x-mcp-header": ""},
            "plain": {"type": "string"}}});
        let mut found = mirrored(&schema);
        found.sort();
        assert_eq!(found, [("priority", "Priority"), ("region", "Region")]);
    }

    #[test]
    fn header_text_matches_by_type() {
        assert!(same("Hello", &json!("Hello")));
        assert!(!same("hello", &json!("Hello")));
        assert!(same("42", &json!(42)));
        assert!(!same("42x", &json!(42)));
        assert!(same("true", &json!(true)));
        assert!(!same("1", &json!(true)));
    }
}
