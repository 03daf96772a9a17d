//! What a plugin instance may touch, deny-by-default: the store data of one
//! instance (WASI context, wasi:http context and its host allow list, the
//! `host` interface state, limits), built from the plugin's grants.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use tokio::io::AsyncWrite;
use wasmtime::component::{Resource, ResourceTable};
use wasmtime_wasi::cli::{IsTerminal, StdoutStream};
use wasmtime_wasi::{FsPerms, WasiCtx, WasiCtxBuilder, WasiCtxView, WasiView};
use wasmtime_wasi_http::{
    RequestOptions, WasiBody, WasiHttpCtx, WasiHttpCtxView, WasiHttpHooks, WasiHttpView,
};

use super::host_impl::HostCtx;
use super::limits::{Deadline, LimitState, MAX_RANDOM_BYTES, MemoryBudget, MemoryLimiter};
use super::outbound::HostAllowList;
use super::version::Settings;
use crate::telemetry::budget::Budget;

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
    pub fn new(
        plugin: &Arc<str>,
        settings: &Arc<Settings>,
        budget: &Arc<MemoryBudget>,
    ) -> anyhow::Result<StoreState> {
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
        for granted in &settings.allow_dirs {
            let grant = &granted.grant;
            let perms = if grant.read_only {
                FsPerms::ReadOnly
            } else {
                FsPerms::ReadWrite
            };
            let opened = granted.instance_path().map_err(anyhow::Error::msg)?;
            wasi.preopened_dir(&opened, &grant.guest, perms)
                .map_err(|e| {
                    anyhow::anyhow!(
                        "cannot open granted directory {}: {e}",
                        grant.host.display()
                    )
                })?;
        }
        // Random bytes are made in the gateway's memory, in one go on the thread that runs
        // the call, before they are copied to the plugin's: wasmtime's default (64 MiB)
        // held that thread too long. Guests ask for a few bytes at a time (Python's
        // os.urandom: 256).
        wasi.max_random_size(MAX_RANDOM_BYTES);
        let mut table = ResourceTable::new();
        table.set_max_capacity(super::limits::host_resources());
        Ok(StoreState {
            wasi: wasi.build(),
            http: WasiHttpCtx::new(),
            table,
            hosts: HostAllowList {
                plugin: plugin.clone(),
                patterns: settings.allow_hosts.clone(),
                private_addresses: settings.allow_private_addresses,
                log_budget: log_budget.clone(),
                refused: Default::default(),
            },
            host: HostCtx::new(plugin.clone(), settings.config.clone(), log_budget),
            memory: MemoryLimiter::new(settings.limits.memory, budget.clone()),
            deadline: Deadline::after(settings.limits.timeout),
            stderr_tail,
        })
    }

    /// Readies the store for a call that reports to `sinks`. A kept instance's earlier
    /// calls may have been another client's: nothing of theirs is quoted to this one.
    pub fn begin_call(&mut self, sinks: super::host_impl::Sinks) {
        super::lock(&self.stderr_tail).clear();
        self.host.begin_call(sinks);
    }

    /// Sends what the call held back, and lets go of its client.
    pub fn end_call(&mut self) {
        self.host.call_ended();
        self.host.sinks = Default::default();
    }

    /// A reply for a 0.2 call to write its result into.
    pub fn new_reply(
        &mut self,
        purpose: super::reply::ReplyFor,
    ) -> wasmtime::Result<Resource<super::reply::Reply>> {
        Ok(self.table.push(super::reply::Reply::new(purpose))?)
    }

    /// The reply a call wrote, taken back.
    pub fn take_reply(
        &mut self,
        reply: Resource<super::reply::Reply>,
    ) -> wasmtime::Result<super::reply::Reply> {
        Ok(self.table.delete(reply)?)
    }

    /// What the 0.2 world's imports reach.
    pub fn v2(&mut self) -> super::host_v2::HostV2<'_> {
        super::host_v2::HostV2 {
            host: &mut self.host,
            table: &mut self.table,
            deadline: &mut self.deadline,
        }
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

pub(super) type SendFuture = Box<
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
        self.send(request, options)
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
    use super::quote;

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
