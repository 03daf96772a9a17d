//! The validated configuration: what the rest of the gateway reads. Built from the
//! raw file schemas in `config::raw` by `config::load`; every field has its default
//! filled in and every path is absolute.

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use globset::GlobSet;

use super::limits::{BreakerConfig, LimitsConfig};

/// The whole gateway configuration.
#[derive(Debug, Clone)]
pub struct Config {
    pub gateway: GatewayConfig,
    /// Subprocess MCP servers by their key. Disabled servers are kept (with
    /// `disabled = true`) so that `check` and `gateway_status` can show them.
    pub servers: BTreeMap<String, ServerConfig>,
    pub plugins: PluginsConfig,
    pub http: HttpConfig,
    /// `[profiles.NAME]`: subsets of the catalog served at `/mcp/NAME` (shared: a request
    /// holds its client's for as long as it runs).
    pub profiles: BTreeMap<String, Arc<Profile>>,
    /// `[[middleware]]`: the chain, in order. Each entry's component is loaded as a plugin
    /// of the same name (`plugins.plugins[name]`, with `middleware` set).
    pub middleware: Vec<MiddlewareEntry>,
    /// `[telemetry]`: where traces go, if anywhere.
    pub telemetry: TelemetryConfig,
    /// `[limits]`: rate limits.
    pub limits: LimitsConfig,
    /// The file this came from; `None` for the embedded default.
    pub source: Option<PathBuf>,
    /// Things that are not errors but that a user should hear about
    /// (e.g. a Claude Desktop entry with a `url`, skipped until remote servers land).
    pub warnings: Vec<String>,
}

/// `[telemetry]`, with `OTEL_EXPORTER_OTLP_ENDPOINT` and `OTEL_SERVICE_NAME` filling in what
/// the file leaves out. Tracing is off without an endpoint.
#[derive(Debug, Clone, PartialEq)]
pub struct TelemetryConfig {
    /// The OTLP/HTTP collector's base URL (`http://host:4318`); spans go to `/v1/traces`.
    pub otlp_endpoint: Option<String>,
    /// The share of new traces kept, 0.0 to 1.0 (default 1.0); a continued trace follows
    /// its parent's decision.
    pub sample_ratio: f64,
    /// `service.name` of the spans (default "wasmgate").
    pub service_name: String,
}

impl Default for TelemetryConfig {
    fn default() -> Self {
        TelemetryConfig {
            otlp_endpoint: None,
            sample_ratio: 1.0,
            service_name: "wasmgate".into(),
        }
    }
}

#[derive(Debug, Clone)]
pub struct GatewayConfig {
    /// `serverInfo.name` (default "wasmgate").
    pub name: String,
    /// Between namespace and tool or prompt name (default "__").
    pub separator: String,
    /// Default per-call timeout for servers (default 60 s).
    pub timeout: Duration,
    /// How long list requests wait for servers still starting (default 10 s).
    pub startup_timeout: Duration,
    /// How long a server gets to answer `initialize` and its first lists before the start
    /// counts as failed (default 60 s: a first `npx -y` or `uvx` start downloads).
    pub init_timeout: Duration,
    /// Items per page of the gateway's own lists (default 100).
    pub page_size: usize,
    /// JSON-lines file events are appended to (default none).
    pub events_file: Option<PathBuf>,
    /// Events kept in memory for `get_events` (default 1000).
    pub event_buffer: usize,
    /// tracing filter directive (default "info"); `--log-level` overrides it.
    pub log_level: String,
    /// Restarts of a crashed server before it is marked failed (default 5).
    pub max_restarts: u32,
    /// Between closing a server's stdin, SIGTERM and SIGKILL (default 2 s).
    pub shutdown_grace: Duration,
    /// `[gateway] auth_dir`: where remote servers' OAuth tokens are kept (see
    /// `oauth_client::auth_dir` for the defaults).
    pub auth_dir: Option<PathBuf>,
}

/// `[http]`: the HTTP front (`wasmgate serve --http ADDR` or `listen`).
#[derive(Debug, Clone)]
pub struct HttpConfig {
    pub listen: Option<String>,
    pub tokens: Vec<HttpToken>,
    /// Serve a non-loopback address without tokens.
    pub allow_unauthenticated: bool,
    /// `Origin` values accepted; `None`: the localhost names.
    pub allowed_origins: Option<Vec<String>>,
    /// `Host` names accepted; `None`: the localhost names when listening on loopback, any otherwise.
    pub allowed_hosts: Option<Vec<String>>,
    pub max_body: usize,
    pub max_sessions: usize,
    pub session_idle_timeout: Duration,
    /// Between keep-alive comments on an idle event stream.
    pub keep_alive: Duration,
    /// For a whole request head (and TLS handshake) on a connection serving no request.
    pub header_timeout: Duration,
    /// A kept-alive connection without a request for this long is closed.
    pub idle_timeout: Duration,
    /// Connections open at once (lowered to fit the descriptor limit when serving).
    pub max_connections: usize,
    pub max_requests_per_session: usize,
    /// Requests in flight over all sessions at once.
    pub max_requests: usize,
    /// Sessions open at once with one token.
    pub max_sessions_per_token: usize,
    /// Runtime threads serving HTTP; `None`: one per core.
    pub threads: Option<usize>,
    /// Certificate chain and key (PEM) for HTTPS.
    pub tls: Option<(PathBuf, PathBuf)>,
    pub replicas: Option<Replicas>,
    /// `[http.oauth]`: bearer tokens from an authorization server, beside `tokens`.
    pub oauth: Option<Arc<OauthFront>>,
}

/// `[http.oauth]`, validated.
#[derive(Clone)]
pub struct OauthFront {
    /// The authorization server's issuer URL, as its tokens' `iss` says.
    pub issuer: String,
    /// The gateway's public base URL, without a trailing `/`.
    pub resource: String,
    pub jwks_uri: Option<String>,
    pub introspection: Option<OauthIntrospection>,
    /// Scopes every token must carry.
    pub scopes: Vec<String>,
    /// A scope that makes the principal the operator.
    pub operator_scope: Option<String>,
    pub ca_file: Option<PathBuf>,
    /// The claim that names the principal.
    pub claim: String,
    pub jwks_refresh: Duration,
    pub rules: Vec<OauthRule>,
}

impl std::fmt::Debug for OauthFront {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OauthFront")
            .field("issuer", &self.issuer)
            .field("resource", &self.resource)
            .field("jwks_uri", &self.jwks_uri)
            .field("introspection", &self.introspection)
            .field("scopes", &self.scopes)
            .field("operator_scope", &self.operator_scope)
            .field("claim", &self.claim)
            .field("rules", &self.rules)
            .finish_non_exhaustive()
    }
}

/// RFC 7662 introspection: the endpoint and the gateway's client credentials.
#[derive(Clone)]
pub struct OauthIntrospection {
    pub endpoint: String,
    pub client_id: String,
    pub client_secret: String,
}

impl std::fmt::Debug for OauthIntrospection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OauthIntrospection")
            .field("endpoint", &self.endpoint)
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

/// A token whose `claim` is (or, for a list, holds) `value` gets `profiles` (empty: all)
/// and, with `operator`, the operator's access.
#[derive(Clone, Debug)]
pub struct OauthRule {
    pub claim: String,
    pub value: String,
    pub profiles: Vec<String>,
    pub operator: bool,
}

/// `[http.replicas]`: the other gateways serving the same clients, which a 2026-07-28
/// retry may reach instead of the one holding its call.
#[derive(Clone)]
pub struct Replicas {
    /// This replica's name, in the `requestState` handles it issues.
    pub name: String,
    /// What every replica signs its handles with (the contents of `key_file`).
    pub key: Arc<[u8]>,
    /// The other replicas' base URLs (`http://host:port`), by name.
    pub peers: BTreeMap<String, http::Uri>,
}

impl std::fmt::Debug for Replicas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Replicas")
            .field("name", &self.name)
            .field("peers", &self.peers)
            .finish_non_exhaustive()
    }
}

impl Default for HttpConfig {
    fn default() -> Self {
        HttpConfig {
            listen: None,
            tokens: Vec::new(),
            allow_unauthenticated: false,
            allowed_origins: None,
            allowed_hosts: None,
            max_body: 16 << 20,
            max_sessions: 10_000,
            session_idle_timeout: Duration::from_secs(30 * 60),
            keep_alive: Duration::from_secs(15),
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            max_connections: 4096,
            max_requests_per_session: 64,
            max_requests: 4096,
            max_sessions_per_token: 1000,
            threads: None,
            tls: None,
            replicas: None,
            oauth: None,
        }
    }
}

/// A bearer token of `[http] tokens`; `name` is what logs and events show.
#[derive(Clone)]
pub struct HttpToken {
    pub name: String,
    pub token: String,
    /// Profiles it may use; empty: any, and the unprofiled `/mcp`.
    pub profiles: Vec<String>,
    /// Scope "mcp": it may use the MCP endpoints.
    pub mcp: bool,
    /// Scope "operator": `/metrics`, and all of `gateway_status` and `get_events`.
    pub operator: bool,
}

impl std::fmt::Debug for HttpToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HttpToken")
            .field("name", &self.name)
            .field("profiles", &self.profiles)
            .field("mcp", &self.mcp)
            .field("operator", &self.operator)
            .finish_non_exhaustive()
    }
}

/// `[profiles.NAME]`: globs over served names; `None` lets all through.
#[derive(Debug, Clone)]
pub struct Profile {
    pub name: String,
    pub tools: Option<GlobSet>,
    pub prompts: Option<GlobSet>,
    pub resources: Option<GlobSet>,
    /// Backends (servers and plugins) visible by name; `None`: all.
    pub servers: Option<Vec<String>>,
    /// The globs as written, for `check`.
    pub written: ProfileGlobs,
}

/// A profile's `tools`, `prompts` and `resources` as written; `None`: the key is absent.
#[derive(Debug, Clone, Default)]
pub struct ProfileGlobs {
    pub tools: Option<Vec<String>>,
    pub prompts: Option<Vec<String>>,
    pub resources: Option<Vec<String>>,
}

/// The gateway's variables every server gets (those the official MCP SDKs pass on, and
/// the locale and time zone); a token exported for one server reaches no other.
pub const BASE_ENV: &[&str] = &[
    "HOME", "LOGNAME", "PATH", "SHELL", "TERM", "USER", "LANG", "LC_ALL", "LC_CTYPE", "TZ",
    "TMPDIR",
];

#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// The key in `[servers.NAME]` / `mcpServers`.
    pub name: String,
    /// How the gateway reaches it.
    pub transport: ServerTransport,
    /// Prefix of this server's tools and prompts; "" means none. Defaults to `name`.
    pub namespace: String,
    /// Per-call timeout for this server (defaults to `gateway.timeout`).
    pub timeout: Duration,
    /// Per-tool overrides, keyed by the server's own (unprefixed) tool name.
    pub tool_timeouts: BTreeMap<String, Duration>,
    /// Which of the server's tools are exposed (`tools` allow globs, `disabled_tools` deny globs).
    pub tool_filter: ToolFilter,
    pub disabled: bool,
    /// Runs one client's calls at a time: a server's request over stdio names no call,
    /// and with calls of several clients in flight the gateway could not tell who asked.
    pub exclusive: bool,
    /// The MCP era the gateway speaks to it in (`protocol`).
    pub protocol: UpstreamProtocol,
    /// `max_concurrent`: calls to it at once; `None` for no bound.
    pub max_concurrent: Option<usize>,
    /// `breaker`: when failures in a row stop calls to it for a while.
    pub breaker: BreakerConfig,
}

/// `protocol` of a server: which MCP era the gateway speaks to it in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum UpstreamProtocol {
    /// Found out: the new era tried first (a stdio server probed once, remembered).
    Auto,
    /// 2025-11-25: `initialize`, then a session.
    Legacy,
    /// 2026-07-28: stateless, every request with its `_meta`.
    Modern,
}

impl UpstreamProtocol {
    pub fn as_str(self) -> &'static str {
        match self {
            UpstreamProtocol::Auto => "auto",
            UpstreamProtocol::Legacy => crate::protocol::LATEST_VERSION,
            UpstreamProtocol::Modern => crate::protocol::modern::MODERN_VERSION,
        }
    }
}

/// How the gateway reaches a server: a process it starts and speaks to over stdio, or a
/// remote server at a URL.
#[derive(Debug, Clone)]
pub enum ServerTransport {
    Stdio(StdioCommand),
    Http(HttpEndpoint),
}

/// Where a remote server listens and what each request to it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HttpEndpoint {
    pub url: String,
    /// Sent on every request, `${VAR}` already expanded: secrets, never shown.
    pub headers: BTreeMap<String, String>,
    /// Its contents are the bearer token, read again whenever the file changes (a token
    /// that an outside process refreshes).
    pub bearer_token_file: Option<PathBuf>,
    /// PEM certificates trusted besides the platform's and the webpki roots (a private CA),
    /// read at each new session.
    pub ca_file: Option<PathBuf>,
    pub transport: HttpTransport,
    /// HTTP/1.1 connections lent for requests at once (the GET stream has its own).
    pub max_connections: usize,
    /// Requests in flight at once; more wait for a turn within their timeout.
    pub max_in_flight: usize,
    /// Bytes of the largest message read from the server: a JSON answer, or one event.
    pub max_message: usize,
    /// The gateway is the server's OAuth client.
    pub oauth: Option<crate::oauth_client::OAuthSettings>,
}

/// The default of [`HttpEndpoint::max_message`], as large as a request the HTTP front takes.
pub const MAX_MESSAGE: usize = 16 << 20;

/// Which MCP HTTP transport a remote server speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpTransport {
    /// Streamable HTTP, and the legacy SSE transport when the server refuses it.
    Auto,
    StreamableHttp,
    Sse,
}

impl HttpTransport {
    pub fn as_str(self) -> &'static str {
        match self {
            HttpTransport::Auto => "auto",
            HttpTransport::StreamableHttp => "streamable-http",
            HttpTransport::Sse => "sse",
        }
    }
}

/// What starts a server's process.
#[derive(Debug, Clone)]
pub struct StdioCommand {
    pub command: String,
    pub args: Vec<String>,
    /// `args` before `${VAR}` expansion: what `check` prints, so that no secret is shown.
    pub args_as_written: Vec<String>,
    /// Extra environment for the child, `${VAR}` already expanded from the gateway's.
    pub env: BTreeMap<String, String>,
    /// Whether the child gets the gateway's whole environment, not only [`BASE_ENV`].
    pub inherit_env: bool,
    pub cwd: Option<PathBuf>,
}

impl ServerConfig {
    /// The command that starts the server's process; panics for a remote server (callers
    /// `match` on `transport` where both can occur).
    pub fn stdio(&self) -> &StdioCommand {
        match &self.transport {
            ServerTransport::Stdio(command) => command,
            ServerTransport::Http(_) => panic!("server `{}` is remote", self.name),
        }
    }

    /// True when a running server's process (or connection) can serve the `new` entry:
    /// what starts the process, or where it connects, is unchanged. Everything else (tool
    /// filters, timeouts, namespace) is applied to it live, so that editing a filter does
    /// not kill the calls in flight.
    pub fn starts_same_process(&self, new: &ServerConfig) -> bool {
        if self.protocol != new.protocol {
            return false;
        }
        match (&self.transport, &new.transport) {
            (ServerTransport::Stdio(old), ServerTransport::Stdio(new)) => {
                old.command == new.command
                    && old.args == new.args
                    && old.env == new.env
                    && old.inherit_env == new.inherit_env
                    && old.cwd == new.cwd
            }
            (ServerTransport::Http(old), ServerTransport::Http(new)) => old == new,
            _ => false,
        }
    }
}

/// Allow and deny globs over a backend's own tool names. Deny wins.
#[derive(Debug, Clone, Default)]
pub struct ToolFilter {
    /// `None` allows everything.
    pub allow: Option<GlobSet>,
    pub deny: Option<GlobSet>,
    /// The patterns as written, for `check` and `gateway_status`.
    pub allow_patterns: Vec<String>,
    pub deny_patterns: Vec<String>,
}

impl ToolFilter {
    pub fn allows(&self, tool: &str) -> bool {
        let allowed = self.allow.as_ref().is_none_or(|set| set.is_match(tool));
        let denied = self.deny.as_ref().is_some_and(|set| set.is_match(tool));
        allowed && !denied
    }

    /// The patterns, as written, that match none of `tools`: a typo, or a tool the server
    /// renamed (the filter then hides nothing, or exposes less than meant).
    pub fn unmatched<'a>(&'a self, tools: &[&str]) -> Vec<&'a str> {
        let mut out = Vec::new();
        for (set, patterns) in [
            (&self.allow, &self.allow_patterns),
            (&self.deny, &self.deny_patterns),
        ] {
            let Some(set) = set else { continue };
            let mut hit = vec![false; patterns.len()];
            for tool in tools {
                for index in set.matches(tool) {
                    if let Some(hit) = hit.get_mut(index) {
                        *hit = true;
                    }
                }
            }
            out.extend(
                patterns
                    .iter()
                    .zip(hit)
                    .filter(|(_, hit)| !hit)
                    .map(|(pattern, _)| pattern.as_str()),
            );
        }
        out
    }

    /// Same rules: the same patterns, and an allow list present in both or neither
    /// (`tools = []` allows nothing, no `tools` allows everything).
    pub fn same_as(&self, other: &ToolFilter) -> bool {
        self.allow_patterns == other.allow_patterns
            && self.deny_patterns == other.deny_patterns
            && self.allow.is_some() == other.allow.is_some()
            && self.deny.is_some() == other.deny.is_some()
    }
}

#[derive(Debug, Clone)]
pub struct PluginsConfig {
    /// Every `*.wasm` here is loaded as a plugin named after its file stem, and watched.
    pub dir: Option<PathBuf>,
    /// Watch `dir` and every plugin path for changes (default true).
    pub watch: bool,
    /// Where compiled components are cached (default `$XDG_CACHE_HOME/wasmgate` or
    /// `~/.cache/wasmgate`; none when neither is known).
    pub cache_dir: Option<PathBuf>,
    /// Where the plugins' key-value stores live (default `$XDG_DATA_HOME/wasmgate` or
    /// `~/.local/share/wasmgate`; none when neither is known).
    pub data_dir: Option<PathBuf>,
    /// Bytes of keys and values one plugin's store may hold per scope (default 1 MiB).
    pub store_size: u64,
    /// Serve the plugins compiled into the binary (default true only for the embedded default config).
    pub bundled: bool,
    /// Limits for plugins that set none of their own.
    pub limits: PluginLimits,
    /// How long compiling one component may take before it is refused (default 180 s).
    pub compile_timeout: Duration,
    /// Linear memory all live plugin instances may hold together (default half the
    /// machine's memory).
    pub total_memory: u64,
    /// Registries (`host:port`) that `oci://` sources reach over plain HTTP, not HTTPS.
    pub oci_insecure: Vec<String>,
    /// `[plugins.NAME]` entries: a plugin at an explicit path, or grants and limits for
    /// a plugin found in `dir` under that name.
    pub plugins: BTreeMap<String, PluginConfig>,
}

/// A file in a folder that makes it a plugin project `wasmgate plugin build` can build:
/// Rust, Python (componentize-py), JavaScript (componentize-js).
pub const PLUGIN_PROJECT_FILES: &[&str] =
    &["Cargo.toml", "app.py", "pyproject.toml", "package.json"];

/// [`PluginsConfig::compile_timeout`]'s default: compiling CPython on two busy cores stays
/// well inside it.
pub const DEFAULT_COMPILE_TIMEOUT: Duration = Duration::from_secs(180);

/// [`PluginsConfig::store_size`]'s default.
pub const DEFAULT_STORE_SIZE: u64 = 1 << 20;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PluginLimits {
    /// Linear memory per instance, bytes (default 64 MiB).
    pub memory: u64,
    /// Wall time per call (default 10 s); the call's own timeout bounds it too.
    pub timeout: Duration,
    /// Fuel per call (default none: only the wall-time limit applies).
    pub fuel: Option<u64>,
}

impl Default for PluginLimits {
    fn default() -> Self {
        PluginLimits {
            memory: 64 << 20,
            timeout: Duration::from_secs(10),
            fuel: None,
        }
    }
}

#[derive(Debug, Clone)]
pub struct PluginConfig {
    pub name: String,
    /// The component file; `None` means `{dir}/{name}.wasm`.
    pub path: Option<PathBuf>,
    /// The plugin's project folder (`wasmgate plugin new`), which `wasmgate dev` builds,
    /// serves and rebuilds on a change; `serve` ignores it.
    pub source: Option<PathBuf>,
    /// `source = "oci://…"`: the registry artifact `serve` and `dev` pull, verify and load
    /// (into `path`, a file of the pull cache).
    pub oci: Option<crate::oci::OciSource>,
    /// Prefix of the plugin's tools (defaults to `name`).
    pub namespace: String,
    pub limits: PluginLimits,
    /// Directories the plugin may open.
    pub allow_dirs: Vec<DirGrant>,
    /// Names of the gateway's environment variables the plugin may read.
    pub allow_env: Vec<String>,
    /// Hosts (`name` or `name:port`, `*.suffix` allowed) the plugin may send HTTP requests to.
    pub allow_hosts: Vec<String>,
    /// Whether allowed names may lead to loopback, link-local and private addresses
    /// (default false: only addresses `allow_hosts` lists itself).
    pub allow_private_addresses: bool,
    /// Lower-case hex sha256 the component must have to be loaded with these grants.
    pub sha256: Option<String>,
    /// Values the plugin reads with `host.config(key)`.
    pub config: BTreeMap<String, String>,
    pub tool_filter: ToolFilter,
    pub disabled: bool,
    pub instances: InstancePolicy,
    /// Whose data its key-value store keeps apart (`store`).
    pub store: StoreScope,
    /// Calls it runs at once; `None`: 32, or 8 for a component with an interpreter inside.
    pub calls_at_once: Option<usize>,
    /// Made from a `[[middleware]]` entry: its component must export the
    /// `wasmgate:middleware` world (and a plugin's must not).
    pub middleware: bool,
    /// The bundled middleware it runs (`use` in `[[middleware]]`), when it has no `path`.
    pub uses_bundled: Option<String>,
}

/// One link of the middleware chain: which component, where it applies, and what a
/// failure of it does.
#[derive(Debug, Clone, PartialEq)]
pub struct MiddlewareEntry {
    pub name: String,
    pub on_error: OnError,
    /// Servers whose requests it sees; `None` with `plugins` also `None`: every route.
    pub servers: Option<Vec<String>>,
    /// Plugins whose requests it sees.
    pub plugins: Option<Vec<String>>,
    /// Profiles whose requests it sees; `None`: every client, with or without a profile.
    pub profiles: Option<Vec<String>>,
    /// Globs over the target (tool or prompt name, resource URI); `None`: every target.
    pub tools: Option<Vec<String>>,
    pub disabled: bool,
}

/// What a middleware that traps, runs out of a limit, answers nonsense or is not loaded does
/// to the request (`on_error`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum OnError {
    /// Refuse the request with an error that names the middleware (fail closed).
    #[default]
    Deny,
    /// Let the request through as if the middleware had passed it.
    Pass,
}

impl OnError {
    pub fn as_str(self) -> &'static str {
        match self {
            OnError::Deny => "deny",
            OnError::Pass => "pass",
        }
    }
}

/// The most `calls_at_once` a plugin may have: a quarter of the instance slots, so that one
/// plugin flooded with slow calls leaves instances to the others.
pub const MAX_CALLS_AT_ONCE: usize = 32;

/// Which instance a plugin's call runs in (`instance` in `[plugins.NAME]`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum InstanceMode {
    /// A fresh instance for every call: nothing a call leaves behind reaches another.
    #[default]
    Call,
    /// One instance per client session, kept between that client's calls.
    Session,
    /// A few long-lived instances that every client's calls share.
    Shared,
}

impl InstanceMode {
    pub fn as_str(self) -> &'static str {
        match self {
            InstanceMode::Call => "call",
            InstanceMode::Session => "session",
            InstanceMode::Shared => "shared",
        }
    }
}

/// Whose data a plugin's key-value store keeps apart (`store` in `[plugins.NAME]`).
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum StoreScope {
    /// One store per principal (each token; "local" for stdio and the operator).
    #[default]
    Principal,
    /// One store every principal's calls read and write.
    Shared,
}

impl StoreScope {
    pub fn as_str(self) -> &'static str {
        match self {
            StoreScope::Principal => "principal",
            StoreScope::Shared => "shared",
        }
    }
}

/// How long kept instances live (`instance`, `instance_idle`, `max_calls_per_instance`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InstancePolicy {
    pub mode: InstanceMode,
    /// Whether the operator set `instance` (else `mode` is the default, and a 0.2
    /// component's declared mode decides: see `plugin::kv::effective_instance`).
    pub configured: bool,
    /// A session's instance unused this long is dropped.
    pub idle: Duration,
    /// A shared instance is replaced after this many calls; `None`: never.
    pub max_calls: Option<u64>,
}

impl Default for InstancePolicy {
    fn default() -> Self {
        InstancePolicy {
            mode: InstanceMode::Call,
            configured: false,
            idle: Duration::from_secs(300),
            max_calls: None,
        }
    }
}

impl PluginConfig {
    /// A plugin with every default: no grants, settings or tool filter.
    pub fn plain(
        name: &str,
        path: Option<PathBuf>,
        namespace: String,
        limits: PluginLimits,
    ) -> Self {
        PluginConfig {
            name: name.to_owned(),
            path,
            source: None,
            oci: None,
            namespace,
            limits,
            allow_dirs: Vec::new(),
            allow_env: Vec::new(),
            allow_hosts: Vec::new(),
            allow_private_addresses: false,
            sha256: None,
            config: BTreeMap::new(),
            tool_filter: ToolFilter::default(),
            disabled: false,
            instances: InstancePolicy::default(),
            store: StoreScope::default(),
            calls_at_once: None,
            middleware: false,
            uses_bundled: None,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DirGrant {
    /// Absolute, canonical host directory.
    pub host: PathBuf,
    /// Where the plugin sees it, e.g. "/data".
    pub guest: String,
    pub read_only: bool,
    /// Set by `allow_gateway_files`: a read-write grant may hold the gateway's own files.
    pub expose_gateway_files: bool,
}
