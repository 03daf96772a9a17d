//! `Mcp-Param-*` headers (SEP-2243, MCP 2026-07-28): a tool whose `inputSchema` property
//! carries `x-mcp-header: NAME` has that argument mirrored in header `Mcp-Param-NAME` on a
//! `tools/call`, so that what sits between client and server can route on it. The front
//! checks its clients' mirrors; the remote client writes them for stateless-era servers.

use serde_json::Value;

/// The JSON Schema types an `x-mcp-header` may annotate (numbers that are not integers
/// have no single text form, so the specification leaves them out).
const MIRRORED_TYPES: &[&str] = &["string", "integer", "boolean"];

/// The properties of `schema` that are mirrored in a header, with the header's name.
/// An annotation that is not valid (an empty name, or one that no header can carry, or on
/// a type that cannot be mirrored) is no mirror: clients drop such a tool.
pub fn mirrored(schema: &Value) -> Vec<(&str, &str)> {
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

/// An argument as its header states it: a string as itself, a number by its value, a
/// boolean as `true` or `false`; nothing else is mirrored.
pub fn text_of(body: &Value) -> Option<String> {
    match body {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

/// Whether a header's text stands for `body`.
pub fn same(text: &str, body: &Value) -> bool {
    match body {
        Value::Number(n) => text.parse::<f64>().ok() == n.as_f64(),
        _ => text_of(body).is_some_and(|t| t == text),
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
        assert_eq!(text_of(&json!(7)).as_deref(), Some("7"));
        assert_eq!(text_of(&json!(null)), None);
    }
}
