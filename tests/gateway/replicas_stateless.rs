//! Replicas and the 2026-07-28 era: no affinity. A retry may reach a replica other than
//! the one holding its call (`input_required`); that replica sends it on to the holder
//! named in its `requestState` (`[http.replicas]`), so a load balancer needs no knowledge
//! of the body: two replicas behind nginx with plain round robin.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::TestDir;
use crate::http_client::{Conn, HttpGateway, runtime};
use crate::http_front::with_example;
use crate::modern_front::{meta, post, request};
use crate::replicas::{Nginx, nginx};

const WAIT: Duration = Duration::from_secs(20);

/// A replica of the example config named `name`, with the shared key in `dir` and `peers`
/// (`(name, address)`).
fn replica(name: &str, key: &str, peers: &[(&str, SocketAddr)]) -> HttpGateway {
    let dir = TestDir::new(&format!("replica-{name}"));
    std::fs::write(dir.join("replicas.key"), key).unwrap();
    HttpGateway::start_in(dir, &with_example(&replicas_table(name, peers)), &[])
}

fn replicas_table(name: &str, peers: &[(&str, SocketAddr)]) -> String {
    let peers: Vec<String> = (peers.iter())
        .map(|(peer, addr)| format!("{peer} = \"http://{addr}\""))
        .collect();
    format!(
        "[http.replicas]\nname = \"{name}\"\nkey_file = \"{{dir}}/replicas.key\"\npeers = {{ {} }}\n",
        peers.join(", ")
    )
}

/// The example server's eliciting tool, called statelessly (`extra`: the retry's params).
fn elicit(id: u64, extra: Value) -> Value {
    let mut params = json!({"name": "ex__elicit", "arguments": {"message": "Who?"},
        "_meta": meta(json!({"io.modelcontextprotocol/clientCapabilities": {"elicitation": {}}}))});
    params
        .as_object_mut()
        .unwrap()
        .extend(extra.as_object().cloned().unwrap_or_default());
    request(id, "tools/call", params)
}

/// The first request and its retry, each on its own connection to `first` and `then`: the
/// retry's answer.
async fn flow(first: SocketAddr, then: SocketAddr, id: u64, name: &str) -> Value {
    let asked = post(
        &mut Conn::open(first).await,
        "/mcp",
        &elicit(id, json!({})),
        &[],
    )
    .await;
    let asked = asked.answer();
    assert_eq!(asked["result"]["resultType"], "input_required", "{asked}");
    let state = asked["result"]["requestState"]
        .as_str()
        .unwrap()
        .to_string();
    let answers = json!({"elicitation-1": {"action": "accept", "content": {"name": name}}});
    let retry = elicit(
        id + 1,
        json!({"inputResponses": answers, "requestState": state}),
    );
    post(&mut Conn::open(then).await, "/mcp", &retry, &[])
        .await
        .answer()
}

fn answered(done: &Value, name: &str) -> bool {
    (done["result"]["content"][0]["text"].as_str()).is_some_and(|t| t.contains(name))
}

#[test]
fn a_retry_reaches_the_replica_holding_its_call() {
    let key = "a shared key of at least thirty-two bytes";
    let a = replica("a", key, &[]);
    let b = replica("b", key, &[("a", a.addr)]);
    runtime().block_on(async {
        // Held by a, retried at b: b sends it on.
        let done = flow(a.addr, b.addr, 1, "Ada").await;
        assert!(answered(&done, "Ada"), "{done}");
        assert_eq!(done["id"], 2, "{done}");
        // Held by b, retried at a, which knows no peer b: refused, not lost.
        let refused = flow(b.addr, a.addr, 3, "Bo").await;
        assert_eq!(refused["error"]["code"], -32602, "{refused}");
        let message = refused["error"]["message"].as_str().unwrap();
        assert!(message.contains("another gateway replica (b)"), "{refused}");
    });
    // A key of another deployment: its handles are forged here, and nothing is sent on.
    let other = replica("a", "another key of at least thirty-two bytes", &[]);
    runtime().block_on(async {
        let done = flow(other.addr, b.addr, 5, "Cy").await;
        assert_eq!(done["error"]["code"], -32602, "{done}");
        assert!(
            done["error"]["message"]
                .as_str()
                .unwrap()
                .contains("altered")
        );
    });
}

/// Two replicas behind nginx's plain round robin (the recipe of docs/deployment.md):
/// a 2026-07-28 client's first requests and retries land on either, and every flow ends.
#[test]
fn stateless_clients_need_no_affinity_behind_nginx() {
    let Some(nginx) = nginx() else { return };
    let key = "a shared key of at least thirty-two bytes";
    let a = replica("a", key, &[]);
    let b = replica("b", key, &[("a", a.addr)]);
    // a learns of b by a config reload, as an operator adding a replica would.
    let text = with_example(&replicas_table("a", &[("b", b.addr)]));
    a.dir.write(
        "gateway.toml",
        &text.replace("{dir}", a.dir.path.to_str().unwrap()),
    );
    let proxy = Nginx::start(&nginx, [a.addr, b.addr]);
    let proxied: SocketAddr = format!("127.0.0.1:{}", proxy.port).parse().unwrap();
    runtime().block_on(async {
        // Until a has reloaded, a retry of b's call that lands on a is refused.
        let deadline = Instant::now() + WAIT;
        while !answered(&flow(b.addr, a.addr, 1, "probe").await, "probe") {
            assert!(Instant::now() < deadline, "{}", a.stderr());
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        for n in 0..6 {
            let name = format!("client-{n}");
            let done = flow(proxied, proxied, 10 + 2 * n, &name).await;
            assert!(
                answered(&done, &name),
                "{done}\n{}",
                proxy.log("access.log")
            );
        }
    });
    let access = proxy.log("access.log");
    for replica in [a.addr, b.addr] {
        assert!(
            access.contains(&replica.to_string()),
            "round robin: {access}"
        );
    }
}
