//! The status page's login cookie: the name of an operator token, an expiry and a nonce,
//! signed with a per-process random key over the token itself, so that it never carries
//! the token, dies with the process, and stops working when the token changes.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::HttpToken;

/// The cookie's name.
pub const NAME: &str = "wasmgate_ui";

/// How long a login lasts.
pub const LIFETIME: Duration = Duration::from_secs(12 * 3600);

/// The signing key: made at the first login, never written anywhere. Two v4 UUIDs carry
/// 244 bits from the operating system's random source.
fn key() -> &'static [u8; 32] {
    static KEY: OnceLock<[u8; 32]> = OnceLock::new();
    KEY.get_or_init(|| {
        let mut key = [0u8; 32];
        key[..16].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key[16..].copy_from_slice(uuid::Uuid::new_v4().as_bytes());
        key
    })
}

/// Nonces of cookies logged out before they expired.
fn revoked() -> &'static Mutex<HashSet<String>> {
    static REVOKED: OnceLock<Mutex<HashSet<String>>> = OnceLock::new();
    REVOKED.get_or_init(Mutex::default)
}

fn now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

fn mac(name: &str, expires: u64, nonce: &str, token: &HttpToken) -> Vec<u8> {
    let mut mac = <Hmac<Sha256>>::new_from_slice(key()).expect("HMAC takes any key length");
    // The token's hash binds the cookie to its secret: a rotated token ends its logins.
    for part in [
        name.as_bytes(),
        expires.to_string().as_bytes(),
        nonce.as_bytes(),
        &Sha256::digest(token.token.as_bytes()),
    ] {
        mac.update(&(part.len() as u64).to_be_bytes());
        mac.update(part);
    }
    mac.finalize().into_bytes().to_vec()
}

/// A fresh cookie value for `token`.
pub fn issue(token: &HttpToken) -> String {
    let expires = now() + LIFETIME.as_secs();
    let nonce = uuid::Uuid::new_v4().simple().to_string();
    let signature = mac(&token.name, expires, &nonce, token);
    format!(
        "{}.{expires}.{nonce}.{}",
        URL_SAFE_NO_PAD.encode(token.name.as_bytes()),
        URL_SAFE_NO_PAD.encode(signature)
    )
}

/// The cookie's parts once read (not yet checked).
struct Parts {
    name: String,
    expires: u64,
    nonce: String,
    signature: Vec<u8>,
}

fn parse(value: &str) -> Option<Parts> {
    let mut parts = value.split('.');
    let name = String::from_utf8(URL_SAFE_NO_PAD.decode(parts.next()?).ok()?).ok()?;
    let expires = parts.next()?.parse().ok()?;
    let nonce = parts.next()?.to_string();
    let signature = URL_SAFE_NO_PAD.decode(parts.next()?).ok()?;
    parts.next().is_none().then_some(Parts {
        name,
        expires,
        nonce,
        signature,
    })
}

/// The operator token a cookie value was issued for, if it is genuine, unexpired, not
/// logged out, and that token is still configured with the operator scope.
pub fn verify<'a>(value: &str, tokens: &'a [HttpToken]) -> Option<&'a HttpToken> {
    let parts = parse(value)?;
    if parts.expires <= now() || revoked().lock().unwrap().contains(&parts.nonce) {
        return None;
    }
    let token = tokens.iter().find(|t| t.operator && t.name == parts.name)?;
    let expected = mac(&parts.name, parts.expires, &parts.nonce, token);
    bool::from(expected.ct_eq(&parts.signature)).then_some(token)
}

/// Ends the login of a cookie value (logout).
pub fn revoke(value: &str) {
    if let Some(parts) = parse(value) {
        revoked().lock().unwrap().insert(parts.nonce);
    }
}

/// The value of cookie `NAME` in a `Cookie` header.
pub fn find(header: &str) -> Option<&str> {
    header
        .split(';')
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(name, _)| *name == NAME)
        .map(|(_, value)| value)
}

/// The operator token among `tokens` that `presented` matches, compared in constant time.
pub fn operator_token<'a>(presented: &str, tokens: &'a [HttpToken]) -> Option<&'a HttpToken> {
    let mut found = None;
    for token in tokens {
        if bool::from(token.token.as_bytes().ct_eq(presented.as_bytes())) {
            found = Some(token);
        }
    }
    found.filter(|t| t.operator)
}

#[cfg(test)]
mod tests {
    use super::{issue, revoke, verify};
    use crate::config::HttpToken;

    fn token(name: &str, secret: &str, operator: bool) -> HttpToken {
        HttpToken {
            name: name.into(),
            token: secret.into(),
            profiles: Vec::new(),
            mcp: true,
            operator,
        }
    }

    #[test]
    fn a_cookie_is_bound_to_its_token_and_ends_at_logout() {
        let ops = token("ops", "0123456789abcdef-ops", true);
        let cookie = issue(&ops);
        assert!(!cookie.contains("0123456789abcdef"), "{cookie}");
        let tokens = vec![ops.clone(), token("ci", "0123456789abcdef-ci", false)];
        assert_eq!(
            verify(&cookie, &tokens).map(|t| t.name.as_str()),
            Some("ops")
        );
        // The token rotated: the cookie is no longer good.
        assert!(verify(&cookie, &[token("ops", "another-secret-0123", true)]).is_none());
        // Tampered: another name, a later expiry.
        let mut parts: Vec<&str> = cookie.split('.').collect();
        let later = (parts[1].parse::<u64>().unwrap() + 1).to_string();
        parts[1] = &later;
        assert!(verify(&parts.join("."), &tokens).is_none());
        assert!(verify("garbage", &tokens).is_none());
        revoke(&cookie);
        assert!(verify(&cookie, &tokens).is_none());
    }
}
