//! The human-readable summary `wasmgate check` prints. Environment values are never
//! shown, only their names: they often hold secrets.

use std::fmt::Write;
use std::time::Duration;

use super::model::*;
use super::redact::redact_url;

impl Config {
    /// Gateway settings, each server and plugin with what it may do, and the warnings.
    pub fn summary(&self) -> String {
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = self.write_summary(&mut out);
        out
    }

    /// `[http]` and `[profiles]`, when set: token names only, never the tokens.
    fn write_http(&self, out: &mut String) -> std::fmt::Result {
        let h = &self.http;
        if h.listen.is_none()
            && h.tokens.is_empty()
            && h.oauth.is_none()
            && self.profiles.is_empty()
        {
            return Ok(());
        }
        writeln!(out, "http:")?;
        writeln!(
            out,
            "  listen {}{}, sessions at most {} (idle {}), body at most {} bytes",
            h.listen.as_deref().unwrap_or("(only with --http)"),
            if h.tls.is_some() { " with TLS" } else { "" },
            h.max_sessions,
            dur(h.session_idle_timeout),
            h.max_body
        )?;
        let tokens: Vec<String> = h
            .tokens
            .iter()
            .map(|t| match t.profiles.is_empty() {
                true => t.name.clone(),
                false => format!("{} (profiles {})", t.name, t.profiles.join(", ")),
            })
            .collect();
        match tokens.is_empty() {
            true => writeln!(
                out,
                "  tokens: none (loopback only, unless allow_unauthenticated)"
            )?,
            false => writeln!(out, "  tokens: {}", tokens.join(", "))?,
        }
        if let Some(o) = &h.oauth {
            // Never the introspection secret: the client id says which one is used.
            writeln!(
                out,
                "  oauth: issuer {}, resource {}/mcp, scopes {}, principal from `{}`",
                o.issuer,
                o.resource,
                o.scopes.join(" "),
                o.claim
            )?;
            if let Some(i) = &o.introspection {
                writeln!(
                    out,
                    "    introspection at {} as client {}",
                    i.endpoint, i.client_id
                )?;
            }
            for r in &o.rules {
                let profiles = match r.profiles.is_empty() {
                    true => "every profile".to_string(),
                    false => format!("profiles {}", r.profiles.join(", ")),
                };
                let operator = if r.operator { ", operator" } else { "" };
                writeln!(
                    out,
                    "    {} = \"{}\": {profiles}{operator}",
                    r.claim, r.value
                )?;
            }
        }
        for profile in self.profiles.values() {
            self.write_profile(out, profile)?;
        }
        Ok(())
    }

    /// What a profile exposes: its backends, its globs and the tokens that may use it.
    fn write_profile(&self, out: &mut String, profile: &Profile) -> std::fmt::Result {
        let name = &profile.name;
        writeln!(out, "  profile {name}: /mcp/{name}")?;
        let servers = match &profile.servers {
            None => "all".to_string(),
            Some(names) if names.is_empty() => "none".to_string(),
            Some(names) => {
                let shown: Vec<String> = names
                    .iter()
                    .map(|n| {
                        let disabled = self
                            .servers
                            .get(n)
                            .map(|s| s.disabled)
                            .or_else(|| self.plugins.plugins.get(n).map(|p| p.disabled));
                        match disabled {
                            Some(true) => format!("{n} [disabled]"),
                            _ => n.clone(),
                        }
                    })
                    .collect();
                shown.join(", ")
            }
        };
        writeln!(out, "    servers and plugins: {servers}")?;
        let w = &profile.written;
        for (kind, globs) in [
            ("tools", &w.tools),
            ("prompts", &w.prompts),
            ("resources", &w.resources),
        ] {
            let shown = match globs {
                None => "all".to_string(),
                Some(globs) if globs.is_empty() => "none".to_string(),
                Some(globs) => globs.join(", "),
            };
            writeln!(out, "    {kind}: {shown}")?;
        }
        let tokens: Vec<&str> = self
            .http
            .tokens
            .iter()
            .filter(|t| t.profiles.is_empty() || t.profiles.contains(name))
            .map(|t| t.name.as_str())
            .collect();
        if !self.http.tokens.is_empty() {
            let tokens = match tokens.is_empty() {
                true => "none".to_string(),
                false => tokens.join(", "),
            };
            writeln!(out, "    tokens that may use it: {tokens}")?;
        }
        Ok(())
    }

    fn write_summary(&self, out: &mut String) -> std::fmt::Result {
        match &self.source {
            Some(path) => writeln!(out, "configuration: {}", path.display())?,
            None => writeln!(out, "configuration: built-in default")?,
        }
        let g = &self.gateway;
        writeln!(out, "gateway:")?;
        writeln!(
            out,
            "  name {}, tool names {{namespace}}{}{{tool}}",
            g.name, g.separator
        )?;
        writeln!(
            out,
            "  timeout {}, startup timeout {}, init timeout {}, page size {}",
            dur(g.timeout),
            dur(g.startup_timeout),
            dur(g.init_timeout),
            g.page_size
        )?;
        writeln!(
            out,
            "  events {} (last {} kept in memory), log level {}",
            g.events_file
                .as_ref()
                .map_or("not written to a file".into(), |p| p.display().to_string()),
            g.event_buffer,
            g.log_level
        )?;
        writeln!(
            out,
            "  max restarts {}, shutdown grace {}",
            g.max_restarts,
            dur(g.shutdown_grace)
        )?;

        self.write_http(out)?;
        if let Some(endpoint) = &self.telemetry.otlp_endpoint {
            let t = &self.telemetry;
            writeln!(
                out,
                "telemetry: traces to {} (OTLP/HTTP), sampling {}, service {}",
                super::redact_url(endpoint),
                t.sample_ratio,
                t.service_name
            )?;
        }
        writeln!(out, "servers ({}):", self.servers.len())?;
        for s in self.servers.values() {
            let state = if s.disabled { " [disabled]" } else { "" };
            let reached = match &s.transport {
                ServerTransport::Stdio(c) => command_line(&c.command, &c.args_as_written),
                // Header values are secrets (tokens): only their names are shown.
                ServerTransport::Http(h) => {
                    format!("{} ({})", redact_url(&h.url), h.transport.as_str())
                }
            };
            writeln!(out, "  {}{state}: {reached}", s.name)?;
            writeln!(
                out,
                "    namespace {}, timeout {}",
                shown_namespace(&s.namespace),
                dur(s.timeout)
            )?;
            if s.protocol != crate::config::UpstreamProtocol::Auto {
                writeln!(out, "    protocol {}", s.protocol.as_str())?;
            }
            if !s.tool_timeouts.is_empty() {
                let per_tool: Vec<String> = s
                    .tool_timeouts
                    .iter()
                    .map(|(tool, t)| format!("{tool} {}", dur(*t)))
                    .collect();
                writeln!(out, "    tool timeouts: {}", per_tool.join(", "))?;
            }
            match &s.transport {
                ServerTransport::Stdio(c) => {
                    if let Some(cwd) = &c.cwd {
                        writeln!(out, "    cwd {}", cwd.display())?;
                    }
                    if !c.env.is_empty() {
                        let names: Vec<&str> = c.env.keys().map(String::as_str).collect();
                        writeln!(out, "    env {}", names.join(", "))?;
                    }
                }
                ServerTransport::Http(h) => {
                    if !h.headers.is_empty() {
                        let names: Vec<&str> = h.headers.keys().map(String::as_str).collect();
                        writeln!(out, "    headers {} (values not shown)", names.join(", "))?;
                    }
                    if let Some(file) = &h.bearer_token_file {
                        writeln!(out, "    bearer token from {}", file.display())?;
                    }
                    if let Some(oauth) = &h.oauth {
                        let client = match (&oauth.client_id, &oauth.client_metadata_url) {
                            (Some(id), _) => format!("client {id}"),
                            (None, Some(url)) => format!("client metadata {url}"),
                            (None, None) => "dynamic registration".to_string(),
                        };
                        writeln!(
                            out,
                            "    OAuth {} ({client}{})",
                            oauth.grant.as_str(),
                            match oauth.scopes.is_empty() {
                                true => String::new(),
                                false => format!(", scopes {}", oauth.scopes.join(" ")),
                            }
                        )?;
                    }
                    if let Some(file) = &h.ca_file {
                        writeln!(out, "    trusts the CA certificates in {}", file.display())?;
                    }
                    writeln!(
                        out,
                        "    at most {} connections, {} requests in flight",
                        h.max_connections, h.max_in_flight
                    )?;
                }
            }
            write_filter(out, &s.tool_filter)?;
        }

        let p = &self.plugins;
        writeln!(out, "plugins ({} configured):", p.plugins.len())?;
        match &p.dir {
            Some(dir) => writeln!(
                out,
                "  dir {}{}",
                dir.display(),
                if p.watch { " (watched)" } else { "" }
            )?,
            None => writeln!(
                out,
                "  no plugin dir{}",
                if p.watch {
                    "; plugin files watched"
                } else {
                    ""
                }
            )?,
        }
        writeln!(
            out,
            "  bundled plugins {}, compile cache {}",
            if p.bundled { "served" } else { "not served" },
            p.cache_dir
                .as_ref()
                .map_or("off".into(), |d| d.display().to_string())
        )?;
        match &p.data_dir {
            Some(dir) => writeln!(
                out,
                "  plugin stores in {}, {} each",
                dir.display(),
                bytes(p.store_size)
            )?,
            None => writeln!(out, "  plugin stores: off (no data_dir, HOME unset)")?,
        }
        writeln!(out, "  default limits: {}", limits(&p.limits))?;
        for plugin in p.plugins.values() {
            let state = if plugin.disabled { " [disabled]" } else { "" };
            let file = p
                .dir
                .as_ref()
                .map(|d| d.join(format!("{}.wasm", plugin.name)));
            let path = match (&plugin.path, plugin.uses_bundled.as_deref(), file) {
                (Some(path), _, _) => path.display().to_string(),
                // A `[[middleware]] use = "NAME"` is the bundled one, whatever `dir` holds.
                (None, Some(uses), _) => format!("the bundled middleware `{uses}`"),
                (None, None, Some(file)) if file.is_file() => file.display().to_string(),
                _ if p.bundled && super::validate::is_bundled(&plugin.name) => {
                    "bundled into the binary".to_string()
                }
                (None, None, Some(file)) => file.display().to_string(),
                (None, None, None) => format!("{}.wasm", plugin.name),
            };
            writeln!(out, "  {}{state}: {path}", plugin.name)?;
            writeln!(
                out,
                "    namespace {}, {}",
                shown_namespace(&plugin.namespace),
                limits(&plugin.limits)
            )?;
            let hosts = if plugin.allow_hosts.is_empty() {
                "none".into()
            } else {
                plugin.allow_hosts.join(", ")
            };
            writeln!(out, "    may reach hosts: {hosts}")?;
            let dirs: Vec<String> = plugin
                .allow_dirs
                .iter()
                .map(|d| {
                    format!(
                        "{} as {} ({})",
                        d.host.display(),
                        d.guest,
                        if d.read_only { "ro" } else { "rw" }
                    )
                })
                .collect();
            writeln!(
                out,
                "    may open: {}",
                if dirs.is_empty() {
                    "nothing".into()
                } else {
                    dirs.join(", ")
                }
            )?;
            let env = if plugin.allow_env.is_empty() {
                "none".into()
            } else {
                plugin.allow_env.join(", ")
            };
            writeln!(out, "    may read env: {env}")?;
            if !plugin.config.is_empty() {
                let keys: Vec<&str> = plugin.config.keys().map(String::as_str).collect();
                writeln!(out, "    config keys: {}", keys.join(", "))?;
            }
            let kept = &plugin.instances;
            match kept.mode {
                InstanceMode::Call => {}
                InstanceMode::Session => writeln!(
                    out,
                    "    instances: one per client session, dropped after {} idle",
                    humantime::format_duration(kept.idle)
                )?,
                InstanceMode::Shared => writeln!(
                    out,
                    "    instances: shared by all clients{}",
                    kept.max_calls
                        .map_or(String::new(), |n| format!(", replaced after {n} calls"))
                )?,
            }
            if plugin.store == StoreScope::Shared {
                writeln!(out, "    store: one for all principals")?;
            }
            write_filter(out, &plugin.tool_filter)?;
        }

        if !self.warnings.is_empty() {
            writeln!(out, "warnings ({}):", self.warnings.len())?;
            for w in &self.warnings {
                writeln!(out, "  - {w}")?;
            }
        }
        Ok(())
    }
}

fn write_filter(out: &mut String, filter: &ToolFilter) -> std::fmt::Result {
    if !filter.allow_patterns.is_empty() {
        writeln!(out, "    only tools: {}", filter.allow_patterns.join(", "))?;
    }
    if !filter.deny_patterns.is_empty() {
        writeln!(out, "    hidden tools: {}", filter.deny_patterns.join(", "))?;
    }
    Ok(())
}

fn shown_namespace(ns: &str) -> String {
    if ns.is_empty() {
        "none (tools keep their own names)".into()
    } else {
        ns.to_owned()
    }
}

fn command_line(command: &str, args: &[String]) -> String {
    let quote = |s: &str| {
        if s.is_empty() || s.contains(|c: char| c.is_whitespace() || c == '"' || c == '\'') {
            format!("{s:?}")
        } else {
            s.to_owned()
        }
    };
    std::iter::once(command)
        .chain(args.iter().map(String::as_str))
        .map(quote)
        .collect::<Vec<_>>()
        .join(" ")
}

fn limits(l: &PluginLimits) -> String {
    let fuel = l
        .fuel
        .map_or("no fuel limit".into(), |f| format!("fuel {f}"));
    format!(
        "memory {}, timeout {}, {fuel}",
        bytes(l.memory),
        dur(l.timeout)
    )
}

fn dur(d: Duration) -> String {
    humantime::format_duration(d).to_string()
}

pub(crate) fn bytes(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (size, unit) in UNITS {
        if n >= size && n.is_multiple_of(size) {
            return format!("{} {unit}", n / size);
        }
    }
    format!("{n} bytes")
}
