//! The overrides of the `tools` config, and the edits they make to a list. Pure, so the
//! host's `cargo test` checks it.

use std::collections::BTreeMap;

use serde_json::Value;
use wasmgate_plugin::middleware::{Edit, ListView};

/// What to change of one entry.
#[derive(Debug, Default, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct Override {
    name: Option<String>,
    title: Option<String>,
    description: Option<String>,
    annotations: Option<serde_json::Map<String, Value>>,
}

/// Gateway name to override.
#[derive(Debug)]
pub struct Overrides(BTreeMap<String, Override>);

impl Overrides {
    pub fn parse(text: &str) -> Result<Self, String> {
        let map: BTreeMap<String, Override> = serde_json::from_str(text)
            .map_err(|e| format!("`tools` is not a JSON object of overrides: {e}"))?;
        for (name, o) in &map {
            if o.name.as_deref().is_some_and(|n| n.trim().is_empty()) {
                return Err(format!("`tools`.{name}: `name` is empty"));
            }
        }
        Ok(Self(map))
    }

    /// The edits for the entries of `list` that have an override.
    pub fn edits(&self, list: &ListView) -> Vec<Edit> {
        list.entries()
            .iter()
            .filter_map(|entry| {
                let o = self.0.get(&entry.name)?;
                let mut edit = Edit::new(&entry.name);
                if let Some(name) = &o.name {
                    edit = edit.renamed(name);
                }
                if let Some(title) = &o.title {
                    edit = edit.title(title);
                }
                if let Some(description) = &o.description {
                    edit = edit.description(description);
                }
                if let Some(annotations) = &o.annotations {
                    edit = edit.annotations(Value::Object(annotations.clone()));
                }
                Some(edit)
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use wasmgate_plugin::middleware::Entry;

    fn entry(name: &str) -> Entry {
        Entry {
            name: name.into(),
            route: None,
            definition: json!({"name": name}),
        }
    }

    #[test]
    fn listed_entries_with_an_override_are_edited() {
        let overrides = Overrides::parse(
            r#"{"gh_search_issues": {"name": "find_issues", "description": "Finds issues."},
                "db_query": {"title": "Query", "annotations": {"readOnlyHint": true}},
                "absent": {"name": "x"}}"#,
        )
        .unwrap();
        let list = ListView::new(
            "tools/list",
            vec![entry("gh_search_issues"), entry("db_query"), entry("other")],
        );
        let edits = overrides.edits(&list);
        assert_eq!(
            edits,
            [
                Edit::rename("gh_search_issues", "find_issues").description("Finds issues."),
                Edit::new("db_query")
                    .title("Query")
                    .annotations(json!({"readOnlyHint": true})),
            ]
        );
    }

    #[test]
    fn bad_overrides_are_told_precisely() {
        let err = |text: &str| Overrides::parse(text).unwrap_err();
        assert!(err("[]").contains("not a JSON object"));
        assert!(err(r#"{"a": {"nmae": "b"}}"#).contains("unknown field `nmae`"));
        assert!(err(r#"{"a": {"name": " "}}"#).contains("`tools`.a: `name` is empty"));
        assert!(err(r#"{"a": {"annotations": 3}}"#).contains("not a JSON object"));
    }
}
