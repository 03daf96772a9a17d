//! An example MCP server: the real subprocess backend of wasmgate's integration tests
//! and the baseline of its latency benchmarks.
//!
//! It speaks MCP (2024-11-05 to 2025-11-25) over stdio: newline-delimited JSON-RPC 2.0,
//! one message per line, protocol only on stdout and logs only on stderr. Requests are
//! answered concurrently; calls that wait (`slow`, `hang`, `sample`, `elicit`, `roots`)
//! run in their own task and can be cancelled with `notifications/cancelled`.
//!
//! Run it with `cargo run --example mcp_example_server -- [FLAGS]`. Modes, all off by default:
//!
//! - `--name NAME`          serverInfo name and logger name (default `example`)
//! - `--crash-after N`      exit(1) when the N-th `tools/call` arrives, without answering it
//! - `--exit-at-start`      write a line to stderr and exit(3) at once
//! - `--start-delay-ms N`   sleep N ms before reading stdin
//! - `--garbage`            before each `tools/call` answer, write a non-JSON line and a
//!   JSON line that is not JSON-RPC
//! - `--tools N`            also expose the tools `gen_0` .. `gen_{N-1}`
//! - `--page-size K`        page every list result, K items a page, with `nextCursor`
//! - `--instructions TEXT`  return `instructions` from `initialize`
//! - `--protocol VERSION`   answer `initialize` with this version instead of negotiating
//! - `--close-stdout-after N` close stdout when the N-th `tools/call` arrives, and keep running
//! - `--non-object-results` answer every `tools/call` with the result `42` (not an object)
//! - `--schemaless-tool`    also list a tool `loose` without the `inputSchema` MCP requires,
//!   and a tool `odd name` with a space in its name (which MCP advises against)
//! - `--endless-cursor`     end every list page with `nextCursor` "again", whatever was asked
//! - `--ignore-cancel`      let calls run on after `notifications/cancelled` (still sending
//!   their progress), as some servers do
//! - `--stop-reading-after N` stop reading stdin (and keep running) once the N-th
//!   `tools/call` is answered
//! - `--items N`            also list prompts `prompt_0`.., resources `example://gen/0`..
//!   and templates `example://gen/{id}/0`.. (N of each)
//! - `--ignore-term`        ignore SIGTERM, and stay after stdin closes (only SIGKILL stops it)
//! - `--stderr-junk`        at each `tools/call`, write to stderr bytes that are not UTF-8,
//!   a 1 MiB line and terminal escapes (a server that crashes if its stderr stops being read)
//! - `--tokio-stdio`        read and write through tokio's `stdin()`/`stdout()`, which hand
//!   each read and flush to a blocking thread, as servers on the official Rust SDK (rmcp's
//!   `stdio()`) do; by default pipes go through the reactor, as in the gateway
//!
//! Environment variables: none are read; a test chooses every behaviour through `args`.
//! When stdin closes, it writes what is queued and exits 0, dropping calls still in flight.
//!
//! Tools: `echo`, `add`, `slow`, `fail`, `error`, `log`, `sample`, `elicit`, `roots`,
//! `notify_changed` (adds `late_tool`), `update_resource`, `big`, `hang`, `pid`.
//! Resources: `example://static/hello`, `example://static/blob`, template `example://item/{id}`.
//! Prompts: `greet`. Completions for the `greet` argument `name` and the template's `id`.

use std::collections::{HashMap, HashSet};
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU8, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};
use tokio::io::{AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, BufWriter};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

const SUPPORTED_VERSIONS: [&str; 4] = ["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];
const DEFAULT_VERSION: &str = "2025-06-18";
/// RFC 5424 severities, least severe first, as MCP's `logging/setLevel` names them.
#[rustfmt::skip]
const LOG_LEVELS: [&str; 8] =
    ["debug", "info", "notice", "warning", "error", "critical", "alert", "emergency"];
/// Tools that wait on a timer or on the client. Each runs in its own task, so it blocks
/// nothing and can be aborted; every other request is answered inline by the reader.
const WAITING_TOOLS: [&str; 5] = ["slow", "hang", "sample", "elicit", "roots"];
const ITEM_TEMPLATE: &str = "example://item/{id}";
/// `big` refuses more, so a typo in a test cannot exhaust the machine's memory.
const MAX_BIG_BYTES: u64 = 256 << 20;
const BLOB_BASE64: &str = "AAECAwQFBgc="; // the bytes 0..=7

#[derive(Default)]
struct Config {
    name: String,
    crash_after: Option<u64>,
    exit_at_start: bool,
    start_delay_ms: u64,
    garbage: bool,
    generated_tools: usize,
    page_size: Option<usize>,
    instructions: Option<String>,
    protocol: Option<String>,
    close_stdout_after: Option<u64>,
    non_object_results: bool,
    schemaless_tool: bool,
    endless_cursor: bool,
    ignore_cancel: bool,
    tokio_stdio: bool,
    stderr_junk: bool,
    stop_reading_after: Option<u64>,
    items: usize,
    ignore_term: bool,
    /// Answers nothing before `initialize`, as servers on some SDKs do.
    silent_before_init: bool,
}

impl Config {
    fn from_args() -> Result<Config, String> {
        let mut config = Config {
            name: "example".to_owned(),
            ..Config::default()
        };
        let mut args = std::env::args().skip(1);
        while let Some(flag) = args.next() {
            let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
            match flag.as_str() {
                "--name" => config.name = value()?,
                "--crash-after" => config.crash_after = Some(parse(&flag, value()?)?),
                "--exit-at-start" => config.exit_at_start = true,
                "--start-delay-ms" => config.start_delay_ms = parse(&flag, value()?)?,
                "--garbage" => config.garbage = true,
                "--tools" => config.generated_tools = parse(&flag, value()?)?,
                "--page-size" => {
                    config.page_size = Some(parse(&flag, value()?)?).filter(|&k| k > 0)
                }
                "--instructions" => config.instructions = Some(value()?),
                "--protocol" => config.protocol = Some(value()?),
                "--close-stdout-after" => config.close_stdout_after = Some(parse(&flag, value()?)?),
                "--non-object-results" => config.non_object_results = true,
                "--schemaless-tool" => config.schemaless_tool = true,
                "--endless-cursor" => config.endless_cursor = true,
                "--ignore-cancel" => config.ignore_cancel = true,
                "--tokio-stdio" => config.tokio_stdio = true,
                "--stderr-junk" => config.stderr_junk = true,
                "--stop-reading-after" => config.stop_reading_after = Some(parse(&flag, value()?)?),
                "--items" => config.items = parse(&flag, value()?)?,
                "--ignore-term" => config.ignore_term = true,
                "--silent-before-init" => config.silent_before_init = true,
                _ => return Err(format!("unknown flag {flag}")),
            }
        }
        Ok(config)
    }
}

fn parse<T: FromStr>(flag: &str, text: String) -> Result<T, String> {
    text.parse()
        .map_err(|_| format!("{flag}: not a valid number: {text}"))
}

/// Any message from the client: a request, a notification, or a response to our request.
#[derive(Deserialize)]
struct Incoming {
    id: Option<Value>,
    method: Option<String>,
    #[serde(default)]
    params: Value,
    result: Option<Value>,
    error: Option<Value>,
}

#[derive(Serialize)]
struct Response<'a> {
    jsonrpc: &'static str,
    id: &'a Value,
    #[serde(skip_serializing_if = "Option::is_none")]
    result: Option<Value>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<RpcError>,
}

#[derive(Serialize)]
struct RpcError {
    code: i64,
    message: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    data: Option<Value>,
}

impl RpcError {
    fn new(code: i64, message: impl Into<String>) -> RpcError {
        RpcError {
            code,
            message: message.into(),
            data: None,
        }
    }

    fn invalid_params(message: impl Into<String>) -> RpcError {
        RpcError::new(-32602, message)
    }
}

type Outcome = Result<Value, RpcError>;

/// What the writer task receives: a serialized line, or the order to flush and exit.
enum Output {
    Line(Vec<u8>),
    Exit(i32),
    /// Flush, then close stdout for good (the process runs on).
    CloseStdout,
}

struct Server {
    config: Config,
    out: mpsc::UnboundedSender<Output>,
    base_tools: Vec<Value>,
    generated_tools: Vec<Value>,
    late_tool: Value,
    late_tool_added: AtomicBool,
    /// Set by `notify_changed` with `what`: a prompt and a resource more.
    late_items: AtomicBool,
    tool_calls: AtomicU64,
    /// Whether `initialize` came (for `--silent-before-init`).
    initialized: AtomicBool,
    log_level: AtomicU8,
    subscriptions: Mutex<HashSet<String>>,
    /// Waiting tool calls in flight, keyed by their request id as JSON text (so 1 != "1").
    running: Mutex<HashMap<String, AbortHandle>>,
    /// Our own requests to the client, waiting for the response that comes in on stdin.
    waiting: Mutex<HashMap<u64, oneshot::Sender<Result<Value, Value>>>>,
    next_request_id: AtomicU64,
}

fn main() {
    let config = Config::from_args().unwrap_or_else(|error| {
        eprintln!("mcp_example_server: {error}");
        std::process::exit(2);
    });
    if config.ignore_term {
        // SAFETY: setting a signal's disposition to ignore has no other effect.
        unsafe { libc::signal(libc::SIGTERM, libc::SIG_IGN) };
    }
    if config.exit_at_start {
        eprintln!("mcp_example_server: exiting at start, as --exit-at-start asks");
        std::process::exit(3);
    }
    // One thread is plenty for this workload and keeps the benchmark baseline free of
    // cross-thread wake-ups.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    runtime.block_on(run(config));
}

async fn run(config: Config) {
    // The gateway's own stdio: pipes go through the reactor, not through tokio's
    // stdin()/stdout() and their blocking thread (a thread hop per read and per flush),
    // so the benchmark's direct baseline is not slowed by what the gateway avoids.
    let (input, output): (
        Box<dyn AsyncRead + Unpin + Send>,
        Box<dyn AsyncWrite + Unpin + Send>,
    ) = if config.tokio_stdio {
        (Box::new(tokio::io::stdin()), Box::new(tokio::io::stdout()))
    } else {
        wasmgate::transport::stdio::std_streams()
    };
    let (out, queue) = mpsc::unbounded_channel();
    let writer = tokio::spawn(write_loop(output, queue));
    tokio::time::sleep(Duration::from_millis(config.start_delay_ms)).await;
    eprintln!("mcp_example_server {}: ready", config.name);
    let server = Arc::new(Server::new(config, out));
    read_loop(&server, input).await;
    if server.config.ignore_term {
        eprintln!("mcp_example_server: stdin closed; staying, as --ignore-term asks");
        std::future::pending::<()>().await;
    }
    // The client closed stdin: write what is queued and leave, like a well-behaved server.
    let _ = server.out.send(Output::Exit(0));
    let _ = writer.await;
}

async fn read_loop(server: &Arc<Server>, input: impl AsyncRead + Unpin) {
    let mut stdin = BufReader::with_capacity(64 * 1024, input);
    let mut line = Vec::with_capacity(4096);
    loop {
        line.clear();
        match stdin.read_until(b'\n', &mut line).await {
            Ok(0) => return,
            Ok(_) => {}
            Err(error) => {
                eprintln!("mcp_example_server: reading stdin: {error}");
                return;
            }
        }
        let text = line.trim_ascii();
        if !text.is_empty() {
            server.on_line(text);
        }
        if server.config.stop_reading_after.is_some()
            && server.config.stop_reading_after <= Some(server.tool_calls.load(Relaxed))
        {
            eprintln!("mcp_example_server: no longer reading stdin, as asked");
            std::future::pending::<()>().await;
        }
    }
}

/// Writes every queued line, then flushes once: a burst of answers costs few syscalls and
/// a lone answer is not held back.
async fn write_loop(output: impl AsyncWrite + Unpin, mut queue: mpsc::UnboundedReceiver<Output>) {
    let mut stdout = BufWriter::with_capacity(64 * 1024, output);
    while let Some(first) = queue.recv().await {
        let mut next = Some(first);
        while let Some(output) = next {
            match output {
                Output::Line(bytes) => {
                    if stdout.write_all(&bytes).await.is_err() {
                        return; // nobody is reading any more
                    }
                }
                Output::Exit(code) => {
                    let _ = stdout.flush().await;
                    std::process::exit(code);
                }
                Output::CloseStdout => {
                    let _ = stdout.flush().await;
                    drop(stdout); // closes the duplicate of fd 1 that it wrote to
                    // SAFETY: fd 1 is ours; nothing writes to it after this.
                    unsafe { libc::close(1) };
                    return;
                }
            }
            next = queue.try_recv().ok();
        }
        if stdout.flush().await.is_err() {
            return;
        }
    }
}

impl Server {
    fn new(config: Config, out: mpsc::UnboundedSender<Output>) -> Server {
        let generated_tools = (0..config.generated_tools)
            .map(|i| tool(&format!("gen_{i}"), "A generated tool", json!({}), &[]))
            .collect();
        let text = json!({"text": {"type": "string"}});
        let late_tool = tool("late_tool", "Echoes the text", text, &["text"]);
        let mut base_tools = base_tools();
        if config.schemaless_tool {
            base_tools
                .push(json!({"name": "loose", "description": "Listed without an inputSchema"}));
            base_tools.push(tool("odd name", "A name with a space", json!({}), &[]));
        }
        Server {
            config,
            out,
            base_tools,
            generated_tools,
            late_tool,
            late_tool_added: AtomicBool::new(false),
            late_items: AtomicBool::new(false),
            tool_calls: AtomicU64::new(0),
            initialized: AtomicBool::new(false),
            log_level: AtomicU8::new(0), // debug: everything, until logging/setLevel
            subscriptions: Mutex::new(HashSet::new()),
            running: Mutex::new(HashMap::new()),
            waiting: Mutex::new(HashMap::new()),
            next_request_id: AtomicU64::new(1),
        }
    }

    fn on_line(self: &Arc<Self>, line: &[u8]) {
        let message: Incoming = match serde_json::from_slice(line) {
            Ok(message) => message,
            Err(_) => {
                let is_json = serde_json::from_slice::<serde::de::IgnoredAny>(line).is_ok();
                let error = if is_json {
                    RpcError::new(-32600, "Invalid Request")
                } else {
                    RpcError::new(-32700, "Parse error")
                };
                return self.respond(&Value::Null, Err(error));
            }
        };
        match (message.method, message.id) {
            (Some(method), Some(id)) => self.on_request(id, &method, message.params),
            (Some(method), None) => self.on_notification(&method, &message.params),
            (None, Some(id)) => self.on_response(&id, message.result, message.error),
            (None, None) => {
                self.respond(&Value::Null, Err(RpcError::new(-32600, "Invalid Request")))
            }
        }
    }

    fn on_request(self: &Arc<Self>, id: Value, method: &str, params: Value) {
        if self.config.silent_before_init && !self.initialized.load(Relaxed) {
            if method != "initialize" {
                return;
            }
            self.initialized.store(true, Relaxed);
        }
        if method != "tools/call" {
            return self.respond(&id, self.handle(method, &params));
        }
        let calls = self.tool_calls.fetch_add(1, Relaxed) + 1;
        if self.config.stderr_junk {
            use std::io::Write;
            let mut junk = b"junk \xff\xfe\xfd not utf-8 \x1b[31mred\x1b[0m\n".to_vec();
            junk.extend(std::iter::repeat_n(b'z', 1 << 20));
            junk.extend(format!("\njunk call {calls}\n").as_bytes());
            // A reader that stopped would make this fail (EPIPE, or SIGPIPE's exit).
            if std::io::stderr().write_all(&junk).is_err() {
                std::process::exit(9);
            }
        }
        if self.config.crash_after == Some(calls) {
            eprintln!("mcp_example_server: crashing at tools/call number {calls}, as asked");
            // Through the writer, so answers already queued still go out before the exit.
            let _ = self.out.send(Output::Exit(1));
            return;
        }
        if self.config.close_stdout_after == Some(calls) {
            eprintln!("mcp_example_server: closing stdout at tools/call number {calls}, as asked");
            let _ = self.out.send(Output::CloseStdout);
            return;
        }
        let name = params["name"].as_str().unwrap_or_default();
        if name == "roots"
            && let Some(ms) = params["arguments"]["later_ms"].as_u64()
        {
            self.ask_roots_later(ms);
            self.answer_call(&id, Ok(text_result("asking later")));
        } else if WAITING_TOOLS.contains(&name) {
            self.spawn_waiting_call(id, params);
        } else {
            self.answer_call(&id, self.call_tool(name, &params["arguments"]));
        }
    }

    fn on_notification(&self, method: &str, params: &Value) {
        // Said on stderr, where the gateway's log (and so a test) sees it.
        if method == "notifications/cancelled" || method == "notifications/roots/list_changed" {
            eprintln!(
                "mcp_example_server {}: received {method} {params}",
                self.config.name
            );
        }
        // Other notifications (initialized, progress) need nothing from us.
        if method == "notifications/cancelled" && !self.config.ignore_cancel {
            let key = params["requestId"].to_string();
            if let Some(task) = self.running.lock().unwrap().remove(&key) {
                task.abort();
            }
        }
    }

    fn on_response(&self, id: &Value, result: Option<Value>, error: Option<Value>) {
        let waiter = id
            .as_u64()
            .and_then(|id| self.waiting.lock().unwrap().remove(&id));
        match waiter {
            Some(waiter) => {
                let _ = waiter.send(match error {
                    Some(error) => Err(error),
                    None => Ok(result.unwrap_or(Value::Null)),
                });
            }
            None => eprintln!("mcp_example_server: response to unknown request {id}"),
        }
    }

    fn spawn_waiting_call(self: &Arc<Self>, id: Value, params: Value) {
        let key = id.to_string();
        let server = Arc::clone(self);
        // The lock is held across the spawn, so the task cannot deregister before it is registered.
        let mut running = self.running.lock().unwrap();
        let task_key = key.clone();
        let task = tokio::spawn(async move {
            let name = params["name"].as_str().unwrap_or_default();
            let outcome = server.call_waiting_tool(name, &params).await;
            // Deregister before answering: once the answer is queued, a cancel has nothing to stop.
            server.running.lock().unwrap().remove(&task_key);
            server.answer_call(&id, outcome);
        });
        running.insert(key, task.abort_handle());
    }

    /// Asks the client for its roots `ms` after the call that asked for it was answered
    /// (when no call of anyone's may be in flight), and logs the answer or error.
    fn ask_roots_later(self: &Arc<Self>, ms: u64) {
        let server = Arc::clone(self);
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(ms)).await;
            let said = match server.ask_client("roots/list", json!({})).await {
                Ok(result) => format!("roots later: {}", result["roots"]),
                Err(error) => format!("roots later failed: {error}"),
            };
            let params = json!({"level": "warning", "logger": server.config.name, "data": said});
            server.notify("notifications/message", params);
        });
    }

    fn handle(&self, method: &str, params: &Value) -> Outcome {
        match method {
            "initialize" => Ok(self.initialize(params)),
            "ping" => Ok(json!({})),
            "tools/list" => {
                let late = self
                    .late_tool_added
                    .load(Relaxed)
                    .then_some(&self.late_tool);
                let tools: Vec<&Value> = self
                    .base_tools
                    .iter()
                    .chain(late)
                    .chain(&self.generated_tools)
                    .collect();
                self.paginate(&tools, params, "tools")
            }
            "resources/list" => {
                let mut all = resources();
                all.extend((0..self.config.items).map(
                    |i| json!({"uri": format!("example://gen/{i}"), "name": format!("gen_{i}")}),
                ));
                if self.late_items.load(Relaxed) {
                    all.push(json!({"uri": "example://static/late", "name": "late"}));
                }
                self.paginate(&all, params, "resources")
            }
            "resources/templates/list" => {
                let mut all = resource_templates();
                all.extend((0..self.config.items).map(|i| json!({"uriTemplate": format!("example://gen/{{id}}/{i}"), "name": format!("gen_{i}")})));
                self.paginate(&all, params, "resourceTemplates")
            }
            "resources/read" => self.read_resource(string(params, "uri")?),
            "resources/subscribe" => {
                self.subscriptions
                    .lock()
                    .unwrap()
                    .insert(string(params, "uri")?.to_owned());
                Ok(json!({}))
            }
            "resources/unsubscribe" => {
                self.subscriptions
                    .lock()
                    .unwrap()
                    .remove(string(params, "uri")?);
                Ok(json!({}))
            }
            "prompts/list" => {
                let mut all = prompts();
                all.extend((0..self.config.items).map(|i| json!({"name": format!("prompt_{i}")})));
                if self.late_items.load(Relaxed) {
                    all.push(json!({"name": "late_prompt"}));
                }
                self.paginate(&all, params, "prompts")
            }
            "prompts/get" => get_prompt(params),
            "completion/complete" => complete(params),
            "logging/setLevel" => {
                self.log_level
                    .store(log_level(string(params, "level")?)?, Relaxed);
                Ok(json!({}))
            }
            _ => Err(RpcError::new(-32601, format!("Method not found: {method}"))),
        }
    }

    fn initialize(&self, params: &Value) -> Value {
        let requested = params["protocolVersion"].as_str();
        let version = match (&self.config.protocol, requested) {
            (Some(forced), _) => forced.as_str(),
            (None, Some(version)) if SUPPORTED_VERSIONS.contains(&version) => version,
            _ => DEFAULT_VERSION,
        };
        let mut result = json!({
            "protocolVersion": version,
            "capabilities": {
                "tools": {"listChanged": true},
                "resources": {"subscribe": true, "listChanged": true},
                "prompts": {"listChanged": true},
                "logging": {},
                "completions": {},
            },
            "serverInfo": {"name": self.config.name, "version": env!("CARGO_PKG_VERSION")},
        });
        if let Some(instructions) = &self.config.instructions {
            result["instructions"] = json!(instructions);
        }
        result
    }

    /// Answers the tools that need no waiting.
    fn call_tool(&self, name: &str, args: &Value) -> Outcome {
        match name {
            "echo" => Ok(text_result(string(args, "text")?)),
            "late_tool" if self.late_tool_added.load(Relaxed) => {
                Ok(text_result(string(args, "text")?))
            }
            "add" => {
                let (a, b) = (&args["a"], &args["b"]);
                let sum = match (a.as_i64(), b.as_i64()) {
                    (Some(a), Some(b)) if a.checked_add(b).is_some() => json!(a + b),
                    _ => match (a.as_f64(), b.as_f64()) {
                        (Some(a), Some(b)) => json!(a + b),
                        _ => return Err(RpcError::invalid_params("add needs numbers a and b")),
                    },
                };
                Ok(json!({
                    "content": [{"type": "text", "text": sum.to_string()}],
                    "structuredContent": {"sum": sum},
                }))
            }
            "fail" => Ok(json!({
                "content": [{"type": "text", "text": "this tool always fails"}],
                "isError": true,
            })),
            "error" => Err(RpcError {
                code: args.get("code").and_then(Value::as_i64).unwrap_or(-32099),
                message: args["message"]
                    .as_str()
                    .unwrap_or("example error")
                    .to_owned(),
                data: Some(json!({"detail": "x"})),
            }),
            "log" => {
                let level = log_level(string(args, "level")?)?;
                let message = string(args, "message")?;
                // A misbehaving server's moves: progress for a token it was not given, and
                // messages below the level the client set.
                if let Some(token) = args.get("progress_token") {
                    let params =
                        json!({"progressToken": token, "progress": 99, "message": message});
                    self.notify("notifications/progress", params);
                }
                let force = args.get("ignore_level") == Some(&json!(true));
                if force || level >= self.log_level.load(Relaxed) {
                    let params = json!({
                        "level": LOG_LEVELS[usize::from(level)],
                        "logger": self.config.name,
                        "data": message,
                    });
                    self.notify("notifications/message", params);
                }
                Ok(text_result("logged"))
            }
            "notify_changed" => {
                match args.get("what").and_then(Value::as_str) {
                    Some(what @ ("prompts" | "resources")) => {
                        self.late_items.store(true, Relaxed);
                        self.notify(&format!("notifications/{what}/list_changed"), json!({}));
                    }
                    _ => {
                        self.late_tool_added.store(true, Relaxed);
                        self.notify("notifications/tools/list_changed", json!({}));
                    }
                }
                Ok(text_result("changed"))
            }
            "update_resource" => {
                let uri = string(args, "uri")?;
                // `force`: a misbehaving server's move, an update for a URI nobody
                // subscribed to through it.
                if args["force"] == json!(true) || self.subscriptions.lock().unwrap().contains(uri)
                {
                    self.notify("notifications/resources/updated", json!({"uri": uri}));
                    return Ok(text_result("updated"));
                }
                // Says so: a test sees whether the gateway's subscription is still here.
                Ok(text_result("nobody subscribed"))
            }
            "big" => {
                let bytes = u64_arg(args, "bytes")?;
                if bytes > MAX_BIG_BYTES {
                    return Err(RpcError::invalid_params(format!(
                        "bytes must be at most {MAX_BIG_BYTES}"
                    )));
                }
                Ok(text_result(&"x".repeat(bytes as usize)))
            }
            "pid" => Ok(text_result(&std::process::id().to_string())),
            _ if self.is_generated_tool(name) => Ok(text_result(&format!("{name} called"))),
            _ => Err(RpcError::invalid_params(format!("Unknown tool: {name}"))),
        }
    }

    /// Answers the tools of `WAITING_TOOLS`, in their own task.
    async fn call_waiting_tool(&self, name: &str, params: &Value) -> Outcome {
        let args = &params["arguments"];
        let reply = match name {
            "slow" => {
                let ms = u64_arg(args, "ms")?;
                let token = params["_meta"].get("progressToken");
                if let (Some(token), Some(true)) = (token, args["announce"].as_bool()) {
                    let said = json!({"level": "error", "logger": self.config.name, "data": format!("token {token}")});
                    self.notify("notifications/message", said);
                }
                self.sleep_with_progress(ms, token).await;
                return Ok(text_result(&format!("slept {ms} ms")));
            }
            "hang" => std::future::pending().await,
            "sample" => {
                let text = json!({"type": "text", "text": string(args, "prompt")?});
                let request = json!({
                    "messages": [{"role": "user", "content": text}],
                    "maxTokens": 100,
                });
                // A server that gives up on its own request: it tells the client so.
                if let Some(ms) = args.get("cancel_after_ms").and_then(Value::as_u64) {
                    let id = self.next_request_id.fetch_add(1, Relaxed);
                    let method = "sampling/createMessage";
                    self.send(
                        &json!({"jsonrpc": "2.0", "id": id, "method": method, "params": request}),
                    );
                    tokio::time::sleep(Duration::from_millis(ms)).await;
                    self.notify(
                        "notifications/cancelled",
                        json!({"requestId": id, "reason": "gave up"}),
                    );
                    return Ok(text_result("gave up"));
                }
                let reply = self.ask_client("sampling/createMessage", request).await;
                reply.map(|result| {
                    result["content"]["text"]
                        .as_str()
                        .unwrap_or_default()
                        .to_owned()
                })
            }
            "elicit" => {
                let request = json!({
                    "message": string(args, "message")?,
                    "requestedSchema": {"type": "object", "properties": {"name": {"type": "string"}}},
                });
                let reply = self.ask_client("elicitation/create", request).await;
                reply.map(|result| result.to_string())
            }
            "roots" => {
                let reply = self.ask_client("roots/list", json!({})).await;
                reply.map(|result| result["roots"].to_string())
            }
            _ => unreachable!("only WAITING_TOOLS are spawned"),
        };
        // The client's answer becomes the tool's text; its error, a tool error.
        Ok(match reply {
            Ok(text) => text_result(&text),
            Err(error) => error_result(&error),
        })
    }

    /// Sleeps `ms` in three parts, reporting each with a progress notification when the
    /// caller asked for progress.
    async fn sleep_with_progress(&self, ms: u64, token: Option<&Value>) {
        let Some(token) = token else {
            return tokio::time::sleep(Duration::from_millis(ms)).await;
        };
        for step in 1..=3u64 {
            let part = if step < 3 { ms / 3 } else { ms - 2 * (ms / 3) };
            tokio::time::sleep(Duration::from_millis(part)).await;
            let params = json!({
                "progressToken": token,
                "progress": step,
                "total": 3,
                "message": format!("step {step} of 3"),
            });
            self.notify("notifications/progress", params);
        }
    }

    /// Sends a request to the client and waits for its response (routed by `on_response`).
    async fn ask_client(&self, method: &str, params: Value) -> Result<Value, Value> {
        let id = self.next_request_id.fetch_add(1, Relaxed);
        let (sender, receiver) = oneshot::channel();
        self.waiting.lock().unwrap().insert(id, sender);
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        receiver
            .await
            .unwrap_or_else(|_| Err(json!({"message": "no response"})))
    }

    fn read_resource(&self, uri: &str) -> Outcome {
        // As a file server would, `..` steps out of a folder.
        let resolved = without_dot_segments(uri);
        let uri = resolved.as_str();
        let content = match uri {
            "example://static/hello" => {
                json!({"uri": uri, "mimeType": "text/plain", "text": format!("hello from {}", self.config.name)})
            }
            "example://static/blob" => {
                json!({"uri": uri, "mimeType": "application/octet-stream", "blob": BLOB_BASE64})
            }
            _ => match uri.strip_prefix("example://item/") {
                Some(id) if !id.is_empty() && !id.contains('/') => {
                    json!({"uri": uri, "mimeType": "text/plain", "text": format!("item {id}")})
                }
                _ => {
                    return Err(RpcError {
                        code: -32002,
                        message: "Resource not found".to_owned(),
                        data: Some(json!({"uri": uri})),
                    });
                }
            },
        };
        Ok(json!({"contents": [content]}))
    }

    /// Cuts a list result into pages when `--page-size` is given. The cursor is the offset
    /// of the next page, which clients must treat as opaque.
    fn paginate<T: Serialize>(&self, items: &[T], params: &Value, key: &str) -> Outcome {
        let start = match &params["cursor"] {
            Value::Null => 0,
            _ if self.config.endless_cursor => 0,
            cursor => cursor
                .as_str()
                .and_then(|c| c.strip_prefix("offset-"))
                .and_then(|offset| offset.parse().ok())
                .filter(|&offset| offset <= items.len())
                .ok_or_else(|| RpcError::invalid_params("Invalid cursor"))?,
        };
        let end = start
            .saturating_add(self.config.page_size.unwrap_or(usize::MAX))
            .min(items.len());
        let mut result = Map::new();
        result.insert(key.to_owned(), json!(items[start..end]));
        if end < items.len() {
            result.insert("nextCursor".to_owned(), json!(format!("offset-{end}")));
        }
        if self.config.endless_cursor {
            result.insert("nextCursor".to_owned(), json!("again"));
        }
        Ok(Value::Object(result))
    }

    fn is_generated_tool(&self, name: &str) -> bool {
        let index = name
            .strip_prefix("gen_")
            .and_then(|n| n.parse::<usize>().ok());
        index.is_some_and(|i| i < self.config.generated_tools)
    }

    fn answer_call(&self, id: &Value, outcome: Outcome) {
        if self.config.garbage {
            // Noise a backend may print; the gateway must skip it and still match the answer.
            self.write_line(b"this line is not JSON\n".to_vec());
            self.write_line(b"{\"example\":\"valid JSON that is not JSON-RPC\"}\n".to_vec());
        }
        if self.config.non_object_results {
            return self.respond(id, Ok(json!(42)));
        }
        self.respond(id, outcome);
    }

    fn respond(&self, id: &Value, outcome: Outcome) {
        let (result, error) = match outcome {
            Ok(result) => (Some(result), None),
            Err(error) => (None, Some(error)),
        };
        self.send(&Response {
            jsonrpc: "2.0",
            id,
            result,
            error,
        });
    }

    fn notify(&self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    fn send(&self, message: &impl Serialize) {
        let mut line = serde_json::to_vec(message).expect("JSON-RPC messages always serialize");
        line.push(b'\n');
        self.write_line(line);
    }

    fn write_line(&self, line: Vec<u8>) {
        // Fails only once the writer has stopped, when there is nobody left to tell.
        let _ = self.out.send(Output::Line(line));
    }
}

#[rustfmt::skip] // one tool a line reads as a table
fn base_tools() -> Vec<Value> {
    let (none, string) = (json!({}), json!({"type": "string"}));
    let count = json!({"type": "integer", "minimum": 0});
    let number = json!({"type": "number"});
    let mut add = tool("add", "Adds a and b", json!({"a": number, "b": number}), &["a", "b"]);
    // Fields a gateway must pass through untouched, known and unknown.
    add["title"] = json!("Add two numbers");
    add["outputSchema"] =
        json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]});
    add["annotations"] = json!({"readOnlyHint": true});
    add["_meta"] = json!({"example/extra": 1});
    add["x-custom"] = json!({"keep": true});
    add["icons"] = json!([{"src": "data:image/png;base64,iVBORw0KGgo=", "mimeType": "image/png", "sizes": ["16x16"]}]);
    let log = json!({"level": {"type": "string", "enum": LOG_LEVELS}, "message": string,
        "progress_token": string, "ignore_level": {"type": "boolean"}});
    vec![
        tool("echo", "Echoes the text", json!({"text": string}), &["text"]),
        add,
        tool("slow", "Sleeps ms, with progress", json!({"ms": count, "announce": {"type": "boolean"}}), &["ms"]),
        tool("fail", "Returns a tool error", none.clone(), &[]),
        tool("error", "Answers a JSON-RPC error", json!({"code": {"type": "integer"}, "message": string}), &[]),
        tool("log", "Sends a log notification", log, &["level", "message"]),
        tool("sample", "Asks the client to sample", json!({"prompt": string, "cancel_after_ms": count}), &["prompt"]),
        tool("elicit", "Asks the client to elicit", json!({"message": string}), &["message"]),
        tool("roots", "Asks the client for its roots (with later_ms: after answering)",
            json!({"later_ms": count}), &[]),
        tool("notify_changed", "Adds late_tool (or, with what, a prompt or resource)",
            json!({"what": {"type": "string", "enum": ["tools", "prompts", "resources"]}}), &[]),
        tool("update_resource", "Notifies uri's subscribers (with force: anyone)",
            json!({"uri": string, "force": {"type": "boolean"}}), &["uri"]),
        tool("big", "Returns that many bytes of text", json!({"bytes": count}), &["bytes"]),
        tool("hang", "Never answers", none.clone(), &[]),
        tool("pid", "Returns the process id", none, &[]),
    ]
}

/// `uri` with its `..` path segments resolved (`example://item/../static/hello` is
/// `example://static/hello`).
fn without_dot_segments(uri: &str) -> String {
    let Some((scheme, path)) = uri.split_once("://") else {
        return uri.to_string();
    };
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            ".." => {
                segments.pop();
            }
            "." => {}
            other => segments.push(other),
        }
    }
    format!("{scheme}://{}", segments.join("/"))
}

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    })
}

fn resources() -> Vec<Value> {
    vec![
        json!({"uri": "example://static/hello", "name": "hello", "mimeType": "text/plain"}),
        json!({"uri": "example://static/blob", "name": "blob", "mimeType": "application/octet-stream"}),
    ]
}

fn resource_templates() -> Vec<Value> {
    vec![json!({"uriTemplate": ITEM_TEMPLATE, "name": "item", "mimeType": "text/plain"})]
}

fn prompts() -> Vec<Value> {
    vec![json!({
        "name": "greet",
        "description": "Greets someone by name",
        "arguments": [{"name": "name", "description": "Who to greet", "required": true}],
    })]
}

fn get_prompt(params: &Value) -> Outcome {
    if params["name"] != "greet" {
        return Err(RpcError::invalid_params(format!(
            "Unknown prompt: {}",
            params["name"]
        )));
    }
    let name = string(&params["arguments"], "name")?;
    Ok(json!({
        "description": "A greeting",
        "messages": [{"role": "user", "content": {"type": "text", "text": format!("Hello, {name}!")}}],
    }))
}

fn complete(params: &Value) -> Outcome {
    let (reference, argument) = (&params["ref"], &params["argument"]);
    let candidates: &[&str] = match (reference["type"].as_str(), argument["name"].as_str()) {
        (Some("ref/prompt"), Some("name")) if reference["name"] == "greet" => &["Alice", "Bob"],
        (Some("ref/resource"), Some("id")) if reference["uri"] == ITEM_TEMPLATE => {
            &["1", "2", "42"]
        }
        (Some(_), Some(_)) => &[],
        _ => {
            return Err(RpcError::invalid_params(
                "completion needs ref and argument",
            ));
        }
    };
    let prefix = argument["value"].as_str().unwrap_or_default();
    let values: Vec<&str> = candidates
        .iter()
        .copied()
        .filter(|v| v.starts_with(prefix))
        .collect();
    Ok(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
}

fn text_result(text: &str) -> Value {
    json!({"content": [{"type": "text", "text": text}]})
}

/// A tool result reporting that the client answered our request with an error.
fn error_result(error: &Value) -> Value {
    let message = error["message"]
        .as_str()
        .unwrap_or("the client answered with an error");
    json!({"content": [{"type": "text", "text": message}], "isError": true})
}

fn string<'a>(params: &'a Value, key: &str) -> Result<&'a str, RpcError> {
    params[key]
        .as_str()
        .ok_or_else(|| RpcError::invalid_params(format!("{key} must be a string")))
}

fn u64_arg(params: &Value, key: &str) -> Result<u64, RpcError> {
    params[key]
        .as_u64()
        .ok_or_else(|| RpcError::invalid_params(format!("{key} must be a non-negative integer")))
}

fn log_level(name: &str) -> Result<u8, RpcError> {
    let index = LOG_LEVELS.iter().position(|&level| level == name);
    index
        .map(|i| i as u8)
        .ok_or_else(|| RpcError::invalid_params(format!("unknown log level {name}")))
}
