//! What `pin` decides about a list: each entry's definition hash against the pinned one,
//! without files or host calls (those are in `store` and `lib`), so it is tested natively.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};

/// `pins.json`: per list (`tools`, `prompts`), each name's approved sha256.
pub type Pins = BTreeMap<String, BTreeMap<String, String>>;
/// `pending.json`: per list, each name whose definition differs from its pin.
pub type Pending = BTreeMap<String, BTreeMap<String, Change>>;

/// A definition that differs from its pin, kept until approved.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Change {
    /// The sha256 of the definition now served.
    pub hash: String,
    /// The sha256 pinned before.
    pub pinned: String,
    /// The definition now served, for a person to read before approving it.
    pub definition: Value,
}

/// The fields of a definition that are hashed, per list; others (icons, `_meta`) are not.
fn hashed_fields(list: &str) -> &'static [&'static str] {
    match list {
        "prompts" => &["name", "title", "description", "arguments"],
        _ => &[
            "name",
            "title",
            "description",
            "inputSchema",
            "outputSchema",
            "annotations",
        ],
    }
}

/// The lower-case hex sha256 of the canonical JSON (keys sorted at every level, no
/// spaces) of `definition`'s hashed fields, its name being `name` (the gateway's).
pub fn definition_hash(list: &str, name: &str, definition: &Value) -> String {
    let mut picked = Map::new();
    for field in hashed_fields(list) {
        let value = if *field == "name" {
            Some(Value::String(name.to_owned()))
        } else {
            definition.get(*field).filter(|v| !v.is_null()).cloned()
        };
        if let Some(value) = value {
            picked.insert((*field).to_owned(), value);
        }
    }
    let canonical = canonical(&Value::Object(picked)).to_string();
    Sha256::digest(canonical.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `value` with every object's keys in sorted order (the map keeps insertion order).
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let sorted: BTreeMap<&String, &Value> = map.iter().collect();
            Value::Object(
                sorted
                    .into_iter()
                    .map(|(k, v)| (k.clone(), canonical(v)))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The `approve` config value, `NAME=SHA256,...`, as name → hash; malformed parts are
/// returned apart so they can be logged.
pub fn parse_approvals(text: &str) -> (BTreeMap<String, String>, Vec<String>) {
    let mut approvals = BTreeMap::new();
    let mut bad = Vec::new();
    for part in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        match part.rsplit_once('=') {
            Some((name, hash)) if !name.trim().is_empty() && is_sha256(hash.trim()) => {
                approvals.insert(name.trim().to_owned(), hash.trim().to_ascii_lowercase());
            }
            _ => bad.push(part.to_owned()),
        }
    }
    (approvals, bad)
}

fn is_sha256(text: &str) -> bool {
    text.len() == 64 && text.chars().all(|c| c.is_ascii_hexdigit())
}

/// What a review of one list found.
#[derive(Debug, Default, PartialEq)]
pub struct Review {
    /// Names to hide (changed, not approved, and `block` on).
    pub hidden: Vec<String>,
    /// Lines for the log at level warning.
    pub warnings: Vec<String>,
    /// Lines for the log at level info (first pins, approvals).
    pub notes: Vec<String>,
    /// Whether `pins` or `pending` changed and must be written.
    pub dirty: bool,
}

/// Reviews the entries (gateway name, definition) of `list` (`tools` or `prompts`)
/// against `pins`, noting changes in `pending`; `approvals` from the config pin a
/// changed definition whose hash they name; with `block`, a changed one is hidden.
pub fn review(
    list: &str,
    entries: &[(String, Value)],
    pins: &mut Pins,
    pending: &mut Pending,
    approvals: &BTreeMap<String, String>,
    block: bool,
) -> Review {
    let mut review = Review::default();
    let pinned = pins.entry(list.to_owned()).or_default();
    let waiting = pending.entry(list.to_owned()).or_default();
    for (name, definition) in entries {
        let hash = definition_hash(list, name, definition);
        let Some(old) = pinned.get(name).cloned() else {
            review
                .notes
                .push(format!("pinned {list} `{name}` at sha256 {hash}"));
            pinned.insert(name.clone(), hash);
            waiting.remove(name);
            review.dirty = true;
            continue;
        };
        if old == hash {
            // Back to what was pinned: nothing waits any more.
            review.dirty |= waiting.remove(name).is_some();
            continue;
        }
        if approvals.get(name) == Some(&hash) {
            review.notes.push(format!(
                "approved {list} `{name}` at sha256 {hash} (config `approve`), was {old}"
            ));
            pinned.insert(name.clone(), hash);
            waiting.remove(name);
            review.dirty = true;
            continue;
        }
        let change = Change {
            hash: hash.clone(),
            pinned: old.clone(),
            definition: definition.clone(),
        };
        if waiting.get(name) != Some(&change) {
            waiting.insert(name.clone(), change);
            review.dirty = true;
        }
        let hidden = if block {
            review.hidden.push(name.clone());
            "; hidden until approved"
        } else {
            ""
        };
        review.warnings.push(format!(
            "{list} `{name}` changed since it was pinned: sha256 {old} is now {hash}{hidden}; \
             approve with `wasmgate pins approve {name}` or the config line \
             approve = \"{name}={hash}\""
        ));
    }
    review
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(description: &str) -> Value {
        json!({"name": "up__x", "description": description,
               "inputSchema": {"type": "object", "properties": {"b": {}, "a": {}}}})
    }

    fn entries(description: &str) -> Vec<(String, Value)> {
        vec![("s__x".to_owned(), tool(description))]
    }

    #[test]
    fn the_hash_is_of_sorted_keys_and_the_gateway_name_and_ignores_other_fields() {
        let a = json!({"description": "d", "inputSchema": {"a": 1, "b": 2}});
        let b = json!({"inputSchema": {"b": 2, "a": 1}, "description": "d", "icons": [],
                       "name": "upstream"});
        assert_eq!(
            definition_hash("tools", "n", &a),
            definition_hash("tools", "n", &b)
        );
        assert_ne!(
            definition_hash("tools", "n", &a),
            definition_hash("tools", "m", &a)
        );
        let hash = definition_hash("tools", "n", &a);
        assert_eq!(hash.len(), 64);
    }

    #[test]
    fn first_seen_is_pinned_a_change_is_pending_and_flagged_and_hidden_when_blocking() {
        let (mut pins, mut pending) = (Pins::new(), Pending::new());
        let none = BTreeMap::new();
        let first = review("tools", &entries("a"), &mut pins, &mut pending, &none, true);
        assert!(first.dirty && first.hidden.is_empty() && first.warnings.is_empty());
        let old = pins["tools"]["s__x"].clone();
        let same = review("tools", &entries("a"), &mut pins, &mut pending, &none, true);
        assert_eq!(same, Review::default());

        let changed = review("tools", &entries("b"), &mut pins, &mut pending, &none, true);
        assert_eq!(changed.hidden, ["s__x"]);
        let new = &pending["tools"]["s__x"];
        assert_eq!(new.pinned, old);
        assert!(changed.warnings[0].contains(&old) && changed.warnings[0].contains(&new.hash));
        assert!(changed.warnings[0].contains("wasmgate pins approve s__x"));
        assert_eq!(pins["tools"]["s__x"], old, "the pin stays until approved");

        let flagged = review(
            "tools",
            &entries("b"),
            &mut pins,
            &mut pending,
            &none,
            false,
        );
        assert!(flagged.hidden.is_empty() && !flagged.dirty);
        assert_eq!(flagged.warnings.len(), 1);
    }

    #[test]
    fn a_config_approval_of_the_new_hash_pins_it() {
        let (mut pins, mut pending) = (Pins::new(), Pending::new());
        let none = BTreeMap::new();
        review("tools", &entries("a"), &mut pins, &mut pending, &none, true);
        review("tools", &entries("b"), &mut pins, &mut pending, &none, true);
        let hash = pending["tools"]["s__x"].hash.clone();
        let wrong = parse_approvals(&format!("s__x={}", "0".repeat(64))).0;
        let still = review(
            "tools",
            &entries("b"),
            &mut pins,
            &mut pending,
            &wrong,
            true,
        );
        assert_eq!(still.hidden, ["s__x"]);
        let (approvals, bad) = parse_approvals(&format!(" s__x={hash} , junk"));
        assert_eq!(bad, ["junk"]);
        let approved = review(
            "tools",
            &entries("b"),
            &mut pins,
            &mut pending,
            &approvals,
            true,
        );
        assert!(approved.hidden.is_empty() && approved.dirty);
        assert_eq!(pins["tools"]["s__x"], hash);
        assert!(pending["tools"].is_empty());
    }
}
