//! `[http]` (the HTTP front: listener, tokens, limits) and `[profiles.NAME]`.

use std::collections::BTreeMap;
use std::sync::Arc;

use super::{Ctx, EnvLookup};
use crate::config::model::{HttpConfig, HttpToken, Profile, Replicas};

/// Bytes of a replicas' shared key: a 256-bit HMAC key.
const MIN_REPLICA_KEY: usize = 32;
use crate::config::raw;

impl Ctx<'_> {
    pub(super) fn http(
        &mut self,
        raw: raw::Http,
        profiles: &BTreeMap<String, Profile>,
    ) -> HttpConfig {
        let mut out = HttpConfig::default();
        if let Some(listen) = raw.listen {
            if let Err(why) = check_listen(&listen) {
                self.error(
                    &["http", "listen"],
                    None,
                    why,
                    "write e.g. \"127.0.0.1:8787\"",
                );
            }
            out.listen = Some(listen);
        }
        self.tokens(raw.tokens, profiles, &mut out.tokens);
        out.allow_unauthenticated = raw.allow_unauthenticated.unwrap_or(false);
        out.allowed_origins = raw.allowed_origins;
        out.allowed_hosts = raw.allowed_hosts;
        if let Some(n) = raw.max_body {
            out.max_body = usize::try_from(n.0).unwrap_or(usize::MAX);
        }
        if let Some(n) = raw.max_sessions {
            out.max_sessions = n.0;
        }
        if let Some(t) = raw.session_idle_timeout {
            out.session_idle_timeout = t.0;
        }
        if let Some(t) = raw.keep_alive {
            out.keep_alive = t.0;
        }
        if let Some(t) = raw.header_timeout {
            out.header_timeout = t.0;
        }
        if let Some(t) = raw.idle_timeout {
            out.idle_timeout = t.0;
        }
        if let Some(n) = raw.max_connections {
            out.max_connections = n.0;
        }
        if let Some(n) = raw.max_requests_per_session {
            out.max_requests_per_session = n.0;
        }
        if let Some(n) = raw.max_requests {
            out.max_requests = n.0;
        }
        if let Some(n) = raw.max_sessions_per_token {
            out.max_sessions_per_token = n.0;
        }
        out.threads = raw.threads.map(|n| n.0);
        match (raw.tls_cert, raw.tls_key) {
            (Some(cert), Some(key)) => {
                let cert = self.path(&cert, &["http", "tls_cert"], true);
                let key = self.path(&key, &["http", "tls_key"], true);
                if let (Some(cert), Some(key)) = (&cert, &key)
                    && let Err(e) = crate::config::load_tls(cert, key)
                {
                    let message = format!("{} {}", e.path.display(), e.message);
                    self.error(&["http", e.key], None, message, e.fix);
                }
                out.tls = cert.zip(key);
            }
            (None, None) => {}
            _ => self.error(
                &["http"],
                None,
                "tls_cert and tls_key go together",
                "set both (PEM files), or neither for plain HTTP",
            ),
        }
        out.replicas = raw.replicas.and_then(|r| self.replicas(r));
        out.oauth = raw
            .oauth
            .and_then(|o| self.oauth(o, profiles))
            .map(Arc::new);
        out
    }

    /// `[http.replicas]`: a name, a shared key of at least [`MIN_REPLICA_KEY`] bytes, and
    /// the other replicas' URLs.
    fn replicas(&mut self, raw: raw::Replicas) -> Option<Replicas> {
        let key = ["http", "replicas"];
        let named = |name: &str| {
            !name.is_empty()
                && (name.chars()).all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
        };
        if !named(&raw.name) {
            self.error(
                &key,
                Some("name"),
                format!("replica name `{}` is empty or not plain", raw.name),
                "use letters, digits, - and _",
            );
        }
        let path = self.path(&raw.key_file, &["http", "replicas", "key_file"], true)?;
        let secret = match std::fs::read(&path) {
            Ok(bytes) if bytes.len() >= MIN_REPLICA_KEY => bytes,
            Ok(_) => {
                self.error(
                    &key,
                    Some("key_file"),
                    format!("{} holds fewer than {MIN_REPLICA_KEY} bytes", path.display()),
                    "fill it with random bytes, e.g. `head -c 32 /dev/urandom > FILE`, and give every replica the same file",
                );
                return None;
            }
            Err(e) => {
                self.error(
                    &key,
                    Some("key_file"),
                    format!("{} cannot be read: {e}", path.display()),
                    "give every replica the same key file",
                );
                return None;
            }
        };
        let mut peers = BTreeMap::new();
        for (name, url) in raw.peers {
            let uri = url
                .parse::<http::Uri>()
                .ok()
                .filter(|u| matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some());
            match uri {
                Some(uri) if named(&name) && name != raw.name => {
                    peers.insert(name, uri);
                }
                _ => self.error(
                    &key,
                    Some("peers"),
                    format!("peer `{name}` = `{url}` is not another replica's http(s) URL"),
                    "name each other replica (not this one) with its base URL, e.g. b = \"http://10.0.0.2:8787\"",
                ),
            }
        }
        Some(Replicas {
            name: raw.name,
            key: Arc::from(secret),
            peers,
        })
    }

    /// `[http] tokens`, and `WASMGATE_TOKEN` as one more: each at least [`MIN_TOKEN`]
    /// characters, with its own name and its own value.
    fn tokens(
        &mut self,
        raw: Vec<raw::HttpToken>,
        profiles: &BTreeMap<String, Profile>,
        out: &mut Vec<HttpToken>,
    ) {
        let key = ["http", "tokens"];
        let mut names = std::collections::BTreeSet::new();
        for (i, token) in raw.into_iter().enumerate() {
            if token.name.trim().is_empty() || !names.insert(token.name.clone()) {
                self.error(
                    &key,
                    Some(&token.name),
                    format!("token {}: its name is empty or used twice", i + 1),
                    "give each token its own name; events and logs show the name, never the token",
                );
            }
            let errors = self.errors.len();
            let value = self.expand(&token.token, &key, true);
            if self.errors.len() > errors {
                // `expand` said which variable is unset: a length complaint would mislead.
            } else if value.is_empty() && token.token.contains("${") {
                self.error(
                    &key,
                    Some(&token.token),
                    format!(
                        "token `{}` is empty: `{}` expands to nothing (the variable is set, but empty)",
                        token.name, token.token
                    ),
                    "set the variable to a long random token, e.g. from `openssl rand -hex 32`",
                );
            } else if value.chars().count() < MIN_TOKEN {
                self.error(
                    &key,
                    Some(&token.token),
                    format!(
                        "token `{}` is shorter than {MIN_TOKEN} characters",
                        token.name
                    ),
                    "use a long random token, e.g. from `openssl rand -hex 32`, through ${VAR}",
                );
            }
            for profile in &token.profiles {
                if !profiles.contains_key(profile) {
                    self.error(
                        &key,
                        Some(profile),
                        format!(
                            "token `{}` names profile `{profile}`, which is not defined",
                            token.name
                        ),
                        "define [profiles.NAME] or remove the name",
                    );
                }
            }
            let scopes = token.scopes.unwrap_or_else(|| vec!["mcp".into()]);
            for scope in (scopes.iter()).filter(|s| !["mcp", "operator"].contains(&s.as_str())) {
                self.error(
                    &key,
                    Some(scope),
                    format!("token `{}` has the unknown scope `{scope}`", token.name),
                    "scopes are \"mcp\" (the MCP endpoints) and \"operator\" (/metrics, the whole gateway_status and get_events)",
                );
            }
            out.push(HttpToken {
                name: token.name,
                token: value,
                profiles: token.profiles,
                mcp: scopes.iter().any(|s| s == "mcp"),
                operator: scopes.iter().any(|s| s == "operator"),
            });
        }
        if let Some(token) = self.env_token() {
            if names.contains(ENV_TOKEN) {
                self.error(
                    &key,
                    Some(ENV_TOKEN),
                    format!("a token is named `{ENV_TOKEN}`, as the one from the environment variable is"),
                    format!("rename the token, or unset {ENV_TOKEN}"),
                );
            }
            out.push(token);
        }
        // The name says who calls, in events and logs, and decides the profiles it may use:
        // with one value for two names, whoever holds it is both.
        let mut seen: BTreeMap<&str, &str> = BTreeMap::new();
        let mut twice = Vec::new();
        for token in out.iter().filter(|t| t.token.chars().count() >= MIN_TOKEN) {
            match seen.get(token.token.as_str()) {
                Some(first) => twice.push(format!(
                    "tokens `{first}` and `{}` have the same value",
                    token.name
                )),
                None => {
                    seen.insert(&token.token, &token.name);
                }
            }
        }
        for message in twice {
            self.error(
                &key,
                None,
                message,
                "give each token its own value (`openssl rand -hex 32` for each); \
                 the value decides who is calling, so two names for one value cannot be told apart",
            );
        }
    }

    /// `WASMGATE_TOKEN`, checked as the tokens of the file are.
    pub(super) fn env_token(&mut self) -> Option<HttpToken> {
        env_token(self.env).unwrap_or_else(|e| {
            self.error(&[], None, e.message, e.fix);
            None
        })
    }
}

/// `WASMGATE_TOKEN` is set, but cannot be a token.
#[derive(Debug, thiserror::Error)]
#[error("{message} ({fix})")]
pub struct EnvTokenError {
    pub message: String,
    pub fix: String,
}

/// The fewest characters a bearer token may have.
pub const MIN_TOKEN: usize = 16;

/// The environment variable that adds one token (named after it) to `[http] tokens`.
pub const ENV_TOKEN: &str = "WASMGATE_TOKEN";

/// `WASMGATE_TOKEN` as a token: none when unset; an error, naming the variable, when it
/// is set but empty or shorter than [`MIN_TOKEN`].
pub fn env_token(env: EnvLookup<'_>) -> Result<Option<HttpToken>, EnvTokenError> {
    let Some(token) = env(ENV_TOKEN) else {
        return Ok(None);
    };
    if token.chars().count() < MIN_TOKEN {
        let length = match token.is_empty() {
            true => "set but empty".to_string(),
            false => format!("shorter than {MIN_TOKEN} characters"),
        };
        return Err(EnvTokenError {
            message: format!(
                "environment variable {ENV_TOKEN} is {length}: it would be a bearer token of the HTTP front"
            ),
            fix: format!(
                "set it to a long random token, e.g. `export {ENV_TOKEN}=$(openssl rand -hex 32)`, or unset it"
            ),
        });
    }
    // The token of whoever started the gateway: every scope.
    Ok(Some(HttpToken {
        name: ENV_TOKEN.into(),
        token,
        profiles: Vec::new(),
        mcp: true,
        operator: true,
    }))
}

/// `host:port` with an IP address or `localhost`.
pub fn check_listen(listen: &str) -> Result<(), String> {
    let (host, port) = listen
        .rsplit_once(':')
        .ok_or_else(|| format!("listen \"{listen}\" has no port"))?;
    port.parse::<u16>()
        .map_err(|_| format!("listen \"{listen}\": the port is not a number from 0 to 65535"))?;
    let host = host.trim_start_matches('[').trim_end_matches(']');
    if host != "localhost" && host.parse::<std::net::IpAddr>().is_err() {
        return Err(format!(
            "listen \"{listen}\": the host must be an IP address or localhost"
        ));
    }
    Ok(())
}
