//! `[http]` (the HTTP front: listener, tokens, limits) and `[profiles.NAME]`.

use super::*;

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
        let mut names = std::collections::BTreeSet::new();
        for (i, token) in raw.tokens.into_iter().enumerate() {
            let key = ["http", "tokens"];
            if token.name.trim().is_empty() || !names.insert(token.name.clone()) {
                self.error(
                    &key,
                    Some(&token.name),
                    format!("token {}: its name is empty or used twice", i + 1),
                    "give each token its own name; events and logs show the name, never the token",
                );
            }
            let value = self.expand(&token.token, &key, true);
            if value.len() < 16 {
                self.error(
                    &key,
                    Some(&token.token),
                    format!("token `{}` is shorter than 16 characters", token.name),
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
            out.tokens.push(HttpToken {
                name: token.name,
                token: value,
                profiles: token.profiles,
            });
        }
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
        out.threads = raw.threads.map(|n| n.0);
        match (raw.tls_cert, raw.tls_key) {
            (Some(cert), Some(key)) => {
                let cert = self.path(&cert, &["http", "tls_cert"], true);
                let key = self.path(&key, &["http", "tls_key"], true);
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
        out
    }

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
            let mut globs = |field: &str, patterns: Option<Vec<String>>| {
                patterns.and_then(|p| self.globs(&p, &["profiles", &name, field]))
            };
            let tools = globs("tools", profile.tools);
            let prompts = globs("prompts", profile.prompts);
            let resources = globs("resources", profile.resources);
            out.insert(
                name.clone(),
                Profile {
                    name,
                    tools,
                    prompts,
                    resources,
                    servers: profile.servers,
                },
            );
        }
        out
    }
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
