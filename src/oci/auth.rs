//! Registry credentials: `~/.docker/config.json`'s `auths` (basic auth, as `docker login`
//! writes them), anonymous otherwise. The token exchange a `WWW-Authenticate: Bearer`
//! challenge asks for is oci-client's.

use std::path::PathBuf;

use base64::Engine as _;
use oci_client::secrets::RegistryAuth;

/// The credentials for `registry`, or anonymous.
pub(super) fn for_registry(registry: &str) -> RegistryAuth {
    docker_config()
        .and_then(|text| from_docker_config(&text, registry))
        .unwrap_or(RegistryAuth::Anonymous)
}

fn docker_config() -> Option<String> {
    let dir = match std::env::var_os("DOCKER_CONFIG") {
        Some(dir) => PathBuf::from(dir),
        None => PathBuf::from(std::env::var_os("HOME")?).join(".docker"),
    };
    std::fs::read_to_string(dir.join("config.json")).ok()
}

/// The `auths` entry for `registry` (keys may be a bare host or a URL), decoded.
fn from_docker_config(text: &str, registry: &str) -> Option<RegistryAuth> {
    let config: serde_json::Value = serde_json::from_str(text).ok()?;
    let auths = config.get("auths")?.as_object()?;
    let host_of = |key: &str| {
        let key = key
            .trim_start_matches("https://")
            .trim_start_matches("http://");
        key.split('/').next().unwrap_or(key).to_owned()
    };
    let entry = auths.iter().find(|(key, _)| host_of(key) == registry)?.1;
    if let Some(encoded) = entry.get("auth").and_then(|a| a.as_str()) {
        let decoded = base64::engine::general_purpose::STANDARD
            .decode(encoded)
            .ok()?;
        let (user, password) = String::from_utf8(decoded)
            .ok()?
            .split_once(':')
            .map(|(u, p)| (u.to_owned(), p.to_owned()))?;
        return Some(RegistryAuth::Basic(user, password));
    }
    let user = entry.get("username")?.as_str()?;
    let password = entry.get("password")?.as_str()?;
    Some(RegistryAuth::Basic(user.to_owned(), password.to_owned()))
}

#[cfg(test)]
mod tests {
    use oci_client::secrets::RegistryAuth;

    use super::from_docker_config;

    #[test]
    fn docker_logins_are_read() {
        // "me:secret"
        let text = r#"{"auths":{"https://ghcr.io":{"auth":"bWU6c2VjcmV0"}}}"#;
        assert!(matches!(
            from_docker_config(text, "ghcr.io"),
            Some(RegistryAuth::Basic(u, p)) if u == "me" && p == "secret"
        ));
        assert!(from_docker_config(text, "quay.io").is_none());
    }
}
