//! The gateway in process, without a transport: a `Session` over an outbox, as a transport
//! drives it. What only an in-process test sees: which request each message a session sends
//! on its own belongs to, and answers returned to the caller of `Session::handle`.

use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{TestDir, config};

fn message(value: Value) -> wasmgate::protocol::Message {
    wasmgate::protocol::parse_message(value).expect("a valid message")
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap()
}

/// The gateway of the config at `path`, started in this process, once its servers are up.
async fn started(path: &std::path::Path) -> std::sync::Arc<wasmgate::gateway::Gateway> {
    let config = wasmgate::config::load(path).expect("config");
    let gateway = wasmgate::gateway::Gateway::start(config);
    gateway.wait_for_start(false).await;
    gateway
}

#[test]
fn progress_of_a_call_is_tagged_with_its_request_and_the_answer_returned() {
    let dir = TestDir::new("in-process");
    let path = dir.write(
        "gateway.toml",
        &config().example("ex", &[]).render(&dir.path),
    );
    runtime().block_on(async {
        let gateway = started(&path).await;
        let (out, mut sent) = wasmgate::pipe::outbox::outbox("the test");
        let session = wasmgate::session::Session::new(gateway.clone(), out);
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "t", "version": "1"}}});
        let wasmgate::session::Handled::Answer(answer) = session.handle(message(init)) else {
            panic!("initialize is answered at once");
        };
        assert!(answer.contains("\"result\""), "{answer}");
        session.handle(message(
            json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ));

        let call = json!({"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {
            "name": "ex__slow", "arguments": {"ms": 300}, "_meta": {"progressToken": "p"}}});
        let wasmgate::session::Handled::Running(answer) = session.handle(message(call)) else {
            panic!("a call runs");
        };
        let answer = tokio::time::timeout(Duration::from_secs(30), answer)
            .await
            .expect("answered")
            .expect("not cancelled");
        let answer: Value = serde_json::from_str(&answer).unwrap();
        assert_eq!(answer["id"], 7);
        assert_eq!(answer["result"]["content"][0]["text"], "slept 300 ms");
        // Everything the session sent on its own for that call says it was for request 7.
        let mut progress = 0;
        while let Some(out) = sent.try_recv() {
            let sent: Value = serde_json::from_str(&out.line).unwrap();
            if sent["method"] == "notifications/progress" {
                assert_eq!(out.related.as_deref(), Some("7"), "{sent}");
                assert_eq!(sent["params"]["progressToken"], "p");
                progress += 1;
            }
        }
        assert_eq!(progress, 3);
        gateway.shutdown().await;
    });
}

#[test]
fn servers_stopping_leave_the_catalog_as_it_was() {
    // A server's stop changes nothing the catalog shows: no rebuild. (One rebuild per server
    // stopped was what made a gateway in front of 100 servers of 114 tools take 5 s to exit.)
    let dir = TestDir::new("in-process-stop");
    let servers = (0..4).fold(config(), |c, n| {
        c.example(&format!("s{n}"), &["--tools", "50"])
    });
    let path = dir.write("gateway.toml", &servers.render(&dir.path));
    runtime().block_on(async {
        let gateway = started(&path).await;
        let built = gateway.catalog();
        assert!(built.tool("s3__gen_49").is_some(), "every server is listed");
        gateway.shutdown().await;
        // Each server's last state change was sent to the hub before its stop returned:
        // once the hub has handled what came before this, any rebuild has happened.
        tokio::time::timeout(Duration::from_secs(30), gateway.events_handled())
            .await
            .expect("the hub handles the servers' events");
        assert!(
            std::sync::Arc::ptr_eq(&built, &gateway.catalog()),
            "the catalog was rebuilt after its servers stopped"
        );
    });
}
