//! `[servers.NAME]` and `mcpServers` entries: the validated server entries.

use super::*;

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

    pub(super) fn server(
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
            transport: ServerTransport::Stdio(StdioCommand {
                command,
                args,
                args_as_written: raw.args.clone(),
                env,
                inherit_env: raw.inherit_env,
                cwd,
            }),
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
