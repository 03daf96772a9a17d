//! The client side of MCP over a child's stdin and stdout: one type speaks to
//! every target (the example server, and the gateway in every configuration).

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, BufWriter};
use tokio::process::{Child, ChildStdin, ChildStdout, Command};

use crate::{ECHO_TEXT, PROTOCOL_VERSION, Paths, READ_TIMEOUT, Result};

/// What the client reads of a message: its id (none for a notification), its
/// method (none for an answer), and whether it is an error.
#[derive(Deserialize)]
pub struct Answer {
    pub id: Option<Value>,
    pub method: Option<String>,
    pub result: Option<Value>,
    pub error: Option<Value>,
}

fn initialize_params() -> Value {
    json!({"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
           "clientInfo": {"name": "wasmgate-bench", "version": "0"}})
}

/// One MCP peer on the other end of a child's stdin and stdout. The same code
/// speaks to every target.
pub struct McpPipe {
    name: String,
    child: Child,
    input: BufWriter<ChildStdin>,
    output: BufReader<ChildStdout>,
    line: String,
    next_id: u64,
    /// Requests sent without waiting for their answers, which are dropped when they come.
    unawaited: Vec<u64>,
    stderr_log: PathBuf,
}

impl McpPipe {
    pub fn spawn(name: &str, program: &Path, args: &[&str], scratch: &Path) -> Result<McpPipe> {
        McpPipe::spawn_with_env(name, program, args, &[], scratch)
    }

    /// `spawn` with environment variables set for the child.
    pub fn spawn_with_env(
        name: &str,
        program: &Path,
        args: &[&str],
        env: &[(&str, &Path)],
        scratch: &Path,
    ) -> Result<McpPipe> {
        let stderr_log = scratch.join(format!("{name}.stderr.log"));
        let stderr = std::fs::File::create(&stderr_log)
            .map_err(|e| format!("{}: {e}", stderr_log.display()))?;
        let mut child = Command::new(program)
            .args(args)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", program.display()))?;
        let input = BufWriter::with_capacity(64 * 1024, child.stdin.take().expect("piped"));
        let output = BufReader::with_capacity(64 * 1024, child.stdout.take().expect("piped"));
        Ok(McpPipe {
            name: name.to_string(),
            child,
            input,
            output,
            line: String::new(),
            next_id: 1,
            unawaited: Vec::new(),
            stderr_log,
        })
    }

    pub fn pid(&self) -> Option<u32> {
        self.child.id()
    }

    pub fn fresh_id(&mut self) -> u64 {
        let id = self.next_id;
        self.next_id += 1;
        id
    }

    pub async fn write(&mut self, message: &Value) -> Result<()> {
        let mut bytes = message.to_string().into_bytes();
        bytes.push(b'\n');
        self.input
            .write_all(&bytes)
            .await
            .map_err(|e| self.broken(e))?;
        self.input.flush().await.map_err(|e| self.broken(e))
    }

    pub fn broken(&self, error: std::io::Error) -> String {
        format!(
            "{}: writing to it failed ({error}){}",
            self.name,
            self.stderr_tail()
        )
    }

    /// Where the child's stderr goes.
    pub fn stderr_log(&self) -> &Path {
        &self.stderr_log
    }

    /// The last lines the child wrote to stderr, to explain a failure.
    pub fn stderr_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.stderr_log).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        let tail = &lines[lines.len().saturating_sub(8)..];
        if tail.is_empty() {
            String::new()
        } else {
            format!("; its stderr ends with:\n  {}", tail.join("\n  "))
        }
    }

    /// Reads the next message with an id (notifications are skipped).
    pub async fn read_answer(&mut self) -> Result<Answer> {
        loop {
            let answer = self.read_message(READ_TIMEOUT).await?;
            if answer.id.is_some() {
                return Ok(answer);
            }
        }
    }

    /// Reads notifications until one of `method`, within `within`; answers are an error here.
    pub async fn wait_for_notification(&mut self, method: &str, within: Duration) -> Result<()> {
        let deadline = Instant::now() + within;
        loop {
            let wait = deadline.saturating_duration_since(Instant::now());
            let message = self.read_message(wait).await?;
            if message.id.is_some() {
                return Err(format!(
                    "{}: an answer to id {:?} while waiting for {method}",
                    self.name, message.id
                ));
            }
            if message.method.as_deref() == Some(method) {
                return Ok(());
            }
        }
    }

    /// Reads the next message, whatever it is.
    async fn read_message(&mut self, within: Duration) -> Result<Answer> {
        self.line.clear();
        let read = tokio::time::timeout(within, self.output.read_line(&mut self.line)).await;
        match read {
            Err(_) => {
                return Err(format!(
                    "{}: nothing within {within:?}{}",
                    self.name,
                    self.stderr_tail()
                ));
            }
            Ok(Err(e)) => return Err(format!("{}: reading failed ({e})", self.name)),
            Ok(Ok(0)) => {
                return Err(format!(
                    "{}: closed its stdout{}",
                    self.name,
                    self.stderr_tail()
                ));
            }
            Ok(Ok(_)) => {}
        }
        serde_json::from_str(&self.line)
            .map_err(|e| format!("{}: not JSON ({e}): {}", self.name, self.line.trim_end()))
    }

    /// One request, waited for; answers to other ids are an error here.
    pub async fn request(&mut self, method: &str, params: Value) -> Result<Value> {
        let id = self.fresh_id();
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        let answer = loop {
            let answer = self.read_answer().await?;
            let unawaited = self
                .unawaited
                .iter()
                .position(|u| answer.id == Some(json!(u)));
            match unawaited {
                Some(i) => {
                    self.unawaited.swap_remove(i);
                }
                None => break answer,
            }
        };
        if answer.id != Some(json!(id)) {
            return Err(format!(
                "{}: answer to id {:?} while waiting for {id}",
                self.name, answer.id
            ));
        }
        match (answer.result, answer.error) {
            (Some(result), None) => Ok(result),
            (_, Some(error)) => Err(format!("{}: {method} failed: {error}", self.name)),
            (None, None) => Err(format!(
                "{}: {method}: an answer with neither result nor error",
                self.name
            )),
        }
    }

    pub async fn initialize(&mut self) -> Result<()> {
        self.request("initialize", initialize_params()).await?;
        self.initialized().await
    }

    /// Writes `initialize` and `initialized` without waiting for the answer: the
    /// next request goes out at once (a client in a hurry, as in the start-up figure).
    pub async fn initialize_unawaited(&mut self) -> Result<()> {
        let id = self.fresh_id();
        self.unawaited.push(id);
        self.write(&json!({"jsonrpc": "2.0", "id": id, "method": "initialize", "params": initialize_params()}))
            .await?;
        self.initialized().await
    }

    async fn initialized(&mut self) -> Result<()> {
        self.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await
    }

    /// Every tool name, over all pages.
    pub async fn tool_names(&mut self) -> Result<Vec<String>> {
        let mut names = Vec::new();
        let mut cursor = Value::Null;
        loop {
            let params = if cursor.is_null() {
                json!({})
            } else {
                json!({"cursor": cursor})
            };
            let page = self.request("tools/list", params).await?;
            let tools = page
                .get("tools")
                .and_then(Value::as_array)
                .cloned()
                .unwrap_or_default();
            names.extend(
                tools
                    .iter()
                    .filter_map(|t| t.get("name")?.as_str().map(str::to_string)),
            );
            cursor = page.get("nextCursor").cloned().unwrap_or(Value::Null);
            if cursor.is_null() {
                return Ok(names);
            }
        }
    }

    /// Every page of a list, each as the line the child wrote, not parsed: the time of each
    /// page (from writing its request to reading its answer) is the gateway's, not the
    /// bench's parsing. Pushes each page's time (ns) to `page_ns`.
    pub async fn list_lines(
        &mut self,
        method: &str,
        page_ns: &mut Vec<u64>,
    ) -> Result<Vec<String>> {
        let mut lines = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let id = self.fresh_id();
            let params = match &cursor {
                None => json!({}),
                Some(cursor) => json!({"cursor": cursor}),
            };
            let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
            let begun = Instant::now();
            self.write(&request).await?;
            // The gateway writes an answer as `{"jsonrpc":"2.0","id":ID,...`: other lines
            // (notifications) are passed over without parsing.
            let head = format!(r#"{{"jsonrpc":"2.0","id":{id},"#);
            loop {
                self.line.clear();
                let read =
                    tokio::time::timeout(READ_TIMEOUT, self.output.read_line(&mut self.line));
                match read.await {
                    Ok(Ok(n)) if n > 0 => {}
                    _ => {
                        return Err(format!(
                            "{}: no answer to {method}{}",
                            self.name,
                            self.stderr_tail()
                        ));
                    }
                }
                if self.line.starts_with(&head) {
                    break;
                }
            }
            page_ns.push(begun.elapsed().as_nanos() as u64);
            // `nextCursor` follows the list in the gateway's result, at the end of the line.
            const KEY: &str = r#""nextCursor":""#;
            cursor = self.line.rfind(KEY).map(|at| {
                let rest = &self.line[at + KEY.len()..];
                rest[..rest.find('"').unwrap_or(0)].to_string()
            });
            lines.push(std::mem::take(&mut self.line));
            if cursor.is_none() {
                return Ok(lines);
            }
        }
    }

    /// Calls `tool` once and checks that it echoed.
    pub async fn check_echo(&mut self, tool: &str) -> Result<()> {
        self.check_text(tool, ECHO_TEXT).await
    }

    /// Calls `tool` once with the bench's text and checks that it answered `expected`.
    pub async fn check_text(&mut self, tool: &str, expected: &str) -> Result<()> {
        let result = self.call_tool(tool, json!({"text": ECHO_TEXT})).await?;
        let text = result.pointer("/content/0/text").and_then(Value::as_str);
        if text != Some(expected) || result.get("isError") == Some(&json!(true)) {
            return Err(format!(
                "{}: {tool} did not answer {expected:?}: {result}",
                self.name
            ));
        }
        Ok(())
    }

    pub async fn call_tool(&mut self, tool: &str, arguments: Value) -> Result<Value> {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    /// The gateway's newest events of one type (its `get_events` tool), newest first.
    pub async fn events(&mut self, event_type: &str, limit: usize) -> Result<Vec<Value>> {
        let result = self
            .call_tool(
                "get_events",
                json!({"event_type": event_type, "limit": limit}),
            )
            .await?;
        match result.pointer("/structuredContent/events") {
            Some(Value::Array(events)) => Ok(events.clone()),
            _ => Err(format!("{}: get_events answered {result}", self.name)),
        }
    }

    /// Initialises, then lists tools until `tool` is there (a plugin may still be
    /// compiling when the first list is answered), for at most `within`.
    pub async fn wait_for_tool(&mut self, tool: &str, within: Duration) -> Result<()> {
        self.initialize().await?;
        let deadline = Instant::now() + within;
        loop {
            let names = self.tool_names().await?;
            if names.iter().any(|n| n == tool) {
                return Ok(());
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "{}: tools/list has no {tool} after {within:?} (it has: {}){}",
                    self.name,
                    names.join(", "),
                    self.stderr_tail()
                ));
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// `calls` calls of `tool`, keeping `inflight` requests outstanding. Returns each
    /// call's latency (ns) and the time the whole run took.
    pub async fn load(
        &mut self,
        tool: &str,
        calls: usize,
        inflight: usize,
    ) -> Result<(Vec<u64>, Duration)> {
        // Every request line is the same but for its id.
        let head = br#"{"jsonrpc":"2.0","id":"#;
        let tail = format!(
            r#","method":"tools/call","params":{{"name":"{tool}","arguments":{{"text":"{ECHO_TEXT}"}}}}}}"#
        );
        let first = self.next_id;
        self.next_id += calls as u64;
        let mut sent_at: Vec<Option<Instant>> = vec![None; calls];
        let mut latencies = Vec::with_capacity(calls);
        let mut buffer = Vec::with_capacity(256);
        let (mut sent, mut done) = (0usize, 0usize);
        let begun = Instant::now();
        while done < calls {
            // Fill the window, then one flush for all that was written.
            if sent < calls && sent - done < inflight {
                while sent < calls && sent - done < inflight {
                    buffer.clear();
                    buffer.extend_from_slice(head);
                    buffer.extend_from_slice((first + sent as u64).to_string().as_bytes());
                    buffer.extend_from_slice(tail.as_bytes());
                    buffer.push(b'\n');
                    self.input
                        .write_all(&buffer)
                        .await
                        .map_err(|e| self.broken(e))?;
                    sent_at[sent] = Some(Instant::now());
                    sent += 1;
                }
                self.input.flush().await.map_err(|e| self.broken(e))?;
            }
            let answer = self.read_answer().await?;
            let now = Instant::now();
            let index = answer
                .id
                .as_ref()
                .and_then(Value::as_u64)
                .and_then(|id| id.checked_sub(first))
                .map(|i| i as usize)
                .filter(|i| *i < calls)
                .ok_or_else(|| {
                    format!(
                        "{}: answer with an unexpected id {:?}",
                        self.name, answer.id
                    )
                })?;
            let Some(start) = sent_at[index].take() else {
                return Err(format!(
                    "{}: a second answer to id {}",
                    self.name,
                    first + index as u64
                ));
            };
            if let Some(error) = answer.error {
                return Err(format!("{}: {tool} failed under load: {error}", self.name));
            }
            latencies.push(now.duration_since(start).as_nanos() as u64);
            done += 1;
        }
        Ok((latencies, begun.elapsed()))
    }

    /// Closes stdin and times the child's exit; past `limit` it is killed, and that is an error.
    pub async fn close_timed(mut self, limit: Duration) -> Result<Duration> {
        let begun = Instant::now();
        let _ = self.input.shutdown().await;
        drop(self.input);
        match tokio::time::timeout(limit, self.child.wait()).await {
            Ok(_) => Ok(begun.elapsed()),
            Err(_) => {
                let _ = self.child.kill().await;
                Err(format!(
                    "{}: still running {limit:?} after its stdin closed",
                    self.name
                ))
            }
        }
    }

    /// Closes stdin and waits for the child to leave; kills it after a grace period.
    pub async fn close(mut self) {
        let _ = self.input.shutdown().await;
        drop(self.input);
        if tokio::time::timeout(Duration::from_secs(3), self.child.wait())
            .await
            .is_err()
        {
            let _ = self.child.kill().await;
        }
    }
}

pub fn write_config(path: &Path, body: &str) -> Result<()> {
    std::fs::write(path, body).map_err(|e| format!("{}: {e}", path.display()))
}

/// A TOML basic string (paths with quotes or backslashes included).
pub fn toml_string(path: &Path) -> String {
    serde_json::to_string(&path.display().to_string()).expect("a string serialises")
}

pub async fn start_gateway(
    name: &str,
    paths: &Paths,
    config: &Path,
    scratch: &Path,
) -> Result<McpPipe> {
    let config = config
        .to_str()
        .ok_or("the scratch directory is not UTF-8")?;
    McpPipe::spawn(
        name,
        &paths.gateway,
        &["serve", "--config", config],
        scratch,
    )
}
