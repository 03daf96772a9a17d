//! `subscriptions/listen` (MCP 2026-07-28) over the HTTP front and stdio: the
//! acknowledgement first, every notification tagged with the listen's id, only the types
//! asked for, several listens at once, a profile's listener hearing only of its servers,
//! the upstream subscription given back when the stream closes, and the end at shutdown.

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{TIMEOUT, config};
use crate::http_client::{Conn, EventStream, HttpGateway, runtime};
use crate::http_front::with_example;

const VERSION: &str = "2026-07-28";
const WAIT: Duration = Duration::from_secs(20);
const ACK: &str = "notifications/subscriptions/acknowledged";
const TAG: &str = "io.modelcontextprotocol/subscriptionId";
const HELLO: &str = "example://static/hello";

fn meta() -> Value {
    json!({
        "io.modelcontextprotocol/protocolVersion": VERSION,
        "io.modelcontextprotocol/clientCapabilities": {},
    })
}

/// A stateless request: `params` with the era's `_meta`.
pub(crate) fn request(id: Value, method: &str, mut params: Value) -> Value {
    params["_meta"] = meta();
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

/// The headers a conformant client sends with `body`.
pub(crate) fn headers(body: &Value) -> Vec<(String, String)> {
    let mut headers = vec![
        ("mcp-protocol-version".to_string(), VERSION.to_string()),
        ("mcp-method".into(), body["method"].as_str().unwrap().into()),
        ("content-type".into(), "application/json".into()),
        (
            "accept".into(),
            "application/json, text/event-stream".into(),
        ),
    ];
    if let Some(name) = body["params"]["name"].as_str() {
        headers.push(("mcp-name".into(), name.into()));
    }
    headers
}

/// POSTs `body` on `path` with a conformant client's headers; the answer (JSON or the
/// last event of a stream).
async fn post(conn: &mut Conn, path: &str, body: &Value) -> Value {
    let headers = headers(body);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (&**n, &**v)).collect();
    conn.post(path, &headers, body).await.answer()
}

/// Opens a listen with `filter` on `path`; its stream, past the acknowledgement, which
/// is returned too.
async fn listen(
    gateway: &HttpGateway,
    path: &str,
    id: Value,
    filter: Value,
) -> (EventStream, Value) {
    let body = request(
        id.clone(),
        "subscriptions/listen",
        json!({"notifications": filter}),
    );
    let headers = headers(&body);
    let headers: Vec<(&str, &str)> = headers.iter().map(|(n, v)| (&**n, &**v)).collect();
    let conn = gateway.connect().await;
    let mut stream = EventStream::open(conn, "POST", path, &headers, &body.to_string())
        .await
        .unwrap_or_else(|r| panic!("a listen stream: {} {}", r.status, r.body));
    let (_, ack) = stream.next_message(WAIT).await.expect("an acknowledgement");
    assert_eq!(ack["method"], ACK, "{ack}");
    assert_eq!(ack["params"]["_meta"][TAG], id, "{ack}");
    (stream, ack)
}

/// A stateless `tools/call` over `conn`; the text of its result.
async fn call(conn: &mut Conn, path: &str, tool: &str, arguments: Value) -> String {
    let body = request(
        json!(1),
        "tools/call",
        json!({"name": tool, "arguments": arguments}),
    );
    let answer = post(conn, path, &body).await;
    answer["result"]["content"][0]["text"]
        .as_str()
        .unwrap_or_else(|| panic!("{tool}: {answer}"))
        .to_string()
}

/// The next notification on a listen stream, which must carry the listen's `id`.
async fn next(stream: &mut EventStream, id: &Value) -> Value {
    let (_, message) = stream.next_message(WAIT).await.expect("a notification");
    assert!(message.get("id").is_none(), "only notifications: {message}");
    assert_eq!(message["params"]["_meta"][TAG], *id, "{message}");
    message
}

#[test]
fn listens_over_http_are_acknowledged_tagged_and_filtered() {
    let hidden = "[profiles.items]\nresources = [\"example://item/*\"]\n";
    let gateway = HttpGateway::start(&with_example(hidden), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        // Once the server is in the catalog, no change of start-up's is still to come.
        assert_eq!(
            call(&mut conn, "/mcp", "ex__echo", json!({"text": "up"})).await,
            "up"
        );
        // A URI outside the profile's view is not honoured, nor subscribed to upstream.
        let filter = json!({"resourceSubscriptions": [HELLO]});
        let (_items, ack) = listen(&gateway, "/mcp/items", json!(0), filter).await;
        let honoured = &ack["params"]["notifications"]["resourceSubscriptions"];
        assert_eq!(*honoured, json!([]), "{ack}");
        let uri = json!({"uri": HELLO});
        let update = call(&mut conn, "/mcp", "ex__update_resource", uri).await;
        assert_eq!(update, "nobody subscribed");
        let tools_id = json!("listen-tools");
        let filter = json!({"toolsListChanged": true, "resourceSubscriptions": [HELLO]});
        let (mut tools, ack) = listen(&gateway, "/mcp", tools_id.clone(), filter.clone()).await;
        assert_eq!(ack["params"]["notifications"], filter, "{ack}");
        let prompts_id = json!(2);
        let (mut prompts, ack) = listen(
            &gateway,
            "/mcp",
            prompts_id.clone(),
            json!({"promptsListChanged": true}),
        )
        .await;
        assert_eq!(
            ack["params"]["notifications"],
            json!({"promptsListChanged": true})
        );

        // A log line and a tools change, then a prompts change: each listen hears its own.
        let log = json!({"level": "error", "message": "m"});
        assert_eq!(call(&mut conn, "/mcp", "ex__log", log).await, "logged");
        assert_eq!(
            call(&mut conn, "/mcp", "ex__notify_changed", json!({})).await,
            "changed"
        );
        let changed = next(&mut tools, &tools_id).await;
        assert_eq!(
            changed["method"], "notifications/tools/list_changed",
            "{changed}"
        );
        let what = json!({"what": "prompts"});
        assert_eq!(
            call(&mut conn, "/mcp", "ex__notify_changed", what).await,
            "changed"
        );
        let changed = next(&mut prompts, &prompts_id).await;
        assert_eq!(
            changed["method"], "notifications/prompts/list_changed",
            "{changed}"
        );

        // The subscribed resource's update; no prompts change came before it.
        let uri = json!({"uri": HELLO});
        assert_eq!(
            call(&mut conn, "/mcp", "ex__update_resource", uri.clone()).await,
            "updated"
        );
        let updated = next(&mut tools, &tools_id).await;
        assert_eq!(
            updated["method"], "notifications/resources/updated",
            "{updated}"
        );
        assert_eq!(updated["params"]["uri"], HELLO, "{updated}");

        // Closing the stream ends the listen: its server's subscription is given back.
        drop(tools);
        let deadline = Instant::now() + WAIT;
        while call(&mut conn, "/mcp", "ex__update_resource", uri.clone()).await
            != "nobody subscribed"
        {
            assert!(Instant::now() < deadline, "still subscribed upstream");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let stderr = gateway.stderr();
    assert!(!stderr.contains("panicked"), "{stderr}");
}

#[test]
fn a_profiles_listener_hears_only_of_its_servers() {
    let dir = std::path::Path::new("{dir}");
    let servers = config().example("a", &[]).example("b", &[]).render(dir);
    let gateway = HttpGateway::start(
        &format!("{servers}\n[profiles.only_a]\nservers = [\"a\"]\n"),
        &[],
    );
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        for server in ["a", "b"] {
            let echo = format!("{server}__echo");
            assert_eq!(
                call(&mut conn, "/mcp", &echo, json!({"text": "up"})).await,
                "up"
            );
        }
        let id = json!(9);
        let all = json!({"toolsListChanged": true, "promptsListChanged": true,
            "resourcesListChanged": true, "resourceSubscriptions": ["example://no/such"]});
        let (mut stream, ack) = listen(&gateway, "/mcp/only_a", id.clone(), all).await;
        // What the gateway honours: a URI that no server has is left out.
        assert_eq!(
            ack["params"]["notifications"]["resourceSubscriptions"],
            json!([]),
            "{ack}"
        );
        // Server b's lists change; then a's prompts: the first thing heard is a's.
        assert_eq!(
            call(&mut conn, "/mcp", "b__notify_changed", json!({})).await,
            "changed"
        );
        let what = json!({"what": "resources"});
        assert_eq!(
            call(&mut conn, "/mcp", "b__notify_changed", what).await,
            "changed"
        );
        let what = json!({"what": "prompts"});
        assert_eq!(
            call(&mut conn, "/mcp", "a__notify_changed", what).await,
            "changed"
        );
        let heard = next(&mut stream, &id).await;
        assert_eq!(
            heard["method"], "notifications/prompts/list_changed",
            "{heard}"
        );
    });
}

#[test]
fn a_listen_with_a_bad_filter_is_refused_with_invalid_params() {
    let gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let mut conn = gateway.connect().await;
        for (id, params) in [
            (1, json!({})),
            (2, json!({"notifications": {"toolsListChanged": "yes"}})),
            (
                3,
                json!({"notifications": {"resourceSubscriptions": HELLO}}),
            ),
        ] {
            let body = request(json!(id), "subscriptions/listen", params);
            let answer = post(&mut conn, "/mcp", &body).await;
            assert_eq!(answer["error"]["code"], -32602, "{answer}");
            assert_eq!(answer["id"], id, "{answer}");
        }
    });
}

/// Past `[http] max_requests`, a listen is refused: each open one holds a place.
#[test]
fn open_listens_count_against_the_request_bound() {
    let gateway = HttpGateway::start(&with_example("[http]\nmax_requests = 2\n"), &[]);
    runtime().block_on(async {
        let filter = json!({"toolsListChanged": true});
        let _first = listen(&gateway, "/mcp", json!(1), filter.clone()).await;
        let _second = listen(&gateway, "/mcp", json!(2), filter.clone()).await;
        let body = request(
            json!(3),
            "subscriptions/listen",
            json!({"notifications": filter}),
        );
        let mut conn = gateway.connect().await;
        let answer = post(&mut conn, "/mcp", &body).await;
        assert_eq!(answer["error"]["code"], -32000, "{answer}");
        assert!(
            answer["error"]["message"]
                .as_str()
                .unwrap()
                .contains("max_requests"),
            "{answer}"
        );
    });
}

/// A gateway that stops answers each open listen, tagged, and its stream ends.
#[test]
fn shutdown_ends_a_listen_with_its_result() {
    let mut gateway = HttpGateway::start(&with_example(""), &[]);
    runtime().block_on(async {
        let id = json!("bye");
        let (mut stream, _) = listen(&gateway, "/mcp", id.clone(), json!({})).await;
        let pid = gateway.pid();
        unsafe { libc::kill(pid as i32, libc::SIGTERM) };
        let (_, last) = stream
            .next_message(WAIT)
            .await
            .expect("the listen's result");
        assert_eq!(last["id"], id, "{last}");
        assert_eq!(last["result"]["resultType"], "complete", "{last}");
        assert_eq!(last["result"]["_meta"][TAG], id, "{last}");
        assert!(stream.next_message(WAIT).await.is_none(), "the stream ends");
    });
    assert!(gateway.terminate(WAIT).is_some_and(|s| s.success()));
}

/// Over stdio a listen is a line: its notifications go out tagged with its id until
/// `notifications/cancelled` names it; another listen goes on.
#[test]
fn listens_over_stdio_end_when_cancelled() {
    let mut client = config().example("ex", &[]).start();
    // Once the server is in the catalog, no change of start-up's is still to come.
    let echo = json!({"name": "ex__echo", "arguments": {"text": "up"}});
    client.send(&request(json!(99), "tools/call", echo));
    let up = client.wait_response(&json!(99), TIMEOUT);
    assert_eq!(up["result"]["content"][0]["text"], "up", "{up}");
    let listen = |client: &mut crate::harness::Client, id: u64, filter: Value| {
        client.send(&request(
            json!(id),
            "subscriptions/listen",
            json!({"notifications": filter}),
        ));
        let ack = client
            .take(TIMEOUT, |m| {
                m["method"] == ACK && m["params"]["_meta"][TAG] == id
            })
            .expect("an acknowledgement");
        assert_eq!(ack["params"]["notifications"], filter, "{ack}");
    };
    let both = json!({"toolsListChanged": true, "promptsListChanged": true});
    listen(&mut client, 7, both.clone());
    listen(&mut client, 8, both);
    let tagged = |id: u64| move |m: &Value| m["params"]["_meta"][TAG] == id;
    let call = request(
        json!(100),
        "tools/call",
        json!({"name": "ex__notify_changed", "arguments": {}}),
    );
    client.send(&call);
    for id in [7, 8] {
        let changed = client.take(TIMEOUT, tagged(id)).expect("a change");
        assert_eq!(
            changed["method"], "notifications/tools/list_changed",
            "{changed}"
        );
    }
    client.notify("notifications/cancelled", json!({"requestId": 7}));
    let call = request(
        json!(101),
        "tools/call",
        json!({"name": "ex__notify_changed", "arguments": {"what": "prompts"}}),
    );
    client.send(&call);
    let changed = client.take(TIMEOUT, tagged(8)).expect("a change");
    assert_eq!(
        changed["method"], "notifications/prompts/list_changed",
        "{changed}"
    );
    assert!(
        client.take(Duration::ZERO, tagged(7)).is_none(),
        "7 was cancelled"
    );
    // No answer to a cancelled listen either, nor a request of the client's session.
    assert!(client.take(Duration::ZERO, |m| m["id"] == 7).is_none());
}

/// Over stdio too, a gateway that stops answers each open listen before it exits.
#[test]
fn shutdown_over_stdio_ends_a_listen_with_its_result() {
    let mut client = config().example("ex", &[]).start();
    let id = json!("bye");
    client.send(&request(
        id.clone(),
        "subscriptions/listen",
        json!({"notifications": {}}),
    ));
    let ack = client
        .take(TIMEOUT, |m| m["method"] == ACK)
        .expect("an acknowledgement");
    assert_eq!(ack["params"]["_meta"][TAG], id, "{ack}");
    client.signal(libc::SIGTERM);
    let last = client.wait_response(&id, TIMEOUT);
    assert_eq!(last["result"]["resultType"], "complete", "{last}");
    assert_eq!(last["result"]["_meta"][TAG], id, "{last}");
}
