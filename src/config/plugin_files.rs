//! `--plugin FILE` on the command line: a plugin served without writing a config for it,
//! for a plugin author's build-and-try loop (`wasmgate --plugin target/.../x.wasm`).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::load::{embedded_default, load_given, process_env};
use super::model::{Config, PluginConfig};
use crate::names::{namespace_for, valid_namespace};

/// The config file, or the embedded default without one, with the `--plugin` files added:
/// at start and at each change of the file.
pub fn load_with_plugin_files(path: Option<&Path>, files: &[PathBuf]) -> Result<Config, String> {
    let named = named_files(files)?;
    let mut config = match path {
        Some(path) => {
            let names: Vec<String> = named.keys().cloned().collect();
            load_given(path, &process_env, &names).map_err(|e| e.to_string())?
        }
        None if named.is_empty() => return Ok(embedded_default()),
        // Just those files: the bundled plugins would crowd a plugin under test.
        None => {
            let mut config = embedded_default();
            config.plugins.bundled = false;
            config.plugins.watch = true;
            config
        }
    };
    add_plugin_files(&mut config, named)?;
    let source = config.source.as_deref();
    if let Some(found) = super::exposure::exposures(source, &config.gateway, &config.plugins)
        .into_iter()
        .next()
    {
        return Err(format!(
            "plugin `{}`: {} ({})",
            found.plugin, found.message, found.fix
        ));
    }
    Ok(config)
}

/// Each file by the plugin name it gives: its stem (`x.wasm` serves `x__...`).
fn named_files(files: &[PathBuf]) -> Result<BTreeMap<String, PathBuf>, String> {
    let mut named = BTreeMap::new();
    for file in files {
        let path =
            std::path::absolute(file).map_err(|e| format!("--plugin {}: {e}", file.display()))?;
        if path.is_dir() {
            return Err(format!(
                "--plugin {}: is a directory (give the component file, e.g. \
                 target/wasm32-wasip2/release/NAME.wasm, or use [plugins] dir in a config)",
                file.display()
            ));
        }
        let Some(name) = path
            .file_stem()
            .and_then(|stem| stem.to_str())
            .filter(|stem| !stem.is_empty() && !stem.starts_with('.'))
        else {
            return Err(format!(
                "--plugin {}: its file name gives no plugin name (name it NAME.wasm)",
                file.display()
            ));
        };
        if let Some(other) = named.insert(name.to_owned(), path.clone()) {
            return Err(format!(
                "--plugin {} and --plugin {}: both would be plugin `{name}` (rename one file)",
                other.display(),
                path.display()
            ));
        }
    }
    Ok(named)
}

/// A file named like a `[plugins.NAME]` table takes the place of that table's path and keeps
/// its grants, limits and settings; one named like a bundled plugin is served instead of it.
fn add_plugin_files(config: &mut Config, named: BTreeMap<String, PathBuf>) -> Result<(), String> {
    for (name, path) in named {
        if !path.is_file() {
            config
                .warnings
                .push(super::validate::plugin_file_warning(&name, &path, ""));
        }
        if let Some(entry) = config.plugins.plugins.get_mut(&name) {
            if entry.disabled {
                return Err(format!(
                    "--plugin {}: the config disables plugin `{name}` (remove `disabled = true` \
                     from [plugins.{name}], or rename the file)",
                    path.display()
                ));
            }
            entry.path = Some(path);
            continue;
        }
        let namespace = namespace_for(&name);
        if !valid_namespace(&name) {
            config.warnings.push(format!(
                "plugin `{name}`: its file name is not a valid namespace, so its tools are \
                 prefixed \"{namespace}\"; rename the file to choose another"
            ));
        }
        let entry = PluginConfig::plain(&name, Some(path), namespace, config.plugins.limits);
        config.plugins.plugins.insert(name, entry);
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_name_must_give_a_plugin_name() {
        for bad in [".wasm", "dir/.hidden.wasm"] {
            let err = load_with_plugin_files(None, &[PathBuf::from(bad)]).unwrap_err();
            assert!(err.contains("gives no plugin name"), "{bad}: {err}");
        }
        let err = load_with_plugin_files(None, &[std::env::temp_dir()]).unwrap_err();
        assert!(err.contains("is a directory"), "{err}");
        let config =
            load_with_plugin_files(None, &[PathBuf::from("/no/such/my plugin.v2.wasm")]).unwrap();
        let entry = &config.plugins.plugins["my plugin.v2"];
        assert_eq!(entry.namespace, "my_plugin_v2");
        assert_eq!(
            entry.path.as_deref(),
            Some(Path::new("/no/such/my plugin.v2.wasm"))
        );
        assert!(!config.plugins.bundled && config.plugins.watch);
        assert_eq!(config.warnings.len(), 2, "{:?}", config.warnings);
    }
}
