//! The file schemas as users write them: `gateway.toml`, and the `mcpServers` JSON of
//! Claude Desktop, Cursor and other clients. Durations and sizes are parsed here, inside
//! the deserializer, so that a bad value is reported at its line and column.

use std::collections::BTreeMap;
use std::fmt;
use std::time::Duration;

use serde::Deserialize;
use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, Visitor};

/// `gateway.toml`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct TomlFile {
    #[serde(default)]
    pub gateway: Gateway,
    #[serde(default)]
    pub servers: BTreeMap<String, Server>,
    #[serde(default)]
    pub plugins: Plugins,
    #[serde(default)]
    pub http: Http,
    #[serde(default)]
    pub profiles: BTreeMap<String, Profile>,
    #[serde(default)]
    pub middleware: Vec<Middleware>,
    #[serde(default)]
    pub telemetry: Telemetry,
    /// `[[limits.rate]]`: rate limits per principal, profile and tool.
    #[serde(default)]
    pub limits: super::limits::RawLimits,
}

/// `[telemetry]`: traces exported over OTLP.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Telemetry {
    pub otlp_endpoint: Option<String>,
    pub sample_ratio: Option<f64>,
    pub service_name: Option<String>,
}

/// `[http]`: the HTTP front.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Http {
    pub listen: Option<String>,
    #[serde(default)]
    pub tokens: Vec<HttpToken>,
    pub allow_unauthenticated: Option<bool>,
    pub allowed_origins: Option<Vec<String>>,
    pub allowed_hosts: Option<Vec<String>>,
    pub max_body: Option<Bytes>,
    pub max_sessions: Option<AtLeastOne>,
    pub session_idle_timeout: Option<Timeout>,
    pub keep_alive: Option<Timeout>,
    pub header_timeout: Option<Timeout>,
    pub idle_timeout: Option<Timeout>,
    pub max_connections: Option<AtLeastOne>,
    pub max_requests_per_session: Option<AtLeastOne>,
    pub max_requests: Option<AtLeastOne>,
    pub max_sessions_per_token: Option<AtLeastOne>,
    pub threads: Option<AtLeastOne>,
    pub tls_cert: Option<String>,
    pub tls_key: Option<String>,
    pub replicas: Option<Replicas>,
    pub oauth: Option<HttpOauth>,
}

/// `[http.oauth]`: the front as an OAuth 2.1 resource server.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpOauth {
    pub issuer: String,
    pub resource: String,
    pub jwks_uri: Option<String>,
    pub introspection: Option<OauthIntrospection>,
    pub scopes: Option<Vec<String>>,
    pub operator_scope: Option<String>,
    pub ca_file: Option<String>,
    /// The claim that names the principal (default "sub").
    pub claim: Option<String>,
    /// Shortest time between two JWKS fetches for an unknown `kid` (default 30 s).
    pub jwks_refresh: Option<Grace>,
    #[serde(default)]
    pub rules: Vec<OauthRule>,
}

/// `[http.oauth.introspection]`: RFC 7662 for tokens that are not JWTs.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OauthIntrospection {
    pub endpoint: String,
    pub client_id: String,
    pub client_secret: String,
}

/// `[[http.oauth.rules]]`: a claim value that grants profiles or the operator.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OauthRule {
    pub claim: String,
    pub value: String,
    #[serde(default)]
    pub profiles: Vec<String>,
    pub operator: Option<bool>,
}

/// `[http.replicas]`: this gateway is one of several behind a load balancer.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Replicas {
    pub name: String,
    pub key_file: String,
    #[serde(default)]
    pub peers: BTreeMap<String, String>,
}

/// One of `[http] tokens`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HttpToken {
    pub name: String,
    pub token: String,
    #[serde(default)]
    pub profiles: Vec<String>,
    /// "mcp" (the default) and "operator".
    pub scopes: Option<Vec<String>>,
}

/// `[profiles.NAME]`: a subset of the catalog served at `/mcp/NAME`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Profile {
    pub tools: Option<Vec<String>>,
    pub prompts: Option<Vec<String>>,
    pub resources: Option<Vec<String>>,
    pub servers: Option<Vec<String>>,
}

/// `claude_desktop_config.json`, Cursor's `mcp.json` and the like. Top-level keys other
/// than these belong to the client (`globalShortcut`, `preferences`, ...) and are ignored.
#[derive(Debug, Default, Deserialize)]
pub struct ClientFile {
    #[serde(rename = "mcpServers")]
    pub mcp_servers: Option<BTreeMap<String, ClientServer>>,
    /// The gateway's own settings, same keys as TOML `[gateway]`.
    pub wasmgate: Option<Gateway>,
    /// Same as TOML `[plugins]`.
    pub plugins: Option<Plugins>,
    /// VS Code's `mcp.json` layout; only noticed, to tell the user to rename it.
    pub servers: Option<IgnoredAny>,
}

/// `[gateway]`, or `"wasmgate"` in JSON.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gateway {
    pub name: Option<String>,
    pub separator: Option<String>,
    pub timeout: Option<Timeout>,
    pub startup_timeout: Option<Timeout>,
    pub init_timeout: Option<Timeout>,
    pub page_size: Option<AtLeastOne>,
    pub events: Option<String>,
    pub event_buffer: Option<usize>,
    pub log_level: Option<String>,
    pub max_restarts: Option<u32>,
    pub shutdown_grace: Option<Grace>,
    /// Where remote servers' OAuth tokens are kept.
    pub auth_dir: Option<String>,
}

/// `[servers.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Server {
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    #[serde(default)]
    pub inherit_env: bool,
    pub namespace: Option<String>,
    pub timeout: Option<Timeout>,
    #[serde(default)]
    pub tool_timeouts: BTreeMap<String, Timeout>,
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    #[serde(default)]
    pub disabled: bool,
    /// One client's calls at a time (for a server that asks clients things).
    #[serde(default)]
    pub exclusive: bool,
    /// The MCP era spoken to it: "auto" (the default), "2025-11-25" or "2026-07-28".
    pub protocol: Option<String>,
    /// A remote server, instead of `command`.
    pub url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    /// "streamable-http", "sse" or "auto" (the default).
    pub transport: Option<String>,
    /// `Authorization: Bearer` with the value of this environment variable.
    pub bearer_token_env: Option<String>,
    /// `Authorization: Bearer` with this file's contents, read again when it changes.
    pub bearer_token_file: Option<String>,
    /// PEM certificates trusted besides the platform's and the webpki roots (a private CA).
    pub ca_file: Option<String>,
    /// HTTP/1.1 connections lent for requests at once.
    pub max_connections: Option<AtLeastOne>,
    /// Requests in flight to the server at once.
    pub max_in_flight: Option<AtLeastOne>,
    /// The largest message (a JSON answer, one event) read from the server.
    pub max_message: Option<Bytes>,
    /// `[servers.NAME.oauth]`: the server asks for OAuth; the gateway is its client.
    pub oauth: Option<OAuth>,
    /// Calls to the server at once; more wait (up to their timeout).
    pub max_concurrent: Option<AtLeastOne>,
    /// The circuit breaker: `{ failures = 5, open_for = "30s" }`.
    pub breaker: Option<super::limits::RawBreaker>,
}

/// `[servers.NAME.oauth]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OAuth {
    pub client_id: Option<String>,
    pub client_secret: Option<String>,
    pub scopes: Option<Vec<String>>,
    /// "client_credentials" or "authorization_code".
    pub grant: Option<String>,
    pub client_metadata_url: Option<String>,
}

/// One `mcpServers` entry: our server keys plus the keys other clients write there.
/// Harmless ones are accepted and ignored; anything else is an error.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ClientServer {
    #[serde(default)]
    pub command: String,
    #[serde(default)]
    pub args: Vec<String>,
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    pub cwd: Option<String>,
    #[serde(default)]
    pub inherit_env: bool,
    pub namespace: Option<String>,
    /// A duration string is ours; a number is another client's (seconds for Cline and
    /// Roo Code, milliseconds for Claude Code) and is ignored.
    pub timeout: Option<ClientTimeout>,
    #[serde(default)]
    pub tool_timeouts: BTreeMap<String, Timeout>,
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    #[serde(default)]
    pub disabled: bool,
    #[serde(default)]
    pub exclusive: bool,
    pub protocol: Option<String>,

    /// "stdio" (VS Code, Cursor, Claude Code); "http", "sse", "streamable-http",
    /// "streamableHttp" mark a remote server.
    #[serde(rename = "type")]
    pub transport: Option<String>,
    /// Cline's older spelling of `type`.
    #[serde(rename = "transportType")]
    pub transport_type: Option<String>,
    pub url: Option<String>,
    pub headers: Option<BTreeMap<String, String>>,
    pub bearer_token_env: Option<String>,
    pub bearer_token_file: Option<String>,
    pub ca_file: Option<String>,
    pub max_connections: Option<AtLeastOne>,
    pub max_in_flight: Option<AtLeastOne>,
    pub max_message: Option<Bytes>,
    /// Roo Code, Windsurf: exact tool names to hide; added to `disabled_tools`.
    #[serde(rename = "disabledTools", default)]
    pub client_disabled_tools: Vec<String>,
    /// VS Code, Cursor: a dotenv file; not read (warned about).
    #[serde(rename = "envFile")]
    pub env_file: Option<String>,

    // Client-side approval and UI settings: meaningless to a gateway, ignored.
    /// Roo Code.
    #[serde(rename = "alwaysAllow")]
    pub _always_allow: Option<IgnoredAny>,
    /// Cline.
    #[serde(rename = "autoApprove")]
    pub _auto_approve: Option<IgnoredAny>,
    /// Several clients and registries.
    #[serde(rename = "description")]
    pub _description: Option<IgnoredAny>,
    /// Roo Code: restart the server when these files change.
    #[serde(rename = "watchPaths")]
    pub _watch_paths: Option<IgnoredAny>,
    /// VS Code: `{ "watch": ..., "debug": ... }` for server development.
    #[serde(rename = "dev")]
    pub _dev: Option<IgnoredAny>,
}

/// `[plugins]`: a few settings and, as sub-tables, one entry per plugin. Read by hand
/// because `deny_unknown_fields` and `flatten` do not combine.
#[derive(Debug, Default)]
pub struct Plugins {
    pub dir: Option<String>,
    pub watch: Option<bool>,
    pub cache_dir: Option<String>,
    pub data_dir: Option<String>,
    pub store_size: Option<u64>,
    pub bundled: Option<bool>,
    pub memory: Option<u64>,
    pub timeout: Option<Duration>,
    pub fuel: Option<u64>,
    pub compile_timeout: Option<Duration>,
    pub total_memory: Option<u64>,
    /// Registries (`host:port`) spoken to over plain HTTP.
    pub oci_insecure: Vec<String>,
    pub entries: BTreeMap<String, PluginEntry>,
}

/// The scalar keys of `[plugins]`, for error messages.
pub const PLUGINS_KEYS: &[&str] = &[
    "dir",
    "watch",
    "cache_dir",
    "data_dir",
    "store_size",
    "bundled",
    "memory",
    "timeout",
    "fuel",
    "compile_timeout",
    "total_memory",
    "oci_insecure",
];

/// `[plugins.NAME]`.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PluginEntry {
    pub path: Option<String>,
    /// The plugin's project folder, which `wasmgate dev` builds and watches, or an
    /// `oci://` reference to pull it from.
    pub source: Option<String>,
    /// The cosign public key (PEM) an `oci://` source's signature must verify with.
    pub public_key: Option<String>,
    pub namespace: Option<String>,
    pub memory: Option<Bytes>,
    pub timeout: Option<Timeout>,
    pub fuel: Option<Fuel>,
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    #[serde(default)]
    pub allow_private_addresses: bool,
    pub sha256: Option<String>,
    #[serde(default)]
    pub allow_dirs: Vec<DirGrant>,
    #[serde(default)]
    pub allow_env: Vec<String>,
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub disabled_tools: Vec<String>,
    #[serde(default)]
    pub disabled: bool,
    #[serde(default)]
    pub config: BTreeMap<String, ConfigValue>,
    pub instance: Option<crate::config::InstanceMode>,
    pub instance_idle: Option<Timeout>,
    pub max_calls_per_instance: Option<AtLeastOne>,
    pub calls_at_once: Option<AtLeastOne>,
    pub store: Option<crate::config::StoreScope>,
}

/// `[[middleware]]`: a link of the chain. Its component's keys are a plugin's (less the
/// tool ones), listed again because `deny_unknown_fields` and `flatten` do not combine.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Middleware {
    pub name: Option<String>,
    /// A bundled middleware by name.
    #[serde(rename = "use")]
    pub uses: Option<String>,
    pub path: Option<String>,
    pub on_error: Option<crate::config::OnError>,
    pub servers: Option<Vec<String>>,
    pub plugins: Option<Vec<String>>,
    pub profiles: Option<Vec<String>>,
    pub tools: Option<Vec<String>>,
    #[serde(default)]
    pub disabled: bool,
    pub memory: Option<Bytes>,
    pub timeout: Option<Timeout>,
    pub fuel: Option<Fuel>,
    #[serde(default)]
    pub allow_hosts: Vec<String>,
    #[serde(default)]
    pub allow_private_addresses: bool,
    pub sha256: Option<String>,
    #[serde(default)]
    pub allow_dirs: Vec<DirGrant>,
    #[serde(default)]
    pub allow_env: Vec<String>,
    #[serde(default)]
    pub config: BTreeMap<String, ConfigValue>,
    pub instance: Option<crate::config::InstanceMode>,
    pub instance_idle: Option<Timeout>,
    pub max_calls_per_instance: Option<AtLeastOne>,
    pub calls_at_once: Option<AtLeastOne>,
}

impl Middleware {
    /// The keys its component shares with a plugin's, as a plugin entry; `shared` instances
    /// unless it says otherwise (a middleware runs on every request).
    pub fn component(&mut self) -> PluginEntry {
        PluginEntry {
            path: self.path.clone(),
            memory: self.memory,
            timeout: self.timeout,
            fuel: self.fuel,
            allow_hosts: std::mem::take(&mut self.allow_hosts),
            allow_private_addresses: self.allow_private_addresses,
            sha256: self.sha256.take(),
            allow_dirs: std::mem::take(&mut self.allow_dirs),
            allow_env: std::mem::take(&mut self.allow_env),
            disabled: self.disabled,
            config: std::mem::take(&mut self.config),
            instance: Some(self.instance.unwrap_or(crate::config::InstanceMode::Shared)),
            instance_idle: self.instance_idle,
            max_calls_per_instance: self.max_calls_per_instance,
            calls_at_once: self.calls_at_once,
            ..PluginEntry::default()
        }
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DirGrant {
    pub host: String,
    pub guest: String,
    #[serde(default)]
    pub mode: DirMode,
    /// A read-write grant may hold the gateway's own files (config, plugins, cache).
    #[serde(default)]
    pub allow_gateway_files: bool,
}

#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DirMode {
    #[default]
    Ro,
    Rw,
}

/// A duration greater than zero: "30s", "500ms", "2m".
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Timeout(pub Duration);

/// A duration that may be zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Grace(pub Duration);

/// `timeout` in an `mcpServers` entry: ours when a string, another client's when a number.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientTimeout {
    Ours(Duration),
    ClientNumber,
}

/// A size in bytes, greater than zero: "64MiB", "512KiB", "1GiB", "1000000", or an integer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bytes(pub u64);

/// Fuel units per call, greater than zero.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Fuel(pub u64);

/// An integer of at least 1.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AtLeastOne(pub usize);

/// A `[plugins.NAME.config]` value; numbers and booleans are kept as their text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ConfigValue(pub String);

/// Parses "30s", "500ms", "2m", "1h 30m" (humantime).
pub fn parse_duration(text: &str) -> Result<Duration, String> {
    humantime::parse_duration(text.trim()).map_err(|e| {
        format!("invalid duration \"{text}\": {e}; write a number with a unit, like \"30s\", \"500ms\" or \"2m\"")
    })
}

/// Parses "64MiB", "512 KiB", "1GiB", "10MB", "1000000" (bytes). Binary units (KiB, MiB,
/// GiB) are powers of 1024, decimal ones (KB, MB, GB) powers of 1000; case is ignored.
pub fn parse_size(text: &str) -> Result<u64, String> {
    let bad = |why: &str| {
        format!(
            "invalid size \"{text}\": {why}; write a number of bytes or a number with a unit, like \"64MiB\", \"512KiB\" or \"1GiB\""
        )
    };
    let trimmed = text.trim();
    let split = trimmed
        .find(|c: char| !c.is_ascii_digit())
        .unwrap_or(trimmed.len());
    let (digits, unit) = trimmed.split_at(split);
    if digits.is_empty() {
        return Err(bad("it does not start with a number"));
    }
    let number: u64 = digits.parse().map_err(|_| bad("the number is too large"))?;
    let multiplier: u64 = match unit.trim().to_ascii_lowercase().as_str() {
        "" | "b" => 1,
        "kib" => 1 << 10,
        "mib" => 1 << 20,
        "gib" => 1 << 30,
        "kb" => 1_000,
        "mb" => 1_000_000,
        "gb" => 1_000_000_000,
        _ => return Err(bad(&format!("unknown unit \"{}\"", unit.trim()))),
    };
    number
        .checked_mul(multiplier)
        .ok_or_else(|| bad("it is too large"))
}

/// Implements `Deserialize` for a newtype through a visitor that sees strings and
/// integers; the parse error becomes a serde error, which the format decorates with the
/// value's position.
macro_rules! scalar_deserialize {
    ($ty:ty, $expecting:literal, $from_str:expr, $from_int:expr) => {
        impl<'de> Deserialize<'de> for $ty {
            fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                struct V;
                impl<'de> Visitor<'de> for V {
                    type Value = $ty;
                    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                        f.write_str($expecting)
                    }
                    fn visit_str<E: de::Error>(self, v: &str) -> Result<$ty, E> {
                        let from_str: fn(&str) -> Result<$ty, String> = $from_str;
                        from_str(v).map_err(E::custom)
                    }
                    fn visit_i64<E: de::Error>(self, v: i64) -> Result<$ty, E> {
                        let from_int: fn(i128) -> Result<$ty, String> = $from_int;
                        from_int(i128::from(v)).map_err(E::custom)
                    }
                    fn visit_u64<E: de::Error>(self, v: u64) -> Result<$ty, E> {
                        let from_int: fn(i128) -> Result<$ty, String> = $from_int;
                        from_int(i128::from(v)).map_err(E::custom)
                    }
                    fn visit_f64<E: de::Error>(self, v: f64) -> Result<$ty, E> {
                        Err(E::custom(format!("{v} is not {}", $expecting)))
                    }
                }
                deserializer.deserialize_any(V)
            }
        }
    };
}

fn positive_duration(text: &str) -> Result<Duration, String> {
    let d = parse_duration(text)?;
    if d.is_zero() {
        return Err(format!(
            "\"{text}\" is zero; a timeout must be greater than zero"
        ));
    }
    Ok(d)
}

fn duration_needs_unit(n: i128) -> String {
    format!("a duration needs a unit: write \"{n}s\" or \"{n}ms\" (a string)")
}

fn positive_int(n: i128, what: &str) -> Result<u64, String> {
    if n <= 0 {
        return Err(format!(
            "{n} is not allowed; {what} must be greater than zero"
        ));
    }
    u64::try_from(n).map_err(|_| format!("{n} is too large"))
}

scalar_deserialize!(
    Timeout,
    "a duration like \"30s\"",
    |s| positive_duration(s).map(Timeout),
    |n| Err(duration_needs_unit(n))
);
scalar_deserialize!(
    Grace,
    "a duration like \"2s\"",
    |s| parse_duration(s).map(Grace),
    |n| Err(duration_needs_unit(n))
);
scalar_deserialize!(
    ClientTimeout,
    "a duration like \"30s\" or a whole number",
    |s| positive_duration(s).map(ClientTimeout::Ours),
    |_| Ok(ClientTimeout::ClientNumber)
);
scalar_deserialize!(
    Bytes,
    "a size like \"64MiB\"",
    |s| match parse_size(s)? {
        0 => Err(format!(
            "\"{s}\" is zero; a memory limit must be greater than zero"
        )),
        n => Ok(Bytes(n)),
    },
    |n| positive_int(n, "a memory limit").map(Bytes)
);
scalar_deserialize!(
    Fuel,
    "a positive integer",
    |s| Err(format!(
        "\"{s}\" is a string; write fuel as an integer, like fuel = 1000000"
    )),
    |n| positive_int(n, "fuel").map(Fuel)
);
scalar_deserialize!(
    AtLeastOne,
    "an integer of at least 1",
    |s| Err(format!(
        "\"{s}\" is a string; write an integer of at least 1"
    )),
    |n| positive_int(n, "the value")
        .and_then(|v| usize::try_from(v).map_err(|_| format!("{n} is too large")))
        .map(AtLeastOne)
);

impl<'de> Deserialize<'de> for ConfigValue {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = ConfigValue;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a string, number, boolean, array or table (plugins read config values as \
                     text; arrays and tables as JSON)",
                )
            }
            fn visit_seq<A: de::SeqAccess<'de>>(self, seq: A) -> Result<ConfigValue, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::SeqAccessDeserializer::new(seq))?;
                Ok(ConfigValue(value.to_string()))
            }
            fn visit_map<A: de::MapAccess<'de>>(self, map: A) -> Result<ConfigValue, A::Error> {
                let value =
                    serde_json::Value::deserialize(de::value::MapAccessDeserializer::new(map))?;
                Ok(ConfigValue(value.to_string()))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_owned()))
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<ConfigValue, E> {
                Ok(ConfigValue(v.to_string()))
            }
        }
        deserializer.deserialize_any(V)
    }
}

impl<'de> Deserialize<'de> for Plugins {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct PluginsVisitor;
        impl<'de> Visitor<'de> for PluginsVisitor {
            type Value = Plugins;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a table of plugin settings and [plugins.NAME] entries")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Plugins, A::Error> {
                let mut plugins = Plugins::default();
                while let Some(key) = map.next_key::<String>()? {
                    map.next_value_seed(Item {
                        key,
                        plugins: &mut plugins,
                    })?;
                }
                Ok(plugins)
            }
        }
        deserializer.deserialize_map(PluginsVisitor)
    }
}

/// One key of `[plugins]`: a table is a plugin entry (whatever its name), anything else
/// must be one of the known settings. Values are checked inside the visitor so that
/// errors keep the value's position.
struct Item<'a> {
    key: String,
    plugins: &'a mut Plugins,
}

impl<'de> DeserializeSeed<'de> for Item<'_> {
    type Value = ();
    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<(), D::Error> {
        deserializer.deserialize_any(self)
    }
}

enum Scalar<'s> {
    Str(&'s str),
    Bool(bool),
    Int(i128),
    Float,
}

impl Item<'_> {
    fn set(self, value: Scalar<'_>) -> Result<(), String> {
        let p = self.plugins;
        let key = self.key.as_str();
        let wrong = |expected: &str| format!("`plugins.{key}` must be {expected}");
        match (key, value) {
            ("dir", Scalar::Str(s)) => p.dir = Some(s.to_owned()),
            ("cache_dir", Scalar::Str(s)) => p.cache_dir = Some(s.to_owned()),
            ("data_dir", Scalar::Str(s)) => p.data_dir = Some(s.to_owned()),
            ("watch", Scalar::Bool(b)) => p.watch = Some(b),
            ("bundled", Scalar::Bool(b)) => p.bundled = Some(b),
            ("memory", Scalar::Str(s)) => match parse_size(s)? {
                0 => return Err(wrong("greater than zero")),
                n => p.memory = Some(n),
            },
            ("memory", Scalar::Int(n)) => p.memory = Some(positive_int(n, "a memory limit")?),
            ("total_memory", Scalar::Str(s)) => match parse_size(s)? {
                0 => return Err(wrong("greater than zero")),
                n => p.total_memory = Some(n),
            },
            ("total_memory", Scalar::Int(n)) => {
                p.total_memory = Some(positive_int(n, "a memory limit")?)
            }
            ("store_size", Scalar::Str(s)) => match parse_size(s)? {
                0 => return Err(wrong("greater than zero")),
                n => p.store_size = Some(n),
            },
            ("store_size", Scalar::Int(n)) => p.store_size = Some(positive_int(n, "a store size")?),
            ("timeout", Scalar::Str(s)) => p.timeout = Some(positive_duration(s)?),
            ("timeout", Scalar::Int(n)) => return Err(duration_needs_unit(n)),
            ("compile_timeout", Scalar::Str(s)) => p.compile_timeout = Some(positive_duration(s)?),
            ("compile_timeout", Scalar::Int(n)) => return Err(duration_needs_unit(n)),
            ("fuel", Scalar::Int(n)) => p.fuel = Some(positive_int(n, "fuel")?),
            ("dir" | "cache_dir" | "data_dir", _) => return Err(wrong("a path (a string)")),
            ("watch" | "bundled", _) => return Err(wrong("true or false")),
            ("memory" | "total_memory" | "store_size", _) => {
                return Err(wrong("a size like \"64MiB\""));
            }
            ("timeout" | "compile_timeout", _) => return Err(wrong("a duration like \"10s\"")),
            ("fuel", _) => return Err(wrong("an integer, like fuel = 1000000")),
            ("oci_insecure", _) => {
                return Err(wrong("a list of registries, like [\"127.0.0.1:5000\"]"));
            }
            _ => {
                return Err(format!(
                    "unknown key `plugins.{key}`: expected one of {}, or a [plugins.{key}] table for a plugin",
                    PLUGINS_KEYS.join(", ")
                ));
            }
        }
        Ok(())
    }
}

impl<'de> Visitor<'de> for Item<'_> {
    type Value = ();
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a setting or a [plugins.{}] table", self.key)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<(), E> {
        self.set(Scalar::Str(v)).map_err(E::custom)
    }
    fn visit_bool<E: de::Error>(self, v: bool) -> Result<(), E> {
        self.set(Scalar::Bool(v)).map_err(E::custom)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<(), E> {
        self.set(Scalar::Int(i128::from(v))).map_err(E::custom)
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<(), E> {
        self.set(Scalar::Int(i128::from(v))).map_err(E::custom)
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<(), E> {
        self.set(Scalar::Float).map_err(E::custom)
    }
    fn visit_seq<A: de::SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        if self.key == "oci_insecure" {
            while let Some(registry) = seq.next_element::<String>()? {
                self.plugins.oci_insecure.push(registry);
            }
            return Ok(());
        }
        Err(de::Error::custom(format!(
            "`plugins.{}` cannot be a list; a plugin is a [plugins.{}] table",
            self.key, self.key
        )))
    }
    fn visit_map<A: MapAccess<'de>>(self, map: A) -> Result<(), A::Error> {
        let entry = PluginEntry::deserialize(de::value::MapAccessDeserializer::new(map))?;
        self.plugins.entries.insert(self.key, entry);
        Ok(())
    }
}
