//! What a plugin instance may touch, deny-by-default: the store data of one
//! instance (WASI context, wasi:http context and its host allow list, the
//! `host` interface state, limits), built from the plugin's grants.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use http_body_util::BodyExt;
use tokio::io::AsyncWrite;
use wasmtime::component::ResourceTable;
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{
    RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

use super::Settings;
use super::budget::Budget;
use super::host_impl::HostCtx;
use super::limits::{Deadline, LimitState, MAX_HOST_RESOURCES, MAX_RANDOM_BYTES, MemoryLimiter};

/// The `T` of every `Store<T>`: lives exactly as long as one instance.
pub struct StoreState {
    wasi: WasiCtx,
    http: WasiHttpCtx,
    table: ResourceTable,
    hosts: HostAllowList,
    pub host: HostCtx,
    pub memory: MemoryLimiter,
    pub deadline: Deadline,
    /// The last lines the instance wrote to stderr: a trap's error result quotes them
    /// (a Rust panic's message, a Python traceback's last line).
    stderr_tail: StderrTail,
}

type StderrTail = Arc<Mutex<VecDeque<String>>>;

/// Lines of stderr a trap's message quotes, at most, and characters per line; lines kept
/// to choose them from.
const TAIL_LINES: usize = 4;
const TAIL_LINE_CHARS: usize = 300;
const TAIL_KEPT: usize = 16;

impl StoreState {
    /// The sandbox of one instance of `plugin`, from its grants. Fails only when
    /// a granted directory cannot be opened.
    pub fn new(plugin: &Arc<str>, settings: &Arc<Settings>) -> anyhow::Result<StoreState> {
        let mut wasi = WasiCtxBuilder::new();
        let stderr_tail = StderrTail::default();
        // One budget for every line the instance puts in the gateway's log.
        let log_budget: Arc<Mutex<Budget>> = Arc::default();
        // No args, no stdin, no inherited environment; network off at the
        // socket level (wasi:http goes through the allow list below).
        wasi.stdout(LogStream {
            plugin: plugin.clone(),
            stream: "stdout",
            tail: None,
            budget: log_budget.clone(),
        })
        .stderr(LogStream {
            plugin: plugin.clone(),
            stream: "stderr",
            tail: Some(stderr_tail.clone()),
            budget: log_budget.clone(),
        })
        .allow_tcp(false)
        .allow_udp(false)
        .allow_ip_name_lookup(false);
        for name in &settings.allow_env {
            if let Ok(value) = std::env::var(name) {
                wasi.env(name, value);
            }
        }
        for grant in &settings.allow_dirs {
            let perms = if grant.read_only {
                FsPerms::ReadOnly
            } else {
                FsPerms::ReadWrite
            };
            wasi.preopened_dir(&grant.host, &grant.guest, perms)
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot open granted directory {}: {e}",
                        grant.host.display()
                    )
                })?;
        }
        // Random bytes are made in the gateway's memory, in one go on the thread that runs
        // the call, before they are copied to the plugin's: 64 MiB (wasmtime's default)
        // took ~200 ms. Guests ask for a few bytes at a time (Python's os.urandom: 256).
        wasi.max_random_size(MAX_RANDOM_BYTES);
        let mut table = ResourceTable::new();
        table.set_max_capacity(MAX_HOST_RESOURCES);
        Ok(StoreState {
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            table,
            hosts: HostAllowList {
                plugin: plugin.clone(),
                patterns: settings.allow_hosts.clone(),
            },
            host: HostCtx::new(plugin.clone(), settings.config.clone(), log_budget),
            memory: MemoryLimiter::new(settings.limits.memory),
            deadline: Deadline::after(settings.limits.timeout),
            stderr_tail,
        })
    }

    /// The instance's last non-empty stderr lines, joined; empty when it wrote none.
    pub fn stderr_tail(&self) -> String {
        let tail = super::lock(&self.stderr_tail);
        quote(&Vec::from_iter(tail.iter().map(String::as_str)))
    }
}

impl WasiView for StoreState {
    fn ctx(&mut self) -> WasiCtxView<'_> {
        WasiCtxView {
            ctx: &mut self.wasi,
            table: &mut self.table,
        }
    }
}

impl WasiHttpView for StoreState {
    fn http(&mut self) -> WasiHttpCtxView<'_> {
        WasiHttpCtxView {
            ctx: &mut self.http,
            table: &mut self.table,
            hooks: &mut self.hosts,
        }
    }
}

impl LimitState for StoreState {
    fn deadline(&mut self) -> &mut Deadline {
        &mut self.deadline
    }
}

/// The hosts a plugin may send HTTP requests to: `name` (any port), `name:port`,
/// `*.suffix` (names under it, not the suffix itself, not IP addresses) or `*` (any
/// host). Anything else is answered `HTTP-request-denied` before a connection is made.
pub struct HostAllowList {
    plugin: Arc<str>,
    patterns: Vec<String>,
}

impl HostAllowList {
    pub fn allows(patterns: &[String], host: &str, port: u16) -> bool {
        let host = host.trim_end_matches('.').to_ascii_lowercase();
        patterns.iter().any(|pattern| {
            let pattern = pattern.to_ascii_lowercase();
            let (pat_host, pat_port) = split_host_port(&pattern);
            if pat_port.is_some_and(|p| p != port) {
                return false;
            }
            if pat_host == "*" {
                return true;
            }
            match pat_host.strip_prefix("*.") {
                // A wildcard names DNS names: `*.0.0.1` must not open 127.0.0.1.
                Some(suffix) => {
                    host.parse::<std::net::IpAddr>().is_err()
                        && host.len() > suffix.len() + 1
                        && host.ends_with(&format!(".{suffix}"))
                }
                None => host == pat_host,
            }
        })
    }
}

/// `host[:port]`, also `[v6]:port`.
fn split_host_port(s: &str) -> (&str, Option<u16>) {
    if let Some(rest) = s.strip_prefix('[')
        && let Some((host, tail)) = rest.split_once(']')
    {
        return (host, tail.strip_prefix(':').and_then(|p| p.parse().ok()));
    }
    match s.rsplit_once(':') {
        Some((host, port)) if !host.contains(':') => match port.parse() {
            Ok(port) => (host, Some(port)),
            Err(_) => (s, None),
        },
        _ => (s, None),
    }
}

/// Most of a denied request's body read (and discarded) before answering.
const DENIED_BODY_DRAIN: usize = 1 << 20;

type SendFuture = Box<
    dyn Future<
            Output = wasmtime_wasi_http::Result<(
                http::Response<WasiBody>,
                Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            )>,
        > + Send,
>;

impl WasiHttpHooks for HostAllowList {
    fn send_request(
        &mut self,
        request: http::Request<WasiBody>,
        options: Option<RequestOptions>,
        _fut: Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
    ) -> SendFuture {
        let uri = request.uri();
        let https = uri.scheme() == Some(&http::uri::Scheme::HTTPS);
        let allowed = uri.host().is_some_and(|host| {
            let port = uri.port_u16().unwrap_or(if https { 443 } else { 80 });
            HostAllowList::allows(
                &self.patterns,
                host.trim_start_matches('[').trim_end_matches(']'),
                port,
            )
        });
        if !allowed {
            tracing::warn!(plugin = %self.plugin, uri = %uri, "outgoing HTTP request denied: host not in allow_hosts");
            // Take the body the guest is writing (and drop it) so that the guest
            // sees the denial on the response rather than a broken body stream.
            return Box::new(async move {
                let mut body = request.into_body();
                let mut taken = 0usize;
                while let Some(Ok(frame)) = body.frame().await {
                    taken += frame.data_ref().map_or(0, |d| d.len());
                    if taken > DENIED_BODY_DRAIN {
                        break;
                    }
                }
                Err(wasmtime_wasi_http::Error::HttpRequestDenied)
            });
        }
        tracing::debug!(plugin = %self.plugin, uri = %uri, method = %request.method(), "outgoing HTTP request");
        Box::new(async move {
            let (response, io) = wasmtime_wasi_http::default_send_request(request, options).await?;
            Ok((
                response.map(BodyExt::boxed_unsync),
                Box::new(io) as Box<dyn Future<Output = wasmtime_wasi_http::Result<()>> + Send>,
            ))
        })
    }
}

/// A plugin's stdout or stderr: lines go to the gateway log, tagged with the
/// plugin's name, never to the process's own stdout.
struct LogStream {
    plugin: Arc<str>,
    stream: &'static str,
    tail: Option<StderrTail>,
    budget: Arc<Mutex<Budget>>,
}

impl IsTerminal for LogStream {
    fn is_terminal(&self) -> bool {
        false
    }
}

impl StdoutStream for LogStream {
    fn async_stream(&self) -> Box<dyn AsyncWrite + Send + Sync> {
        Box::new(LineLogger {
            plugin: self.plugin.clone(),
            stream: self.stream,
            tail: self.tail.clone(),
            budget: self.budget.clone(),
            pending: Vec::new(),
        })
    }
}

/// The last [`TAIL_LINES`] of `lines`, joined. A JavaScript runtime prints an error's
/// message, then `Stack:` and the frames: the message is what a client can use, so the
/// quote ends before the last `Stack:`.
fn quote(lines: &[&str]) -> String {
    let lines = match lines.iter().rposition(|line| *line == "Stack:") {
        Some(stack) if stack > 0 => &lines[..stack],
        _ => lines,
    };
    lines[lines.len().saturating_sub(TAIL_LINES)..].join(" / ")
}

/// Longest line kept before it is logged in pieces.
const MAX_LINE: usize = 8 * 1024;

struct LineLogger {
    plugin: Arc<str>,
    stream: &'static str,
    tail: Option<StderrTail>,
    budget: Arc<Mutex<Budget>>,
    pending: Vec<u8>,
}

impl LineLogger {
    fn emit(&self, line: &[u8]) {
        let line = String::from_utf8_lossy(line);
        let line = line.trim_end_matches(['\r', '\n']);
        // A blank line says nothing in a log (Rust's panic message starts with one).
        if line.trim().is_empty() {
            return;
        }
        // The quote of a trap below still sees every line.
        if super::lock(&self.budget).take_or_drop() {
            let line = crate::telemetry::one_line(line);
            tracing::info!(target: "wasmgate::plugin::output", plugin = %self.plugin, stream = self.stream, "{line}");
        }
        // Runtimes' own notes are no use to a client: Rust's hint to set RUST_BACKTRACE
        // (which it cannot), SpiderMonkey's word on how it aborts.
        let quotable = !line.starts_with("note: run with `RUST_BACKTRACE")
            && line != "Redirecting call to abort() to mozalloc_abort";
        if let Some(tail) = self.tail.as_ref().filter(|_| quotable) {
            let mut tail = super::lock(tail);
            if tail.len() == TAIL_KEPT {
                tail.pop_front();
            }
            tail.push_back(line.trim().chars().take(TAIL_LINE_CHARS).collect());
        }
    }

    fn flush_lines(&mut self) {
        while let Some(end) = self.pending.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.pending.drain(..=end).collect();
            self.emit(&line);
        }
        if self.pending.len() >= MAX_LINE {
            let chunk = std::mem::take(&mut self.pending);
            self.emit(&chunk);
        }
    }
}

impl AsyncWrite for LineLogger {
    fn poll_write(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<std::io::Result<usize>> {
        self.pending.extend_from_slice(buf);
        self.flush_lines();
        Poll::Ready(Ok(buf.len()))
    }

    fn poll_flush(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _cx: &mut Context<'_>) -> Poll<std::io::Result<()>> {
        Poll::Ready(Ok(()))
    }
}

impl Drop for LineLogger {
    fn drop(&mut self) {
        if !self.pending.is_empty() {
            let rest = std::mem::take(&mut self.pending);
            self.emit(&rest);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{HostAllowList, quote};

    #[test]
    fn host_patterns() {
        let p = vec![
            "api.example.test".to_string(),
            "*.svc.test".into(),
            "127.0.0.1:8080".into(),
        ];
        assert!(HostAllowList::allows(&p, "api.example.test", 443));
        assert!(HostAllowList::allows(&p, "API.example.test", 80));
        assert!(!HostAllowList::allows(&p, "evil.example.test", 443));
        assert!(HostAllowList::allows(&p, "a.svc.test", 443));
        assert!(HostAllowList::allows(&p, "a.b.svc.test", 443));
        assert!(!HostAllowList::allows(&p, "svc.test", 443));
        assert!(!HostAllowList::allows(&p, "xsvc.test", 443));
        assert!(HostAllowList::allows(&p, "127.0.0.1", 8080));
        assert!(!HostAllowList::allows(&p, "127.0.0.1", 8081));
        assert!(!HostAllowList::allows(&[], "api.example.test", 443));
        assert!(!HostAllowList::allows(&["*.0.0.1".into()], "127.0.0.1", 80));
        let any = vec!["*".to_string()];
        assert!(HostAllowList::allows(&any, "127.0.0.1", 8081));
        assert!(HostAllowList::allows(&any, "example.test", 443));
    }

    /// A trap quotes the error's message: the last lines, or for JavaScript the lines
    /// before its stack (as componentize-js's runtime prints them).
    #[test]
    fn trap_quotes() {
        let rust = [
            "thread '<unnamed>' panicked at src/lib.rs:9:5:",
            "faulty.trap: requested panic",
        ];
        assert_eq!(
            quote(&rust),
            "thread '<unnamed>' panicked at src/lib.rs:9:5: / faulty.trap: requested panic"
        );
        let js = [
            "about to throw",
            "invalid variant tag value `undefined` (received `TypeError: boom`) specified for `CallError`",
            "Stack:",
            "export_tool_0_1_0$callTool@/tmp/8e0c/sources/initializer.js:583:17",
            "callTool@plugin.js:12:5",
            "main@plugin.js:20:1",
        ];
        assert_eq!(
            quote(&js),
            "about to throw / invalid variant tag value `undefined` (received `TypeError: boom`) specified for `CallError`"
        );
        let python = [
            "Traceback (most recent call last):",
            "  File \"app.py\", line 3",
            "a",
            "b",
            "ValueError: bad",
        ];
        assert_eq!(
            quote(&python),
            "  File \"app.py\", line 3 / a / b / ValueError: bad"
        );
        assert_eq!(quote(&["Stack:", "frame"]), "Stack: / frame");
        assert_eq!(quote(&[]), "");
    }
}
