//! Property-based fuzzing of the stdio front, in process: lines of random bytes, random
//! JSON, and JSON-RPC messages with random ids, methods and params, each followed by a
//! `ping`. Every line the gateway writes must be JSON-RPC, every error a standard code,
//! and the `ping` must be answered: no input stops the session.
//!
//! `WASMGATE_FUZZ_CASES=N` sets the number of cases (default 256; a long run for a
//! session of work: 200000).

use std::sync::Arc;
use std::time::Duration;

use proptest::prelude::*;
use proptest::test_runner::{Config as RunnerConfig, TestCaseError, TestRunner};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};

use crate::harness::check_jsonrpc;

/// Error codes a malformed or unexpected message may get.
const CODES: &[i64] = &[
    -32700, -32600, -32601, -32602, -32603, -32000, -32001, -32002,
];

const METHODS: &[&str] = &[
    "initialize",
    "notifications/initialized",
    "ping",
    "tools/list",
    "tools/call",
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/read",
    "resources/templates/list",
    "resources/subscribe",
    "resources/unsubscribe",
    "completion/complete",
    "logging/setLevel",
    "notifications/cancelled",
    "notifications/progress",
    "notifications/roots/list_changed",
];

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(|n| json!(n)),
        any::<f64>().prop_filter_map("finite", |f| serde_json::Number::from_f64(f)
            .map(Value::Number)),
        "\\PC{0,20}".prop_map(Value::String),
        prop::sample::select(METHODS).prop_map(|m| json!(m)),
        prop::sample::select(vec![
            "gateway_status",
            "get_events",
            "2025-06-18",
            "2024-11-05"
        ])
        .prop_map(|m| json!(m)),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(
                prop_oneof![
                    "[a-zA-Z_]{1,10}",
                    prop::sample::select(vec![
                        "name",
                        "arguments",
                        "_meta",
                        "progressToken",
                        "uri",
                        "cursor",
                        "level",
                        "requestId",
                        "protocolVersion",
                        "capabilities",
                        "clientInfo",
                    ])
                    .prop_map(String::from),
                ],
                inner,
                0..6
            )
            .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

fn message() -> impl Strategy<Value = Value> {
    // Mostly well-formed envelopes, so that the methods' own handling is reached.
    let id = prop_oneof![
        1 => Just(None),
        4 => any::<i64>().prop_map(|n| Some(json!(n))),
        4 => "[a-z0-9-]{0,8}".prop_map(|s| Some(json!(s))),
        1 => json_value().prop_map(Some),
    ];
    let method = prop_oneof![
        8 => prop::sample::select(METHODS).prop_map(|m| json!(m)),
        1 => json_value(),
    ];
    let version = prop_oneof![
        8 => Just(Some(json!("2.0"))),
        1 => Just(None),
        1 => json_value().prop_map(Some),
    ];
    (version, id, method, prop::option::of(json_value())).prop_map(
        |(version, id, method, params)| {
            let mut message = serde_json::Map::new();
            if let Some(version) = version {
                message.insert("jsonrpc".into(), version);
            }
            if let Some(id) = id {
                message.insert("id".into(), id);
            }
            message.insert("method".into(), method);
            if let Some(params) = params {
                message.insert("params".into(), params);
            }
            Value::Object(message)
        },
    )
}

/// One line the client sends (no newline inside).
fn line() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => message().prop_map(|m| m.to_string().into_bytes()),
        1 => prop::collection::vec(message(), 0..4).prop_map(|b| Value::Array(b).to_string().into_bytes()),
        1 => json_value().prop_map(|v| v.to_string().into_bytes()),
        1 => prop::collection::vec(any::<u8>(), 0..64),
        // A valid message cut short or with a byte changed.
        1 => (message(), any::<prop::sample::Index>(), any::<u8>()).prop_map(|(m, at, byte)| {
            let mut bytes = m.to_string().into_bytes();
            let i = at.index(bytes.len());
            if byte % 2 == 0 { bytes.truncate(i) } else { bytes[i] = byte }
            bytes
        }),
    ]
    .prop_map(|mut bytes| {
        bytes.retain(|&b| b != b'\n');
        bytes
    })
}

#[test]
fn no_line_stops_the_session_and_every_answer_is_json_rpc() {
    let cases = std::env::var("WASMGATE_FUZZ_CASES")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(256);
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let mut config = wasmgate::config::embedded_default();
    config.plugins.bundled = false;
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let (client_read, client_write) = tokio::io::split(client);
    runtime.spawn(async move {
        let gateway = wasmgate::gateway::Gateway::start(config);
        let _ = wasmgate::transport::stdio::serve(
            gateway,
            server_read,
            server_write,
            std::future::pending(),
        )
        .await;
    });
    let mut client_write = client_write;
    let mut client_read = BufReader::new(client_read);
    // An initialized session, as a client's would be, so that every method is reachable.
    runtime.block_on(async {
        let init = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {},
            "clientInfo": {"name": "fuzz", "version": "1"}}});
        let ready = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        client_write
            .write_all(format!("{init}\n{ready}\n").as_bytes())
            .await
            .unwrap();
        let mut answer = String::new();
        client_read.read_line(&mut answer).await.unwrap();
        assert!(answer.contains("\"result\""), "{answer}");
    });
    let io = Arc::new(tokio::sync::Mutex::new((client_write, client_read)));
    let probes = std::sync::atomic::AtomicU64::new(0);
    let mut runner = TestRunner::new(RunnerConfig {
        cases,
        failure_persistence: None,
        ..RunnerConfig::default()
    });
    runner
        .run(&line(), |bytes| {
            let probe = probes.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let io = io.clone();
            runtime.block_on(async move {
                let mut io = io.lock().await;
                let (write, read) = &mut *io;
                let probe_id = format!("probe-{probe}");
                let ping = json!({"jsonrpc": "2.0", "id": probe_id, "method": "ping"});
                let mut input = bytes.clone();
                input.push(b'\n');
                input.extend(format!("{ping}\n").as_bytes());
                write.write_all(&input).await.unwrap();
                let mut line = String::new();
                loop {
                    line.clear();
                    let read =
                        tokio::time::timeout(Duration::from_secs(10), read.read_line(&mut line))
                            .await
                            .map_err(|_| {
                                TestCaseError::fail("no answer to the ping after this line")
                            })?;
                    if read.unwrap() == 0 {
                        return Err(TestCaseError::fail("the session ended"));
                    }
                    let value: Value = serde_json::from_str(&line)
                        .map_err(|e| TestCaseError::fail(format!("not JSON: {e}: {line}")))?;
                    check_jsonrpc(&value).map_err(TestCaseError::fail)?;
                    for answer in value
                        .as_array()
                        .cloned()
                        .unwrap_or_else(|| vec![value.clone()])
                    {
                        if let Some(code) = answer["error"]["code"].as_i64() {
                            prop_assert!(CODES.contains(&code), "code {code}: {answer}");
                        }
                    }
                    if value["id"] == json!(probe_id) {
                        prop_assert_eq!(&value["result"], &json!({}));
                        return Ok(());
                    }
                }
            })
        })
        .unwrap();
}
