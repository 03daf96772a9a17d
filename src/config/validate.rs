//! Raw file schemas to the validated model: defaults filled in, `${VAR}` and `~`
//! expanded, paths made absolute, globs compiled, and every problem collected with the
//! line of the key it concerns.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use globset::{Glob, GlobSetBuilder};

use super::error::{ConfigError, Diagnostic, line_col, locate};
use super::model::*;
use super::raw;

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
    let plugins = cx.plugins(raw.plugins);
    cx.finish(gateway, servers, plugins)
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
    cx.finish(gateway, servers, plugins)
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

    /// Expands `${VAR}`, `${VAR:-default}`, `${env:VAR}`; `$${` is a literal `${`. With
    /// `strict` false (a disabled server) an unset variable is only a warning.
    fn expand(&mut self, text: &str, key: &[&str], strict: bool) -> String {
        match expand_vars(text, self.env) {
            Ok(expanded) => expanded,
            Err(ExpandError::Unset(name)) if !strict => {
                self.warnings.push(format!(
                    "{}: environment variable {name} is not set (the entry is disabled, so this is not an error yet)",
                    key.join(".")
                ));
                text.to_owned()
            }
            Err(ExpandError::Unset(name)) => {
                self.error(
                    key,
                    Some(text),
                    format!("environment variable {name} is not set"),
                    format!("set it, or write ${{{name}:-default}}"),
                );
                text.to_owned()
            }
            Err(ExpandError::Malformed(reference)) => {
                self.error(
                    key,
                    Some(text),
                    format!("`{reference}` is not a variable reference this gateway understands"),
                    "write ${NAME} or ${NAME:-default}, with NAME made of letters, digits and _; write $${ for a literal ${",
                );
                text.to_owned()
            }
        }
    }

    /// Expands variables and `~`, and makes the path absolute against the config's directory.
    fn path(&mut self, text: &str, key: &[&str], strict: bool) -> Option<PathBuf> {
        if text.trim().is_empty() {
            self.error(
                key,
                None,
                "the path is empty",
                "write a path, or remove the key",
            );
            return None;
        }
        let expanded = self.expand(text, key, strict);
        let path = self.tilde(&expanded, key)?;
        let absolute = if path.is_absolute() {
            path
        } else {
            self.src.base_dir.join(path)
        };
        Some(
            absolute
                .components()
                .filter(|c| *c != Component::CurDir)
                .collect(),
        )
    }

    fn tilde(&mut self, text: &str, key: &[&str]) -> Option<PathBuf> {
        let rest = match text.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') || rest.starts_with('\\') => {
                rest
            }
            _ => return Some(PathBuf::from(text)),
        };
        match (self.env)("HOME").filter(|h| !h.is_empty()) {
            Some(home) => Some(PathBuf::from(format!("{home}{rest}"))),
            None => {
                self.error(
                    key,
                    Some(text),
                    "cannot expand `~`: HOME is not set",
                    "write an absolute path",
                );
                None
            }
        }
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
        out
    }

    /// An `mcpServers` entry to our server schema; `None` when it is skipped.
    fn client_server(&mut self, name: &str, entry: raw::ClientServer) -> Option<raw::Server> {
        let s = self.servers_key();
        let transport = entry
            .transport
            .as_deref()
            .or(entry.transport_type.as_deref());
        let remote = match transport {
            None | Some("stdio") => false,
            Some(
                "http" | "sse" | "streamable-http" | "streamableHttp" | "streamable_http" | "ws"
                | "websocket",
            ) => true,
            Some(other) => {
                let field = if entry.transport.is_some() {
                    "type"
                } else {
                    "transportType"
                };
                self.error(
                    &[s, name, field],
                    None,
                    format!("unknown transport \"{other}\""),
                    "write \"stdio\" for a server the gateway starts, or remove the key",
                );
                return None;
            }
        };
        if remote {
            self.warnings.push(format!(
                "server `{name}` is remote (type \"{}\"); remote servers are not supported yet, skipped",
                transport.unwrap_or_default()
            ));
            return None;
        }
        if (entry.url.is_some() || entry.headers.is_some()) && entry.command.is_empty() {
            self.warnings.push(format!(
                "server `{name}` is remote (url); remote servers are not supported yet, skipped"
            ));
            return None;
        }
        if entry.url.is_some() {
            self.warnings.push(format!(
                "server `{name}`: `url` is ignored because the entry has a `command`"
            ));
        }
        if let Some(file) = &entry.env_file {
            self.warnings.push(format!(
                "server `{name}`: envFile \"{file}\" is not read by wasmgate; copy the variables into `env`"
            ));
        }
        if entry.timeout == Some(raw::ClientTimeout::ClientNumber) {
            self.warnings.push(format!(
                "server `{name}`: a numeric `timeout` is ignored (clients differ on its unit: \
                 seconds or milliseconds); the gateway's timeout applies. Write \"timeout\": \"30s\" \
                 for wasmgate"
            ));
        }
        let mut disabled_tools = entry.disabled_tools;
        disabled_tools.extend(entry.client_disabled_tools);
        Some(raw::Server {
            command: entry.command,
            args: entry.args,
            env: entry.env,
            cwd: entry.cwd,
            inherit_env: entry.inherit_env,
            namespace: entry.namespace,
            timeout: match entry.timeout {
                Some(raw::ClientTimeout::Ours(d)) => Some(raw::Timeout(d)),
                Some(raw::ClientTimeout::ClientNumber) | None => None,
            },
            tool_timeouts: entry.tool_timeouts,
            tools: entry.tools,
            disabled_tools,
            disabled: entry.disabled,
            url: None,
            headers: None,
        })
    }

    fn server(
        &mut self,
        name: &str,
        raw: raw::Server,
        gateway: &GatewayConfig,
    ) -> Option<ServerConfig> {
        let s = self.servers_key();
        if raw.url.is_some() || raw.headers.is_some() {
            self.warnings.push(format!(
                "server `{name}` is remote (url); remote servers are not supported yet, skipped"
            ));
            return None;
        }
        let strict = !raw.disabled;
        let command = self.expand(&raw.command, &[s, name, "command"], strict);
        let command = match command.strip_prefix("~/") {
            Some(rest) => match (self.env)("HOME") {
                Some(home) => format!("{home}/{rest}"),
                None => command,
            },
            None => command,
        };
        if command.trim().is_empty() {
            self.error(
                &[s, name, "command"],
                None,
                format!("server `{name}` has no command"),
                "set command to the program that starts the MCP server, e.g. command = \"uvx\"",
            );
        }
        let args: Vec<String> = raw
            .args
            .iter()
            .map(|a| self.expand(a, &[s, name, "args"], strict))
            .collect();
        let mut env = BTreeMap::new();
        for (key, value) in &raw.env {
            if key.is_empty() || key.contains(['=', '\0']) {
                self.error(
                    &[s, name, "env"],
                    Some(key),
                    format!("`{key}` is not a valid environment variable name"),
                    "use letters, digits and _ (no = sign)",
                );
                continue;
            }
            let value = self.expand(value, &[s, name, "env", key], strict);
            env.insert(key.clone(), value);
        }
        if self.runs_this_config(&command, &args, &env) {
            self.warnings.push(format!(
                "server `{name}` runs wasmgate with this same configuration; skipped, as it would start itself forever"
            ));
            return None;
        }
        let cwd = raw
            .cwd
            .as_deref()
            .and_then(|cwd| self.path(cwd, &[s, name, "cwd"], strict));
        if let Some(cwd) = &cwd
            && !cwd.is_dir()
        {
            self.warnings.push(format!(
                "server `{name}`: cwd {} is not a directory; the server will fail to start",
                cwd.display()
            ));
        }
        let namespace = self.namespace(name, raw.namespace, &[s, name], "server");
        let mut tool_timeouts = BTreeMap::new();
        for (tool, t) in raw.tool_timeouts {
            tool_timeouts.insert(tool, t.0);
        }
        let tool_filter = self.filter(raw.tools.as_deref(), &raw.disabled_tools, &[s, name]);
        Some(ServerConfig {
            name: name.to_owned(),
            command,
            args,
            args_as_written: raw.args.clone(),
            env,
            inherit_env: raw.inherit_env,
            cwd,
            namespace,
            timeout: raw.timeout.map_or(gateway.timeout, |t| t.0),
            tool_timeouts,
            tool_filter,
            disabled: raw.disabled,
        })
    }

    /// Whether this entry is the gateway itself pointed at the file being loaded, as in a
    /// Claude Desktop config that lists wasmgate next to the servers it should gather.
    /// (A wrapper such as `sh -c "wasmgate ..."` is caught when the started gateway sees
    /// its config among its parents': see `crate::nesting`.)
    fn runs_this_config(
        &self,
        command: &str,
        args: &[String],
        env: &BTreeMap<String, String>,
    ) -> bool {
        let program = command.rsplit(['/', '\\']).next().unwrap_or(command);
        let program = program.strip_suffix(".exe").unwrap_or(program);
        let Some(this) = self.src.file.file_name() else {
            return false;
        };
        // `--config=FILE` too, and the file in the variable the `--config` flag reads.
        let names_this = |a: &str| {
            let file = a.split_once('=').map_or(a, |(_, value)| value);
            Path::new(file).file_name() == Some(this)
        };
        program == "wasmgate"
            && (args.iter().any(|a| names_this(a))
                || env.get("WASMGATE_CONFIG").is_some_and(|c| names_this(c)))
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
        let mut builder = GlobSetBuilder::new();
        let mut ok = true;
        for pattern in patterns {
            match Glob::new(pattern) {
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

    fn plugins(&mut self, raw: raw::Plugins) -> PluginsConfig {
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
        let defaults = PluginLimits {
            memory: raw.memory.unwrap_or(PluginLimits::default().memory),
            timeout: raw.timeout.unwrap_or(PluginLimits::default().timeout),
            fuel: raw.fuel.or(PluginLimits::default().fuel),
        };
        let bundled = raw.bundled.unwrap_or(false);
        let mut plugins = BTreeMap::new();
        for (name, entry) in raw.entries {
            if let Some(plugin) = self.plugin(&name, entry, dir.as_deref(), bundled, defaults) {
                plugins.insert(name, plugin);
            }
        }
        PluginsConfig {
            dir,
            watch: raw.watch.unwrap_or(true),
            cache_dir,
            bundled,
            limits: defaults,
            compile_timeout: raw.compile_timeout.unwrap_or(DEFAULT_COMPILE_TIMEOUT),
            total_memory: raw.total_memory.unwrap_or_else(default_total_memory),
            plugins,
        }
    }

    fn plugin(
        &mut self,
        name: &str,
        raw: raw::PluginEntry,
        dir: Option<&Path>,
        bundled: bool,
        defaults: PluginLimits,
    ) -> Option<PluginConfig> {
        let table = ["plugins", name];
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
        match (raw.path.is_some(), dir) {
            _ if given => {}
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
        let namespace = self.namespace(name, raw.namespace, &table, "plugin");
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
            let value = self.expand(&v.0, &["plugins", name, "config", &k], strict);
            config.insert(k, value);
        }
        let tool_filter = self.filter(raw.tools.as_deref(), &raw.disabled_tools, &table);
        Some(PluginConfig {
            name: name.to_owned(),
            path,
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
        })
    }

    fn dir_grant(&mut self, raw: raw::DirGrant, key: &[&str], strict: bool) -> Option<DirGrant> {
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
                    .filter(|plugin| !plugin.disabled)
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
            source: self.src.source.clone(),
            warnings: self.warnings,
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

/// The namespace a backend gets by default: its name, with every character clients
/// refuse in a tool name made `_`.
pub fn namespace_for(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// Whether `name` is one of the plugins built into this binary.
pub(crate) fn is_bundled(name: &str) -> bool {
    crate::bundled::BUNDLED_PLUGINS
        .iter()
        .any(|(bundled, _)| *bundled == name)
}

pub(crate) fn valid_namespace(ns: &str) -> bool {
    ns.chars()
        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

fn valid_env_name(name: &str) -> bool {
    let mut chars = name.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `name`, `name:port`, `*.suffix`, `[v6]:port`, or `*` for any host.
fn check_host(host: &str) -> Result<(), String> {
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

#[derive(Debug, PartialEq, Eq)]
enum ExpandError {
    Unset(String),
    Malformed(String),
}

fn expand_vars(text: &str, env: EnvLookup<'_>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if let Some(after) = rest.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        let Some(after) = rest.strip_prefix("${") else {
            out.push('$');
            rest = &rest[1..];
            continue;
        };
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Malformed(rest.to_owned()));
        };
        let inner = &after[..end];
        let reference = &rest[..end + 3];
        let body = inner.strip_prefix("env:").unwrap_or(inner);
        let (name, default) = match body.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (body, None),
        };
        if !valid_env_name(name) {
            return Err(ExpandError::Malformed(reference.to_owned()));
        }
        match (
            env(name).filter(|v| !v.is_empty() || default.is_none()),
            default,
        ) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(ExpandError::Unset(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("secret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_variables_defaults_and_escapes() {
        assert_eq!(expand_vars("a ${TOKEN} b", &env).unwrap(), "a secret b");
        assert_eq!(expand_vars("${env:TOKEN}", &env).unwrap(), "secret");
        assert_eq!(expand_vars("${NOPE:-fallback}", &env).unwrap(), "fallback");
        assert_eq!(expand_vars("${EMPTY:-fallback}", &env).unwrap(), "fallback");
        assert_eq!(expand_vars("${EMPTY}", &env).unwrap(), "");
        assert_eq!(
            expand_vars("$${TOKEN} $HOME 5$", &env).unwrap(),
            "${TOKEN} $HOME 5$"
        );
        assert_eq!(
            expand_vars("${NOPE}", &env),
            Err(ExpandError::Unset("NOPE".into()))
        );
        assert_eq!(
            expand_vars("${input:key}", &env),
            Err(ExpandError::Malformed("${input:key}".into()))
        );
        assert_eq!(
            expand_vars("x ${OPEN", &env),
            Err(ExpandError::Malformed("${OPEN".into()))
        );
    }

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
}
