//! `[servers.NAME]` and `mcpServers` entries: the validated server entries.

use std::collections::BTreeMap;
use std::path::Path;

use super::Ctx;
use crate::config::model::{
    GatewayConfig, HttpEndpoint, HttpTransport, MAX_MESSAGE, ServerConfig, ServerTransport,
    StdioCommand, UpstreamProtocol,
};
use crate::config::raw;
use crate::protocol::LATEST_VERSION as LEGACY_VERSION;
use crate::protocol::modern::MODERN_VERSION;

impl Ctx<'_> {
    /// An `mcpServers` entry to our server schema; `None` when it is skipped.
    pub(super) fn client_server(
        &mut self,
        name: &str,
        entry: raw::ClientServer,
    ) -> Option<raw::Server> {
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
        if matches!(transport, Some("ws" | "websocket")) {
            self.warnings.push(format!(
                "server `{name}` is remote over WebSocket, which MCP does not define; skipped"
            ));
            return None;
        }
        let remote = remote || (entry.url.is_some() && entry.command.is_empty());
        if entry.url.is_some() && !remote {
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
            exclusive: entry.exclusive,
            protocol: entry.protocol,
            transport: remote.then(|| {
                match transport {
                    Some("sse") => "sse",
                    Some(_) => "streamable-http",
                    // A bare `url`: what the server speaks is found out.
                    None => "auto",
                }
                .to_string()
            }),
            bearer_token_env: entry.bearer_token_env,
            bearer_token_file: entry.bearer_token_file,
            ca_file: entry.ca_file,
            max_connections: entry.max_connections,
            max_in_flight: entry.max_in_flight,
            max_message: entry.max_message,
            max_concurrent: None,
            breaker: None,
            url: entry.url.filter(|_| remote),
            headers: entry.headers.filter(|_| remote),
            oauth: None,
        })
    }

    pub(super) fn server(
        &mut self,
        name: &str,
        raw: raw::Server,
        gateway: &GatewayConfig,
    ) -> Option<ServerConfig> {
        let s = self.servers_key();
        let strict = !raw.disabled;
        let transport = match raw.url.is_some() || raw.headers.is_some() {
            true => ServerTransport::Http(self.remote(name, &raw, strict)?),
            false => ServerTransport::Stdio(self.stdio(name, &raw, strict)?),
        };
        let namespace = self.namespace(name, raw.namespace, &[s, name], "server");
        let mut tool_timeouts = BTreeMap::new();
        for (tool, t) in raw.tool_timeouts {
            tool_timeouts.insert(tool, t.0);
        }
        let tool_filter = self.filter(raw.tools.as_deref(), &raw.disabled_tools, &[s, name]);
        let protocol = self.upstream_protocol(name, raw.protocol.as_deref());
        let remote = matches!(transport, ServerTransport::Http(_));
        Some(ServerConfig {
            name: name.to_owned(),
            transport,
            namespace,
            timeout: raw.timeout.map_or(gateway.timeout, |t| t.0),
            tool_timeouts,
            tool_filter,
            disabled: raw.disabled,
            exclusive: raw.exclusive,
            protocol,
            max_concurrent: raw.max_concurrent.map(|n| n.0),
            breaker: crate::config::BreakerConfig::from_raw(raw.breaker, remote),
        })
    }

    /// `protocol`: the era the server is spoken to in; "auto" finds it out.
    fn upstream_protocol(&mut self, name: &str, written: Option<&str>) -> UpstreamProtocol {
        match written {
            None | Some("auto") => UpstreamProtocol::Auto,
            Some(LEGACY_VERSION) => UpstreamProtocol::Legacy,
            Some(MODERN_VERSION) => UpstreamProtocol::Modern,
            Some(other) => {
                let s = self.servers_key();
                self.error(
                    &[s, name, "protocol"],
                    None,
                    format!("server `{name}`: unknown protocol \"{other}\""),
                    "write \"auto\", \"2025-11-25\" or \"2026-07-28\"",
                );
                UpstreamProtocol::Auto
            }
        }
    }

    /// A remote server's URL, headers (`${VAR}` expanded) and transport.
    fn remote(&mut self, name: &str, raw: &raw::Server, strict: bool) -> Option<HttpEndpoint> {
        let s = self.servers_key();
        let url = self.expand(raw.url.as_deref().unwrap_or(""), &[s, name, "url"], strict);
        if !raw.command.is_empty() {
            self.error(
                &[s, name, "url"],
                None,
                format!("server `{name}` has both a command and a url"),
                "keep `command` for a server the gateway starts, or `url` for a remote one",
            );
        }
        match url.parse::<::http::Uri>() {
            // Credentials in the URL would go out in the `Host` header, in the clear over
            // http://, and show wherever the URL is shown: refused, with the headers to use.
            Ok(uri) if uri.authority().is_some_and(|a| a.as_str().contains('@')) => self.error(
                &[s, name, "url"],
                None,
                format!(
                    "server `{name}`: url \"{}\" carries credentials (user:password@)",
                    crate::config::redact_url(&url)
                ),
                "remove them from the url; send a token with bearer_token_env or bearer_token_file, \
                 or any scheme with headers = { Authorization = \"Basic ${VAR}\" }",
            ),
            Ok(uri)
                if matches!(uri.scheme_str(), Some("http" | "https")) && uri.host().is_some() => {}
            _ => self.error(
                &[s, name, "url"],
                None,
                format!(
                    "server `{name}`: url \"{}\" is not an http:// or https:// URL",
                    crate::config::redact_url(&url)
                ),
                "write the server's MCP endpoint, e.g. url = \"https://example.com/mcp\"",
            ),
        }
        let mut headers = BTreeMap::new();
        for (key, value) in raw.headers.iter().flatten() {
            let value = self.expand(value, &[s, name, "headers", key], strict);
            if ::http::HeaderName::from_bytes(key.as_bytes()).is_err()
                || ::http::HeaderValue::from_str(&value).is_err()
            {
                // The value is a secret: the message names the header only.
                self.error(
                    &[s, name, "headers"],
                    Some(key),
                    format!(
                        "server `{name}`: header `{key}` is not a valid HTTP header name and value"
                    ),
                    "use a token for the name and visible ASCII for the value",
                );
                continue;
            }
            headers.insert(key.clone(), value);
        }
        if let Some(var) = &raw.bearer_token_env {
            let token = self.expand(
                &format!("${{{var}}}"),
                &[s, name, "bearer_token_env"],
                strict,
            );
            headers.insert("Authorization".into(), format!("Bearer {}", token.trim()));
        }
        let bearer_token_file = raw
            .bearer_token_file
            .as_deref()
            .and_then(|file| self.path(file, &[s, name, "bearer_token_file"], strict));
        if let Some(file) = &bearer_token_file {
            self.private_file(file, &[s, name, "bearer_token_file"], strict);
        }
        let transport = match raw.transport.as_deref() {
            None | Some("auto") => HttpTransport::Auto,
            Some("streamable-http" | "streamableHttp" | "http") => HttpTransport::StreamableHttp,
            Some("sse") => HttpTransport::Sse,
            Some(other) => {
                self.error(
                    &[s, name, "transport"],
                    None,
                    format!("server `{name}`: unknown transport \"{other}\""),
                    "write \"streamable-http\", \"sse\" or \"auto\"",
                );
                HttpTransport::Auto
            }
        };
        let ca_file = raw
            .ca_file
            .as_deref()
            .and_then(|file| self.path(file, &[s, name, "ca_file"], strict));
        let mut limit = |value: Option<raw::AtLeastOne>, key: &str, default, most| {
            let n = value.map_or(default, |n| n.0);
            if n > most {
                self.error(
                    &[s, name, key],
                    None,
                    format!("server `{name}`: {key} = {n} is more than {most}"),
                    format!("write a number from 1 to {most}"),
                );
            }
            n.min(most)
        };
        let max_connections = limit(raw.max_connections, "max_connections", 64, 1024);
        let max_in_flight = limit(raw.max_in_flight, "max_in_flight", 64, 4096);
        let max_message = raw
            .max_message
            .map_or(MAX_MESSAGE, |n| usize::try_from(n.0).unwrap_or(usize::MAX));
        let oauth = raw
            .oauth
            .as_ref()
            .and_then(|oauth| self.oauth_client(name, oauth, strict));
        Some(HttpEndpoint {
            oauth,
            url,
            headers,
            bearer_token_file,
            ca_file,
            transport,
            max_connections,
            max_in_flight,
            max_message,
        })
    }

    /// A file holding a secret must be readable by its owner alone, as ssh asks of a
    /// private key; a file that does not exist yet is read (and checked) when it appears.
    fn private_file(&mut self, file: &Path, key: &[&str], strict: bool) {
        use std::os::unix::fs::PermissionsExt;
        let Ok(meta) = std::fs::metadata(file) else {
            return;
        };
        let mode = meta.permissions().mode() & 0o777;
        if mode & 0o077 == 0 {
            return;
        }
        let message = format!(
            "{} holds a secret, yet other users may read or change it (mode {mode:03o})",
            file.display()
        );
        let fix = format!("chmod 600 {}", file.display());
        if strict {
            self.error(key, None, message, fix);
        } else {
            self.warnings
                .push(format!("{}: {message} ({fix})", key.join(".")));
        }
    }

    /// What starts a local server's process.
    fn stdio(&mut self, name: &str, raw: &raw::Server, strict: bool) -> Option<StdioCommand> {
        let s = self.servers_key();
        let remote_keys = [
            ("transport", raw.transport.is_some()),
            ("max_connections", raw.max_connections.is_some()),
            ("max_in_flight", raw.max_in_flight.is_some()),
            ("max_message", raw.max_message.is_some()),
        ];
        for (key, _) in remote_keys.iter().filter(|(_, set)| *set) {
            self.warnings.push(format!(
                "server `{name}`: `{key}` is ignored because the entry has no `url`"
            ));
        }
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
        Some(StdioCommand {
            command,
            args,
            args_as_written: raw.args.clone(),
            env,
            inherit_env: raw.inherit_env,
            cwd,
        })
    }

    /// Whether this entry is the gateway itself pointed at the file being loaded, as in a
    /// Claude Desktop config that lists wasmgate next to the servers it should gather.
    /// (A wrapper such as `sh -c "wasmgate ..."` is caught when the started gateway sees
    /// its config among its parents': see `crate::nesting`.)
    pub(super) fn runs_this_config(
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
}
