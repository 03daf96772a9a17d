//! The test client: starts the real `wasmgate` binary with a config in its own temp
//! folder and talks MCP to it over the child's stdin/stdout, as an MCP client does.
//! Every wait is bounded, and every line the gateway writes to stdout is checked to be
//! JSON-RPC: anything else fails the test. The one config builder is `builder`; the
//! helpers many test files share (fixtures, waits, checks) are `helpers`.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

mod builder;
mod helpers;

pub use builder::{Config, config, setup, toml_str};
pub use helpers::{
    LIST_CHANGED, LOAD_TIMEOUT, backend, call_failed, call_ok, first_list, fixture, fixture_path,
    has, is_executable, on_path, plugin_dir, sha256_hex, shipped, shipped_path, wait_event,
    wait_tools,
};

/// Default bound for one answer. Generous: CI machines are small and tests run in parallel.
pub const TIMEOUT: Duration = Duration::from_secs(20);

/// The binary under test.
pub fn wasmgate() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_wasmgate"))
}

/// The example MCP server that `cargo test` builds next to the binary.
pub fn example_server() -> PathBuf {
    let path = wasmgate()
        .parent()
        .expect("binary folder")
        .join("examples")
        .join("mcp_example_server");
    assert!(
        path.exists(),
        "{} is missing: build it with `cargo build --examples` (a plain `cargo test` does)",
        path.display()
    );
    let source = Path::new(env!("CARGO_MANIFEST_DIR")).join("examples/mcp_example_server.rs");
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    if let (Some(src), Some(bin)) = (modified(&source), modified(&path)) {
        assert!(
            src <= bin,
            "{} is older than its source: rebuild it with `cargo build --examples`",
            path.display()
        );
    }
    path
}

/// A folder of its own for one test, removed afterwards unless the test failed.
pub struct TestDir {
    pub path: PathBuf,
}

impl TestDir {
    pub fn new(label: &str) -> TestDir {
        static COUNTER: AtomicU64 = AtomicU64::new(0);
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let path =
            std::env::temp_dir().join(format!("wasmgate-test-{}-{n}-{label}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).expect("create test dir");
        TestDir { path }
    }

    pub fn join(&self, name: &str) -> PathBuf {
        self.path.join(name)
    }

    pub fn write(&self, name: &str, contents: &str) -> PathBuf {
        let path = self.join(name);
        std::fs::write(&path, contents).expect("write test file");
        path
    }
}

impl Drop for TestDir {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            let _ = std::fs::remove_dir_all(&self.path);
        }
    }
}

/// What the stdout reader hands over.
enum Line {
    Message(Value),
    Closed,
}

/// One running gateway and the MCP client talking to it.
pub struct Client {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<Line>,
    /// Messages read but not yet taken by a test.
    buffer: VecDeque<Value>,
    stdout_closed: bool,
    reader: Option<JoinHandle<()>>,
    /// Lines on stdout that are not JSON-RPC.
    violations: Arc<Mutex<Vec<String>>>,
    next_id: u64,
    pub dir: TestDir,
}

impl Client {
    /// Starts the binary with `args`; its stderr goes to `gateway.stderr` in `dir`.
    pub fn spawn(args: &[&str], dir: TestDir) -> Client {
        Client::spawn_with_env(args, dir, &[])
    }

    pub fn config_path(&self) -> PathBuf {
        self.dir.join("gateway.toml")
    }

    /// What the gateway wrote to stderr so far.
    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("gateway.stderr")).unwrap_or_default()
    }

    // ---- writing ----

    pub fn send_bytes(&mut self, bytes: &[u8]) {
        let stdin = self.stdin.as_mut().expect("stdin is open");
        stdin.write_all(bytes).expect("write to the gateway");
        stdin.flush().expect("flush to the gateway");
    }

    /// Sends one line (a newline is added).
    pub fn send_line(&mut self, line: &str) {
        let mut bytes = Vec::with_capacity(line.len() + 1);
        bytes.extend_from_slice(line.as_bytes());
        bytes.push(b'\n');
        self.send_bytes(&bytes);
    }

    pub fn send(&mut self, message: &Value) {
        self.send_line(&message.to_string());
    }

    /// Sends a request with a fresh numeric id and returns that id.
    pub fn send_request(&mut self, method: &str, params: Value) -> Value {
        let id = json!(self.next_id);
        self.next_id += 1;
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}));
        id
    }

    pub fn notify(&mut self, method: &str, params: Value) {
        self.send(&json!({"jsonrpc": "2.0", "method": method, "params": params}));
    }

    /// Answers a request the gateway sent to the client.
    pub fn respond(&mut self, id: Value, result: Value) {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}));
    }

    pub fn respond_error(&mut self, id: Value, code: i64, message: &str) {
        self.send(
            &json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}),
        );
    }

    /// Takes the gateway's stdin, for a writer of its own: a thread that may block on the
    /// full pipe while the test reads. [`Client::give_stdin`] hands it back.
    pub fn take_stdin(&mut self) -> ChildStdin {
        self.stdin.take().expect("stdin is open")
    }

    pub fn give_stdin(&mut self, stdin: ChildStdin) {
        self.stdin = Some(stdin);
    }

    /// Closes the gateway's stdin: the client is gone.
    pub fn close_stdin(&mut self) {
        self.stdin = None;
    }

    // ---- reading ----

    /// The next line from stdout, waiting until `deadline`; `None` on timeout or EOF.
    fn receive(&mut self, deadline: Instant) -> Option<Value> {
        if self.stdout_closed {
            return None;
        }
        let wait = deadline.saturating_duration_since(Instant::now());
        let line = match self.lines.recv_timeout(wait) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => return None,
            Err(RecvTimeoutError::Disconnected) => Line::Closed,
        };
        self.check_violations();
        match line {
            Line::Message(value) => Some(value),
            Line::Closed => {
                self.stdout_closed = true;
                None
            }
        }
    }

    fn check_violations(&self) {
        let violations = self.violations.lock().unwrap();
        if let Some(first) = violations.first() {
            panic!("the gateway wrote a line that is not JSON-RPC to stdout: {first}");
        }
    }

    /// The next message of any kind (buffered ones first).
    pub fn read_message(&mut self, timeout: Duration) -> Option<Value> {
        if let Some(message) = self.buffer.pop_front() {
            return Some(message);
        }
        self.receive(Instant::now() + timeout)
    }

    /// Takes the first buffered or incoming message that `pick` accepts, keeping the others.
    pub fn take(&mut self, timeout: Duration, pick: impl Fn(&Value) -> bool) -> Option<Value> {
        if let Some(at) = self.buffer.iter().position(&pick) {
            return self.buffer.remove(at);
        }
        let deadline = Instant::now() + timeout;
        while let Some(message) = self.receive(deadline) {
            if pick(&message) {
                return Some(message);
            }
            self.buffer.push_back(message);
        }
        None
    }

    /// The response to request `id`, if it arrives within `timeout`.
    pub fn try_response(&mut self, id: &Value, timeout: Duration) -> Option<Value> {
        self.take(timeout, |m| is_response(m) && &m["id"] == id)
    }

    /// The messages that came before the response to `id`, in order, and that response.
    pub fn until_response(&mut self, id: &Value, timeout: Duration) -> (Vec<Value>, Value) {
        let deadline = Instant::now() + timeout;
        let mut before = Vec::new();
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            let Some(message) = self.read_message(left) else {
                panic!(
                    "no response to request {id} within {timeout:?}{}",
                    self.closed_note()
                );
            };
            if is_response(&message) && &message["id"] == id {
                return (before, message);
            }
            before.push(message);
        }
    }

    pub fn wait_response(&mut self, id: &Value, timeout: Duration) -> Value {
        match self.try_response(id, timeout) {
            Some(response) => response,
            None => panic!(
                "no response to request {id} within {timeout:?}{}",
                self.closed_note()
            ),
        }
    }

    /// Sends a request and returns the whole response (`result` or `error`).
    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.send_request(method, params);
        self.wait_response(&id, TIMEOUT)
    }

    /// Sends a request and returns its `result`; a JSON-RPC error fails the test.
    pub fn result(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params.clone());
        match response.get("result") {
            Some(result) => result.clone(),
            None => panic!("{method} {params} failed: {response}"),
        }
    }

    /// The `error` of a request that must fail.
    pub fn error(&mut self, method: &str, params: Value) -> Value {
        let response = self.request(method, params.clone());
        match response.get("error") {
            Some(error) => error.clone(),
            None => panic!("{method} {params} should have failed: {response}"),
        }
    }

    /// `tools/call` whose result is returned (a JSON-RPC error fails the test).
    pub fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.result("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// `tools/call` that must answer with a JSON-RPC error, which is returned.
    pub fn call_error(&mut self, tool: &str, arguments: Value) -> Value {
        self.error("tools/call", json!({"name": tool, "arguments": arguments}))
    }

    /// `tools/call` with arguments the tool refuses: at 2025-11-25 (what `initialize`
    /// speaks) a tool error result, "Invalid arguments for tool {tool}: ...", whose text is
    /// returned (earlier versions get error -32602).
    pub fn call_invalid(&mut self, tool: &str, arguments: Value) -> String {
        let result = self.call(tool, arguments.clone());
        let text = result["content"][0]["text"].as_str().unwrap_or_default();
        assert!(
            result["isError"] == json!(true)
                && text.starts_with(&format!("Invalid arguments for tool {tool}: ")),
            "{tool} {arguments} should be an invalid-arguments result: {result}"
        );
        text.to_string()
    }

    pub fn try_notification(&mut self, method: &str, timeout: Duration) -> Option<Value> {
        self.take(timeout, |m| m.get("id").is_none() && m["method"] == method)
    }

    pub fn next_notification(&mut self, method: &str, timeout: Duration) -> Value {
        match self.try_notification(method, timeout) {
            Some(n) => n,
            None => panic!(
                "no {method} notification within {timeout:?}{}",
                self.closed_note()
            ),
        }
    }

    /// Buffered notifications of `method`, removed from the buffer.
    pub fn drain_notifications(&mut self, method: &str) -> Vec<Value> {
        let (taken, kept) = self
            .buffer
            .drain(..)
            .partition(|m| m.get("id").is_none() && m["method"] == method);
        self.buffer = kept;
        taken.into()
    }

    /// The next request the gateway sends to the client (sampling, elicitation, roots).
    pub fn next_client_request(&mut self, timeout: Duration) -> Value {
        match self.take(timeout, is_server_request) {
            Some(request) => request,
            None => panic!(
                "no request to the client within {timeout:?}{}",
                self.closed_note()
            ),
        }
    }

    /// Whether a request to the client is waiting in the buffer.
    pub fn has_buffered_client_request(&self) -> bool {
        self.buffer.iter().any(is_server_request)
    }

    fn closed_note(&self) -> String {
        if self.stdout_closed {
            format!(" (stdout closed); stderr:\n{}", tail(&self.stderr()))
        } else {
            String::new()
        }
    }

    // ---- MCP conveniences ----

    /// `initialize` (latest version, every client capability) and `notifications/initialized`.
    pub fn initialize(&mut self) -> Value {
        self.initialize_with(
            "2025-11-25",
            json!({"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}}),
        )
    }

    pub fn initialize_with(&mut self, version: &str, capabilities: Value) -> Value {
        let result = self.result(
            "initialize",
            json!({"protocolVersion": version, "capabilities": capabilities,
                   "clientInfo": {"name": "wasmgate-tests", "version": "0"}}),
        );
        self.notify("notifications/initialized", json!({}));
        result
    }

    /// Waits until no server is starting or restarting and the tools of every ready one are listed.
    pub fn wait_ready(&mut self) {
        eventually(TIMEOUT, "the servers to be ready and listed", || {
            let status = self.status();
            let backends = status["backends"].as_object()?.clone();
            if backends
                .values()
                .any(|b| b["status"] == "starting" || b["status"] == "restarting")
            {
                return None;
            }
            let separator = status["gateway"]["config"]["separator"]
                .as_str()
                .unwrap_or("__")
                .to_string();
            let names = self.tool_names();
            let listed = backends
                .values()
                .filter(|b| b["status"] == "ready" && b["tool_count"].as_u64() > Some(0))
                .all(|b| {
                    let namespace = b["namespace"].as_str().unwrap_or_default();
                    namespace.is_empty()
                        || names
                            .iter()
                            .any(|n| n.starts_with(&format!("{namespace}{separator}")))
                });
            listed.then_some(())
        });
    }

    /// Every page of a list method, concatenated.
    pub fn list_all(&mut self, method: &str, key: &str) -> Vec<Value> {
        let mut items = Vec::new();
        let mut params = json!({});
        for _ in 0..1000 {
            let page = self.result(method, params);
            items.extend(
                page[key]
                    .as_array()
                    .unwrap_or_else(|| panic!("{method}: no `{key}` array in {page}"))
                    .iter()
                    .cloned(),
            );
            match page.get("nextCursor") {
                Some(cursor) if !cursor.is_null() => params = json!({"cursor": cursor}),
                _ => return items,
            }
        }
        panic!("{method} never stopped paging");
    }

    pub fn tools(&mut self) -> Vec<Value> {
        self.list_all("tools/list", "tools")
    }

    pub fn tool_names(&mut self) -> Vec<String> {
        self.tools()
            .iter()
            .map(|t| t["name"].as_str().expect("tool name").to_string())
            .collect()
    }

    /// `gateway_status`'s structured content.
    pub fn status(&mut self) -> Value {
        self.call("gateway_status", json!({}))["structuredContent"].clone()
    }

    /// `get_events` with `arguments`: the events, newest first.
    pub fn events(&mut self, arguments: Value) -> Vec<Value> {
        let result = self.call("get_events", arguments);
        result["structuredContent"]["events"]
            .as_array()
            .unwrap_or_else(|| panic!("get_events: no events array in {result}"))
            .clone()
    }

    // ---- the process ----

    /// Waits for the gateway to exit.
    pub fn wait_exit(&mut self, timeout: Duration) -> Option<ExitStatus> {
        let deadline = Instant::now() + timeout;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Some(status);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The gateway's resident memory now, in bytes (Linux: /proc).
    pub fn rss(&self) -> u64 {
        self.memory("VmRSS")
    }

    /// The most memory the gateway has held at once, in bytes.
    pub fn peak_rss(&self) -> u64 {
        self.memory("VmHWM")
    }

    fn memory(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .expect("/proc/PID/status");
        let kib: u64 = status
            .lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("{field} in /proc/PID/status"));
        kib * 1024
    }

    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe {
            libc::kill(self.child.id() as i32, signal);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        self.stdin = None;
        if self.wait_exit(Duration::from_millis(0)).is_none() {
            // SIGTERM first: every test then also exercises an orderly shutdown.
            self.signal(libc::SIGTERM);
            if self.wait_exit(Duration::from_secs(5)).is_none() {
                let _ = self.child.kill();
                let _ = self.child.wait();
            }
        }
        if let Some(reader) = self.reader.take() {
            let _ = reader.join();
        }
        if std::thread::panicking() {
            eprintln!(
                "---- gateway stderr ({}) ----\n{}",
                self.dir.path.display(),
                tail(&self.stderr())
            );
            return;
        }
        let violations = self.violations.lock().unwrap();
        if let Some(first) = violations.first() {
            panic!(
                "the gateway wrote {} line(s) to stdout that are not JSON-RPC, the first: {first}",
                violations.len()
            );
        }
    }
}

fn tail(text: &str) -> &str {
    let start = text.len().saturating_sub(6000);
    let start = (start..text.len())
        .find(|i| text.is_char_boundary(*i))
        .unwrap_or(text.len());
    &text[start..]
}

fn read_stdout(stdout: impl Read, tx: mpsc::Sender<Line>, violations: Arc<Mutex<Vec<String>>>) {
    let mut reader = BufReader::with_capacity(1 << 16, stdout);
    let mut line = Vec::new();
    loop {
        line.clear();
        match reader.read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => break,
            Ok(_) => {}
        }
        let text = line.strip_suffix(b"\n").unwrap_or(&line);
        match serde_json::from_slice::<Value>(text)
            .map_err(|e| e.to_string())
            .and_then(|v| check_jsonrpc(&v).map(|_| v))
        {
            Ok(value) => {
                let _ = tx.send(Line::Message(value));
            }
            Err(why) => {
                let shown: String = String::from_utf8_lossy(text).chars().take(300).collect();
                violations.lock().unwrap().push(format!("{why}: {shown:?}"));
            }
        }
    }
    let _ = tx.send(Line::Closed);
}

/// A JSON-RPC 2.0 message, or a non-empty batch of them.
pub fn check_jsonrpc(value: &Value) -> Result<(), String> {
    match value {
        Value::Array(items) if items.is_empty() => Err("an empty batch".into()),
        Value::Array(items) => items.iter().try_for_each(check_message),
        _ => check_message(value),
    }
}

fn check_message(value: &Value) -> Result<(), String> {
    let object = value.as_object().ok_or("not an object")?;
    if object.get("jsonrpc") != Some(&json!("2.0")) {
        return Err("no \"jsonrpc\": \"2.0\"".into());
    }
    let id_ok = |id: &Value| id.is_string() || id.is_i64() || id.is_u64();
    if let Some(method) = object.get("method") {
        if !method.is_string() {
            return Err("method is not a string".into());
        }
        return match object.get("id") {
            Some(id) if !id_ok(id) => Err("a request id that is neither string nor integer".into()),
            _ => Ok(()),
        };
    }
    let id = object.get("id").ok_or("a response without id")?;
    if !id_ok(id) && !id.is_null() && !id.is_number() {
        return Err("a response id that is neither string, number nor null".into());
    }
    match (object.get("result"), object.get("error")) {
        (Some(_), None) => Ok(()),
        (None, Some(error)) => {
            if error["code"].is_i64() && error["message"].is_string() {
                Ok(())
            } else {
                Err("an error without integer code and string message".into())
            }
        }
        _ => Err("a response needs exactly one of result and error".into()),
    }
}

pub fn is_response(message: &Value) -> bool {
    message.get("method").is_none() && message.get("id").is_some()
}

pub fn is_server_request(message: &Value) -> bool {
    message.get("method").is_some() && message.get("id").is_some()
}

/// Polls `probe` until it gives a value; fails the test after `timeout`.
pub fn eventually<T>(timeout: Duration, what: &str, mut probe: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(value) = probe() {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The text of a tool result's first content item.
pub fn text(result: &Value) -> &str {
    result["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("no text content in {result}"))
}

/// True once `pid` no longer runs (gone, or a zombie nobody reaped yet).
pub fn process_gone(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.trim_start().chars().next())
            .is_some_and(|s| s == 'Z' || s == 'X'),
    }
}

/// The outcome of one CLI run.
pub struct Output {
    pub status: ExitStatus,
    pub stdout: String,
    pub stderr: String,
}

impl Output {
    /// Asserts the exit code; a mismatch shows both streams.
    #[track_caller]
    pub fn assert_exit(&self, code: i32) {
        assert_eq!(
            self.status.code(),
            Some(code),
            "stdout:\n{}\nstderr:\n{}",
            self.stdout,
            self.stderr
        );
    }
}

/// Runs the binary to completion (bounded by `timeout`) in `dir`.
pub fn run_cli(args: &[&str], dir: &Path, timeout: Duration) -> Output {
    run_cli_with_env(args, dir, &[], timeout)
}

/// [`run_cli`] with `env` added to the binary's environment.
pub fn run_cli_with_env(
    args: &[&str],
    dir: &Path,
    env: &[(&str, &str)],
    timeout: Duration,
) -> Output {
    let mut child = Command::new(wasmgate())
        .args(args)
        .envs(env.iter().copied())
        .env_remove("WASMGATE_CONFIG")
        .env_remove("RUST_LOG")
        .current_dir(dir)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start wasmgate");
    let collect = |mut pipe: Box<dyn Read + Send>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            let _ = pipe.read_to_string(&mut text);
            text
        })
    };
    let stdout = collect(Box::new(child.stdout.take().expect("stdout")));
    let stderr = collect(Box::new(child.stderr.take().expect("stderr")));
    let deadline = Instant::now() + timeout;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("wasmgate {args:?} did not finish within {timeout:?}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    Output {
        status,
        stdout: stdout.join().unwrap_or_default(),
        stderr: stderr.join().unwrap_or_default(),
    }
}

impl Client {
    /// Like [`Client::spawn`], with `env` added to the gateway's environment (the
    /// sandbox tests grant some variables, the embedded-default test moves the cache).
    pub fn spawn_with_env(args: &[&str], dir: TestDir, env: &[(&str, &str)]) -> Client {
        Client::start_process(args, dir, env, true)
    }

    /// With `log_level`, the gateway logs at `WASMGATE_TEST_LOG` (default info) whatever
    /// its config says.
    fn start_process(args: &[&str], dir: TestDir, env: &[(&str, &str)], log_level: bool) -> Client {
        let stderr = File::create(dir.join("gateway.stderr")).expect("stderr file");
        let log = std::env::var("WASMGATE_TEST_LOG").unwrap_or_else(|_| "info".into());
        let mut command = Command::new(wasmgate());
        command
            .args(args)
            .env_remove("WASMGATE_CONFIG")
            .env_remove("RUST_LOG")
            .env_remove("WASMGATE_LOG");
        if log_level {
            command.env("WASMGATE_LOG", log);
        }
        command
            .envs(env.iter().copied())
            .current_dir(&dir.path)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr);
        let mut child = command.spawn().expect("start wasmgate");
        let stdout = child.stdout.take().expect("piped stdout");
        let (tx, lines) = mpsc::channel();
        let violations = Arc::new(Mutex::new(Vec::new()));
        let seen = violations.clone();
        let reader = std::thread::spawn(move || read_stdout(stdout, tx, seen));
        Client {
            stdin: child.stdin.take(),
            child,
            lines,
            buffer: VecDeque::new(),
            stdout_closed: false,
            reader: Some(reader),
            violations,
            next_id: 1,
            dir,
        }
    }
}
