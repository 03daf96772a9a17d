//! Several principals on one HTTP front, through the real binary: what one profile's
//! servers send on their own, and what the gateway's own tools and answers say, never
//! reaches a session of a profile that does not see them; a server's request goes to the
//! client whose call caused it, or to none.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{config, toml_str};
use crate::http_client::{ACCEPT_BOTH, Conn, EventStream, HttpGateway, McpSession, runtime};

const WAIT: Duration = Duration::from_secs(20);
/// How long a stream is read for messages that must not come.
const QUIET: Duration = Duration::from_millis(600);

const TOKEN_A: &str = "token-of-alice-0123456789";
const TOKEN_B: &str = "token-of-bob-0123456789ab";

/// Servers `a` and `b` (the example server) and the `echo` plugin (from `{dir}/plugins`),
/// profile `A` seeing `a` and `B` seeing `b` and `echo`, a token for each, and `extra`
/// appended.
fn two_tenants(extra: &str) -> String {
    let dir = std::path::Path::new("{dir}");
    let servers = config()
        .example("a", &["--name", "a", "--instructions", "Instructions of a"])
        .example(
            "b",
            &["--name", "b", "--instructions", "SECRET-B instructions"],
        )
        .render(dir);
    format!(
        r#"{servers}
[http]
tokens = [
  {{ name = "alice", token = "{TOKEN_A}", profiles = ["A"] }},
  {{ name = "bob", token = "{TOKEN_B}", profiles = ["B"] }},
]

[plugins]
dir = "{{dir}}/plugins"
cache_dir = "{{dir}}/cache"

[profiles.A]
servers = ["a"]

[profiles.B]
servers = ["b", "echo"]
{extra}
"#
    )
}

/// How a tenant's client reaches the front.
#[derive(Clone, Copy, Debug)]
enum Transport {
    Streamable,
    LegacySse,
}

/// One client of the front that answers the requests it gets (sampling, elicitation,
/// roots) with its own name in them, and keeps every message it received.
struct Tenant {
    name: &'static str,
    gateway_addr: std::net::SocketAddr,
    token: String,
    transport: Transport,
    /// Streamable HTTP: the session; legacy: `None`.
    session: Option<McpSession>,
    /// The session's own stream (`GET`), or the legacy stream.
    stream: EventStream,
    /// Legacy: where messages are posted.
    endpoint: String,
    next_id: u64,
    seen: Vec<Value>,
    /// The initialize answer.
    init: Value,
}

fn init_params() -> Value {
    json!({"protocolVersion": "2025-11-25",
           "capabilities": {"sampling": {}, "elicitation": {}, "roots": {"listChanged": true}},
           "clientInfo": {"name": "tenant", "version": "1"}})
}

impl Tenant {
    async fn open(
        gateway: &HttpGateway,
        name: &'static str,
        profile: &str,
        token: &str,
        transport: Transport,
    ) -> Tenant {
        let bearer = format!("Bearer {token}");
        let auth: Vec<(&str, &str)> = match token {
            "" => Vec::new(),
            _ => vec![("authorization", bearer.as_str())],
        };
        let mut get = auth.clone();
        get.push(("accept", "text/event-stream"));
        let suffix = match profile {
            "" => String::new(),
            name => format!("/{name}"),
        };
        let mut tenant = match transport {
            Transport::Streamable => {
                let path = format!("/mcp{suffix}");
                let mut conn = gateway.connect().await;
                let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init_params()});
                let reply = conn.post(&path, &auth, &init).await;
                assert_eq!(reply.status, 200, "{}", reply.body);
                let answer = reply.json();
                let headers = auth.iter().map(|(k, v)| (k.to_string(), v.to_string()));
                let session = McpSession::new(
                    conn,
                    &path,
                    headers.collect(),
                    reply.headers["mcp-session-id"].clone(),
                );
                let stream = session
                    .open_stream(
                        gateway.connect().await,
                        "GET",
                        &[("accept", "text/event-stream")],
                        "",
                    )
                    .await
                    .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
                Tenant {
                    name,
                    gateway_addr: gateway.addr,
                    token: token.to_string(),
                    transport,
                    session: Some(session),
                    stream,
                    endpoint: String::new(),
                    next_id: 0,
                    seen: vec![answer.clone()],
                    init: answer,
                }
            }
            Transport::LegacySse => {
                let path = format!("/sse{suffix}");
                let mut stream = EventStream::open(gateway.connect().await, "GET", &path, &get, "")
                    .await
                    .unwrap_or_else(|r| panic!("{} {}", r.status, r.body));
                let endpoint = stream
                    .next(WAIT)
                    .await
                    .and_then(|e| e.data)
                    .expect("endpoint");
                let mut tenant = Tenant {
                    name,
                    gateway_addr: gateway.addr,
                    token: token.to_string(),
                    transport,
                    session: None,
                    stream,
                    endpoint,
                    next_id: 0,
                    seen: Vec::new(),
                    init: Value::Null,
                };
                tenant.init = tenant.request("initialize", init_params()).await;
                tenant
            }
        };
        tenant
            .post(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
            .await;
        tenant
    }

    /// The `Authorization` header, when the tenant has a token.
    fn auth(&self) -> Vec<(String, String)> {
        match self.token.as_str() {
            "" => Vec::new(),
            token => vec![("authorization".into(), format!("Bearer {token}"))],
        }
    }

    /// Posts a message that is not a request of ours (a notification, an answer).
    async fn post(&mut self, message: &Value) {
        let mut conn = Conn::open(self.gateway_addr).await;
        let reply = match (&self.session, self.transport) {
            (Some(session), Transport::Streamable) => {
                let mut other = session.on(conn);
                other.send(message).await
            }
            _ => {
                let auth = self.auth();
                let auth: Vec<(&str, &str)> =
                    auth.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                conn.post(&self.endpoint, &auth, message).await
            }
        };
        assert_eq!(reply.status, 202, "{message}: {}", reply.body);
    }

    /// The answer this client gives to a request of the gateway's.
    fn answer_to(&self, request: &Value) -> Value {
        let who = self.name;
        let result = match request["method"].as_str().unwrap_or_default() {
            "sampling/createMessage" => json!({"role": "assistant", "model": "m",
                "content": {"type": "text", "text": format!("sampled by {who}")}}),
            "elicitation/create" => json!({"action": "accept", "content": {"name": who}}),
            "roots/list" => {
                json!({"roots": [{"uri": format!("file:///SECRET-{who}"), "name": who}]})
            }
            _ => json!({}),
        };
        json!({"jsonrpc": "2.0", "id": request["id"], "result": result})
    }

    /// Handles one message that came: kept, and answered when it is a request.
    async fn took(&mut self, message: Value) {
        self.seen.push(message.clone());
        if message.get("method").is_some() && message.get("id").is_some() {
            let answer = self.answer_to(&message);
            self.post(&answer).await;
        }
    }

    /// A request; its answer. What comes meanwhile (on its stream, or the legacy one) is
    /// kept, and requests among it are answered.
    async fn request(&mut self, method: &str, params: Value) -> Value {
        self.next_id += 1;
        let id = self.next_id;
        let message = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        match self.transport {
            Transport::Streamable => {
                let session = self.session.as_ref().unwrap();
                let post = [ACCEPT_BOTH, ("content-type", "application/json")];
                let conn = Conn::open(self.gateway_addr).await;
                match session
                    .open_stream(conn, "POST", &post, &message.to_string())
                    .await
                {
                    Err(reply) => {
                        assert_eq!(reply.status, 200, "{method}: {}", reply.body);
                        let answer = reply.json();
                        self.seen.push(answer.clone());
                        answer
                    }
                    Ok(mut stream) => loop {
                        let (_, got) = stream.next_message(WAIT).await.expect("the answer");
                        if got["id"] == id && got.get("method").is_none() {
                            self.seen.push(got.clone());
                            return got;
                        }
                        self.took(got).await;
                    },
                }
            }
            Transport::LegacySse => {
                let auth = self.auth();
                let auth: Vec<(&str, &str)> =
                    auth.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
                let mut conn = Conn::open(self.gateway_addr).await;
                let reply = conn.post(&self.endpoint, &auth, &message).await;
                assert_eq!(reply.status, 202, "{method}: {}", reply.body);
                loop {
                    let (_, got) = self.stream.next_message(WAIT).await.expect("the answer");
                    if got["id"] == id && got.get("method").is_none() {
                        self.seen.push(got.clone());
                        return got;
                    }
                    self.took(got).await;
                }
            }
        }
    }

    async fn call(&mut self, tool: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": tool, "arguments": arguments}))
            .await
    }

    /// Reads the session's own stream for `limit`, keeping (and answering) what comes.
    async fn read_for(&mut self, limit: Duration) {
        let deadline = tokio::time::Instant::now() + limit;
        loop {
            let left = deadline.saturating_duration_since(tokio::time::Instant::now());
            if left.is_zero() {
                return;
            }
            match self.stream.next_message(left).await {
                Some((_, got)) => self.took(got).await,
                None => return,
            }
        }
    }

    /// Reads the session's own stream until a message `pick` accepts, keeping the rest.
    async fn read_until(&mut self, what: &str, pick: impl Fn(&Value) -> bool) -> Value {
        loop {
            let (_, got) = self
                .stream
                .next_message(WAIT)
                .await
                .unwrap_or_else(|| panic!("{}: no {what}; seen {:?}", self.name, self.seen));
            let found = pick(&got);
            self.took(got.clone()).await;
            if found {
                return got;
            }
        }
    }

    fn everything_seen(&self) -> String {
        serde_json::to_string(&self.seen).unwrap()
    }
}

fn text_of(answer: &Value) -> String {
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The property: two profiles with disjoint servers and tokens; B's server originates
/// every kind of message (log lines, progress, list_changed, a resource update for a URI A
/// subscribed to, sampling, elicitation, roots within and outside a call), and B uses
/// completions and the built-in tools. Nothing of B's reaches A: not on A's streams, not
/// in A's answers (built-in tools, completions, instructions). Over Streamable HTTP and
/// legacy SSE.
#[test]
fn nothing_of_one_profile_reaches_another() {
    for transport in [Transport::Streamable, Transport::LegacySse] {
        let dir = crate::harness::TestDir::new("tenancy");
        std::fs::create_dir_all(dir.join("plugins")).unwrap();
        std::fs::write(
            dir.join("plugins/echo.wasm"),
            crate::harness::fixture("echo"),
        )
        .unwrap();
        let gateway = HttpGateway::start_in(dir, &two_tenants(""), &[]);
        runtime().block_on(async {
            // A opens last: the newest session, which a guess at who asked would pick.
            let mut b = Tenant::open(&gateway, "B", "B", TOKEN_B, transport).await;
            // Lists wait for the servers: A's initialize then finds their instructions.
            b.request("tools/list", json!({})).await;
            let mut a = Tenant::open(&gateway, "A", "A", TOKEN_A, transport).await;
            for tenant in [&mut a, &mut b] {
                let set = tenant.request("logging/setLevel", json!({"level": "debug"})).await;
                assert!(set.get("result").is_some(), "{set}");
                let tools = tenant.request("tools/list", json!({})).await;
                assert!(tools.get("result").is_some(), "{tools}");
            }
            let sub = a
                .request("resources/subscribe", json!({"uri": "example://static/hello"}))
                .await;
            assert!(sub.get("result").is_some(), "{transport:?}: {sub}");

            // B's server does everything it can on its own.
            let logged = b
                .call("b__log", json!({"level": "error", "message": "SECRET-B log line"}))
                .await;
            assert_eq!(text_of(&logged), "logged", "{logged}");
            b.request(
                "tools/call",
                json!({"name": "b__slow", "arguments": {"ms": 30}, "_meta": {"progressToken": "SECRET-B-progress"}}),
            )
            .await;
            b.call("b__update_resource", json!({"uri": "example://static/hello", "force": true}))
                .await;
            let sampled = b.call("b__sample", json!({"prompt": "SECRET-B prompt"})).await;
            assert_eq!(text_of(&sampled), "sampled by B", "{transport:?}: {sampled}");
            let elicited = b.call("b__elicit", json!({"message": "SECRET-B asks"})).await;
            assert!(text_of(&elicited).contains("\"B\""), "{elicited}");
            let roots = b.call("b__roots", json!({})).await;
            assert!(text_of(&roots).contains("SECRET-B"), "B's own roots: {roots}");
            // A request with no call in flight: answered by the gateway, asked of nobody.
            b.call("b__roots", json!({"later_ms": 50})).await;
            let later = b
                .read_until("b's later roots log line", |m| {
                    m["params"]["data"].as_str().is_some_and(|d| d.starts_with("roots later"))
                })
                .await;
            assert_eq!(later["params"]["data"], "roots later: []", "{later}");
            b.call("b__notify_changed", json!({"what": "prompts"})).await;
            // B's plugin logs and reports progress on B's call.
            let plugin_log = b.call("echo__log", json!({"message": "SECRET-B plugin log"})).await;
            assert_eq!(text_of(&plugin_log), "logged", "{plugin_log}");
            b.request(
                "tools/call",
                json!({"name": "echo__progress", "arguments": {"steps": 2, "delay_ms": 1},
                       "_meta": {"progressToken": "SECRET-B-plugin-progress"}}),
            )
            .await;
            let completion = b
                .request(
                    "completion/complete",
                    json!({"ref": {"type": "ref/prompt", "name": "b__greet"},
                           "argument": {"name": "name", "value": "A"}}),
                )
                .await;
            assert!(completion.get("result").is_some(), "{completion}");
            b.read_for(QUIET).await;
            let heard = b.everything_seen();
            assert!(heard.contains("SECRET-B log line"), "B hears its server");
            assert!(heard.contains("SECRET-B plugin log"), "B hears its plugin: {heard}");

            // A's own server still talks to A: the test would see a mute front too.
            a.call("a__log", json!({"level": "error", "message": "a's own line"})).await;
            // What A asks of the gateway about others.
            let hidden = a
                .request(
                    "completion/complete",
                    json!({"ref": {"type": "ref/prompt", "name": "b__greet"},
                           "argument": {"name": "name", "value": "A"}}),
                )
                .await;
            assert!(hidden.get("error").is_some(), "completion of B's prompt: {hidden}");
            let status = a.call("gateway_status", json!({})).await;
            let backends = &status["result"]["structuredContent"]["backends"];
            assert!(backends.get("a").is_some(), "{status}");
            assert!(backends.get("b").is_none(), "{status}");
            for field in ["pid", "command", "url"] {
                assert!(backends["a"].get(field).is_none(), "{field} shown: {status}");
            }
            assert!(status["result"]["structuredContent"].get("http").is_none(), "{status}");
            let events = a.call("get_events", json!({"limit": 1000})).await;
            let events = text_of(&events);
            assert!(!events.contains("\"b\""), "B's events: {events}");
            assert!(!events.contains("bob"), "B's token name: {events}");
            a.read_for(QUIET).await;

            let seen = a.everything_seen();
            assert!(seen.contains("a's own line"), "{transport:?}: A hears a: {seen}");
            assert!(seen.contains("Instructions of a"), "{seen}");
            for leak in ["SECRET-B", "\"logger\":\"b\"", "b__echo", "bob", "resources/updated"] {
                assert!(!seen.contains(leak), "{transport:?}: `{leak}` reached A: {seen}");
            }
            assert!(
                !a.seen.iter().any(|m| m.get("method").is_some() && m.get("id").is_some()),
                "{transport:?}: a request of B's server reached A: {seen}"
            );
        });
        let stderr = gateway.stderr();
        assert!(!stderr.contains("panicked"), "{stderr}");
    }
}

/// Two clients calling one stdio server at once: its request (which names no call) goes
/// to neither; each caller's tool gets an error that says why. With `exclusive = true` the
/// calls take turns and the request reaches its caller.
#[test]
fn concurrent_callers_never_get_each_others_requests() {
    for exclusive in [false, true] {
        let extra = if exclusive { "exclusive = true" } else { "" };
        let dir = std::path::Path::new("{dir}");
        let text = config().example_with("ex", &[], &[extra]).render(dir);
        let gateway = HttpGateway::start(&text, &[]);
        runtime().block_on(async {
            let mut one = Tenant::open(&gateway, "one", "", "", Transport::Streamable).await;
            let mut two = Tenant::open(&gateway, "two", "", "", Transport::Streamable).await;
            // `one` holds a call in flight to the server while `two`'s call asks for roots.
            // Its first progress opens the stream's answer: the call is then in flight.
            let slow = json!({"jsonrpc": "2.0", "id": 99, "method": "tools/call",
                              "params": {"name": "ex__slow", "arguments": {"ms": 1500},
                                         "_meta": {"progressToken": "p"}}});
            let post = [ACCEPT_BOTH, ("content-type", "application/json")];
            let session = one.session.as_ref().unwrap();
            let conn = Conn::open(gateway.addr).await;
            let mut slow_stream = session
                .open_stream(conn, "POST", &post, &slow.to_string())
                .await
                .ok();
            let roots = two.call("ex__roots", json!({})).await;
            let text = text_of(&roots);
            if exclusive {
                assert!(text.contains("SECRET-two"), "two's own roots: {roots}");
            } else {
                assert!(text.contains("several clients"), "{roots}");
                assert!(
                    text.contains("exclusive"),
                    "the error names the fix: {roots}"
                );
            }
            if let Some(stream) = slow_stream.as_mut() {
                while let Some((_, got)) = stream.next_message(WAIT).await {
                    one.took(got).await;
                }
            }
            one.read_for(QUIET).await;
            let seen = one.everything_seen();
            assert!(
                !seen.contains("roots/list"),
                "two's request reached one: {seen}"
            );
        });
    }
}

/// A remote server's request that arrives on a call's own stream goes to that call's
/// client: two clients' calls in flight at once to a server that asks each for sampling
/// (the older call's request coming while the newer call is in flight) each get their own
/// prompt, never the other's.
#[test]
fn a_remote_servers_request_reaches_the_caller_on_its_stream() {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/gateway/fixtures/asking_server.py");
    let mut server = Stopped(
        std::process::Command::new("python3")
            .arg(script)
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("start python3"),
    );
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.0.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port = line.trim().strip_prefix("listening on ").expect("a port");
    let url = format!("http://127.0.0.1:{port}/mcp");
    let text = format!(
        "[servers.up]\nurl = {}\ntransport = \"streamable-http\"\n",
        toml_str(&url)
    );
    let gateway = HttpGateway::start(&text, &[]);
    runtime().block_on(async {
        let mut one = Tenant::open(&gateway, "one", "", "", Transport::Streamable).await;
        let mut two = Tenant::open(&gateway, "two", "", "", Transport::Streamable).await;
        let ask = |prompt: &str, wait_ms: u64| {
            json!({"name": "up__ask", "arguments": {"prompt": prompt, "wait_ms": wait_ms}})
        };
        let (first, second) = tokio::join!(
            one.request("tools/call", ask("prompt of one", 1000)),
            async {
                // Called after one's: the newest call when one's request comes.
                tokio::time::sleep(Duration::from_millis(200)).await;
                two.request("tools/call", ask("prompt of two", 2000)).await
            },
        );
        assert_eq!(text_of(&first), "sampled by one", "{first}");
        assert_eq!(text_of(&second), "sampled by two", "{second}");
        for (tenant, theirs) in [(&one, "prompt of two"), (&two, "prompt of one")] {
            let seen = tenant.everything_seen();
            assert!(!seen.contains(theirs), "{}: the other's request: {seen}", tenant.name);
        }
    });
}

/// A process killed when the test ends, however it ends.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}
