//! The config of a one-plugin gateway for `inspect` and `call`: written as the TOML a user
//! would write and loaded as the gateway loads any config, so every grant and limit is
//! checked and applied by the same code.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokio::sync::mpsc;

use crate::config::{self, Config};
use crate::plugin::{Interest, PluginEvent, PluginHost};

/// Grants and limits from the command line.
#[derive(Default)]
pub struct Grants {
    /// `HOST:GUEST[:ro|rw]`
    pub dirs: Vec<String>,
    pub hosts: Vec<String>,
    pub env: Vec<String>,
    pub memory: Option<String>,
    pub timeout: Option<String>,
}

/// The plugin's name (the file's stem, as `--plugin FILE` names it) and the config.
pub fn config_for(file: &Path, grants: &Grants) -> Result<(String, Config), String> {
    let path = std::path::absolute(file).map_err(|e| format!("{}: {e}", file.display()))?;
    let name = path
        .file_stem()
        .and_then(|s| s.to_str())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| format!("{}: its file name gives no plugin name", file.display()))?
        .to_owned();
    let mut entry = toml::Table::new();
    entry.insert("path".into(), path.to_string_lossy().into_owned().into());
    entry.insert("namespace".into(), config::namespace_for(&name).into());
    let mut dirs = Vec::new();
    for grant in &grants.dirs {
        dirs.push(toml::Value::Table(dir_grant(grant)?));
    }
    let list = |items: &[String]| {
        items
            .iter()
            .cloned()
            .map(toml::Value::from)
            .collect::<Vec<_>>()
    };
    entry.insert("allow_dirs".into(), dirs.into());
    entry.insert("allow_hosts".into(), list(&grants.hosts).into());
    entry.insert("allow_env".into(), list(&grants.env).into());
    if let Some(memory) = &grants.memory {
        entry.insert("memory".into(), memory.clone().into());
    }
    if let Some(timeout) = &grants.timeout {
        entry.insert("timeout".into(), timeout.clone().into());
    }
    let mut plugins = toml::Table::new();
    plugins.insert("bundled".into(), false.into());
    plugins.insert("watch".into(), false.into());
    plugins.insert(name.clone(), entry.into());
    let root = toml::Table::from_iter([("plugins".to_string(), toml::Value::Table(plugins))]);
    let text = toml::to_string(&root).map_err(|e| e.to_string())?;
    let cwd = std::env::current_dir().map_err(|e| format!("the current folder: {e}"))?;
    let config = config::from_toml_str(
        &text,
        &cwd.join("(command line)"),
        &cwd,
        &config::process_env,
    )
    .map_err(|e| {
        // The TOML's lines are ours, not the user's: name the setting, not where it is.
        let text = e.to_string();
        match text.find(": plugins.") {
            Some(at) => text[at + 2..].to_owned(),
            None => text,
        }
    })?;
    Ok((name, config))
}

/// `HOST:GUEST[:ro|rw]` as an `allow_dirs` entry.
fn dir_grant(text: &str) -> Result<toml::Table, String> {
    let bad = || {
        format!("--allow-dir {text}: write HOST:GUEST or HOST:GUEST:ro|rw, e.g. ./data:/data:ro")
    };
    let (rest, mode) = match text.rsplit_once(':') {
        Some((rest, mode @ ("ro" | "rw"))) => (rest, mode),
        _ => (text, "ro"),
    };
    let (host, guest) = rest.rsplit_once(':').ok_or_else(bad)?;
    if host.is_empty() || guest.is_empty() {
        return Err(bad());
    }
    let mut table = toml::Table::new();
    table.insert("host".into(), host.into());
    table.insert("guest".into(), guest.into());
    table.insert("mode".into(), mode.into());
    Ok(table)
}

/// Makes the config's one plugin a middleware, as a `[[middleware]]` entry makes it: its
/// code must be one, and it runs in shared instances (the default for middleware).
pub fn as_middleware(config: &mut Config, name: &str) {
    if let Some(entry) = config.plugins.plugins.get_mut(name) {
        entry.middleware = true;
        entry.instances.mode = config::InstanceMode::Shared;
    }
}

/// A plugin as the gateway loaded it: its MCP tools (a middleware: its interest and
/// instance mode) and how long compiling took.
pub struct Loaded {
    pub tools: Vec<Value>,
    pub compile_ms: Option<u64>,
    pub interest: Option<Interest>,
    pub instance: config::InstanceMode,
    /// A 0.2 plugin's other lists and the instance mode it declared.
    pub resources: Vec<Value>,
    pub templates: Vec<Value>,
    pub prompts: Vec<Value>,
    pub completes: bool,
    pub declared_instance: Option<config::InstanceMode>,
}

/// Loads the config's one plugin in a plugin host of its own; `Err` is why it was refused,
/// as the gateway would say it.
pub async fn load(config: &Config) -> Result<Loaded, String> {
    let (events, mut received) = mpsc::unbounded_channel();
    let host: Arc<PluginHost> = PluginHost::start(&config.plugins, &[], events)
        .await
        .map_err(|e| format!("cannot start the plugin host: {e:#}"))?;
    let mut compile_ms = None;
    while let Ok(event) = received.try_recv() {
        if let PluginEvent::Loaded { compile_ms: ms, .. } = event {
            compile_ms = ms;
        }
    }
    let loaded = host.plugins().into_iter().next();
    let failed = host.failed_plugins().into_iter().next();
    host.shutdown().await;
    match (loaded, failed) {
        (Some(info), _) => Ok(Loaded {
            tools: info.tools,
            compile_ms,
            interest: info.interest,
            instance: info.instance,
            resources: info.resources,
            templates: info.templates,
            prompts: info.prompts,
            completes: info.completes,
            declared_instance: info.declared_instance,
        }),
        (None, Some(failed)) => Err(failed.reason()),
        (None, None) => Err("was not loaded (no such file?)".into()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dir_grants_take_an_optional_mode() {
        let grant = dir_grant("./data:/data").unwrap();
        assert_eq!(grant["mode"].as_str(), Some("ro"));
        let grant = dir_grant("/tmp/x:/out:rw").unwrap();
        assert_eq!(grant["host"].as_str(), Some("/tmp/x"));
        assert_eq!(grant["guest"].as_str(), Some("/out"));
        assert_eq!(grant["mode"].as_str(), Some("rw"));
        assert!(dir_grant("/data").is_err());
    }

    #[test]
    fn the_config_holds_one_plugin_with_its_grants() {
        let grants = Grants {
            env: vec!["HOME".into()],
            hosts: vec!["example.com".into()],
            memory: Some("32MiB".into()),
            timeout: Some("2s".into()),
            ..Grants::default()
        };
        let (name, config) = config_for(Path::new("/x/my-tool.wasm"), &grants).unwrap();
        assert_eq!(name, "my-tool");
        let entry = &config.plugins.plugins["my-tool"];
        assert_eq!(entry.allow_env, ["HOME"]);
        assert_eq!(entry.allow_hosts, ["example.com"]);
        assert_eq!(entry.limits.memory, 32 << 20);
        assert!(!config.plugins.bundled && !config.plugins.watch);
        let bad = Grants {
            memory: Some("lots".into()),
            ..Grants::default()
        };
        assert!(
            config_for(Path::new("x.wasm"), &bad)
                .unwrap_err()
                .contains("lots")
        );
    }
}
