//! Start-up: from spawning the gateway to its first complete `tools/list` answer.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::pipe::start_gateway;
use crate::{PROTOCOL_VERSION, Paths, READ_TIMEOUT, Result};

/// Time from spawning the gateway to its first `tools/list` answer that names `ex__echo`.
/// Initialize and tools/list are written at once, without waiting for any answer.
pub async fn startup_once(paths: &Paths, config: &Path, scratch: &Path) -> Result<Duration> {
    let begun = Instant::now();
    let mut pipe = start_gateway("startup", paths, config, scratch).await?;
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
                      "params": {"protocolVersion": PROTOCOL_VERSION, "capabilities": {},
                                 "clientInfo": {"name": "wasmgate-bench", "version": "0"}}});
    pipe.write(&init).await?;
    pipe.write(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}))
        .await?;
    let mut id = 2;
    pipe.write(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
        .await?;
    loop {
        let answer = pipe.read_answer().await?;
        if answer.id != Some(json!(id)) {
            continue;
        }
        let listed = answer
            .result
            .as_ref()
            .and_then(|r| r.get("tools"))
            .and_then(Value::as_array);
        if listed.is_some_and(|tools| {
            tools
                .iter()
                .any(|t| t.get("name") == Some(&json!("ex__echo")))
        }) {
            let elapsed = begun.elapsed();
            pipe.close().await;
            return Ok(elapsed);
        }
        if begun.elapsed() > READ_TIMEOUT {
            return Err("the gateway never listed ex__echo".into());
        }
        // Not there yet (the gateway answered before the server was ready): ask again.
        id += 1;
        pipe.write(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/list"}))
            .await?;
    }
}
