//! Grants that would let a plugin reach past its sandbox through the gateway itself: a
//! read-write grant holding a file the gateway runs or loads code from, and a grant inside
//! another plugin's (or its own) read-write grant, which a link could redirect.

use std::path::{Path, PathBuf};

use super::model::{GatewayConfig, PluginsConfig};

/// A grant refused, with the plugin it belongs to.
pub(crate) struct Exposure {
    pub plugin: String,
    pub message: String,
    pub fix: String,
}

/// Every refused grant of the enabled plugins, in plugin order.
pub(crate) fn exposures(
    source: Option<&Path>,
    gateway: &GatewayConfig,
    plugins: &PluginsConfig,
) -> Vec<Exposure> {
    let mut guarded: Vec<(PathBuf, String)> = Vec::new();
    if let Some(file) = source {
        guarded.push((
            file.to_path_buf(),
            "the config file, which starts servers".into(),
        ));
    }
    if let Some(dir) = &plugins.dir {
        let what = "the plugin folder, whose file names carry grants";
        guarded.push((dir.clone(), what.into()));
    }
    if let Some(dir) = &plugins.cache_dir {
        let what = "the compiled-plugin cache, native code the gateway runs";
        guarded.push((dir.clone(), what.into()));
    }
    if let Some(dir) = &plugins.data_dir {
        // Not code, but every principal's stored data: a plugin must not reach it.
        let what = "the plugins' stores, every principal's data";
        guarded.push((dir.clone(), what.into()));
    }
    if let Some(file) = &gateway.events_file {
        guarded.push((file.clone(), "the events file".into()));
    }
    let enabled: Vec<_> = plugins.plugins.values().filter(|p| !p.disabled).collect();
    for plugin in &enabled {
        if let Some(path) = &plugin.path {
            let what = format!("plugin `{}`'s component", plugin.name);
            guarded.push((path.clone(), what));
        }
    }
    let guarded: Vec<(PathBuf, String)> = guarded
        .into_iter()
        .map(|(path, what)| (resolved(&path), what))
        .collect();

    let mut out = Vec::new();
    for plugin in &enabled {
        for (index, grant) in plugin.allow_dirs.iter().enumerate() {
            if !grant.read_only && !grant.expose_gateway_files {
                for (path, what) in &guarded {
                    if path.starts_with(&grant.host) {
                        out.push(Exposure {
                            plugin: plugin.name.clone(),
                            message: format!(
                                "the read-write grant of {} holds {} ({what}): a plugin could \
                                 write its way to running native code",
                                grant.host.display(),
                                path.display()
                            ),
                            fix: "grant a folder that does not hold it, make the grant \
                                  mode = \"ro\", or set allow_gateway_files = true on this \
                                  grant if that is meant"
                                .into(),
                        });
                    }
                }
            }
            let outer = enabled.iter().flat_map(|other| {
                (other.allow_dirs.iter().enumerate()).map(move |(i, g)| (other, i, g))
            });
            for (other, other_index, outer) in outer {
                let same = other.name == plugin.name && other_index == index;
                if !same && !outer.read_only && grant.host.starts_with(&outer.host) {
                    let owner = if other.name == plugin.name {
                        "its own".to_string()
                    } else {
                        format!("plugin `{}`'s", other.name)
                    };
                    out.push(Exposure {
                        plugin: plugin.name.clone(),
                        message: format!(
                            "the grant of {} lies inside {owner} read-write grant of {}: a \
                             plugin that writes there could put a link in its place",
                            grant.host.display(),
                            outer.host.display()
                        ),
                        fix: "grant the outer folder alone, or make it mode = \"ro\"".into(),
                    });
                }
            }
        }
    }
    out
}

/// `path` with its links resolved as far as it exists (a file or folder made later is
/// looked for where it will be).
fn resolved(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut head = path.to_path_buf();
    loop {
        if let Ok(canonical) = head.canonicalize() {
            return rest.iter().rev().fold(canonical, |p, c| p.join(c));
        }
        match (head.file_name().map(|n| n.to_owned()), head.parent()) {
            (Some(name), Some(parent)) => {
                rest.push(name);
                head = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}
