//! `[[middleware]]`: the chain's links in order, each a component (a file, or a bundled
//! middleware by name) loaded by the plugin host, and its scope.

use std::collections::BTreeSet;

use super::Ctx;
use crate::config::model::{MiddlewareEntry, PluginsConfig};
use crate::config::raw;

impl Ctx<'_> {
    /// The chain; each link's component joins `plugins` under the link's name.
    pub(super) fn middleware(
        &mut self,
        raw: Vec<raw::Middleware>,
        plugins: &mut PluginsConfig,
    ) -> Vec<MiddlewareEntry> {
        let mut chain = Vec::new();
        let mut seen = BTreeSet::new();
        for (index, mut link) in raw.into_iter().enumerate() {
            let at = format!("middleware[{index}]");
            let stem = link.path.as_deref().and_then(|path| {
                let stem = std::path::Path::new(path).file_stem()?;
                Some(stem.to_string_lossy().into_owned())
            });
            let Some(name) = link.name.clone().or(link.uses.clone()).or(stem) else {
                self.error(
                    &["middleware"],
                    None,
                    format!("{at} names no component"),
                    "give it `use = \"redact\"` (a bundled middleware) or `path = \"FILE.wasm\"`",
                );
                continue;
            };
            let key = |k: &'static str| ["middleware".to_string(), name.clone(), k.to_string()];
            if !crate::names::portable(&name) {
                self.error(
                    &["middleware"],
                    Some(&name),
                    format!("middleware name \"{name}\" is not 1-64 letters, digits, `_` or `-`"),
                    "set `name` to letters, digits, `_` or `-`",
                );
                continue;
            }
            if !seen.insert(name.clone()) {
                self.error(
                    &["middleware"],
                    Some(&name),
                    format!("two middleware entries are named `{name}`"),
                    "give each its own `name` (the same component may run twice with two names)",
                );
                continue;
            }
            if plugins.plugins.contains_key(&name) {
                self.error(
                    &["middleware"],
                    Some(&name),
                    format!("middleware `{name}` has the name of a [plugins.{name}] table"),
                    "give the middleware its own `name`",
                );
                continue;
            }
            match (&link.uses, &link.path) {
                (Some(_), Some(_)) => {
                    self.error(
                        &["middleware"],
                        Some(&name),
                        format!("middleware `{name}` has both `use` and `path`"),
                        "keep one: `use` runs a bundled middleware, `path` a component file",
                    );
                    continue;
                }
                (None, None) => {
                    self.error(
                        &["middleware"],
                        Some(&name),
                        format!("middleware `{name}` has neither `use` nor `path`"),
                        "add `use = \"redact\"` (a bundled middleware) or `path = \"FILE.wasm\"`",
                    );
                    continue;
                }
                (Some(uses), None) if !is_bundled_middleware(uses) => {
                    let known = bundled_middleware_names().join(", ");
                    self.error(
                        &key("use").each_ref().map(String::as_str),
                        Some(uses),
                        format!("there is no bundled middleware `{uses}`"),
                        format!("use one of: {known}; or give a component file with `path`"),
                    );
                    continue;
                }
                _ => {}
            }
            let component = link.component();
            let Some(mut plugin) =
                self.plugin("middleware", &name, component, None, false, plugins.limits)
            else {
                continue;
            };
            plugin.middleware = true;
            plugin.uses_bundled = link.uses.clone();
            // A middleware serves no tools: its name claims no namespace.
            plugin.namespace = String::new();
            plugins.plugins.insert(name.clone(), plugin);
            let globs = [
                ("servers", &link.servers),
                ("plugins", &link.plugins),
                ("profiles", &link.profiles),
                ("tools", &link.tools),
            ];
            for (field, list) in globs {
                for glob in list.iter().flatten() {
                    if let Err(e) = globset::Glob::new(glob) {
                        self.error(
                            &key(field).each_ref().map(String::as_str),
                            Some(glob),
                            format!("\"{glob}\" is not a glob: {e}"),
                            "write names with `*` and `?` wildcards",
                        );
                    }
                }
            }
            chain.push(MiddlewareEntry {
                name,
                on_error: link.on_error.unwrap_or_default(),
                servers: link.servers,
                plugins: link.plugins,
                profiles: link.profiles,
                tools: link.tools,
                disabled: link.disabled,
            });
        }
        chain
    }
}

fn is_bundled_middleware(name: &str) -> bool {
    bundled_middleware_names().contains(&name)
}

fn bundled_middleware_names() -> Vec<&'static str> {
    (crate::bundled::BUNDLED_MIDDLEWARE.iter())
        .map(|(name, _)| *name)
        .collect()
}
