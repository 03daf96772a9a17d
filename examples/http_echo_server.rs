//! The floor of the HTTP bench (benches/gateway/http.rs): a minimal Streamable HTTP MCP
//! server on axum over hyper, as the gateway's front is, with JSON answers and no
//! sessions. It parses each message and answers `tools/call` with its `text` argument,
//! so what the bench measures above it is the gateway's own work.
//!
//! `http_echo_server [ADDR]` prints `listening on http://ADDR/mcp` on stdout, then serves.

use axum::Router;
use axum::body::Bytes;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use serde_json::{Value, json};

async fn mcp(body: Bytes) -> Response {
    let Ok(message) = serde_json::from_slice::<Value>(&body) else {
        return StatusCode::BAD_REQUEST.into_response();
    };
    let Some(id) = message.get("id").cloned() else {
        return StatusCode::ACCEPTED.into_response();
    };
    let result = match message["method"].as_str() {
        Some("initialize") => json!({
            "protocolVersion": message["params"]["protocolVersion"],
            "capabilities": {"tools": {}},
            "serverInfo": {"name": "http-echo", "version": "1"},
        }),
        Some("tools/list") => {
            json!({"tools": [{"name": "echo", "inputSchema": {"type": "object"}}]})
        }
        Some("tools/call") => {
            let text = message["params"]["arguments"]["text"].clone();
            json!({"content": [{"type": "text", "text": text}]})
        }
        _ => json!({}),
    };
    let answer = json!({"jsonrpc": "2.0", "id": id, "result": result}).to_string();
    ([(header::CONTENT_TYPE, "application/json")], answer).into_response()
}

fn main() {
    let listen = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:0".into());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a runtime");
    runtime.block_on(async {
        let listener = tokio::net::TcpListener::bind(&listen).await.expect("bind");
        println!("listening on http://{}/mcp", listener.local_addr().unwrap());
        let app = Router::new().route("/mcp", post(mcp));
        axum::serve(listener, app).await.expect("serve");
    });
}
