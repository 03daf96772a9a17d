//! Raw file schemas to the validated model: defaults filled in, `${VAR}` and `~`
//! expanded, paths made absolute, globs compiled, and every problem collected with the
//! line of the key it concerns.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use globset::GlobSetBuilder;

use super::error::{ConfigError, Diagnostic, line_col, locate};
use super::model::*;
use super::raw;
use crate::names::{namespace_for, valid_namespace};

mod expand;
mod http;
mod limits;
mod middleware;
mod oauth;
mod oauth_client;
mod plugins;
mod profiles;
mod servers;
mod telemetry;

pub use http::{ENV_TOKEN, EnvTokenError, MIN_TOKEN, check_listen, env_token};
pub(crate) use plugins::plugin_file_warning;
pub(crate) use telemetry::telemetry_from_env;

/// Looks up a variable of the gateway's environment. Passed in so tests are hermetic.
pub type EnvLookup<'a> = &'a dyn Fn(&str) -> Option<String>;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    Toml,
    Json,
}

impl Format {
    /// By the extension (`.toml`, `.json`); for any other name, text whose first non-blank
    /// character is `{` is JSON, anything else TOML.
    pub fn detect(path: &Path, text: &str) -> Format {
        match path.extension().and_then(|e| e.to_str()) {
            Some(e) if e.eq_ignore_ascii_case("toml") => Format::Toml,
            Some(e) if e.eq_ignore_ascii_case("json") => Format::Json,
            _ if text.trim_start().starts_with('{') => Format::Json,
            _ => Format::Toml,
        }
    }

    /// `[servers]` is `"mcpServers"` in JSON.
    pub fn servers_key(self) -> &'static str {
        match self {
            Format::Toml => "servers",
            Format::Json => "mcpServers",
        }
    }
}

/// The file being validated, for locating keys and resolving relative paths.
pub(crate) struct Source<'a> {
    /// As named to the loader; used in messages.
    pub file: &'a Path,
    pub text: &'a str,
    pub format: Format,
    /// Absolute directory relative paths are resolved against.
    pub base_dir: &'a Path,
    /// Absolute path stored in `Config::source`; `None` for text without a file.
    pub source: Option<PathBuf>,
    /// Plugins whose file the command line gives (`--plugin`): their tables need no path.
    pub given_plugins: &'a [String],
}

pub(crate) const DEFAULT_SEPARATOR: &str = "__";

pub(crate) fn default_gateway() -> GatewayConfig {
    GatewayConfig {
        name: "wasmgate".into(),
        separator: DEFAULT_SEPARATOR.into(),
        timeout: Duration::from_secs(60),
        startup_timeout: Duration::from_secs(10),
        init_timeout: Duration::from_secs(60),
        page_size: 100,
        events_file: None,
        event_buffer: 1000,
        log_level: "info".into(),
        max_restarts: 5,
        shutdown_grace: Duration::from_secs(2),
        auth_dir: None,
    }
}

/// Half the machine's memory: `[plugins] total_memory` when the config sets none.
pub(crate) fn default_total_memory() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let (pages, page) = unsafe {
        (
            libc::sysconf(libc::_SC_PHYS_PAGES),
            libc::sysconf(libc::_SC_PAGESIZE),
        )
    };
    match (u64::try_from(pages), u64::try_from(page)) {
        (Ok(pages), Ok(page)) if pages > 0 && page > 0 => pages * page / 2,
        _ => 4 << 30,
    }
}

/// `$XDG_CACHE_HOME/wasmgate`, else `$HOME/.cache/wasmgate`, else none.
pub(crate) fn default_cache_dir(env: EnvLookup<'_>) -> Option<PathBuf> {
    let absolute = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_CACHE_HOME")
        .map(|dir| dir.join("wasmgate"))
        .or_else(|| absolute("HOME").map(|home| home.join(".cache").join("wasmgate")))
}

/// `$XDG_DATA_HOME/wasmgate`, else `$HOME/.local/share/wasmgate`, else none: where the
/// plugins' key-value stores live when `[plugins] data_dir` is not set.
pub fn default_data_dir(env: EnvLookup<'_>) -> Option<PathBuf> {
    let absolute = |name: &str| env(name).map(PathBuf::from).filter(|p| p.is_absolute());
    absolute("XDG_DATA_HOME")
        .map(|dir| dir.join("wasmgate"))
        .or_else(|| absolute("HOME").map(|home| home.join(".local/share/wasmgate")))
}

pub(crate) fn from_toml(
    raw: raw::TomlFile,
    src: &Source<'_>,
    env: EnvLookup<'_>,
) -> Result<Config, ConfigError> {
    let mut cx = Ctx::new(src, env);
    let gateway = cx.gateway(raw.gateway);
    let servers = raw.servers.into_iter().filter_map(|(name, server)| {
        let server = cx.server(&name, server, &gateway)?;
        Some((name, server))
    });
    let servers: BTreeMap<_, _> = servers.collect();
    let mut plugins = cx.plugins(raw.plugins);
    let middleware = cx.middleware(raw.middleware, &mut plugins);
    let profiles = cx.profiles(raw.profiles);
    cx.profile_backends(&profiles, &servers, &plugins);
    let http = cx.http(raw.http, &profiles);
    let telemetry = cx.telemetry(raw.telemetry);
    let limits = cx.limits(raw.limits);
    let mut config = cx.finish(gateway, servers, plugins)?;
    config.http = http;
    config.telemetry = telemetry;
    config.middleware = middleware;
    config.limits = limits;
    config.profiles = (profiles.into_iter())
        .map(|(name, profile)| (name, std::sync::Arc::new(profile)))
        .collect();
    Ok(config)
}

pub(crate) fn from_client(
    raw: raw::ClientFile,
    src: &Source<'_>,
    env: EnvLookup<'_>,
) -> Result<Config, ConfigError> {
    let mut cx = Ctx::new(src, env);
    if raw.mcp_servers.is_none() && raw.servers.is_some() {
        cx.warnings.push(
            "this file has `servers` (the layout of VS Code's mcp.json) but no `mcpServers`; \
             its servers are not read: rename the key to `mcpServers`"
                .into(),
        );
    }
    let gateway = cx.gateway(raw.wasmgate.unwrap_or_default());
    let mut servers = BTreeMap::new();
    for (name, entry) in raw.mcp_servers.unwrap_or_default() {
        if let Some(server) = cx
            .client_server(&name, entry)
            .and_then(|s| cx.server(&name, s, &gateway))
        {
            servers.insert(name, server);
        }
    }
    let plugins = cx.plugins(raw.plugins.unwrap_or_default());
    let env_token = cx.env_token();
    let telemetry = cx.telemetry(raw::Telemetry::default());
    let mut config = cx.finish(gateway, servers, plugins)?;
    config.telemetry = telemetry;
    config.http.tokens.extend(env_token);
    Ok(config)
}

struct Ctx<'a> {
    src: &'a Source<'a>,
    env: EnvLookup<'a>,
    errors: Vec<Diagnostic>,
    warnings: Vec<String>,
}

/// A namespace claimed by a server or plugin, for the duplicate check.
struct Claim {
    namespace: String,
    owner: String,
    key: Vec<String>,
}

impl<'a> Ctx<'a> {
    fn new(src: &'a Source<'a>, env: EnvLookup<'a>) -> Self {
        Ctx {
            src,
            env,
            errors: Vec::new(),
            warnings: Vec::new(),
        }
    }

    /// `[gateway]` is `"wasmgate"` in JSON, `[servers]` is `"mcpServers"`.
    fn gateway_key(&self) -> &'static str {
        match self.src.format {
            Format::Toml => "gateway",
            Format::Json => "wasmgate",
        }
    }

    fn servers_key(&self) -> &'static str {
        self.src.format.servers_key()
    }

    fn error(
        &mut self,
        key: &[&str],
        needle: Option<&str>,
        message: impl Into<String>,
        fix: impl Into<String>,
    ) {
        let (line, column) = match locate(self.src.text, key, needle) {
            Some(offset) => {
                let (line, column) = line_col(self.src.text, offset);
                (Some(line), Some(column))
            }
            None => (None, None),
        };
        self.errors.push(Diagnostic {
            file: self.src.file.to_path_buf(),
            line,
            column,
            key: (!key.is_empty()).then(|| key.join(".")),
            message: message.into(),
            fix: Some(fix.into()),
        });
    }

    fn gateway(&mut self, raw: raw::Gateway) -> GatewayConfig {
        let g = self.gateway_key();
        let mut out = default_gateway();
        if let Some(name) = raw.name {
            if name.trim().is_empty() {
                self.error(
                    &[g, "name"],
                    None,
                    "the name is empty",
                    "write a name, or remove the key for \"wasmgate\"",
                );
            } else {
                out.name = name;
            }
        }
        if let Some(separator) = raw.separator {
            if separator.is_empty() {
                self.error(
                    &[g, "separator"],
                    None,
                    "the separator is empty",
                    "write \"__\" (the default)",
                );
            } else if let Some(bad) = separator
                .chars()
                .find(|c| !(c.is_ascii_alphanumeric() || "_.:-".contains(*c)))
            {
                self.error(
                    &[g, "separator"],
                    None,
                    format!("the separator contains `{bad}`; tool names may only use letters, digits and _ . : -"),
                    "write \"__\" (the default)",
                );
            } else {
                if separator.contains([':', '.']) {
                    self.warnings.push(format!(
                        "separator \"{separator}\": some clients reject tool names with `:` or `.` \
                         (a common rule is ^[A-Za-z0-9_-]{{1,64}}$); \"__\" works everywhere"
                    ));
                }
                out.separator = separator;
            }
        }
        if let Some(t) = raw.timeout {
            out.timeout = t.0;
        }
        if let Some(t) = raw.startup_timeout {
            out.startup_timeout = t.0;
        }
        if let Some(t) = raw.init_timeout {
            out.init_timeout = t.0;
        }
        if let Some(n) = raw.page_size {
            out.page_size = n.0;
        }
        if let Some(events) = raw.events {
            out.events_file = self.path(&events, &[g, "events"], true);
        }
        match raw.event_buffer {
            Some(0) => self.error(
                &[g, "event_buffer"],
                None,
                "event_buffer = 0 would keep no events: get_events would always answer empty",
                "keep at least 1 (the default is 1000); `events` writes them to a file as well",
            ),
            Some(n) => out.event_buffer = n,
            None => {}
        }
        if let Some(level) = raw.log_level {
            match crate::telemetry::check_filter(&level) {
                Ok(()) => out.log_level = level,
                Err(e) => self.error(
                    &[g, "log_level"],
                    None,
                    format!("invalid log level \"{level}\": {e}"),
                    crate::telemetry::FILTER_HELP,
                ),
            }
        }
        if let Some(n) = raw.max_restarts {
            out.max_restarts = n;
        }
        if let Some(g) = raw.shutdown_grace {
            out.shutdown_grace = g.0;
        }
        if let Some(dir) = raw.auth_dir {
            out.auth_dir = self.path(&dir, &[g, "auth_dir"], true);
        }
        out
    }

    /// An explicit namespace must be valid; a default one (the key) is made valid.
    fn namespace(
        &mut self,
        name: &str,
        explicit: Option<String>,
        table: &[&str],
        kind: &str,
    ) -> String {
        match explicit {
            Some(ns) => {
                if !valid_namespace(&ns) {
                    let key: Vec<&str> = table.iter().copied().chain(["namespace"]).collect();
                    self.error(
                        &key,
                        None,
                        format!("namespace \"{ns}\" may only contain letters, digits, _ and -"),
                        "tool names must pass the clients' rules; write e.g. namespace = \"my_server\"",
                    );
                }
                ns
            }
            None if valid_namespace(name) => name.to_owned(),
            None => {
                let fixed = namespace_for(name);
                self.warnings.push(format!(
                    "{kind} `{name}`: its name is not a valid namespace, so its tools are prefixed \"{fixed}\"; set `namespace` to choose another"
                ));
                fixed
            }
        }
    }

    fn filter(&mut self, allow: Option<&[String]>, deny: &[String], table: &[&str]) -> ToolFilter {
        let allow = allow.filter(|patterns| !patterns.is_empty());
        let allow_key: Vec<&str> = table.iter().copied().chain(["tools"]).collect();
        let deny_key: Vec<&str> = table.iter().copied().chain(["disabled_tools"]).collect();
        ToolFilter {
            allow: allow.and_then(|patterns| self.globs(patterns, &allow_key)),
            deny: (!deny.is_empty())
                .then(|| self.globs(deny, &deny_key))
                .flatten(),
            allow_patterns: allow.map(<[String]>::to_vec).unwrap_or_default(),
            deny_patterns: deny.to_vec(),
        }
    }

    fn globs(&mut self, patterns: &[String], key: &[&str]) -> Option<globset::GlobSet> {
        self.globs_built(patterns, key, false)
    }

    /// [`Self::globs`] for URIs: `*` and `?` do not match `/` (`**` does).
    fn uri_globs(&mut self, patterns: &[String], key: &[&str]) -> Option<globset::GlobSet> {
        self.globs_built(patterns, key, true)
    }

    fn globs_built(
        &mut self,
        patterns: &[String],
        key: &[&str],
        literal_separator: bool,
    ) -> Option<globset::GlobSet> {
        let mut builder = GlobSetBuilder::new();
        let mut ok = true;
        for pattern in patterns {
            let glob = globset::GlobBuilder::new(pattern)
                .literal_separator(literal_separator)
                .build();
            match glob {
                Ok(glob) => {
                    builder.add(glob);
                }
                Err(e) => {
                    ok = false;
                    self.error(
                        key,
                        Some(pattern),
                        format!("invalid glob \"{pattern}\": {}", e.kind()),
                        "fix the pattern: * matches any characters, ? one, [abc] one of a set, {a,b} either",
                    );
                }
            }
        }
        if !ok {
            return None;
        }
        match builder.build() {
            Ok(set) => Some(set),
            Err(e) => {
                self.error(
                    key,
                    None,
                    format!("the patterns do not compile: {e}"),
                    "simplify the patterns",
                );
                None
            }
        }
    }

    fn finish(
        mut self,
        gateway: GatewayConfig,
        servers: BTreeMap<String, ServerConfig>,
        plugins: PluginsConfig,
    ) -> Result<Config, ConfigError> {
        let s = self.servers_key();
        let claims = servers
            .values()
            .filter(|server| !server.disabled)
            .map(|server| Claim {
                namespace: server.namespace.clone(),
                owner: format!("server `{}`", server.name),
                key: vec![s.into(), server.name.clone()],
            })
            .chain(
                plugins
                    .plugins
                    .values()
                    .filter(|plugin| !plugin.disabled && !plugin.middleware)
                    .map(|plugin| Claim {
                        namespace: plugin.namespace.clone(),
                        owner: format!("plugin `{}`", plugin.name),
                        key: vec!["plugins".into(), plugin.name.clone()],
                    }),
            );
        let mut seen: BTreeMap<String, String> = BTreeMap::new();
        for claim in claims.collect::<Vec<_>>() {
            if claim.namespace.is_empty() {
                continue;
            }
            if let Some(first) = seen.get(&claim.namespace) {
                let message = format!(
                    "namespace \"{}\" is used by both {first} and {}; their tool names would collide",
                    claim.namespace, claim.owner
                );
                let mut key: Vec<&str> = claim.key.iter().map(String::as_str).collect();
                key.push("namespace");
                self.error(
                    &key,
                    None,
                    message,
                    "give one of them another namespace = \"...\"",
                );
            } else {
                seen.insert(claim.namespace, claim.owner);
            }
        }
        for found in super::exposure::exposures(self.src.source.as_deref(), &gateway, &plugins) {
            let key = ["plugins", found.plugin.as_str(), "allow_dirs"];
            self.error(&key, None, found.message, found.fix);
        }
        if !self.errors.is_empty() {
            self.errors.sort_by_key(|d| d.line.unwrap_or(usize::MAX));
            return Err(ConfigError::Invalid(self.errors));
        }
        Ok(Config {
            gateway,
            servers,
            plugins,
            http: HttpConfig::default(),
            profiles: BTreeMap::new(),
            middleware: Vec::new(),
            telemetry: TelemetryConfig::default(),
            limits: Default::default(),
            source: self.src.source.clone(),
            warnings: self.warnings,
        })
    }
}

/// Whether `name` is one of the plugins built into this binary.
pub(crate) fn is_bundled(name: &str) -> bool {
    crate::bundled::BUNDLED_PLUGINS
        .iter()
        .any(|(bundled, _)| *bundled == name)
}
