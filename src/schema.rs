//! JSON Schema checks shared by the router (a tool's arguments) and the plugin host (a
//! plugin's schemas at load, its structured output after a call).

use serde_json::Value;

/// Why `instance` does not match: the first few errors, each with its JSON pointer, or
/// `None` when it matches.
pub fn mismatch(validator: &jsonschema::Validator, instance: &Value) -> Option<String> {
    if validator.is_valid(instance) {
        return None;
    }
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .take(5)
        .map(|e| {
            let path = e.instance_path.to_string();
            if path.is_empty() {
                e.to_string()
            } else {
                format!("{path}: {e}")
            }
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_the_offending_field() {
        let v = jsonschema::validator_for(&json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
        }))
        .unwrap();
        assert_eq!(mismatch(&v, &json!({"n": 1})), None);
        let why = mismatch(&v, &json!({"n": "x"})).unwrap();
        assert!(why.starts_with("/n: "), "{why}");
    }
}
