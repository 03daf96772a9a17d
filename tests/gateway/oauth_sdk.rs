//! The official Python SDK's client, with its own OAuth support, through the whole flow
//! against the HTTP front (`[http.oauth]`) and a real authorization server (npm's
//! oidc-provider): protected-resource and issuer metadata discovery, dynamic registration,
//! a user's login by the authorization code grant with PKCE, the token; the user is then
//! given exactly the tools of the profile the claim rules map them to.

use std::path::Path;

use serde_json::Value;

use crate::harness::TestDir;
use crate::http_client::HttpGateway;
use crate::oauth_front::{Provider, provider_folder, two_profiles};
use crate::oauth_remote::free_port;

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

/// What the SDK client saw, logged in as `login`, on `path`, calling `tool`.
fn sdk_session(python: &Path, gw: &HttpGateway, path: &str, login: &str, tool: &str) -> Value {
    crate::third_party::run_fixture_script(
        python,
        "sdk_oauth_client.py",
        &[&gw.url(path), login, tool],
        &[],
    )
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
    let provider = Provider::start_with(&folder, &[]);
    let gw = gateway(&provider);

    let alice = sdk_session(&python, &gw, "/mcp/eng", "alice", "a__echo");
    let tools = server_tools(&alice);
    assert!(tools.contains(&"a__echo"), "{alice}");
    assert!(tools.iter().all(|n| n.starts_with("a__")), "{alice}");
    assert_eq!(alice["called"][0], "through OAuth", "{alice}");
    // It registered itself, and went through the login and the consent pages.
    assert_eq!(alice["registered"], true, "{alice}");
    assert_eq!(
        alice["pages"],
        serde_json::json!(["login", "consent"]),
        "{alice}"
    );
    assert_eq!(alice["scope"], "mcp", "{alice}");

    let bob = sdk_session(&python, &gw, "/mcp/ops", "bob", "b__echo");
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
