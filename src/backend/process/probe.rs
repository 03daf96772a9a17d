//! The stdio era probe: `server/discover` sent to a throw-away process of the server
//! (servers built on some SDKs exit on any request before `initialize`, so the process
//! that serves is never the one probed). A discover result naming the stateless version
//! means that era, whether or not the server offers the session era too; any other answer
//! means the 2025 era (see `modern::auto_picks_modern`).

use std::time::Duration;

use serde_json::Value;
use tokio::io::{AsyncWriteExt, BufReader};

use super::child::{signal_group, spawn};
use crate::backend::era::Era;
use crate::backend::modern;
use crate::config::ServerConfig;
use crate::pipe::lines::{self, Line};

/// The probe's answer: `None` when it says nothing to remember (the process could not
/// start). No answer within `limit` is the old era: a server of the new one answers
/// discover at once, and one that ignores a request before `initialize` would otherwise
/// hold up every start by `limit`.
pub(super) async fn probe(config: &ServerConfig, limit: Duration) -> Option<Era> {
    let mut child = match spawn(config) {
        Ok(child) => child,
        Err(err) => {
            tracing::debug!(server = %config.name, "era probe could not start the server: {err}");
            return None;
        }
    };
    let pid = child.id();
    // Its stderr is drained, so that a chatty start cannot block on a full pipe.
    if let Some(mut stderr) = child.stderr.take() {
        tokio::spawn(async move {
            let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
        });
    }
    let mut stdin = child.stdin.take()?;
    let stdout = child.stdout.take()?;
    let answer = tokio::time::timeout(limit, async move {
        let line = format!("{}\n", modern::discover_request(1));
        if stdin.write_all(line.as_bytes()).await.is_err() {
            return Some(Era::Legacy);
        }
        let _ = stdin.flush().await;
        let mut reader = BufReader::new(stdout);
        let mut buffer = Vec::new();
        loop {
            lines::reuse(&mut buffer);
            match lines::read_line(&mut reader, &mut buffer, lines::MAX_MESSAGE).await {
                Ok(Line::Read) => {}
                Ok(Line::TooLong(_)) => continue,
                // It exited (or closed stdout) rather than answer: a server of the old era.
                Ok(Line::End) | Err(_) => return Some(Era::Legacy),
            }
            let Ok(message) = serde_json::from_slice::<Value>(&buffer) else {
                continue;
            };
            if message.get("id") != Some(&Value::from(1)) || message.get("method").is_some() {
                continue;
            }
            let modern = message.get("result").is_some_and(modern::auto_picks_modern);
            return Some(if modern { Era::Modern } else { Era::Legacy });
        }
    })
    .await;
    if let Some(pid) = pid {
        signal_group(pid, libc::SIGKILL);
    }
    let _ = child.kill().await;
    match answer {
        Ok(era) => era,
        Err(_) => {
            tracing::info!(server = %config.name, "era probe: no answer to server/discover within {} ms; speaking 2025-11-25 (set `protocol` to choose)", limit.as_millis());
            Some(Era::Legacy)
        }
    }
}
