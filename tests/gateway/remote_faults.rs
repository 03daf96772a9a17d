//! Faults of a remote server that a real server cannot be made to show on demand, against a
//! scripted Streamable HTTP server on a thread (one request per connection): a forgotten
//! session, an answer's stream cut short, the GET stream dropped and resumed, what clients
//! asked restored on a new session, and the limit on requests in flight.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Client, TIMEOUT, TestDir, config, eventually, text};

/// One HTTP request the scripted server read.
#[derive(Clone, Debug)]
pub(crate) struct Seen {
    pub(crate) verb: String,
    pub(crate) session: Option<String>,
    pub(crate) last_event_id: Option<String>,
    pub(crate) message: Value,
}

impl Seen {
    pub(crate) fn method(&self) -> &str {
        self.message["method"].as_str().unwrap_or_default()
    }
}

/// The answer being written to one request.
pub(crate) struct Reply {
    pub(crate) stream: TcpStream,
}

impl Reply {
    pub(crate) fn json(&mut self, status: &str, extra: &str, body: Option<Value>) {
        let body = body.map_or(String::new(), |b| b.to_string());
        let _ = write!(
            self.stream,
            "HTTP/1.1 {status}\r\ncontent-type: application/json\r\n{extra}content-length: {}\r\nconnection: close\r\n\r\n{body}",
            body.len()
        );
    }

    pub(crate) fn result(&mut self, seen: &Seen, result: Value) {
        let answer = json!({"jsonrpc": "2.0", "id": seen.message["id"], "result": result});
        self.json("200 OK", "", Some(answer));
    }

    pub(crate) fn events(&mut self) {
        let _ = write!(
            self.stream,
            "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n"
        );
    }

    pub(crate) fn event(&mut self, id: Option<&str>, data: &Value) {
        let id = id.map_or(String::new(), |id| format!("id: {id}\n"));
        let _ = write!(self.stream, "{id}data: {data}\n\n");
        let _ = self.stream.flush();
    }

    /// Holds the stream open until the gateway closes it.
    pub(crate) fn hold(&mut self) {
        let mut sink = [0u8; 256];
        while self.stream.read(&mut sink).is_ok_and(|n| n > 0) {}
    }
}

/// A count that waiting threads take one from.
#[derive(Default)]
struct Gate {
    open: Mutex<usize>,
    changed: Condvar,
}

impl Gate {
    fn open(&self, n: usize) {
        *self.open.lock().unwrap() += n;
        self.changed.notify_all();
    }

    fn pass(&self) {
        let mut open = self.open.lock().unwrap();
        while *open == 0 {
            open = self.changed.wait(open).unwrap();
        }
        *open -= 1;
    }
}

type Script = dyn Fn(&Seen, &mut Reply) -> bool + Send + Sync;

/// The scripted server: every request recorded in `seen`; what `script` does not answer
/// (it returns false) gets the defaults of a small MCP server with sessions `s1`, `s2`, ...
pub(crate) struct Scripted {
    addr: SocketAddr,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Scripted {
    pub(crate) fn start(
        script: impl Fn(&Seen, &mut Reply) -> bool + Send + Sync + 'static,
    ) -> Scripted {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let (log, inits) = (seen.clone(), Arc::new(AtomicUsize::new(0)));
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                let (log, script, inits) = (log.clone(), script.clone(), inits.clone());
                std::thread::spawn(move || serve_one(stream, &log, &*script, &inits));
            }
        });
        Scripted { addr, seen }
    }

    pub(crate) fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }

    pub(crate) fn count(&self, pick: impl Fn(&Seen) -> bool) -> usize {
        self.seen.lock().unwrap().iter().filter(|s| pick(s)).count()
    }
}

fn serve_one(stream: TcpStream, log: &Mutex<Vec<Seen>>, script: &Script, inits: &AtomicUsize) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let (mut head, mut line) = (Vec::new(), String::new());
    while reader.read_line(&mut line).is_ok_and(|n| n > 2) {
        head.push(line.trim().to_string());
        line.clear();
    }
    let header = |name: &str| {
        head.iter().find_map(|h| {
            let (key, value) = h.split_once(':')?;
            key.eq_ignore_ascii_case(name)
                .then(|| value.trim().to_string())
        })
    };
    let length: usize = header("content-length").map_or(0, |l| l.parse().unwrap());
    let mut body = vec![0; length];
    if reader.read_exact(&mut body).is_err() {
        return;
    }
    let seen = Seen {
        verb: head
            .first()
            .and_then(|h| h.split(' ').next())
            .unwrap_or_default()
            .to_string(),
        session: header("mcp-session-id"),
        last_event_id: header("last-event-id"),
        message: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    log.lock().unwrap().push(seen.clone());
    let mut reply = Reply { stream };
    if script(&seen, &mut reply) {
        return;
    }
    match (seen.verb.as_str(), seen.method()) {
        ("GET", _) => reply.json("405 Method Not Allowed", "", None),
        ("DELETE", _) => reply.json("200 OK", "", None),
        (_, "initialize") => {
            let n = inits.fetch_add(1, Ordering::SeqCst) + 1;
            let capabilities =
                json!({"tools": {}, "logging": {}, "resources": {"subscribe": true}});
            let answer = json!({"jsonrpc": "2.0", "id": seen.message["id"], "result": {
                "protocolVersion": "2025-06-18", "capabilities": capabilities,
                "serverInfo": {"name": "scripted", "version": "1"}}});
            reply.json("200 OK", &format!("mcp-session-id: s{n}\r\n"), Some(answer));
        }
        (_, "tools/list") => {
            let tools: Vec<Value> = ["who", "cut", "hold"]
                .iter()
                .map(|name| json!({"name": name, "inputSchema": {"type": "object"}}))
                .collect();
            reply.result(&seen, json!({"tools": tools}));
        }
        (_, "resources/list") => reply.result(
            &seen,
            json!({"resources": [{"uri": "scripted://a", "name": "a"}]}),
        ),
        (_, "resources/templates/list") => reply.result(&seen, json!({"resourceTemplates": []})),
        (_, "tools/call") => {
            let text = format!("session {}", seen.session.clone().unwrap_or_default());
            reply.result(&seen, json!({"content": [{"type": "text", "text": text}]}));
        }
        _ if seen.message.get("id").is_some() && seen.message.get("method").is_some() => {
            reply.result(&seen, json!({}))
        }
        _ => reply.json("202 Accepted", "", None),
    }
}

/// The gateway over stdio with the scripted server as `up`.
pub(crate) fn gateway(server: &Scripted, lines: &[&str]) -> Client {
    let mut client = started(server, lines);
    client.wait_ready();
    client
}

/// The gateway over stdio with the scripted server as `up`, initialized, `up` perhaps not
/// ready yet.
pub(crate) fn started(server: &Scripted, lines: &[&str]) -> Client {
    let dir = TestDir::new("outer");
    let config = config()
        .remote("up", &server.url(), lines)
        .render(&dir.path);
    let path = dir.write("gateway.toml", &config);
    let path = path.to_str().unwrap().to_string();
    let mut client = Client::spawn_with_env(&["serve", "--config", &path], dir, &[]);
    client.initialize();
    client
}

pub(crate) fn is_init(seen: &Seen) -> bool {
    seen.method() == "initialize"
}

/// A server that answers 404 for the session: the gateway initializes a new one and the
/// call goes through on it, the client none the wiser.
#[test]
fn a_forgotten_session_is_opened_again_and_the_call_sent_on_it() {
    let calls_on_s1 = AtomicUsize::new(0);
    let server = Scripted::start(move |seen, reply| {
        let forgotten = seen.method() == "tools/call"
            && seen.session.as_deref() == Some("s1")
            && calls_on_s1.fetch_add(1, Ordering::SeqCst) >= 1;
        if forgotten {
            reply.json("404 Not Found", "", None);
        }
        forgotten
    });
    let mut client = gateway(&server, &[]);
    assert_eq!(text(&client.call("up__who", json!({}))), "session s1");
    assert_eq!(text(&client.call("up__who", json!({}))), "session s2");
    assert_eq!(server.count(is_init), 2);
}

/// On the new session after a 404, the log level and the subscriptions clients asked for
/// reach the server again, before the call that found the session gone.
#[test]
fn the_log_level_and_subscriptions_are_restored_on_a_new_session() {
    let forget = Arc::new(AtomicBool::new(false));
    let forgetting = forget.clone();
    let server = Scripted::start(move |seen, reply| {
        let gone = forgetting.load(Ordering::SeqCst) && seen.session.as_deref() == Some("s1");
        if gone {
            reply.json("404 Not Found", "", None);
        }
        gone
    });
    let mut client = gateway(&server, &[]);
    client.result("logging/setLevel", json!({"level": "debug"}));
    client.result("resources/subscribe", json!({"uri": "scripted://a"}));
    forget.store(true, Ordering::SeqCst);
    assert_eq!(text(&client.call("up__who", json!({}))), "session s2");

    let on_s2: Vec<Seen> = server
        .seen()
        .into_iter()
        .filter(|s| s.session.as_deref() == Some("s2") && s.verb == "POST")
        .collect();
    let at = |method: &str| {
        on_s2
            .iter()
            .position(|s| s.method() == method)
            .unwrap_or_else(|| panic!("no {method} on s2: {on_s2:?}"))
    };
    let (level, subscribe, call) = (
        at("logging/setLevel"),
        at("resources/subscribe"),
        at("tools/call"),
    );
    assert!(level < call && subscribe < call, "{on_s2:?}");
    assert_eq!(on_s2[level].message["params"]["level"], "debug");
    assert_eq!(on_s2[subscribe].message["params"]["uri"], "scripted://a");
}

/// An answer's event stream cut after a progress event: that call fails at once with an
/// error naming the server; the session goes on and the next call is answered on it.
#[test]
fn a_stream_cut_in_the_middle_of_an_answer() {
    let server = Scripted::start(|seen, reply| {
        let cut = seen.message["params"]["name"] == "cut";
        if cut {
            reply.events();
            let token = seen.message["params"]["_meta"]["progressToken"].clone();
            let progress = json!({"jsonrpc": "2.0", "method": "notifications/progress",
                                  "params": {"progressToken": token, "progress": 1}});
            reply.event(None, &progress);
            // Half an event, then the connection closes.
            let _ = write!(reply.stream, "data: {{\"jsonrpc\": \"2.0\", \"id\"");
        }
        cut
    });
    let mut client = gateway(&server, &[r#"timeout = "30s""#]);
    let started = Instant::now();
    let id = client.send_request(
        "tools/call",
        json!({"name": "up__cut", "arguments": {}, "_meta": {"progressToken": "c"}}),
    );
    let (before, response) = client.until_response(&id, TIMEOUT);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "at once, not at the timeout"
    );
    assert!(
        before
            .iter()
            .any(|m| m["method"] == "notifications/progress"),
        "{before:?}"
    );
    let message = response["error"]["message"].as_str().unwrap_or_default();
    assert_eq!(response["error"]["code"], -32000, "{response}");
    assert!(
        message.contains("`up`") && message.contains("broke off"),
        "{response}"
    );

    assert_eq!(text(&client.call("up__who", json!({}))), "session s1");
    assert_eq!(client.status()["backends"]["up"]["status"], "ready");
    assert_eq!(server.count(is_init), 1, "the same session");
}

/// The GET stream dropped after an event with an id is opened again with `Last-Event-ID`,
/// and what the server sends on the new stream reaches the client.
#[test]
fn the_get_stream_resumes_with_last_event_id_after_a_drop() {
    let gate = Arc::new(Gate::default());
    let gets = AtomicUsize::new(0);
    let opened = gate.clone();
    let server = Scripted::start(move |seen, reply| {
        if seen.verb != "GET" {
            return false;
        }
        let log = |data: &str| {
            json!({"jsonrpc": "2.0", "method": "notifications/message",
                                      "params": {"level": "error", "data": data}})
        };
        reply.events();
        if gets.fetch_add(1, Ordering::SeqCst) == 0 {
            opened.pass();
            reply.event(Some("e1"), &log("first"));
        } else {
            reply.event(Some("e2"), &log("second"));
            reply.hold();
        }
        true
    });
    let mut client = gateway(&server, &[]);
    eventually(TIMEOUT, "the GET stream to open", || {
        (server.count(|s| s.verb == "GET") == 1).then_some(())
    });
    gate.open(1);
    for data in ["first", "second"] {
        let message = client.next_notification("notifications/message", TIMEOUT);
        assert_eq!(message["params"]["data"], data, "{message}");
    }
    let gets: Vec<Seen> = server
        .seen()
        .into_iter()
        .filter(|s| s.verb == "GET")
        .collect();
    assert_eq!(gets[0].last_event_id, None, "{gets:?}");
    assert_eq!(gets[1].last_event_id.as_deref(), Some("e1"), "{gets:?}");
    assert_eq!(gets[1].session.as_deref(), Some("s1"), "{gets:?}");
}

/// At most 64 requests are in flight to one server: the 65th waits for a turn (it does
/// not fail) and goes as soon as one of the 64 is answered.
#[test]
fn the_sixty_fifth_request_in_flight_waits_for_a_turn() {
    held_at_once(&[r#"timeout = "60s""#], 65, 64);
}

/// `max_connections` bounds the HTTP/1.1 connections lent at once (so the requests on
/// them), `max_in_flight` the requests whatever carries them.
#[test]
fn max_connections_and_max_in_flight_bound_what_reaches_the_server() {
    held_at_once(&["max_connections = 2"], 5, 2);
    held_at_once(&["max_in_flight = 3"], 5, 3);
}

/// Sends `calls` calls to a scripted server that holds each until released, the server's
/// entry having `lines`: `limit` of them reach it and no more (a short look), one more once
/// one is answered, and every call gets its answer in the end.
fn held_at_once(lines: &[&str], calls: usize, limit: usize) {
    let release = Arc::new(Gate::default());
    let (held, most) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let (gate, now, peak) = (release.clone(), held.clone(), most.clone());
    let server = Scripted::start(move |seen, reply| {
        if seen.message["params"]["name"] != "hold" {
            return false;
        }
        let n = now.fetch_add(1, Ordering::SeqCst) + 1;
        peak.fetch_max(n, Ordering::SeqCst);
        gate.pass();
        now.fetch_sub(1, Ordering::SeqCst);
        reply.result(seen, json!({"content": [{"type": "text", "text": "held"}]}));
        true
    });
    let mut client = gateway(&server, lines);
    let holds = |server: &Scripted| server.count(|s| s.message["params"]["name"] == "hold");
    let ids: Vec<Value> = (0..calls)
        .map(|_| client.send_request("tools/call", json!({"name": "up__hold", "arguments": {}})))
        .collect();
    eventually(
        TIMEOUT,
        &format!("{limit} calls to reach the server"),
        || (held.load(Ordering::SeqCst) == limit).then_some(()),
    );
    // Nothing to wait for here but the absence of one more: a short look.
    let look = Instant::now() + Duration::from_millis(300);
    while Instant::now() < look {
        assert_eq!(
            holds(&server),
            limit,
            "{lines:?}: one too many reached the server"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    release.open(1);
    eventually(TIMEOUT, "the next call to reach the server", || {
        (holds(&server) == limit + 1).then_some(())
    });
    release.open(calls);
    for id in &ids {
        let response = client.wait_response(id, TIMEOUT);
        assert_eq!(text(&response["result"]), "held", "{lines:?}: {response}");
    }
    assert_eq!(most.load(Ordering::SeqCst), limit, "{lines:?}");
}
