//! [`ListView`]: a list as the gateway would serve it, of [`Entry`]s; [`Edit`]: a change
//! to one entry.

use serde_json::Value;

use super::wit::{self, ListContext};

/// One entry of a list: its gateway name (a URI for resources), where it comes from, and
/// its MCP object (`Tool`, `Prompt` or `Resource`).
#[derive(Debug, Clone, PartialEq)]
pub struct Entry {
    pub name: String,
    pub route: Option<String>,
    /// The whole MCP object; `null` if the gateway's text was not JSON.
    pub definition: Value,
}

impl Entry {
    /// The definition's `description`, if it has one.
    pub fn description(&self) -> Option<&str> {
        self.definition["description"].as_str()
    }
}

/// A list and whom it is for.
#[derive(Debug, Clone, PartialEq)]
pub struct ListView {
    ctx: ListContext,
    entries: Vec<Entry>,
}

impl ListView {
    /// A `method` list (`tools/list`, ...) of these entries, for no profile; for tests.
    pub fn new(method: &str, entries: Vec<Entry>) -> Self {
        let ctx = ListContext {
            method: method.into(),
            profile: None,
        };
        Self { ctx, entries }
    }

    /// A list from the WIT's arguments, each definition parsed.
    pub fn from_wit(ctx: ListContext, entries: Vec<wit::Entry>) -> Self {
        let entries = entries
            .into_iter()
            .map(|e| Entry {
                definition: serde_json::from_str(&e.definition).unwrap_or(Value::Null),
                name: e.name,
                route: e.route,
            })
            .collect();
        Self { ctx, entries }
    }

    /// `tools/list`, `prompts/list` or `resources/list`.
    pub fn method(&self) -> &str {
        &self.ctx.method
    }

    /// The profile the list is for; none for the whole gateway.
    pub fn profile(&self) -> Option<&str> {
        self.ctx.profile.as_deref()
    }

    pub fn entries(&self) -> &[Entry] {
        &self.entries
    }

    /// The entry of this gateway name.
    pub fn get(&self, name: &str) -> Option<&Entry> {
        self.entries.iter().find(|e| e.name == name)
    }
}

/// A change to one entry, named by its gateway name; what it does not set stays.
#[derive(Debug, Clone, PartialEq)]
pub struct Edit {
    name: String,
    hide: bool,
    rename: Option<String>,
    title: Option<String>,
    description: Option<String>,
    annotations: Option<Value>,
}

impl Edit {
    /// An edit of `name` that changes nothing yet: add [`title`](Self::title),
    /// [`description`](Self::description), [`annotations`](Self::annotations).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            hide: false,
            rename: None,
            title: None,
            description: None,
            annotations: None,
        }
    }

    /// Leave `name` out of the list; a request that names it is refused as unknown.
    pub fn hide(name: impl Into<String>) -> Self {
        Self {
            hide: true,
            ..Self::new(name)
        }
    }

    /// Show `name` as `new_name`; requests that use the new name reach it, and the old
    /// name is no longer known. Not for resources (their URI is their name).
    pub fn rename(name: impl Into<String>, new_name: impl Into<String>) -> Self {
        Self {
            rename: Some(new_name.into()),
            ..Self::new(name)
        }
    }

    /// Rename too (after [`Edit::new`]), or instead of the name given to [`Edit::rename`].
    pub fn renamed(mut self, new_name: impl Into<String>) -> Self {
        self.rename = Some(new_name.into());
        self
    }

    pub fn title(mut self, title: impl Into<String>) -> Self {
        self.title = Some(title.into());
        self
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.description = Some(description.into());
        self
    }

    /// MCP annotations (an object), replacing the entry's.
    pub fn annotations(mut self, annotations: Value) -> Self {
        self.annotations = Some(annotations);
        self
    }

    /// The gateway name it edits.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// As the WIT says it.
    pub fn into_wit(self) -> wit::Edit {
        wit::Edit {
            name: self.name,
            hide: self.hide,
            rename: self.rename,
            title: self.title,
            description: self.description,
            annotations: self.annotations.map(|a| a.to_string()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_list_parses_its_definitions() {
        let list = ListView::from_wit(
            ListContext {
                method: "tools/list".into(),
                profile: Some("dev".into()),
            },
            vec![wit::Entry {
                name: "gh_search".into(),
                route: Some("gh".into()),
                definition: r#"{"name":"gh_search","description":"Finds."}"#.into(),
            }],
        );
        assert_eq!((list.method(), list.profile()), ("tools/list", Some("dev")));
        assert_eq!(list.get("gh_search").unwrap().description(), Some("Finds."));
        assert_eq!(list.entries()[0].route.as_deref(), Some("gh"));
        assert!(list.get("other").is_none());
    }

    #[test]
    fn edits_set_only_what_they_are_told() {
        let hidden = Edit::hide("a").into_wit();
        assert!(hidden.hide && hidden.rename.is_none() && hidden.title.is_none());
        let renamed = Edit::rename("a", "b")
            .description("B.")
            .annotations(json!({"readOnlyHint": true}))
            .into_wit();
        assert_eq!(
            (renamed.hide, renamed.rename.as_deref()),
            (false, Some("b"))
        );
        assert_eq!(renamed.description.as_deref(), Some("B."));
        assert_eq!(
            renamed.annotations.as_deref(),
            Some(r#"{"readOnlyHint":true}"#)
        );
        let titled = Edit::new("c").title("C").renamed("d");
        assert_eq!(titled.name(), "c");
        assert_eq!(titled.into_wit().rename.as_deref(), Some("d"));
    }
}
