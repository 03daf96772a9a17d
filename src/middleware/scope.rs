//! Where a link applies: the config's scope (servers, plugins, profiles, target globs)
//! and the component's own interest (methods, name globs), compiled once per chain.

use globset::{Glob, GlobSet, GlobSetBuilder};
use serde_json::{Value, json};

use super::onion::Route;
use crate::config::MiddlewareEntry;
use crate::plugin::Interest;

/// The lists a list hook may edit.
const LIST_METHODS: [&str; 4] = [
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
];

/// A set of MCP methods, or all of them.
#[derive(Default)]
struct Methods {
    all: bool,
    listed: Vec<String>,
}

impl Methods {
    fn new(methods: &[String]) -> Methods {
        Methods {
            all: methods.iter().any(|m| m == "*"),
            listed: methods.to_vec(),
        }
    }

    fn has(&self, method: &str) -> bool {
        self.all || self.listed.iter().any(|m| m == method)
    }
}

pub(super) struct Scope {
    servers: Option<GlobSet>,
    plugins: Option<GlobSet>,
    profiles: Option<GlobSet>,
    /// The config's `tools` globs.
    targets: Option<GlobSet>,
    /// The component's `names` globs.
    names: Option<GlobSet>,
    requests: Methods,
    results: Methods,
    lists: Methods,
    /// Not loaded: its interest is unknown, so it is taken to be everything in its scope
    /// (a link that fails closed refuses all of it).
    unknown: bool,
    entry: MiddlewareEntry,
}

impl Scope {
    pub(super) fn new(entry: &MiddlewareEntry, interest: Option<&Interest>) -> Scope {
        // Not loaded: every request it could see is refused, every list it could edit
        // loses the entries in its scope (or, under `pass`, neither).
        let every = ["*".to_string()];
        let (requests, results, lists, names) = match interest {
            Some(i) => (&i.requests[..], &i.results[..], &i.lists[..], &i.names[..]),
            None => (&every[..], &[][..], &every[..], &[][..]),
        };
        Scope {
            servers: globs(entry.servers.as_deref()),
            plugins: globs(entry.plugins.as_deref()),
            profiles: globs(entry.profiles.as_deref()),
            targets: globs(entry.tools.as_deref()),
            names: (!names.is_empty()).then(|| globs(Some(names))).flatten(),
            requests: Methods::new(requests),
            results: Methods::new(results),
            lists: Methods::new(lists),
            unknown: interest.is_none(),
            entry: entry.clone(),
        }
    }

    /// Whether a request of `method` to `route`, naming `target`, from `profile` is in scope;
    /// `(request hook, result hook)`.
    pub(super) fn applies(
        &self,
        method: &str,
        route: &Route<'_>,
        target: Option<&str>,
        profile: Option<&str>,
    ) -> (bool, bool) {
        // An unloaded link judges lists through their entries, not the list request.
        if self.unknown && LIST_METHODS.contains(&method) {
            return (false, false);
        }
        let (request, result) = (self.requests.has(method), self.results.has(method));
        if !(request || result) || !self.covers(route, target, profile) {
            return (false, false);
        }
        (request, result)
    }

    /// Whether an item of a list, served by `route` and named `name`, is in scope.
    pub(super) fn covers(
        &self,
        route: &Route<'_>,
        target: Option<&str>,
        profile: Option<&str>,
    ) -> bool {
        let routed = match (&self.servers, &self.plugins) {
            (None, None) => true,
            (servers, plugins) => match route {
                Route::Server(name) => servers.as_ref().is_some_and(|g| g.is_match(name)),
                Route::Plugin(name) => plugins.as_ref().is_some_and(|g| g.is_match(name)),
                Route::Gateway => false,
            },
        };
        let named = target.is_none_or(|target| {
            self.targets.as_ref().is_none_or(|g| g.is_match(target))
                && self.names.as_ref().is_none_or(|g| g.is_match(target))
        });
        routed && self.profiled(profile) && named
    }

    /// Whether it edits the list of `method` for `profile`.
    pub(super) fn edits(&self, method: &str, profile: Option<&str>) -> bool {
        self.lists.has(method) && self.profiled(profile)
    }

    fn profiled(&self, profile: Option<&str>) -> bool {
        match (&self.profiles, profile) {
            (None, _) => true,
            (Some(globs), Some(profile)) => globs.is_match(profile),
            (Some(_), None) => false,
        }
    }

    /// The config's scope, as `gateway_status` shows it.
    pub(super) fn describe(&self) -> Value {
        let e = &self.entry;
        json!({"servers": e.servers, "plugins": e.plugins, "profiles": e.profiles, "tools": e.tools})
    }
}

/// The globs of a list (checked when the config was read); `None` for no list.
fn globs(list: Option<&[String]>) -> Option<GlobSet> {
    let mut set = GlobSetBuilder::new();
    for glob in list? {
        if let Ok(glob) = Glob::new(glob) {
            set.add(glob);
        }
    }
    set.build().ok()
}
