//! `[plugins]` and `[plugins.NAME]`: the plugin folder, limits, grants and pins.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use super::{Ctx, default_cache_dir, default_data_dir, default_total_memory, is_bundled};
use crate::config::model::{
    DEFAULT_COMPILE_TIMEOUT, DEFAULT_STORE_SIZE, DirGrant, InstanceMode, InstancePolicy,
    MAX_CALLS_AT_ONCE, PLUGIN_PROJECT_FILES, PluginConfig, PluginLimits, PluginsConfig,
};
use crate::config::raw;

impl Ctx<'_> {
    pub(super) fn plugins(&mut self, raw: raw::Plugins) -> PluginsConfig {
        let p = "plugins";
        let dir = raw
            .dir
            .as_deref()
            .and_then(|d| self.path(d, &[p, "dir"], true));
        if let Some(dir) = &dir
            && !dir.is_dir()
        {
            self.warnings.push(format!(
                "plugins.dir {} is not a directory (yet); plugins will be loaded when it appears",
                dir.display()
            ));
        }
        if let Some(dir) = &dir
            && let Ok(meta) = std::fs::metadata(dir)
            && std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o022 != 0
        {
            self.warnings.push(format!(
                "plugins.dir {} is writable by group or others: whoever can write there can \
                 serve a plugin, and one named like a [plugins] table gets its grants (chmod \
                 go-w it, or pin each granted plugin with sha256)",
                dir.display()
            ));
        }
        let cache_dir = match raw.cache_dir.as_deref() {
            Some(c) => self.path(c, &[p, "cache_dir"], true),
            None => default_cache_dir(self.env),
        };
        let data_dir = match raw.data_dir.as_deref() {
            Some(d) => self.path(d, &[p, "data_dir"], true),
            None => default_data_dir(self.env),
        };
        let defaults = PluginLimits {
            memory: raw.memory.unwrap_or(PluginLimits::default().memory),
            timeout: raw.timeout.unwrap_or(PluginLimits::default().timeout),
            fuel: raw.fuel.or(PluginLimits::default().fuel),
        };
        let bundled = raw.bundled.unwrap_or(false);
        let mut plugins = BTreeMap::new();
        for (name, entry) in raw.entries {
            if let Some(plugin) =
                self.plugin("plugins", &name, entry, dir.as_deref(), bundled, defaults)
            {
                plugins.insert(name, plugin);
            }
        }
        PluginsConfig {
            dir,
            watch: raw.watch.unwrap_or(true),
            cache_dir,
            data_dir,
            store_size: raw.store_size.unwrap_or(DEFAULT_STORE_SIZE),
            bundled,
            limits: defaults,
            compile_timeout: raw.compile_timeout.unwrap_or(DEFAULT_COMPILE_TIMEOUT),
            total_memory: raw.total_memory.unwrap_or_else(default_total_memory),
            oci_insecure: raw.oci_insecure,
            plugins,
        }
    }

    /// A plugin's entry, or a middleware's component (`section` "middleware", whose file
    /// the caller has checked for).
    pub(super) fn plugin(
        &mut self,
        section: &'static str,
        name: &str,
        raw: raw::PluginEntry,
        dir: Option<&Path>,
        bundled: bool,
        defaults: PluginLimits,
    ) -> Option<PluginConfig> {
        let table = [section, name];
        let key = |k: &'static str| [table[0], table[1], k];
        let strict = !raw.disabled;
        let path = raw
            .path
            .as_deref()
            .and_then(|path| self.path(path, &key("path"), strict));
        // A table for a bundled plugin (with `bundled = true`), or for a file given with
        // `--plugin`, gives it grants and limits.
        let served_bundled = bundled && is_bundled(name);
        let given = self.src.given_plugins.iter().any(|g| g == name);
        let is_oci = |s: &&str| s.starts_with(crate::oci::SCHEME);
        let oci = raw
            .source
            .as_deref()
            .filter(is_oci)
            .and_then(|source| self.oci_source(name, source, &raw, strict));
        let source = raw
            .source
            .as_deref()
            .filter(|s| !is_oci(s))
            .and_then(|source| self.plugin_source(name, source, strict));
        if raw.public_key.is_some() && !raw.source.as_deref().is_some_and(|s| is_oci(&s)) {
            self.error(
                &key("public_key"),
                raw.public_key.as_deref(),
                "public_key checks the signature of an oci:// source, and this plugin has none",
                "set source = \"oci://REGISTRY/REPO:TAG\", or remove public_key",
            );
        }
        match (raw.path.is_some(), dir) {
            _ if given || section != "plugins" || oci.is_some() => {}
            // `wasmgate dev` builds it; `serve` has no file to serve.
            (false, None) if raw.source.is_some() => self.warnings.push(format!(
                "plugin `{name}` names a source folder and no path: `wasmgate dev` builds and \
                 serves it, `serve` does not (set path to the component the build writes)"
            )),
            (false, None) if !served_bundled => self.error(
                &table,
                None,
                format!(
                    "plugin `{name}` has no path, and [plugins] sets no dir to find {name}.wasm in"
                ),
                format!(
                    "set path = \"plugins/{name}.wasm\" here, or dir = \"plugins\" in [plugins]"
                ),
            ),
            (false, Some(dir)) if !served_bundled && !raw.disabled => {
                let file = dir.join(format!("{name}.wasm"));
                if !file.is_file() {
                    let hint = " (or is the table's name misspelt?)";
                    self.warnings.push(plugin_file_warning(name, &file, hint));
                }
            }
            _ => {}
        }
        if let Some(path) = &path
            && !given
            && !path.is_file()
        {
            self.warnings.push(plugin_file_warning(name, path, ""));
        }
        let namespace = self.namespace(name, raw.namespace.clone(), &table, "plugin");
        let instances = self.instance_policy(name, &raw);
        let mut allow_dirs: Vec<DirGrant> = Vec::new();
        for grant in raw.allow_dirs {
            let Some(grant) = self.dir_grant(grant, &key("allow_dirs"), strict) else {
                continue;
            };
            // Two grants at one guest path: one would hide the other.
            if allow_dirs.iter().any(|g| g.guest == grant.guest) {
                self.error(
                    &key("allow_dirs"),
                    Some(&grant.guest),
                    format!("two grants share the guest path \"{}\"", grant.guest),
                    "give each granted directory its own guest path",
                );
                continue;
            }
            allow_dirs.push(grant);
        }
        for var in &raw.allow_env {
            if !valid_env_name(var) {
                self.error(
                    &key("allow_env"),
                    Some(var),
                    format!("\"{var}\" is not an environment variable name"),
                    "write names like \"HOME\": letters, digits and _, not starting with a digit",
                );
            }
        }
        for host in &raw.allow_hosts {
            match check_host(host) {
                Ok(()) if host == "*" => self.warnings.push(format!(
                    "plugin `{name}` may send HTTP requests to any host (allow_hosts = [\"*\"])"
                )),
                Ok(()) => {}
                Err(why) => self.error(
                    &key("allow_hosts"),
                    Some(host),
                    format!("\"{host}\" is not a host pattern: {why}"),
                    "write a host name, optionally with a port or a leading *. (\"api.example.com\", \"localhost:8080\", \"*.example.org\")",
                ),
            }
        }
        let sha256 = raw.sha256.map(|pin| pin.to_ascii_lowercase());
        if let Some(pin) = &sha256
            && !(pin.len() == 64 && pin.bytes().all(|b| b.is_ascii_hexdigit()))
        {
            self.error(
                &key("sha256"),
                Some(pin),
                format!("\"{pin}\" is not a sha256 (64 hex digits)"),
                "write the digest `sha256sum FILE` prints",
            );
        }
        let mut config = BTreeMap::new();
        for (k, v) in raw.config {
            let value = self.expand(&v.0, &[section, name, "config", &k], strict);
            config.insert(k, value);
        }
        let tool_filter = self.filter(raw.tools.as_deref(), &raw.disabled_tools, &table);
        let calls_at_once = raw.calls_at_once.map(|n| n.0);
        if let Some(n) = calls_at_once
            && n > MAX_CALLS_AT_ONCE
        {
            self.error(
                &key("calls_at_once"),
                Some(&n.to_string()),
                format!("a plugin runs at most {MAX_CALLS_AT_ONCE} calls at once"),
                format!("write a number from 1 to {MAX_CALLS_AT_ONCE}"),
            );
        }
        Some(PluginConfig {
            name: name.to_owned(),
            path,
            source,
            oci,
            namespace,
            limits: PluginLimits {
                memory: raw.memory.map_or(defaults.memory, |b| b.0),
                timeout: raw.timeout.map_or(defaults.timeout, |t| t.0),
                fuel: raw.fuel.map(|f| f.0).or(defaults.fuel),
            },
            allow_dirs,
            allow_env: raw.allow_env,
            allow_hosts: raw.allow_hosts,
            allow_private_addresses: raw.allow_private_addresses,
            sha256,
            config,
            tool_filter,
            disabled: raw.disabled,
            instances,
            store: raw.store.unwrap_or_default(),
            calls_at_once,
            middleware: false,
            uses_bundled: None,
        })
    }

    /// `source = "oci://…"` and its `public_key`, or an error saying what is wrong.
    fn oci_source(
        &mut self,
        name: &str,
        text: &str,
        raw: &raw::PluginEntry,
        strict: bool,
    ) -> Option<crate::oci::OciSource> {
        let key = ["plugins", name, "source"];
        if raw.path.is_some() {
            self.error(
                &key,
                Some(text),
                "an oci:// source is pulled into the cache and served from there, so the plugin \
                 has no path of its own",
                "remove path, or serve the file at path and drop source",
            );
            return None;
        }
        let reference = match crate::oci::OciRef::parse(text) {
            Ok(reference) => reference,
            Err(err) => {
                self.error(
                    &key,
                    Some(text),
                    err.to_string(),
                    "write oci://REGISTRY/REPOSITORY:TAG or oci://REGISTRY/REPOSITORY@sha256:HEX",
                );
                return None;
            }
        };
        let public_key = raw
            .public_key
            .as_deref()
            .and_then(|p| self.path(p, &["plugins", name, "public_key"], strict));
        if let Some(path) = &public_key
            && strict
            && !path.is_file()
        {
            self.error(
                &["plugins", name, "public_key"],
                raw.public_key.as_deref(),
                format!("the public key {} does not exist", path.display()),
                "give the cosign.pub that `wasmgate plugin keygen` wrote",
            );
            return None;
        }
        Some(crate::oci::OciSource {
            reference,
            public_key,
        })
    }

    /// `source`: a folder holding a plugin project, or an error saying what is wrong.
    fn plugin_source(&mut self, name: &str, text: &str, strict: bool) -> Option<PathBuf> {
        let key = ["plugins", name, "source"];
        let path = self.path(text, &key, strict)?;
        let problem = if !path.is_dir() {
            Some((
                format!("the source folder {} does not exist", path.display()),
                "create it with `wasmgate plugin new NAME --dir DIR`, or fix the path \
                 (relative paths are relative to the config file)",
            ))
        } else if !PLUGIN_PROJECT_FILES.iter().any(|f| path.join(f).is_file()) {
            Some((
                format!(
                    "{} is not a plugin project: it holds none of {}",
                    path.display(),
                    PLUGIN_PROJECT_FILES.join(", ")
                ),
                "name the folder `wasmgate plugin new` made (the one with Cargo.toml, app.py or package.json)",
            ))
        } else {
            None
        };
        match problem {
            Some((message, fix)) if strict => {
                self.error(&key, Some(text), message, fix);
                None
            }
            _ => Some(path),
        }
    }

    /// `instance`, `instance_idle` and `max_calls_per_instance`; a key the mode does not
    /// use is a warning, not an error, so that switching modes is a one-line change.
    fn instance_policy(&mut self, name: &str, raw: &raw::PluginEntry) -> InstancePolicy {
        let defaults = InstancePolicy::default();
        let mode = raw.instance.unwrap_or_default();
        let unused = |key: &str, wants: &str| {
            format!(
                "plugin `{name}`: {key} applies to instance = \"{wants}\" only (this plugin's \
                 is \"{}\"); it is ignored",
                mode.as_str()
            )
        };
        if raw.instance_idle.is_some() && mode != InstanceMode::Session {
            self.warnings.push(unused("instance_idle", "session"));
        }
        if raw.max_calls_per_instance.is_some() && mode != InstanceMode::Shared {
            self.warnings
                .push(unused("max_calls_per_instance", "shared"));
        }
        InstancePolicy {
            mode,
            configured: raw.instance.is_some(),
            idle: raw.instance_idle.map_or(defaults.idle, |t| t.0),
            max_calls: raw.max_calls_per_instance.map(|n| n.0 as u64),
        }
    }

    pub(super) fn dir_grant(
        &mut self,
        raw: raw::DirGrant,
        key: &[&str],
        strict: bool,
    ) -> Option<DirGrant> {
        let host = self.path(&raw.host, key, strict)?;
        let host = match host.canonicalize() {
            Ok(host) if host.is_dir() => host,
            Ok(_) => {
                self.error(
                    key,
                    Some(&raw.host),
                    format!("{} is not a directory", host.display()),
                    "grant a directory",
                );
                return None;
            }
            Err(e) => {
                self.error(
                    key,
                    Some(&raw.host),
                    format!("cannot grant {}: {e}", host.display()),
                    "create the directory, or fix host (relative paths are relative to the config file)",
                );
                return None;
            }
        };
        let guest_ok = raw.guest.starts_with('/') && !raw.guest.split('/').any(|part| part == "..");
        if !guest_ok {
            self.error(
                key,
                Some(&raw.guest),
                format!("guest path \"{}\" must be absolute, without ..", raw.guest),
                "write where the plugin sees the directory, e.g. guest = \"/data\"",
            );
            return None;
        }
        Some(DirGrant {
            host,
            guest: raw.guest,
            read_only: raw.mode == raw::DirMode::Ro,
            expose_gateway_files: raw.allow_gateway_files,
        })
    }
}

/// The warning for a plugin file that is not a file: loaded when it appears (`if_missing`
/// says what else may be wrong), unless something else (a folder, a device) is there.
pub(crate) fn plugin_file_warning(name: &str, path: &Path, if_missing: &str) -> String {
    if path.exists() {
        format!(
            "plugin `{name}`: {} is not a regular file; a plugin is a .wasm file",
            path.display()
        )
    } else {
        format!(
            "plugin `{name}`: {} does not exist (yet); it will be loaded when it appears{if_missing}",
            path.display()
        )
    }
}

pub(super) fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `name`, `name:port`, `*.suffix`, `[v6]:port`, or `*` for any host.
pub(super) fn check_host(host: &str) -> Result<(), String> {
    if host == "*" {
        return Ok(());
    }
    if host.is_empty() {
        return Err("it is empty".into());
    }
    if host.contains("://") {
        return Err("leave out the scheme".into());
    }
    if host.contains('/') {
        return Err("leave out the path".into());
    }
    let (name, port) = if let Some(v6) = host.strip_prefix('[') {
        let (addr, rest) = v6
            .split_once(']')
            .ok_or("an IPv6 address needs its closing ]")?;
        if addr.is_empty() || !addr.chars().all(|c| c.is_ascii_hexdigit() || c == ':') {
            return Err("not an IPv6 address".into());
        }
        return match rest.strip_prefix(':') {
            None if rest.is_empty() => Ok(()),
            Some(port) if port.parse::<u16>().is_ok() => Ok(()),
            _ => Err("the port must be a number up to 65535".into()),
        };
    } else {
        match host.rsplit_once(':') {
            Some((name, port)) => (name, Some(port)),
            None => (host, None),
        }
    };
    if let Some(port) = port
        && port.parse::<u16>().is_err()
    {
        return Err("the port must be a number up to 65535".into());
    }
    let name = name.strip_prefix("*.").unwrap_or(name);
    if name.is_empty()
        || !name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.')
    {
        return Err("a host name has letters, digits, - and . (and * only as a leading *.)".into());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_patterns() {
        for ok in [
            "api.example.test",
            "*.example.org",
            "localhost:8080",
            "[::1]:80",
            "10.0.0.1",
            "*",
        ] {
            assert_eq!(check_host(ok), Ok(()), "{ok}");
        }
        for bad in [
            "https://x.test",
            "x.test/path",
            "x.test:http",
            "a*.test",
            "",
            "[::1",
        ] {
            assert!(check_host(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_oci_source_is_parsed_and_its_keys_checked() {
        let base = tempfile::tempdir().unwrap();
        std::fs::write(base.path().join("cosign.pub"), "pem").unwrap();
        let load = |text: &str| {
            crate::config::from_toml_str(text, Path::new("g.toml"), base.path(), &|_| None)
        };
        let config = load(
            "[plugins]\noci_insecure = [\"127.0.0.1:5000\"]\n[plugins.t]\n\
             source = \"oci://127.0.0.1:5000/tools/t:1\"\npublic_key = \"cosign.pub\"\n",
        )
        .unwrap();
        assert_eq!(config.plugins.oci_insecure, ["127.0.0.1:5000"]);
        let entry = &config.plugins.plugins["t"];
        let oci = entry.oci.as_ref().unwrap();
        assert_eq!(oci.reference.to_string(), "oci://127.0.0.1:5000/tools/t:1");
        assert_eq!(
            oci.public_key.as_deref(),
            Some(base.path().join("cosign.pub").as_path())
        );
        assert!(entry.path.is_none() && entry.source.is_none());
        assert!(config.warnings.is_empty(), "{:?}", config.warnings);
        for (text, why) in [
            ("source = \"oci://tools/t:1\"", "the registry comes first"),
            (
                "source = \"oci://r.io/t:1\"\npath = \"t.wasm\"",
                "has no path of its own",
            ),
            ("path = \"t.wasm\"\npublic_key = \"cosign.pub\"", "has none"),
            (
                "source = \"oci://r.io/t:1\"\npublic_key = \"nope.pub\"",
                "does not exist",
            ),
        ] {
            let err = load(&format!("[plugins.t]\n{text}\n"))
                .unwrap_err()
                .to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
        let list = load("[plugins]\noci_insecure = \"x\"\n")
            .unwrap_err()
            .to_string();
        assert!(list.contains("a list of registries"), "{list}");
    }

    #[test]
    fn a_source_must_be_a_plugin_project() {
        let base = std::env::temp_dir().join(format!("wasmgate-source-{}", std::process::id()));
        std::fs::create_dir_all(base.join("tool")).unwrap();
        std::fs::create_dir_all(base.join("empty")).unwrap();
        std::fs::write(base.join("tool/Cargo.toml"), "[package]\nname = \"tool\"\n").unwrap();
        let load =
            |text: &str| crate::config::from_toml_str(text, Path::new("g.toml"), &base, &|_| None);
        let config = load("[plugins.tool]\nsource = \"tool\"\n").unwrap();
        let entry = &config.plugins.plugins["tool"];
        assert_eq!(entry.source.as_deref(), Some(base.join("tool").as_path()));
        assert!(entry.path.is_none());
        assert!(
            config
                .warnings
                .iter()
                .any(|w| w.contains("`wasmgate dev` builds and serves it")),
            "{:?}",
            config.warnings
        );
        let absent = load("[plugins.tool]\nsource = \"nope\"\n")
            .unwrap_err()
            .to_string();
        assert!(absent.contains("does not exist"), "{absent}");
        let empty = load("[plugins.tool]\nsource = \"empty\"\n")
            .unwrap_err()
            .to_string();
        assert!(empty.contains("is not a plugin project"), "{empty}");
        std::fs::remove_dir_all(&base).unwrap();
    }
}
