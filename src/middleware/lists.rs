//! Lists through the chain: the list hooks of the links that edit a list run once per
//! catalog snapshot and profile; their edits (hide, rename, re-describe, re-annotate) make
//! the list the client reads, and the names it may call: a renamed entry answers to its new
//! name only, a hidden one to none.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::onion::Route;
use super::{Chain, Link};
use crate::catalog::Catalog;
use crate::catalog::view::{Kind, View, item_name};
use crate::config::OnError;
use crate::plugin::{Edit, HookCall, ListContext, ListEntry};

/// A list as the chain edited it for one profile.
pub struct Edited {
    /// The items the client reads, as a catalog of that one list (for its pages).
    pub listing: Catalog,
    /// Client name → gateway name, for renamed entries.
    renamed_to: HashMap<String, String>,
    /// Gateway names a client may not call by: hidden, or renamed away; with the link
    /// and its failure when a failed link hid it.
    gone: HashMap<String, Option<(String, String)>>,
}

/// Why a client may not call a name.
pub enum Gone<'e> {
    /// Hidden or renamed by a link: as if unknown.
    Unknown,
    /// Hidden because a link failed on the list (under `on_error = "deny"`): the link and why.
    Failed(&'e str, &'e str),
}

impl Edited {
    /// The gateway's name for what a client calls `name`, or why it may not call it.
    pub fn resolve<'n>(&'n self, name: &'n str) -> Result<&'n str, Gone<'n>> {
        if let Some(original) = self.renamed_to.get(name) {
            return Ok(original);
        }
        match self.gone.get(name) {
            None => Ok(name),
            Some(None) => Err(Gone::Unknown),
            Some(Some((link, why))) => Err(Gone::Failed(link, why)),
        }
    }
}

/// Which list, and for which profile.
pub(super) type Key = (u8, Option<Arc<str>>);

/// An edited list and the snapshot it was made from.
pub(super) struct Cached {
    catalog: Arc<Catalog>,
    edited: Arc<Edited>,
}

/// The MCP method of a list.
fn method_of(kind: Kind) -> &'static str {
    match kind {
        Kind::Tools => "tools/list",
        Kind::Prompts => "prompts/list",
        Kind::Resources => "resources/list",
        Kind::Templates => "resources/templates/list",
    }
}

impl Chain {
    /// Whether a link edits the list of `kind` for `profile`.
    pub fn edits(&self, kind: Kind, profile: Option<&str>) -> bool {
        let method = method_of(kind);
        self.links
            .iter()
            .any(|link| link.scope.edits(method, profile))
    }

    /// The list of `kind` for `profile` as the chain edits it, made once per catalog snapshot;
    /// `None` when no link edits it (the catalog's own list stands).
    pub async fn edited(
        &self,
        kind: Kind,
        catalog: &Arc<Catalog>,
        view: &View,
        profile: Option<&Arc<str>>,
        timeout: Duration,
    ) -> Option<Arc<Edited>> {
        let method = method_of(kind);
        let profile_name = profile.map(|p| &**p);
        let editors: Vec<&Link> = (self.links.iter())
            .filter(|link| link.scope.edits(method, profile_name))
            .collect();
        if editors.is_empty() {
            return None;
        }
        let key = (kind as u8, profile.cloned());
        if let Some(cached) = self.lists.lock().unwrap().get(&key)
            && Arc::ptr_eq(&cached.catalog, catalog)
        {
            return Some(cached.edited.clone());
        }
        let edited = Arc::new(edit(&editors, kind, catalog, view, profile_name, timeout).await);
        self.lists.lock().unwrap().insert(
            key,
            Cached {
                catalog: catalog.clone(),
                edited: edited.clone(),
            },
        );
        Some(edited)
    }
}

/// Runs the editors' list hooks in order over the items `view` shows.
async fn edit(
    editors: &[&Link],
    kind: Kind,
    catalog: &Catalog,
    view: &View,
    profile: Option<&str>,
    timeout: Duration,
) -> Edited {
    let method = method_of(kind);
    let mut items: Vec<Value> = view.items(catalog, kind).into_iter().cloned().collect();
    let mut renamed: HashMap<String, String> = HashMap::new();
    let mut hidden: HashMap<String, Option<(String, String)>> = HashMap::new();
    for link in editors {
        let in_scope: Vec<usize> = (0..items.len())
            .filter(|&i| {
                let name = item_name(kind, &items[i]);
                !hidden.contains_key(name)
                    && link
                        .scope
                        .covers(&route_of(catalog, kind, name), Some(name), profile)
            })
            .collect();
        if in_scope.is_empty() {
            continue;
        }
        let entries: Vec<ListEntry> = (in_scope.iter())
            .map(|&i| {
                let name = item_name(kind, &items[i]);
                ListEntry {
                    name: name.to_string(),
                    route: route_of(catalog, kind, name).name(),
                    definition: items[i].to_string(),
                }
            })
            .collect();
        let context = ListContext {
            method: method.to_string(),
            profile: profile.map(str::to_string),
        };
        let call = HookCall {
            timeout,
            session: None,
            log: Some(link.log.clone()),
        };
        let answer = match &link.state {
            Ok(middleware) => {
                (middleware.on_list(&context, &entries, call).await).map_err(|e| e.to_string())
            }
            Err(why) => Err(why.clone()),
        };
        let edits = match answer {
            Ok(edits) => edits,
            Err(error) => {
                match link.on_error {
                    // Fails closed: what it would have judged is not shown.
                    OnError::Deny => {
                        tracing::warn!(middleware = %link.name, "middleware {} failed on {method}; the {} entries in its scope are hidden: {error}", link.name, entries.len());
                        let why = || Some((link.name.clone(), error.clone()));
                        hidden.extend(entries.into_iter().map(|e| (e.name, why())));
                    }
                    OnError::Pass => {
                        tracing::warn!(middleware = %link.name, "middleware {} failed on {method}; passed over: {error}", link.name);
                    }
                }
                continue;
            }
        };
        let by_name: HashMap<String, usize> = (in_scope.iter())
            .map(|&i| (item_name(kind, &items[i]).to_string(), i))
            .collect();
        for edit in edits {
            let Some(&i) = by_name.get(&edit.name) else {
                continue;
            };
            apply(&mut items[i], &edit, kind);
            if edit.hide {
                hidden.insert(edit.name.clone(), None);
            }
            if let Some(new) = edit
                .rename
                .filter(|_| matches!(kind, Kind::Tools | Kind::Prompts))
            {
                renamed.insert(edit.name.clone(), new);
            }
        }
    }
    let mut renamed_to = HashMap::new();
    let mut gone = hidden.clone();
    let mut shown = Vec::with_capacity(items.len());
    for mut item in items {
        let name = item_name(kind, &item).to_string();
        if hidden.contains_key(&name) {
            continue;
        }
        if let Some(new) = renamed.get(&name) {
            item["name"] = json!(new);
            renamed_to.insert(new.clone(), name.clone());
            gone.insert(name, None);
        }
        shown.push(item);
    }
    // A new name that is also an entry's own name takes its place.
    for new in renamed_to.keys() {
        gone.remove(new);
    }
    let mut listing = Catalog::default();
    match kind {
        Kind::Tools => listing.tools = shown,
        Kind::Prompts => listing.prompts = shown,
        Kind::Resources => listing.resources = shown,
        Kind::Templates => listing.templates = shown,
    }
    Edited {
        listing,
        renamed_to,
        gone,
    }
}

/// The fields an edit sets on an item.
fn apply(item: &mut Value, edit: &Edit, kind: Kind) {
    let Some(object) = item.as_object_mut() else {
        return;
    };
    if let Some(title) = &edit.title {
        object.insert("title".into(), json!(title));
    }
    if let Some(description) = &edit.description {
        object.insert("description".into(), json!(description));
    }
    if let Some(annotations) = &edit.annotations
        && kind != Kind::Prompts
        && let Ok(annotations @ Value::Object(_)) = serde_json::from_str::<Value>(annotations)
    {
        object.insert("annotations".into(), annotations);
    }
}

fn route_of<'c>(catalog: &'c Catalog, kind: Kind, name: &str) -> Route<'c> {
    Route::of(catalog.target_of(kind, name))
}
