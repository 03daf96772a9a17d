//! One page of a catalog list, as the answer's JSON text. Each item's text is written once
//! per catalog, when it is first listed, and kept beside it: a page is copied together
//! from those texts rather than cloned and serialised again for every page of every client
//! (100 servers of 114 tools are 115 pages of 100, listed whole by each client that connects).

use std::sync::OnceLock;

use serde_json::Value;
use serde_json::value::RawValue;

use super::Catalog;
use super::view::{Kind, View, item_name, shows};

/// The JSON text of each item of one list, each written when first listed.
#[derive(Default)]
pub(super) struct Texts(OnceLock<Box<[OnceLock<Box<str>>]>>);

impl Texts {
    fn get<'t>(&'t self, items: &[Value], index: usize) -> &'t str {
        let texts = self
            .0
            .get_or_init(|| items.iter().map(|_| OnceLock::new()).collect());
        texts[index].get_or_init(|| {
            // A `Value` always serialises (its keys are strings).
            serde_json::to_string(&items[index])
                .unwrap_or_else(|_| "null".into())
                .into_boxed_str()
        })
    }
}

impl Catalog {
    /// The page of `kind` that `cursor` names (the first without one), `size` items under
    /// `key`, with `nextCursor` when more follow: the bytes a `json!` of the items would
    /// serialise to. `None` for a cursor that names no page of this list.
    pub fn page(
        &self,
        kind: Kind,
        view: &View,
        cursor: Option<&Value>,
        size: usize,
        key: &str,
    ) -> Option<Box<RawValue>> {
        let items = self.items(kind);
        let shown: Option<Vec<usize>> = match view {
            View::All => None,
            View::Profile(profile) => Some(
                (0..items.len())
                    .filter(|&i| {
                        let name = item_name(kind, &items[i]);
                        shows(profile, kind, name, self.target_of(kind, name))
                    })
                    .collect(),
            ),
            View::Nothing => Some(Vec::new()),
        };
        let total = shown.as_ref().map_or(items.len(), Vec::len);
        let start = match cursor {
            None | Some(Value::Null) => 0,
            Some(cursor) => decode_cursor(cursor).filter(|n| *n <= total)?,
        };
        let end = (start + size).min(total);
        let texts = &self.texts[kind as usize];
        let mut text = String::with_capacity(64 + 128 * (end - start));
        text.push('{');
        push_json_string(&mut text, key);
        text.push_str(":[");
        for n in start..end {
            if n > start {
                text.push(',');
            }
            let index = shown.as_ref().map_or(n, |shown| shown[n]);
            text.push_str(texts.get(items, index));
        }
        text.push(']');
        if end < total {
            text.push_str(",\"nextCursor\":");
            push_json_string(&mut text, &encode_cursor(end));
        }
        text.push('}');
        RawValue::from_string(text).ok()
    }
}

fn push_json_string(text: &mut String, s: &str) {
    text.push_str(&serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()));
}

/// The cursor is the offset, opaque to the client.
fn encode_cursor(offset: usize) -> String {
    format!("o{offset:x}")
}

fn decode_cursor(cursor: &Value) -> Option<usize> {
    cursor
        .as_str()?
        .strip_prefix('o')
        .and_then(|hex| usize::from_str_radix(hex, 16).ok())
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    /// The page's bytes are what the list's items serialised in a `json!` would be.
    #[test]
    fn pages_read_as_the_items_serialised() {
        let catalog = Catalog {
            tools: (0..5)
                .map(|i| json!({"name": format!("t{i}"), "description": "é \"q\"", "inputSchema": {"type": "object", "properties": {}}}))
                .collect(),
            ..Default::default()
        };
        let mut cursor = None;
        let mut pages = Vec::new();
        loop {
            let page = catalog
                .page(Kind::Tools, &View::All, cursor.as_ref(), 2, "tools")
                .unwrap();
            let value: Value = serde_json::from_str(page.get()).unwrap();
            let mut expected = json!({"tools": value["tools"]});
            if let Some(next) = value.get("nextCursor") {
                expected["nextCursor"] = next.clone();
            }
            assert_eq!(page.get(), expected.to_string());
            pages.push(value.clone());
            cursor = value.get("nextCursor").cloned();
            if cursor.is_none() {
                break;
            }
        }
        let listed: Vec<&Value> = pages
            .iter()
            .flat_map(|p| p["tools"].as_array().unwrap())
            .collect();
        assert_eq!(listed, catalog.tools.iter().collect::<Vec<_>>());
        assert_eq!(pages.len(), 3);
        assert!(
            catalog
                .page(Kind::Tools, &View::All, Some(&json!("o6")), 2, "tools")
                .is_none()
        );
        assert!(
            catalog
                .page(Kind::Tools, &View::All, Some(&json!(3)), 2, "tools")
                .is_none()
        );
        let empty = catalog
            .page(Kind::Tools, &View::Nothing, None, 2, "tools")
            .unwrap();
        assert_eq!(empty.get(), r#"{"tools":[]}"#);
    }
}
