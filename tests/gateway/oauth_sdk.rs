//! The official Python SDK's client, with its own OAuth support, through the whole flow
//! against the HTTP front (`[http.oauth]`) and a real authorization server (npm's
//! oidc-provider): protected-resource and issuer metadata discovery, dynamic registration,
//! a user's login by the authorization code grant with PKCE, the token and its refresh;
//! the user is then given exactly the tools of the profile the claim rules map them to.
//! Known instead by a client ID metadata document, served over HTTPS with a private CA the
//! provider trusts.

use std::path::Path;

use serde_json::{Value, json};

use crate::harness::TestDir;
use crate::http_client::HttpGateway;
use crate::oauth_front::{Provider, provider_folder, two_profiles};
use crate::oauth_remote::free_port;
use crate::remote::make_ca_and_certificate;

/// Servers `a` (profile `eng`) and `b` (profile `ops`); the user `alice` may use `eng`,
/// `bob` `ops`, by their `sub`. The resource is the gateway's real URL: the SDK asks for a
/// token for the metadata's resource only when it is a parent of the URL it connects to.
fn gateway(provider: &Provider) -> HttpGateway {
    let port = free_port();
    let text = format!(
        r#"{profiles}
[http.oauth]
issuer = "{issuer}"
resource = "http://127.0.0.1:{port}"

[[http.oauth.rules]]
claim = "sub"
value = "alice"
profiles = ["eng"]

[[http.oauth.rules]]
claim = "sub"
value = "bob"
profiles = ["ops"]
"#,
        issuer = provider.issuer,
        profiles = two_profiles(),
    );
    HttpGateway::start_on(
        TestDir::new("oauth-sdk"),
        &text,
        &format!("127.0.0.1:{port}"),
        &[],
    )
}

/// What the SDK client saw, logged in as `login`, on `path`, calling `tool`; with `certs`,
/// known by its metadata document served with the certificate there; `env` for the script.
fn sdk_session(
    python: &Path,
    gw: &HttpGateway,
    (path, login, tool): (&str, &str, &str),
    certs: Option<&Path>,
    env: &[(&str, &str)],
) -> Value {
    let url = gw.url(path);
    let mut args = vec![url.as_str(), login, tool];
    args.extend(certs.map(|dir| dir.to_str().unwrap()));
    crate::third_party::run_fixture_script(python, "sdk_oauth_client.py", &args, env)
}

/// The servers' tools among `seen`'s (the gateway's own are on every path).
fn server_tools(seen: &Value) -> Vec<&str> {
    let all = seen["tools"].as_array().unwrap_or_else(|| panic!("{seen}"));
    let names = all.iter().map(|t| t.as_str().unwrap());
    names.filter(|name| name.contains("__")).collect()
}

#[test]
fn the_python_sdk_logs_a_user_in_and_gets_exactly_its_profiles_tools() {
    let Some(folder) = provider_folder() else {
        return;
    };
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    // Access tokens live 3 s: the SDK refreshes alice's before its second call.
    let provider = Provider::start_with(&folder, &[("OIDC_ACCESS_TOKEN_TTL", "3")]);
    let gw = gateway(&provider);

    let after_expiry = [("SDK_AFTER_EXPIRY", "1")];
    let alice = sdk_session(
        &python,
        &gw,
        ("/mcp/eng", "alice", "a__echo"),
        None,
        &after_expiry,
    );
    let tools = server_tools(&alice);
    assert!(tools.contains(&"a__echo"), "{alice}");
    assert!(tools.iter().all(|n| n.starts_with("a__")), "{alice}");
    let called = json!(["through OAuth", "after the refresh"]);
    assert_eq!(alice["called"], called, "{alice}");
    assert_eq!(alice["refreshed"], true, "{alice}");
    // It registered itself, and went through the login and the consent pages once: the
    // refresh needed no second login.
    let client_id = alice["client_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{alice}"));
    assert!(
        !client_id.is_empty() && !client_id.starts_with("https:"),
        "{alice}"
    );
    assert_eq!(alice["pages"], json!(["login", "consent"]), "{alice}");
    assert_eq!(alice["scope"], "mcp", "{alice}");

    let bob = sdk_session(&python, &gw, ("/mcp/ops", "bob", "b__echo"), None, &[]);
    let tools = server_tools(&bob);
    assert!(tools.contains(&"b__echo"), "{bob}");
    assert!(tools.iter().all(|n| n.starts_with("b__")), "{bob}");
    assert_eq!(bob["called"][0], "through OAuth", "{bob}");

    // The tokens are never logged.
    let stderr = gw.stderr();
    for seen in [&alice, &bob] {
        let token = seen["access_token"].as_str().unwrap();
        assert!(!stderr.contains(token), "a token is logged: {stderr}");
    }
}

#[test]
fn the_python_sdk_is_known_by_its_client_id_metadata_document() {
    let Some(folder) = provider_folder() else {
        return;
    };
    let Some(python) = crate::third_party::sdk_python() else {
        return;
    };
    let certs = TestDir::new("oauth-sdk-ca");
    make_ca_and_certificate(&certs);
    let ca = certs.join("ca.pem");
    let env = [
        ("OIDC_CIMD", "1"),
        ("NODE_EXTRA_CA_CERTS", ca.to_str().unwrap()),
    ];
    let provider = Provider::start_with(&folder, &env);
    let gw = gateway(&provider);

    let seen = sdk_session(
        &python,
        &gw,
        ("/mcp/eng", "alice", "a__echo"),
        Some(&certs.path),
        &[],
    );
    let tools = server_tools(&seen);
    assert!(tools.contains(&"a__echo"), "{seen}");
    assert!(tools.iter().all(|n| n.starts_with("a__")), "{seen}");
    assert_eq!(seen["called"][0], "through OAuth", "{seen}");
    // No registration: the document's URL is the client's id, and the provider read it.
    let document = seen["document"]
        .as_str()
        .unwrap_or_else(|| panic!("{seen}"));
    assert!(document.starts_with("https://127.0.0.1:"), "{seen}");
    assert_eq!(seen["client_id"], document, "{seen}");
    assert!(!seen["fetched"].as_array().unwrap().is_empty(), "{seen}");
    assert_eq!(seen["pages"], json!(["login", "consent"]), "{seen}");
}
