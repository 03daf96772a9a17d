//! `[profiles.NAME]`: the globs compiled, and the servers and plugins each one names
//! checked against the config's, so that a typo is refused rather than serving nothing.

use std::collections::BTreeMap;
use std::path::PathBuf;

use super::{Ctx, is_bundled};
use crate::config::model::{PluginsConfig, Profile, ProfileGlobs, ServerConfig};
use crate::config::raw;
use crate::names::valid_namespace;

/// What a name in a profile's `servers` is.
enum Named {
    Enabled,
    Disabled,
    /// Not in the config, but `[plugins] dir` may hold it later.
    MaybeInDir(PathBuf),
    Unknown,
}

impl Ctx<'_> {
    pub(super) fn profiles(
        &mut self,
        raw: BTreeMap<String, raw::Profile>,
    ) -> BTreeMap<String, Profile> {
        let mut out = BTreeMap::new();
        for (name, profile) in raw {
            if !valid_namespace(&name) {
                self.error(
                    &["profiles", &name],
                    None,
                    format!("profile name \"{name}\" may only contain letters, digits, _ and -"),
                    "it is a path segment: /mcp/NAME",
                );
            }
            let mut globs = |field: &str, patterns: &Option<Vec<String>>| {
                patterns
                    .as_ref()
                    .and_then(|p| self.globs(p, &["profiles", &name, field]))
            };
            let tools = globs("tools", &profile.tools);
            let prompts = globs("prompts", &profile.prompts);
            // A URI's `*` stops at `/`, as a path's does: `file:///data/*` is not all of `/`.
            let resources = (profile.resources.as_ref())
                .and_then(|p| self.uri_globs(p, &["profiles", &name, "resources"]));
            out.insert(
                name.clone(),
                Profile {
                    name,
                    tools,
                    prompts,
                    resources,
                    servers: profile.servers,
                    written: ProfileGlobs {
                        tools: profile.tools,
                        prompts: profile.prompts,
                        resources: profile.resources,
                    },
                },
            );
        }
        out
    }

    /// Every name in a profile's `servers` must be a server or plugin of the config; a
    /// profile that can show no server's or plugin's item at all gets a warning.
    pub(super) fn profile_backends(
        &mut self,
        profiles: &BTreeMap<String, Profile>,
        servers: &BTreeMap<String, ServerConfig>,
        plugins: &PluginsConfig,
    ) {
        for profile in profiles.values() {
            let p = profile.name.as_str();
            let key = ["profiles", p, "servers"];
            let mut shown = 0;
            for name in profile.servers.iter().flatten() {
                match self.named(name, servers, plugins) {
                    Named::Enabled => shown += 1,
                    Named::Disabled => {}
                    Named::MaybeInDir(file) => {
                        shown += 1;
                        self.warnings.push(format!(
                            "profile `{p}` names `{name}`, which is no server or plugin of this config \
                             and not (yet) a plugin file: {} does not exist",
                            file.display()
                        ));
                    }
                    Named::Unknown => {
                        let owner = servers.values().find(|s| s.namespace == *name);
                        let fix = match owner {
                            Some(s) => format!(
                                "`{name}` is the namespace of server `{}`: profiles name servers by their key",
                                s.name
                            ),
                            None => "write the key of a [servers.NAME] or [plugins.NAME] entry, or remove the name".into(),
                        };
                        self.error(
                            &key,
                            Some(name),
                            format!(
                                "profile `{p}` names `{name}`, which is no server or plugin of this config"
                            ),
                            fix,
                        );
                        shown += 1;
                    }
                }
            }
            match &profile.servers {
                Some(names) if names.is_empty() => self.warnings.push(format!(
                    "profile `{p}`: `servers = []` shows no server or plugin, only the gateway's own tools"
                )),
                Some(names) if shown == 0 => self.warnings.push(format!(
                    "profile `{p}`: every server it names is disabled ({}), so it shows only the gateway's own tools",
                    names.join(", ")
                )),
                _ => {}
            }
            let w = &profile.written;
            if [&w.tools, &w.prompts, &w.resources]
                .iter()
                .all(|globs| globs.as_ref().is_some_and(Vec::is_empty))
            {
                self.warnings.push(format!(
                    "profile `{p}` shows nothing: its tools, prompts and resources are all []"
                ));
            }
        }
    }

    fn named(
        &self,
        name: &str,
        servers: &BTreeMap<String, ServerConfig>,
        plugins: &PluginsConfig,
    ) -> Named {
        let state = |disabled: bool| match disabled {
            true => Named::Disabled,
            false => Named::Enabled,
        };
        if let Some(server) = servers.get(name) {
            return state(server.disabled);
        }
        if let Some(plugin) = plugins.plugins.get(name) {
            return state(plugin.disabled);
        }
        if self.src.given_plugins.iter().any(|g| g == name) || (plugins.bundled && is_bundled(name))
        {
            return Named::Enabled;
        }
        match &plugins.dir {
            Some(dir) if dir.join(format!("{name}.wasm")).is_file() => Named::Enabled,
            Some(dir) => Named::MaybeInDir(dir.join(format!("{name}.wasm"))),
            None => Named::Unknown,
        }
    }
}
