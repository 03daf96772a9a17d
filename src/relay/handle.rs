//! `requestState` handles: what a 2026-07-28 client echoes to carry on a call the gateway
//! keeps open. The state is the client's to hold and so attacker-controlled (the
//! specification says so): an HMAC-SHA256 covers what the handle names (the call, its
//! round, its expiry, the replica that holds it) and whom it was issued to (the
//! principal), so a forged, altered, expired or borrowed handle is refused before anything
//! reaches a server.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use serde_json::json;
use sha2::Sha256;

use crate::peer::Principal;

/// What every handle starts with: a state without it was not minted here (a server's
/// own, passed through).
pub const PREFIX: &str = "wg1.";

/// What a handle names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handle {
    /// The parked call ([`super::Parked`]'s key).
    pub call: u64,
    /// Which round of the call's exchange: an older round's handle was used already.
    pub round: u32,
    /// Unix time in ms after which the call is given up.
    pub expires_ms: u64,
    /// The gateway process that holds the call.
    pub replica: String,
}

/// Why a `requestState` is refused (error -32602 to the client).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum StateError {
    #[error("requestState was not issued to this caller by this gateway, or was altered")]
    Forged,
    #[error("requestState expired; send the request again without it")]
    Expired,
    #[error("requestState names a call held by another gateway replica ({0})")]
    OtherReplica(String),
    #[error("requestState was used already; retry with the requestState of the latest result")]
    Used,
    #[error("the call requestState continued has ended; send the request again without it")]
    Ended,
    #[error(
        "requestState belongs to another request: a retry repeats the first request's method, name and arguments"
    )]
    OtherRequest,
    #[error("too many calls wait for their clients' input; try again later")]
    Full,
}

/// Mints and checks handles with a key of this process's own.
pub struct Sealer {
    key: Vec<u8>,
    replica: String,
}

type HmacSha256 = Hmac<Sha256>;

impl Sealer {
    /// A random key and replica name: handles do not outlive the process (its parked calls
    /// do not either).
    pub fn new() -> Sealer {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        let replica = uuid::Uuid::new_v4().simple().to_string()[..12].to_string();
        Sealer::shared(&key, replica)
    }

    /// The key replicas share (`[http.replicas]`), so that each can read whose a handle is.
    pub fn shared(key: &[u8], replica: String) -> Sealer {
        Sealer {
            key: key.to_vec(),
            replica,
        }
    }

    /// The replica a handle of this gateway's key names, when it is not this one.
    pub fn held_elsewhere(&self, state: &str, principal: &Principal) -> Option<String> {
        match self.open(state, principal, 0) {
            Err(StateError::OtherReplica(replica)) => Some(replica),
            _ => None,
        }
    }

    pub fn replica(&self) -> &str {
        &self.replica
    }

    pub fn seal(&self, handle: &Handle, principal: &Principal) -> String {
        let payload = format!(
            "{}.{}.{}.{}",
            handle.call, handle.round, handle.expires_ms, handle.replica
        );
        let tag = self.tag(&payload, principal).finalize().into_bytes();
        format!(
            "{PREFIX}{}.{}",
            URL_SAFE_NO_PAD.encode(payload),
            URL_SAFE_NO_PAD.encode(tag)
        )
    }

    /// The handle `state` names, if this gateway issued it to `principal` and it has not
    /// expired at `now_ms`.
    pub fn open(
        &self,
        state: &str,
        principal: &Principal,
        now_ms: u64,
    ) -> Result<Handle, StateError> {
        let body = state.strip_prefix(PREFIX).ok_or(StateError::Forged)?;
        let (payload, tag) = body.split_once('.').ok_or(StateError::Forged)?;
        let payload = URL_SAFE_NO_PAD
            .decode(payload)
            .map_err(|_| StateError::Forged)?;
        let tag = URL_SAFE_NO_PAD
            .decode(tag)
            .map_err(|_| StateError::Forged)?;
        let payload = String::from_utf8(payload).map_err(|_| StateError::Forged)?;
        self.tag(&payload, principal)
            .verify_slice(&tag)
            .map_err(|_| StateError::Forged)?;
        let handle = parse(&payload).ok_or(StateError::Forged)?;
        if handle.replica != self.replica {
            return Err(StateError::OtherReplica(handle.replica));
        }
        if now_ms > handle.expires_ms {
            return Err(StateError::Expired);
        }
        Ok(handle)
    }

    /// The MAC over a payload and the principal it is bound to.
    fn tag(&self, payload: &str, principal: &Principal) -> HmacSha256 {
        let mut mac = HmacSha256::new_from_slice(&self.key).expect("HMAC takes any key length");
        mac.update(payload.as_bytes());
        // As JSON, so no token or profile name can pass for another's.
        let whom = json!([
            principal.token.as_deref(),
            principal.profile.as_deref(),
            principal.operator
        ]);
        mac.update(b"\n");
        mac.update(whom.to_string().as_bytes());
        mac
    }
}

impl Default for Sealer {
    fn default() -> Self {
        Sealer::new()
    }
}

fn parse(payload: &str) -> Option<Handle> {
    let mut parts = payload.splitn(4, '.');
    Some(Handle {
        call: parts.next()?.parse().ok()?,
        round: parts.next()?.parse().ok()?,
        expires_ms: parts.next()?.parse().ok()?,
        replica: parts.next()?.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::{Handle, Principal, Sealer, StateError};

    fn handle(sealer: &Sealer) -> Handle {
        Handle {
            call: 7,
            round: 2,
            expires_ms: 1_000,
            replica: sealer.replica().to_string(),
        }
    }

    #[test]
    fn a_handle_opens_for_its_principal_until_it_expires() {
        let sealer = Sealer::new();
        let alice = Principal {
            token: Some(Arc::from("alice")),
            ..Principal::default()
        };
        let state = sealer.seal(&handle(&sealer), &alice);
        assert_eq!(sealer.open(&state, &alice, 999), Ok(handle(&sealer)));
        assert_eq!(sealer.open(&state, &alice, 1_001), Err(StateError::Expired));
        assert_eq!(
            sealer.open(&state, &Principal::default(), 999),
            Err(StateError::Forged)
        );
    }

    #[test]
    fn an_altered_or_foreign_handle_is_forged() {
        let sealer = Sealer::new();
        let nobody = Principal::default();
        let state = sealer.seal(&handle(&sealer), &nobody);
        for bad in [
            format!("{state}-TAMPERED"),
            state.replacen("wg1.", "wg2.", 1),
            Sealer::new().seal(&handle(&sealer), &nobody),
            "wg1.".to_string(),
            "opaque".to_string(),
        ] {
            assert_eq!(
                sealer.open(&bad, &nobody, 0),
                Err(StateError::Forged),
                "{bad}"
            );
        }
    }
}
