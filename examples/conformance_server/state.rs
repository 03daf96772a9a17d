//! The `requestState` of the fixture's `input_required` rounds: which request it belongs
//! to, the round reached and the answers so far, signed with a key of this process
//! (HMAC-SHA256) and valid for a few minutes. The client carries it between rounds and
//! may have changed it: whatever fails the check is refused.

use std::sync::LazyLock;
use std::time::{SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::{Value, json};
use sha2::Sha256;

use crate::plans::Answers;

/// How long a client has to answer a round.
const TTL_SECS: u64 = 600;

/// The key of this process: a state from another process (or a restart) is refused.
static KEY: LazyLock<[u8; 32]> = LazyLock::new(|| {
    let mut key = [0u8; 32];
    key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
    key
});

fn mac(payload: &str) -> Hmac<Sha256> {
    let mut mac = Hmac::<Sha256>::new_from_slice(&*KEY).expect("HMAC takes any key");
    mac.update(payload.as_bytes());
    mac
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

/// The state of `subject` (the request it answers) at `round` with `answers`.
pub fn seal(subject: &str, round: usize, answers: &Answers) -> String {
    let body = json!({"s": subject, "r": round, "a": answers, "e": now() + TTL_SECS});
    let payload = URL_SAFE_NO_PAD.encode(body.to_string());
    let tag = URL_SAFE_NO_PAD.encode(mac(&payload).finalize().into_bytes());
    format!("{payload}.{tag}")
}

/// The round and answers `state` carries for `subject`; why not, when it fails the check.
pub fn open(state: &Value, subject: &str) -> Result<(usize, Answers), &'static str> {
    let text = state.as_str().ok_or("requestState must be a string")?;
    let (payload, tag) = text.split_once('.').ok_or("requestState is malformed")?;
    let tag = URL_SAFE_NO_PAD
        .decode(tag)
        .map_err(|_| "requestState failed its integrity check")?;
    mac(payload)
        .verify_slice(&tag)
        .map_err(|_| "requestState failed its integrity check")?;
    let body: Value = URL_SAFE_NO_PAD
        .decode(payload)
        .ok()
        .and_then(|b| serde_json::from_slice(&b).ok())
        .ok_or("requestState is malformed")?;
    if body["s"] != subject {
        return Err("requestState belongs to another request");
    }
    if body["e"].as_u64().is_none_or(|e| e < now()) {
        return Err("requestState has expired");
    }
    let round = body["r"].as_u64().ok_or("requestState is malformed")? as usize;
    let answers = body["a"].as_object().cloned().unwrap_or_default();
    Ok((round, answers))
}
