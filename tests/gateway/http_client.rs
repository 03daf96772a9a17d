//! A small HTTP/1.1 client for the HTTP front's tests, over tokio's TcpStream: requests on
//! a keep-alive connection, chunked and sized bodies, and event streams read event by event.
//! The gateway under test is the real binary, started with `serve --http 127.0.0.1:0`.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpStream;

use crate::harness::TestDir;

/// A gateway serving HTTP, stopped when dropped.
pub struct HttpGateway {
    child: Child,
    pub addr: SocketAddr,
    pub dir: TestDir,
}

impl HttpGateway {
    /// Starts `wasmgate serve --http 127.0.0.1:0` on `config` (TOML text), with `env`.
    pub fn start(config: &str, env: &[(&str, &str)]) -> HttpGateway {
        HttpGateway::start_in(TestDir::new("http"), config, env)
    }

    /// [`Self::start`] in `dir`, which may hold files the config names.
    pub fn start_in(dir: TestDir, config: &str, env: &[(&str, &str)]) -> HttpGateway {
        HttpGateway::start_on(dir, config, "127.0.0.1:0", env)
    }

    /// [`Self::start_in`] on `listen` (a port known before the config is written).
    pub fn start_on(dir: TestDir, config: &str, listen: &str, env: &[(&str, &str)]) -> HttpGateway {
        let path = dir.write(
            "gateway.toml",
            &config.replace("{dir}", dir.path.to_str().unwrap()),
        );
        let (child, addr) = spawn(&path, &dir, listen, env);
        HttpGateway {
            child,
            addr: addr.expect("the gateway listens"),
            dir,
        }
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn stderr(&self) -> String {
        std::fs::read_to_string(self.dir.join("gateway.stderr")).unwrap_or_default()
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub async fn connect(&self) -> Conn {
        Conn::open(self.addr).await
    }

    /// A session on `path` after `initialize` and `notifications/initialized`, with
    /// `headers` on every request.
    pub async fn session(&self, path: &str, headers: &[(&str, &str)]) -> McpSession {
        let mut conn = self.connect().await;
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {"sampling": {}},
            "clientInfo": {"name": "http-test", "version": "1"}}});
        let reply = conn.post(path, headers, &init).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let id = reply.headers["mcp-session-id"].clone();
        let mut session = McpSession {
            conn,
            path: path.to_string(),
            headers: headers
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            id,
            next: 1,
        };
        let reply = session
            .send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        assert_eq!(reply.status, 202, "{}", reply.body);
        session
    }
}

impl HttpGateway {
    /// SIGKILL, as a crash would: no session is closed, no stream ended.
    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }

    /// Sends SIGTERM and waits up to `limit` for the process to exit; its status.
    pub fn terminate(&mut self, limit: Duration) -> Option<std::process::ExitStatus> {
        if let Ok(Some(status)) = self.child.try_wait() {
            return Some(status);
        }
        // SIGTERM first: the gateway stops its servers on the way out.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + limit;
        while Instant::now() < deadline {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        None
    }
}

impl Drop for HttpGateway {
    fn drop(&mut self) {
        if self.terminate(Duration::from_secs(5)).is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// Starts the binary serving HTTP on `listen`; the address it bound, or `None` when it
/// exited first (its stderr says why).
pub fn spawn(
    config: &Path,
    dir: &TestDir,
    listen: &str,
    env: &[(&str, &str)],
) -> (Child, Option<SocketAddr>) {
    let stderr = std::fs::File::create(dir.join("gateway.stderr")).unwrap();
    let mut command = Command::new(crate::harness::wasmgate());
    command
        .args(["serve", "--http", listen, "--config"])
        .arg(config)
        .env_remove("WASMGATE_CONFIG")
        .env_remove("WASMGATE_TOKEN")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    for (key, value) in env {
        command.env(key, value);
    }
    let mut child = command.spawn().expect("start wasmgate");
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        let text = std::fs::read_to_string(dir.join("gateway.stderr")).unwrap_or_default();
        // A whole line only: the file may be read while the line is being written.
        if let Some((line, _)) = text
            .split("listening on ")
            .nth(1)
            .and_then(|r| r.split_once('\n'))
        {
            let authority = line.split("://").nth(1).unwrap().split('/').next().unwrap();
            let addr = authority.parse().unwrap_or_else(|e| panic!("{line}: {e}"));
            return (child, Some(addr));
        }
        if let Ok(Some(_)) = child.try_wait() {
            return (child, None);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("the gateway did not listen within 30 s");
}

pub struct Reply {
    pub status: u16,
    pub headers: HashMap<String, String>,
    pub body: String,
}

impl Reply {
    pub fn json(&self) -> Value {
        serde_json::from_str(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.body))
    }

    /// The `data` of each event of an event-stream body, parsed.
    pub fn events(&self) -> Vec<Value> {
        self.body
            .lines()
            .filter_map(|l| l.strip_prefix("data:"))
            .map(|d| serde_json::from_str(d.trim()).unwrap())
            .collect()
    }

    /// The one JSON-RPC answer, whether sent as JSON or as the last event of a stream.
    pub fn answer(&self) -> Value {
        if self
            .headers
            .get("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            self.events().pop().expect("an answer event")
        } else {
            self.json()
        }
    }
}

/// One keep-alive connection.
pub struct Conn {
    reader: BufReader<tokio::net::tcp::OwnedReadHalf>,
    writer: tokio::net::tcp::OwnedWriteHalf,
    host: String,
}

pub const ACCEPT_BOTH: (&str, &str) = ("accept", "application/json, text/event-stream");

impl Conn {
    pub async fn open(addr: SocketAddr) -> Conn {
        let stream = TcpStream::connect(addr).await.expect("connect");
        stream.set_nodelay(true).unwrap();
        let (read, writer) = stream.into_split();
        Conn {
            reader: BufReader::new(read),
            writer,
            host: addr.to_string(),
        }
    }

    /// What the gateway sends from here on: nothing once every answer was read.
    pub fn reader(&mut self) -> &mut BufReader<tokio::net::tcp::OwnedReadHalf> {
        &mut self.reader
    }

    /// The TCP stream, once every answer on it was read.
    pub fn into_stream(self) -> TcpStream {
        self.reader.into_inner().reunite(self.writer).unwrap()
    }

    /// `POST path` with a JSON body, the MCP `Accept` header and `headers`.
    pub async fn post(&mut self, path: &str, headers: &[(&str, &str)], body: &Value) -> Reply {
        let mut all = vec![ACCEPT_BOTH, ("content-type", "application/json")];
        all.extend_from_slice(headers);
        self.request("POST", path, &all, &body.to_string()).await
    }

    /// Sends a request and reads the whole response (an event stream until it ends).
    pub async fn request(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Reply {
        self.send_head(method, path, headers, body).await;
        let (status, response_headers) = self.read_head().await;
        let body = self.read_body(&response_headers).await;
        Reply {
            status,
            headers: response_headers,
            body,
        }
    }

    pub async fn send_head(
        &mut self,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) {
        let mut head = format!("{method} {path} HTTP/1.1\r\n");
        if !headers.iter().any(|(k, _)| k.eq_ignore_ascii_case("host")) {
            head.push_str(&format!("host: {}\r\n", self.host));
        }
        for (key, value) in headers {
            head.push_str(&format!("{key}: {value}\r\n"));
        }
        head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
        // One write: a refusal (401, 403) sent before the body arrived makes the server
        // close the connection, and the next request on it would fail.
        head.push_str(body);
        self.writer.write_all(head.as_bytes()).await.unwrap();
    }

    pub async fn read_head(&mut self) -> (u16, HashMap<String, String>) {
        let mut line = String::new();
        self.reader.read_line(&mut line).await.unwrap();
        let status = line
            .split(' ')
            .nth(1)
            .and_then(|s| s.parse().ok())
            .unwrap_or_else(|| panic!("status line: {line:?}"));
        let mut headers = HashMap::new();
        loop {
            line.clear();
            self.reader.read_line(&mut line).await.unwrap();
            let line = line.trim_end();
            if line.is_empty() {
                break;
            }
            let (key, value) = line.split_once(':').unwrap();
            headers.insert(key.to_ascii_lowercase(), value.trim().to_string());
        }
        (status, headers)
    }

    async fn read_body(&mut self, headers: &HashMap<String, String>) -> String {
        if headers
            .get("transfer-encoding")
            .is_some_and(|t| t == "chunked")
        {
            let mut body = String::new();
            while let Some(chunk) = self.read_chunk().await {
                body.push_str(&chunk);
            }
            return body;
        }
        let len = headers
            .get("content-length")
            .map_or(0, |l| l.parse().unwrap());
        let mut body = vec![0; len];
        self.reader.read_exact(&mut body).await.unwrap();
        String::from_utf8(body).unwrap()
    }

    /// The next chunk of a chunked body; `None` at its end.
    pub async fn read_chunk(&mut self) -> Option<String> {
        let mut line = String::new();
        if self.reader.read_line(&mut line).await.ok()? == 0 {
            return None;
        }
        let size = usize::from_str_radix(line.trim(), 16).ok()?;
        let mut chunk = vec![0; size + 2];
        self.reader.read_exact(&mut chunk).await.ok()?;
        chunk.truncate(size);
        (size > 0).then(|| String::from_utf8(chunk).unwrap())
    }
}

/// An event stream read event by event.
pub struct EventStream {
    pub conn: Conn,
    pending: String,
}

/// One event: its id (if any), its data (if any), or a comment.
#[derive(Debug)]
pub struct Event {
    pub id: Option<String>,
    pub data: Option<String>,
    pub comment: bool,
}

impl EventStream {
    /// Sends a request whose answer is an event stream; panics on another status.
    pub async fn open(
        mut conn: Conn,
        method: &str,
        path: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> Result<EventStream, Reply> {
        conn.send_head(method, path, headers, body).await;
        let (status, headers) = conn.read_head().await;
        if !headers
            .get("content-type")
            .is_some_and(|t| t.starts_with("text/event-stream"))
        {
            let body = conn.read_body(&headers).await;
            return Err(Reply {
                status,
                headers,
                body,
            });
        }
        Ok(EventStream {
            conn,
            pending: String::new(),
        })
    }

    /// The next event or comment within `limit`; `None` when the stream ended or nothing came.
    pub async fn next(&mut self, limit: Duration) -> Option<Event> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            if let Some(end) = self.pending.find("\n\n") {
                let block: String = self.pending.drain(..end + 2).collect();
                let mut event = Event {
                    id: None,
                    data: None,
                    comment: false,
                };
                for line in block.lines() {
                    if let Some(id) = line.strip_prefix("id:") {
                        event.id = Some(id.trim().to_string());
                    } else if let Some(data) = line.strip_prefix("data:") {
                        event.data = Some(data.trim().to_string());
                    } else if line.starts_with(':') {
                        event.comment = true;
                    }
                }
                return Some(event);
            }
            let chunk = tokio::time::timeout_at(deadline, self.conn.read_chunk())
                .await
                .ok()??;
            self.pending.push_str(&chunk);
        }
    }

    /// The next event with data, parsed; comments are skipped.
    pub async fn next_message(&mut self, limit: Duration) -> Option<(Option<String>, Value)> {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            let event = self.next(left).await?;
            if let Some(data) = event.data.filter(|d| !d.is_empty()) {
                return Some((event.id, serde_json::from_str(&data).unwrap()));
            }
        }
    }
}

/// An initialized Streamable HTTP session on one connection.
pub struct McpSession {
    pub conn: Conn,
    pub path: String,
    pub headers: Vec<(String, String)>,
    pub id: String,
    next: u64,
}

impl McpSession {
    /// The session `id` on `conn`, sending `headers` (besides the session's own) on `path`.
    pub fn new(conn: Conn, path: &str, headers: Vec<(String, String)>, id: String) -> McpSession {
        McpSession {
            conn,
            path: path.to_string(),
            headers,
            id,
            next: 1,
        }
    }

    fn all_headers(&self) -> Vec<(&str, &str)> {
        let mut all: Vec<(&str, &str)> = self
            .headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        all.push(("mcp-session-id", &self.id));
        all.push(("mcp-protocol-version", "2025-11-25"));
        all
    }

    /// The same session on another connection `conn` (its requests numbered apart).
    pub fn on(&self, conn: Conn) -> McpSession {
        McpSession {
            conn,
            path: self.path.clone(),
            headers: self.headers.clone(),
            id: self.id.clone(),
            next: self.next + 1_000_000,
        }
    }

    pub async fn send(&mut self, message: &Value) -> Reply {
        let headers: Vec<(String, String)> = self
            .all_headers()
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        let headers: Vec<(&str, &str)> = headers
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_str()))
            .collect();
        let path = self.path.clone();
        self.conn.post(&path, &headers, message).await
    }

    /// A request; its answer, whether sent as JSON or at the end of a stream.
    pub async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next += 1;
        let message =
            json!({"jsonrpc": "2.0", "id": self.next, "method": method, "params": params});
        let reply = self.send(&message).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let answer = reply.answer();
        assert_eq!(answer["id"], self.next, "{answer}");
        answer
    }

    pub async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    /// A request of this session on `conn` whose answer is an event stream.
    pub async fn open_stream(
        &self,
        conn: Conn,
        method: &str,
        extra: &[(&str, &str)],
        body: &str,
    ) -> Result<EventStream, Reply> {
        let mut headers = self.all_headers();
        headers.extend_from_slice(extra);
        EventStream::open(conn, method, &self.path, &headers, body).await
    }
}

/// A current-thread runtime for one test.
pub fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}
