//! `[plugins.NAME] instance = "call" | "session" | "shared"`: which calls see what an
//! earlier call left in a plugin instance's memory. The real binary over HTTP, with two
//! client sessions, and the `echo` fixture's `count` (a counter in the instance's memory:
//! "1" in a fresh instance) and `crash` (adds one, then traps).

use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::harness::{Config, TestDir, config, fixture};
use crate::http_client::{ACCEPT_BOTH, HttpGateway, McpSession, runtime};

/// How long a test waits for the gateway to change state before it fails.
const WAIT: Duration = Duration::from_secs(30);

/// A gateway serving the `echo` fixture with `settings` in its `[plugins.echo]` table.
fn gateway(settings: &str) -> HttpGateway {
    let dir = TestDir::new("instances");
    let config = echo_config(settings);
    config.write(&dir.path);
    let text = config.render(&dir.path);
    HttpGateway::start_in(dir, &text, &[])
}

fn echo_config(settings: &str) -> Config {
    config()
        .file("echo.wasm", fixture("echo"))
        .plugins(&format!("[plugins.echo]\n{settings}"))
}

/// A session whose first list waited for the plugins to load.
async fn session(gateway: &HttpGateway) -> McpSession {
    let mut session = gateway.session("/mcp", &[]).await;
    let list = session.request("tools/list", json!({})).await;
    assert!(list["result"]["tools"].is_array(), "{list}");
    session
}

/// `echo__count`'s answer: the counter of the instance the call ran in.
async fn count(session: &mut McpSession) -> u32 {
    let answer = session.call("echo__count", json!({})).await;
    let result = &answer["result"];
    assert_ne!(result["isError"], true, "{answer}");
    result["content"][0]["text"]
        .as_str()
        .and_then(|t| t.parse().ok())
        .unwrap_or_else(|| panic!("no count in {answer}"))
}

async fn crash(session: &mut McpSession) {
    let answer = session.call("echo__crash", json!({})).await;
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("crash: requested trap"), "{text}");
}

/// The plugin's entry in `gateway_status`.
async fn status(session: &mut McpSession) -> Value {
    let answer = session.call("gateway_status", json!({})).await;
    let text = answer["result"]["content"][0]["text"].as_str().unwrap();
    let status: Value = serde_json::from_str(text).unwrap();
    status["backends"]["echo"].clone()
}

/// Polls the plugin's status until `done` holds.
async fn status_until(session: &mut McpSession, what: &str, done: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + WAIT;
    loop {
        let now = status(session).await;
        if done(&now) {
            return;
        }
        assert!(Instant::now() < deadline, "no {what}: {now}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[test]
fn call_mode_gives_every_call_a_fresh_instance() {
    let gateway = gateway("");
    runtime().block_on(async {
        let mut a = session(&gateway).await;
        for _ in 0..3 {
            assert_eq!(count(&mut a).await, 1);
        }
        let echo = status(&mut a).await;
        assert_eq!(echo["instance"], "call", "{echo}");
        assert_eq!(echo["instances"], 0, "{echo}");
    });
}

#[test]
fn shared_instances_keep_state_for_every_client_until_a_trap_or_the_call_limit() {
    let gateway = gateway("instance = \"shared\"\nmax_calls_per_instance = 4");
    runtime().block_on(async {
        let (mut a, mut b) = (session(&gateway).await, session(&gateway).await);
        // One call at a time: the pool has one instance, and both clients use it.
        assert_eq!(count(&mut a).await, 1);
        assert_eq!(count(&mut b).await, 2);
        assert_eq!(count(&mut a).await, 3);
        let echo = status(&mut a).await;
        assert_eq!(echo["instance"], "shared", "{echo}");
        assert_eq!(echo["instances"], 1, "{echo}");
        // The fourth call is its last: the next gets a new instance.
        assert_eq!(count(&mut b).await, 4);
        assert_eq!(count(&mut a).await, 1);
        // A trap drops the instance it happened in, with what the crash added.
        crash(&mut b).await;
        assert_eq!(count(&mut a).await, 1);
        assert_eq!(count(&mut b).await, 2);
    });
}

#[test]
fn a_shared_pool_holds_at_most_calls_at_once_instances() {
    let gateway = gateway("instance = \"shared\"\ncalls_at_once = 2");
    runtime().block_on(async {
        let mut sessions = Vec::new();
        for _ in 0..6 {
            sessions.push(session(&gateway).await);
        }
        let calls = sessions
            .iter_mut()
            .map(|s| s.call("echo__sleep", json!({"ms": 200})));
        for answer in futures_util::future::join_all(calls).await {
            assert_eq!(
                answer["result"]["content"][0]["text"], "slept 200",
                "{answer}"
            );
        }
        let echo = status(&mut sessions[0]).await;
        assert_eq!(echo["instances"], 2, "{echo}");
        assert_eq!(echo["limits"]["calls_at_once"], 2, "{echo}");
        // Calls one after the other take the instance used last.
        assert_eq!(count(&mut sessions[0]).await, 1);
        assert_eq!(count(&mut sessions[1]).await, 2);
    });
}

#[test]
fn session_instances_are_per_client_and_end_with_the_session() {
    let gateway = gateway("instance = \"session\"");
    runtime().block_on(async {
        let (mut a, mut b) = (session(&gateway).await, session(&gateway).await);
        assert_eq!(count(&mut a).await, 1);
        assert_eq!(count(&mut a).await, 2);
        assert_eq!(count(&mut b).await, 1);
        assert_eq!(count(&mut a).await, 3);
        let echo = status(&mut b).await;
        assert_eq!(echo["instance"], "session", "{echo}");
        assert_eq!(echo["instances"], 2, "{echo}");
        // A trap: that session's next call starts afresh; the other keeps its state.
        crash(&mut b).await;
        assert_eq!(count(&mut b).await, 1);
        assert_eq!(count(&mut a).await, 4);
        // A session that ends takes its instance with it.
        let mut conn = gateway.connect().await;
        let reply = conn
            .request("DELETE", "/mcp", &[("mcp-session-id", &a.id)], "")
            .await;
        assert_eq!(reply.status, 200);
        status_until(&mut b, "instance dropped with its session", |echo| {
            echo["instances"] == 1
        })
        .await;
        assert_eq!(count(&mut b).await, 2);
    });
}

#[test]
fn a_sessions_calls_take_turns_on_its_instance() {
    let gateway = gateway("instance = \"session\"");
    runtime().block_on(async {
        let mut a = session(&gateway).await;
        assert_eq!(count(&mut a).await, 1);
        // A call of the session holds its instance (its first progress came) ...
        let call = json!({"jsonrpc": "2.0", "id": 90, "method": "tools/call", "params": {
            "name": "echo__progress", "arguments": {"steps": 2, "delay_ms": 300},
            "_meta": {"progressToken": "p"}}});
        let post = [ACCEPT_BOTH, ("content-type", "application/json")];
        let mut slow = a
            .open_stream(gateway.connect().await, "POST", &post, &call.to_string())
            .await
            .unwrap_or_else(|r| panic!("a stream: {} {}", r.status, r.body));
        let (_, first) = slow.next_message(WAIT).await.expect("progress");
        assert_eq!(first["method"], "notifications/progress", "{first}");
        // ... so another of its calls waits for it, and runs on that instance: "2", where
        // a second instance would have answered "1".
        let mut same = a.on(gateway.connect().await);
        assert_eq!(count(&mut same).await, 2);
        loop {
            let (_, message) = slow.next_message(WAIT).await.expect("the answer");
            if message["id"] == 90 {
                assert_eq!(
                    message["result"]["content"][0]["text"], "done 2",
                    "{message}"
                );
                break;
            }
        }
    });
}

#[test]
fn an_idle_session_instance_is_dropped_after_instance_idle() {
    let gateway = gateway("instance = \"session\"\ninstance_idle = \"1s\"");
    runtime().block_on(async {
        let mut a = session(&gateway).await;
        assert_eq!(count(&mut a).await, 1);
        assert_eq!(count(&mut a).await, 2);
        let mut watcher = session(&gateway).await;
        status_until(&mut watcher, "idle instance dropped", |echo| {
            echo["instances"] == 0
        })
        .await;
        assert_eq!(count(&mut a).await, 1);
    });
}

#[test]
fn a_reload_drains_the_kept_instances() {
    let gateway = gateway("instance = \"shared\"");
    runtime().block_on(async {
        let mut a = session(&gateway).await;
        assert_eq!(count(&mut a).await, 1);
        assert_eq!(count(&mut a).await, 2);
        // New settings make a new version: its calls start on a new instance.
        let file = gateway.dir.join("gateway.toml");
        let edited =
            echo_config("instance = \"shared\"\ntimeout = \"7s\"").render(&gateway.dir.path);
        std::fs::write(&file, edited).unwrap();
        status_until(&mut a, "the new settings", |echo| {
            echo["limits"]["timeout_ms"] == 7000
        })
        .await;
        assert_eq!(count(&mut a).await, 1);
        assert_eq!(count(&mut a).await, 2);
    });
}

/// Sessions that keep instances of four plugins, 32 sessions each, ask for more instances
/// than the gateway holds: the calls past that, and a call of a fifth plugin, take the
/// slots of the instances idle longest instead of waiting for one until they time out.
#[test]
fn idle_kept_instances_give_their_slots_to_calls_of_any_plugin() {
    let dir = TestDir::new("instances");
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    let kept = ["a", "b", "c", "d"];
    let mut config = "[plugins]\ndir = \"{dir}/plugins\"\n".to_string();
    for name in kept.iter().chain(&["e"]) {
        std::fs::write(dir.join(&format!("plugins/{name}.wasm")), fixture("echo")).unwrap();
        let mode = if *name == "e" { "call" } else { "session" };
        config.push_str(&format!(
            "\n[plugins.{name}]\ninstance = \"{mode}\"\ntimeout = \"3s\"\n"
        ));
    }
    let gateway = HttpGateway::start_in(dir, &config, &[]);
    runtime().block_on(async {
        let mut sessions = Vec::new();
        for _ in 0..32 {
            let mut session = session(&gateway).await;
            for name in kept {
                let answer = session.call(&format!("{name}__count"), json!({})).await;
                assert_eq!(answer["result"]["content"][0]["text"], "1", "{answer}");
            }
            sessions.push(session);
        }
        let answer = sessions[0].call("e__count", json!({})).await;
        assert_eq!(answer["result"]["content"][0]["text"], "1", "{answer}");
        // The last session's instances were used last: still kept.
        let last = sessions.last_mut().unwrap();
        let answer = last.call("a__count", json!({})).await;
        assert_eq!(answer["result"]["content"][0]["text"], "2", "{answer}");
    });
}
