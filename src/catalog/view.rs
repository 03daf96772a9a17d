//! What a profile (`[profiles.NAME]`) lets a session see of the catalog: globs over the
//! served names, and which backends. Lists, calls and `list_changed` all ask here.

use std::sync::Arc;

use serde_json::Value;

use super::{Catalog, Target};
use crate::config::{Config, Profile};

/// What of the catalog a client sees, resolved from its profile's name once: the one
/// place a profile is looked up by name.
#[derive(Clone, Debug)]
pub enum View {
    /// No profile: everything.
    All,
    /// Its profile's view.
    Profile(Arc<Profile>),
    /// Its profile left the config: nothing, until it reconnects.
    Nothing,
}

impl View {
    /// The view of the profile named `profile` (if any) in `config`.
    pub fn of(profile: Option<&str>, config: &Config) -> View {
        match profile {
            None => View::All,
            Some(name) => match config.profiles.get(name) {
                Some(profile) => View::Profile(profile.clone()),
                None => View::Nothing,
            },
        }
    }

    /// Whether it shows the item of `kind` named `name` that `target` serves.
    pub fn shows(&self, kind: Kind, name: &str, target: Option<&Target>) -> bool {
        match self {
            View::All => true,
            View::Profile(profile) => shows(profile, kind, name, target),
            View::Nothing => false,
        }
    }

    /// Whether it includes backend `backend` (a server or plugin): see
    /// [`Catalog::view_includes`].
    pub fn includes(&self, catalog: &Catalog, backend: &str) -> bool {
        match self {
            View::All => true,
            View::Profile(profile) => catalog.view_includes(profile, backend),
            View::Nothing => false,
        }
    }

    /// The items of `kind` of `catalog` it shows.
    pub fn items<'c>(&self, catalog: &'c Catalog, kind: Kind) -> Vec<&'c Value> {
        match self {
            View::All => catalog.items(kind).iter().collect(),
            View::Profile(profile) => catalog.visible(kind, profile),
            View::Nothing => Vec::new(),
        }
    }
}

/// Which list an item is of.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    Tools,
    Prompts,
    Resources,
    Templates,
}

/// Whether `profile` shows the item named `name` (a tool or prompt name, a resource URI or
/// template) that `target` serves.
pub fn shows(profile: &Profile, kind: Kind, name: &str, target: Option<&Target>) -> bool {
    let globs = match kind {
        Kind::Tools => &profile.tools,
        Kind::Prompts => &profile.prompts,
        Kind::Resources | Kind::Templates => &profile.resources,
    };
    if globs.as_ref().is_some_and(|g| !g.is_match(name)) {
        return false;
    }
    // `..` would walk out of what the glob names on a server that resolves it.
    if globs.is_some() && matches!(kind, Kind::Resources | Kind::Templates) && has_dot_segment(name)
    {
        return false;
    }
    match (&profile.servers, target) {
        // The gateway's own tools are governed by the name globs alone.
        (Some(_), Some(Target::Builtin)) | (None, _) => true,
        (Some(servers), Some(target)) => servers.iter().any(|s| s == target.server()),
        (Some(_), None) => false,
    }
}

impl Catalog {
    /// Whether `profile`'s view includes backend `name` (a server or plugin): what decides
    /// which sessions hear what that backend sends on its own. A profile that names its
    /// backends includes those; one that only filters by name includes a backend when it
    /// shows at least one of its items.
    pub fn view_includes(&self, profile: &Profile, name: &str) -> bool {
        if let Some(servers) = &profile.servers {
            return servers.iter().any(|s| s == name);
        }
        if profile.tools.is_none() && profile.prompts.is_none() && profile.resources.is_none() {
            return true;
        }
        [Kind::Tools, Kind::Prompts, Kind::Resources, Kind::Templates]
            .into_iter()
            .any(|kind| {
                self.items(kind).iter().any(|item| {
                    let item = item_name(kind, item);
                    let target = self.target_of(kind, item);
                    target.is_some_and(|t| t.server() == name) && shows(profile, kind, item, target)
                })
            })
    }

    /// The list of `kind`, as `profile` shows it.
    pub fn items(&self, kind: Kind) -> &Vec<Value> {
        match kind {
            Kind::Tools => &self.tools,
            Kind::Prompts => &self.prompts,
            Kind::Resources => &self.resources,
            Kind::Templates => &self.templates,
        }
    }

    /// The items of `kind` that `profile` shows.
    pub fn visible<'c>(&'c self, kind: Kind, profile: &Profile) -> Vec<&'c Value> {
        self.items(kind)
            .iter()
            .filter(|item| {
                let name = item_name(kind, item);
                shows(profile, kind, name, self.target_of(kind, name))
            })
            .collect()
    }

    /// Where the item of `kind` named `name` is served.
    pub fn target_of(&self, kind: Kind, name: &str) -> Option<&Target> {
        match kind {
            Kind::Tools => self.tool(name).map(|r| &r.target),
            Kind::Prompts => self.prompt(name).map(|r| &r.target),
            Kind::Resources => self.resource_target(name),
            Kind::Templates => self.template_target(name),
        }
    }
}

/// Whether a URI has a `..` path segment, also written with `%2e`.
fn has_dot_segment(uri: &str) -> bool {
    let path = uri.split(['?', '#']).next().unwrap_or_default();
    path.split(['/', '\\']).any(|segment| {
        let lower = segment.to_ascii_lowercase();
        lower.replace("%2e", ".") == ".."
    })
}

/// The name an item is known by: a tool's or prompt's `name`, a resource's `uri`, a
/// template's `uriTemplate`.
pub fn item_name(kind: Kind, item: &Value) -> &str {
    let key = match kind {
        Kind::Tools | Kind::Prompts => "name",
        Kind::Resources => "uri",
        Kind::Templates => "uriTemplate",
    };
    item.get(key).and_then(Value::as_str).unwrap_or_default()
}
