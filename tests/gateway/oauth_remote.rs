//! The gateway as the OAuth client of a remote server that a real authorization server
//! protects: a second gateway is the resource server (`[http.oauth]`, tokens from npm's
//! oidc-provider), the first reaches it with `[servers.NAME.oauth]` and the client
//! credentials grant, discovers the issuer from the 401, gets a token for the resource,
//! refreshes it before it expires mid-run, and its calls keep working; and a user's
//! `wasmgate auth login` (authorization code with PKCE, dynamic registration, a loopback
//! redirect) whose tokens the gateway then uses.

use std::path::PathBuf;
use std::time::Duration;

use serde_json::json;

use crate::harness::{Client, TestDir, config, wasmgate};
use crate::http_client::HttpGateway;
use crate::oauth_front::{Provider, provider_folder};

/// A gateway's config in `dir` with the protected gateway on `port` as server `far`, whose
/// `[servers.far.oauth]` table holds `oauth`: the config's path and the tokens' folder.
fn client_config(dir: &TestDir, port: u16, oauth: &str) -> (PathBuf, PathBuf) {
    let auth_dir = dir.join("auth");
    let text = format!(
        "[gateway]\nauth_dir = \"{}\"\n\n[servers.far]\nurl = \"http://127.0.0.1:{port}/mcp\"\n\n\
         [servers.far.oauth]\n{oauth}",
        auth_dir.display()
    );
    (dir.write("gateway.toml", &text), auth_dir)
}

/// A loopback port free a moment ago: the resource server's URL is its resource, written
/// in its config before it starts.
pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

#[test]
fn the_gateway_logs_in_to_a_protected_remote_server_and_refreshes_its_token() {
    let Some(folder) = provider_folder() else {
        return;
    };
    // 62 s: fresh when minted, due for a refresh (a minute early) a few seconds later.
    let provider = Provider::start_with(&folder, &[("OIDC_ACCESS_TOKEN_TTL", "62")]);
    let port = free_port();
    let resource = format!("http://127.0.0.1:{port}");
    // Client credentials tokens name their client, not a user.
    let protected = protected_gateway(&provider, port, "claim = \"client_id\"\n");

    let dir = TestDir::new("oauth-remote-client");
    let (path, auth_dir) = client_config(
        &dir,
        port,
        "client_id = \"gateway\"\nclient_secret = \"${FAR_SECRET}\"\n\
         grant = \"client_credentials\"\nscopes = [\"mcp\"]\n",
    );
    let mut client = Client::spawn_with_env(
        &["serve", "--config", path.to_str().unwrap()],
        dir,
        &[("FAR_SECRET", "gateway-secret")],
    );
    client.initialize();
    client.wait_ready();
    let echo = client.call("far__ex__echo", json!({"text": "through OAuth"}));
    assert_eq!(echo["content"][0]["text"], "through OAuth", "{echo}");

    // The token is due for a refresh once fewer than 60 s are left: a few seconds on.
    std::thread::sleep(Duration::from_secs(3));
    let echo = client.call("far__ex__echo", json!({"text": "after the refresh"}));
    assert_eq!(echo["content"][0]["text"], "after the refresh", "{echo}");
    let stderr = client.stderr();
    assert!(stderr.contains("refreshed the access token"), "{stderr}");

    // The resource server knew the caller by its client id; the secret and the tokens
    // appear in no log, and the tokens' file is the user's alone.
    let status = client.status();
    assert_eq!(status["backends"]["far"]["status"], "ready", "{status}");
    assert!(!stderr.contains("gateway-secret"), "{stderr}");
    assert!(!protected.stderr().contains("gateway-secret"));
    let stored: Vec<_> = std::fs::read_dir(&auth_dir).unwrap().flatten().collect();
    assert_eq!(stored.len(), 1, "{stored:?}");
    use std::os::unix::fs::PermissionsExt;
    let mode = stored[0].metadata().unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o600);
    let saved = std::fs::read_to_string(stored[0].path()).unwrap();
    let token = serde_json::from_str::<serde_json::Value>(&saved).unwrap();
    let access = token
        .pointer("/tokens/access_token")
        .and_then(|t| t.as_str());
    let access = access.unwrap_or_else(|| panic!("no access token in {saved}"));
    assert!(!stderr.contains(access), "the access token is logged");
    // The token was asked for this resource (RFC 8707), found from the server's 401.
    let asked = token["resource"].as_str().unwrap_or_default();
    assert!(asked.starts_with(&resource), "{saved}");
}

/// A gateway that protects its example server with the provider's tokens, on `port`;
/// `extra` goes into its `[http.oauth]`.
fn protected_gateway(provider: &Provider, port: u16, extra: &str) -> HttpGateway {
    let resource = format!("http://127.0.0.1:{port}");
    let servers = config()
        .example("ex", &[])
        .render(std::path::Path::new("{dir}"));
    HttpGateway::start_on(
        TestDir::new("oauth-remote-rs"),
        &format!(
            "{servers}\n[http.oauth]\nissuer = \"{}\"\nresource = \"{resource}\"\n{extra}",
            provider.issuer
        ),
        &format!("127.0.0.1:{port}"),
        &[],
    )
}

#[test]
fn a_users_login_through_the_browser_is_kept_and_used_by_the_gateway() {
    let Some(folder) = provider_folder() else {
        return;
    };
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let provider = Provider::start(&folder);
    let port = free_port();
    let _protected = protected_gateway(&provider, port, "");

    // No client id or secret: the gateway registers itself, and a user logs in.
    let dir = TestDir::new("oauth-login");
    let (path, auth_dir) = client_config(&dir, port, "scopes = [\"mcp\"]\n");
    // The user's browser, as `auth login` opens it: it logs in and consents on the
    // provider's pages and follows the redirect to the loopback listener.
    let bin = dir.join("bin");
    std::fs::create_dir(&bin).unwrap();
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/tests/gateway/fixtures/browser_login.py"
    );
    let pages = dir.join("pages.json");
    let opener = bin.join("xdg-open");
    std::fs::write(
        &opener,
        format!(
            "#!/bin/sh\nexec {} {script} \"$1\" alice > {} 2>&1\n",
            python.display(),
            pages.display()
        ),
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&opener, std::fs::Permissions::from_mode(0o755)).unwrap();
    let search = format!(
        "{}:{}",
        bin.display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let login = std::process::Command::new(wasmgate())
        .args(["auth", "login", "far", "--config", path.to_str().unwrap()])
        .env("PATH", &search)
        .env_remove("WASMGATE_CONFIG")
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&login.stdout).to_string();
    let stderr = String::from_utf8_lossy(&login.stderr).to_string();
    let browsed = std::fs::read_to_string(&pages).unwrap_or_default();
    assert!(login.status.success(), "{said}\n{stderr}\n{browsed}");
    assert!(said.contains("logged in to `far`"), "{said}");
    assert_eq!(browsed.trim(), r#"["login", "consent"]"#, "{browsed}");

    let status = std::process::Command::new(wasmgate())
        .args(["auth", "status", "--config", path.to_str().unwrap()])
        .output()
        .unwrap();
    let status = String::from_utf8_lossy(&status.stdout).to_string();
    assert!(status.contains("logged in"), "{status}");

    // The gateway takes the stored tokens up: its calls reach the protected server.
    let mut client = Client::spawn(&["serve", "--config", path.to_str().unwrap()], dir);
    client.initialize();
    client.wait_ready();
    let echo = client.call("far__ex__echo", json!({"text": "as alice"}));
    assert_eq!(echo["content"][0]["text"], "as alice", "{echo}");
    let saved = std::fs::read_dir(&auth_dir)
        .unwrap()
        .flatten()
        .next()
        .unwrap();
    let saved = std::fs::read_to_string(saved.path()).unwrap();
    let saved: serde_json::Value = serde_json::from_str(&saved).unwrap();
    let access = saved
        .pointer("/tokens/access_token")
        .and_then(|t| t.as_str())
        .unwrap();
    assert!(!stderr.contains(access) && !said.contains(access) && !status.contains(access));
    assert!(!client.stderr().contains(access));
}
