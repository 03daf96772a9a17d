//! What the gateway's middleware chain hands a middleware and gets back: plain Rust
//! mirrors of the `wasmgate:middleware` WIT types, their conversion to and from the
//! bindings, and the checks on what a middleware answers (sizes, JSON where JSON is due).

use std::sync::Arc;
use std::time::Duration;

use super::LogSink;
use super::convert::{MAX_ERROR_TEXT, MAX_LISTING_BYTES, MAX_RESULT_BYTES};
use super::middleware_bindings as wit;

/// Which world a loaded component implements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PluginKind {
    /// A tool plugin (`wasmgate:plugin/tool`).
    Tools,
    /// A middleware (`wasmgate:middleware/hooks`): it has no tools.
    Middleware,
}

impl PluginKind {
    pub fn as_str(self) -> &'static str {
        match self {
            PluginKind::Tools => "tools",
            PluginKind::Middleware => "middleware",
        }
    }
}

/// What a middleware hooks, as its `describe` answered when its version was loaded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Interest {
    pub requests: Vec<String>,
    pub results: Vec<String>,
    pub lists: Vec<String>,
    pub names: Vec<String>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Direction {
    ToServer,
    ToClient,
}

/// Who asks what, and where it goes (the WIT's `context`).
#[derive(Debug, Clone)]
pub struct HookContext {
    pub method: String,
    pub direction: Direction,
    pub target: Option<String>,
    pub route: Option<String>,
    pub principal: Option<String>,
    pub profile: Option<String>,
    pub client_name: Option<String>,
    pub client_version: Option<String>,
    pub era: String,
    pub trace_id: String,
}

/// A refusal: the client gets a JSON-RPC error with this message (code -32001 when none);
/// `data` is JSON text, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Denial {
    pub message: String,
    pub code: Option<i32>,
    pub data: Option<String>,
}

/// What to do with a request. `Replace` and `Answer` hold a JSON object's text, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RequestAction {
    Pass,
    Replace(String),
    Deny(Denial),
    Answer(String),
}

/// How a request ended: its result object, or its JSON-RPC error object, as JSON text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    Success(String),
    Failure(String),
}

/// What to do with a result. `Replace` holds a JSON object's text, checked.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResultAction {
    Pass,
    Replace(String),
    Deny(Denial),
}

#[derive(Debug, Clone)]
pub struct ListContext {
    pub method: String,
    pub profile: Option<String>,
}

/// One entry of a list: its gateway name, where it comes from, the MCP object's JSON text.
#[derive(Debug, Clone)]
pub struct ListEntry {
    pub name: String,
    pub route: Option<String>,
    pub definition: String,
}

/// A change to one entry, named by its gateway name; `None` fields stay. `annotations`
/// holds a JSON object's text, checked.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Edit {
    pub name: String,
    pub hide: bool,
    pub rename: Option<String>,
    pub title: Option<String>,
    pub description: Option<String>,
    pub annotations: Option<String>,
}

/// Per-hook context from the gateway, as [`super::CallContext`] is for tool calls.
#[derive(Clone)]
pub struct HookCall {
    /// The gateway's time for the hook; the middleware's own limit bounds it too.
    pub timeout: Duration,
    /// The client session: `instance = "session"` keeps an instance per session.
    pub session: Option<Arc<str>>,
    /// Where the middleware's `host.log` lines go besides the gateway's log.
    pub log: Option<LogSink>,
}

impl HookCall {
    /// A hook with this much time, outside any session, logging to the gateway's log only.
    pub fn new(timeout: Duration) -> HookCall {
        HookCall {
            timeout,
            session: None,
            log: None,
        }
    }
}

/// Why a hook gave no answer.
#[derive(Debug, Clone, thiserror::Error)]
pub enum HookError {
    /// No middleware of that name is loaded (yet, or it failed to load).
    #[error("no middleware `{0}` is loaded")]
    NotLoaded(String),
    /// Loaded, but a tool plugin.
    #[error("`{0}` is a tool plugin, not a middleware")]
    NotMiddleware(String),
    /// It trapped, hit a limit, timed out or answered what the gateway cannot use.
    #[error("middleware `{middleware}` {reason}")]
    Failed { middleware: String, reason: String },
}

/// Entries each list of an interest may have, and bytes each entry.
pub const MAX_INTEREST_ENTRIES: usize = 64;
pub const MAX_INTEREST_BYTES: usize = 256;

/// `describe`'s answer, within bounds; `Err` says which bound it broke.
pub(super) fn interest_from(interest: wit::Interest) -> Result<Interest, String> {
    let wit::Interest {
        requests,
        results,
        lists,
        names,
    } = interest;
    for (field, entries) in [
        ("requests", &requests),
        ("results", &results),
        ("lists", &lists),
        ("names", &names),
    ] {
        if entries.len() > MAX_INTEREST_ENTRIES {
            return Err(format!(
                "describe returned {} entries in `{field}`; a middleware may list \
                 {MAX_INTEREST_ENTRIES} at most",
                entries.len()
            ));
        }
        if let Some(long) = entries.iter().find(|e| e.len() > MAX_INTEREST_BYTES) {
            return Err(format!(
                "describe returned an entry of {} bytes in `{field}`; each may have \
                 {MAX_INTEREST_BYTES} at most",
                long.len()
            ));
        }
    }
    Ok(Interest {
        requests,
        results,
        lists,
        names,
    })
}

impl HookContext {
    pub(super) fn to_wit(&self) -> wit::Context {
        wit::Context {
            method: self.method.clone(),
            direction: match self.direction {
                Direction::ToServer => wit::Direction::ToServer,
                Direction::ToClient => wit::Direction::ToClient,
            },
            target: self.target.clone(),
            route: self.route.clone(),
            principal: self.principal.clone(),
            profile: self.profile.clone(),
            client_name: self.client_name.clone(),
            client_version: self.client_version.clone(),
            era: self.era.clone(),
            trace_id: self.trace_id.clone(),
        }
    }
}

impl Outcome {
    pub(super) fn to_wit(&self) -> wit::Outcome {
        match self {
            Outcome::Success(result) => wit::Outcome::Success(result.clone()),
            Outcome::Failure(error) => wit::Outcome::Failure(error.clone()),
        }
    }
}

impl ListContext {
    pub(super) fn to_wit(&self) -> wit::ListContext {
        wit::ListContext {
            method: self.method.clone(),
            profile: self.profile.clone(),
        }
    }
}

pub(super) fn entries_to_wit(entries: &[ListEntry]) -> Vec<wit::Entry> {
    entries
        .iter()
        .map(|e| wit::Entry {
            name: e.name.clone(),
            route: e.route.clone(),
            definition: e.definition.clone(),
        })
        .collect()
}

/// `on-request`'s answer, checked; `Err` is why it is unusable.
pub(super) fn request_action(action: wit::RequestAction) -> Result<RequestAction, String> {
    Ok(match action {
        wit::RequestAction::Pass => RequestAction::Pass,
        wit::RequestAction::Replace(params) => {
            RequestAction::Replace(json_object(params, "replace", MAX_RESULT_BYTES)?)
        }
        wit::RequestAction::Deny(denial) => RequestAction::Deny(denial_from(denial)?),
        wit::RequestAction::Answer(result) => {
            RequestAction::Answer(json_object(result, "answer", MAX_RESULT_BYTES)?)
        }
    })
}

/// `on-result`'s answer, checked.
pub(super) fn result_action(action: wit::ResultAction) -> Result<ResultAction, String> {
    Ok(match action {
        wit::ResultAction::Pass => ResultAction::Pass,
        wit::ResultAction::Replace(result) => {
            ResultAction::Replace(json_object(result, "replace", MAX_RESULT_BYTES)?)
        }
        wit::ResultAction::Deny(denial) => ResultAction::Deny(denial_from(denial)?),
    })
}

/// `on-list`'s answer, checked: no more edits than entries, annotations JSON objects, all
/// of it within what a plugin may list.
pub(super) fn edits_from(edits: Vec<wit::Edit>, entries: usize) -> Result<Vec<Edit>, String> {
    if edits.len() > entries {
        return Err(format!(
            "returned {} edits for a list of {entries} entries",
            edits.len()
        ));
    }
    let bytes: usize = edits
        .iter()
        .map(|e| {
            e.name.len()
                + [&e.rename, &e.title, &e.description, &e.annotations]
                    .iter()
                    .map(|field| field.as_ref().map_or(0, String::len))
                    .sum::<usize>()
        })
        .sum();
    if bytes > MAX_LISTING_BYTES {
        return Err(format!(
            "returned {bytes} bytes of edits; a middleware may return {} MiB at most",
            MAX_LISTING_BYTES >> 20
        ));
    }
    edits
        .into_iter()
        .map(|e| {
            if e.rename.as_deref() == Some("") {
                return Err(format!("renames `{}` to an empty name", e.name));
            }
            let annotations = match e.annotations {
                Some(text) => Some(json_object(text, "annotations", MAX_LISTING_BYTES)?),
                None => None,
            };
            Ok(Edit {
                name: e.name,
                hide: e.hide,
                rename: e.rename,
                title: e.title,
                description: e.description,
                annotations,
            })
        })
        .collect()
}

fn denial_from(denial: wit::Denial) -> Result<Denial, String> {
    let data = match denial.data {
        Some(data) => {
            if data.len() > MAX_ERROR_TEXT {
                return Err(format!(
                    "denied with {} bytes of data; a denial's data may have {MAX_ERROR_TEXT} \
                     at most",
                    data.len()
                ));
            }
            if serde_json::from_str::<serde::de::IgnoredAny>(&data).is_err() {
                return Err("denied with data that is not JSON".into());
            }
            Some(data)
        }
        None => None,
    };
    Ok(Denial {
        message: crate::protocol::cut_owned(denial.message, MAX_ERROR_TEXT),
        code: denial.code,
        data,
    })
}

/// `text` if it is one JSON object of at most `max` bytes. Checked without building it: a
/// pass over the bytes.
fn json_object(text: String, what: &str, max: usize) -> Result<String, String> {
    if text.len() > max {
        return Err(format!(
            "answered {what} with {} bytes; at most {} MiB",
            text.len(),
            max >> 20
        ));
    }
    let object = text.trim_start().starts_with('{')
        && serde_json::from_str::<serde::de::IgnoredAny>(&text).is_ok();
    if !object {
        return Err(format!(
            "answered {what} with text that is not a JSON object: {}",
            crate::protocol::cut_short(&text, 80)
        ));
    }
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_for_json_objects() {
        let replace = |text: &str| request_action(wit::RequestAction::Replace(text.into()));
        assert_eq!(
            replace(r#" {"a": 1}"#).unwrap(),
            RequestAction::Replace(r#" {"a": 1}"#.into())
        );
        for bad in ["[1]", "{", "{} {}", "\"x\"", ""] {
            let why = replace(bad).unwrap_err();
            assert!(why.contains("not a JSON object"), "{bad}: {why}");
        }
        let deny = |data: Option<&str>| {
            result_action(wit::ResultAction::Deny(wit::Denial {
                message: "no".into(),
                code: Some(-32001),
                data: data.map(str::to_owned),
            }))
        };
        assert!(deny(Some(r#"{"why": 1}"#)).is_ok());
        assert!(deny(Some("nope")).unwrap_err().contains("not JSON"));
    }

    #[test]
    fn interest_and_edits_are_bounded() {
        let many = vec!["tools/call".to_string(); MAX_INTEREST_ENTRIES + 1];
        let why = interest_from(wit::Interest {
            requests: Vec::new(),
            results: many,
            lists: Vec::new(),
            names: Vec::new(),
        })
        .unwrap_err();
        assert!(why.contains("65 entries in `results`"), "{why}");
        let why = interest_from(wit::Interest {
            requests: Vec::new(),
            results: Vec::new(),
            lists: Vec::new(),
            names: vec!["x".repeat(MAX_INTEREST_BYTES + 1)],
        })
        .unwrap_err();
        assert!(why.contains("257 bytes in `names`"), "{why}");
        let edit = |annotations: &str| wit::Edit {
            name: "a".into(),
            hide: false,
            rename: None,
            title: None,
            description: None,
            annotations: Some(annotations.into()),
        };
        assert!(edits_from(vec![edit("{}")], 1).is_ok());
        assert!(edits_from(vec![edit("{}"), edit("{}")], 1).is_err());
        assert!(edits_from(vec![edit("[]")], 1).is_err());
    }
}
