//! Validation of the settings that guard the HTTP front and hold secrets: tokens (and
//! `WASMGATE_TOKEN`), profiles' servers, remote URLs and token files, the replicas' shared
//! key. TLS files are checked through the binary (tests/gateway/config_checks.rs), with
//! certificates openssl makes.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use super::{Config, ConfigError, from_json_str, from_toml_str};
use crate::test_support::TempDir;

const LONG: &str = "0123456789abcdef-long";

fn env_with(vars: &[(&str, &str)]) -> impl Fn(&str) -> Option<String> {
    let vars: Vec<(String, String)> = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    move |name| vars.iter().find(|(k, _)| k == name).map(|(_, v)| v.clone())
}

fn load(text: &str, base: &Path, env: &[(&str, &str)]) -> Result<Config, ConfigError> {
    from_toml_str(text, Path::new("gateway.toml"), base, &env_with(env))
}

fn errors(text: &str, base: &Path, env: &[(&str, &str)]) -> Vec<String> {
    match load(text, base, env) {
        Ok(_) => panic!("expected errors for\n{text}"),
        Err(e) => e.diagnostics().iter().map(ToString::to_string).collect(),
    }
}

#[test]
fn an_unset_or_empty_token_variable_is_named_as_such() {
    let dir = TempDir::new("wasmgate-sec-");
    let text = "[http]\ntokens = [{ name = \"ci\", token = \"${CI_TOKEN}\" }]\n";
    let found = errors(text, &dir, &[]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("environment variable CI_TOKEN is not set"),
        "{}",
        found[0]
    );
    let found = errors(text, &dir, &[("CI_TOKEN", "")]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("token `ci` is empty: `${CI_TOKEN}` expands to nothing"),
        "{}",
        found[0]
    );
}

#[test]
fn one_token_value_under_two_names_is_refused_without_showing_it() {
    let dir = TempDir::new("wasmgate-sec-");
    let text = "[http]\ntokens = [\n  { name = \"alice\", token = \"${A}\" },\n  { name = \"bob\", token = \"${B}\" },\n]\n";
    let found = errors(text, &dir, &[("A", LONG), ("B", LONG)]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("tokens `alice` and `bob` have the same value"),
        "{}",
        found[0]
    );
    assert!(!found[0].contains(LONG), "{}", found[0]);
    // WASMGATE_TOKEN counts as one more token.
    let text = "[http]\ntokens = [{ name = \"alice\", token = \"${A}\" }]\n";
    let found = errors(text, &dir, &[("A", LONG), ("WASMGATE_TOKEN", LONG)]);
    assert!(
        found[0].contains("tokens `alice` and `WASMGATE_TOKEN` have the same value"),
        "{found:#?}"
    );
    assert!(load(text, &dir, &[("A", LONG), ("B", "another-0123456789")]).is_ok());
}

#[test]
fn wasmgate_token_has_the_minimum_of_the_tokens_and_is_listed() {
    let dir = TempDir::new("wasmgate-sec-");
    for value in ["short", ""] {
        let found = errors("", &dir, &[("WASMGATE_TOKEN", value)]);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0].contains("environment variable WASMGATE_TOKEN is")
                && found[0].contains("openssl rand"),
            "{}",
            found[0]
        );
    }
    let config = load("", &dir, &[("WASMGATE_TOKEN", LONG)]).unwrap();
    assert_eq!(config.http.tokens.len(), 1);
    assert_eq!(config.http.tokens[0].name, "WASMGATE_TOKEN");
    assert!(config.summary().contains("tokens: WASMGATE_TOKEN"));
    // JSON configs too.
    let err = from_json_str(
        "{\"mcpServers\": {}}",
        Path::new("mcp.json"),
        &dir,
        &env_with(&[("WASMGATE_TOKEN", "short")]),
    )
    .unwrap_err();
    assert!(err.to_string().contains("WASMGATE_TOKEN"), "{err}");
    // A token of the file may not take its name.
    let text = "[http]\ntokens = [{ name = \"WASMGATE_TOKEN\", token = \"${A}\" }]\n";
    let found = errors(
        text,
        &dir,
        &[("A", LONG), ("WASMGATE_TOKEN", "x".repeat(20).as_str())],
    );
    assert!(found[0].contains("named `WASMGATE_TOKEN`"), "{found:#?}");
}

#[test]
fn a_profile_naming_no_server_or_plugin_is_refused_at_its_line() {
    let dir = TempDir::new("wasmgate-sec-");
    let text = "[servers.time]\ncommand = \"x\"\nnamespace = \"t\"\n\n[profiles.a]\nservers = [\"time\", \"tmie\"]\n\n[profiles.b]\nservers = [\"t\"]\n";
    let found = errors(text, &dir, &[]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(
        found[0].starts_with("gateway.toml:6:")
            && found[0].contains("profile `a` names `tmie`, which is no server or plugin"),
        "{}",
        found[0]
    );
    assert!(
        found[1].contains("`t` is the namespace of server `time`"),
        "{}",
        found[1]
    );
}

#[test]
fn a_profile_that_can_show_no_backend_warns() {
    let dir = TempDir::new("wasmgate-sec-");
    std::fs::create_dir(dir.join("plugins")).unwrap();
    let text = "[servers.off]\ncommand = \"x\"\ndisabled = true\n\
                [plugins]\ndir = \"plugins\"\n\
                [profiles.disabled]\nservers = [\"off\"]\n\
                [profiles.none]\nservers = []\n\
                [profiles.nothing]\ntools = []\nprompts = []\nresources = []\n\
                [profiles.later]\nservers = [\"dropped_in_later\"]\n";
    let config = load(text, &dir, &[]).unwrap();
    let warnings = config.warnings.join("\n");
    for expected in [
        "profile `disabled`: every server it names is disabled (off)",
        "profile `none`: `servers = []` shows no server or plugin",
        "profile `nothing` shows nothing",
        "profile `later` names `dropped_in_later`, which is no server or plugin of this config and not (yet) a plugin file",
    ] {
        assert!(warnings.contains(expected), "{expected}:\n{warnings}");
    }
    let summary = config.summary();
    for expected in [
        "profile disabled: /mcp/disabled\n    servers and plugins: off [disabled]\n    tools: all\n",
        "profile nothing: /mcp/nothing\n    servers and plugins: all\n    tools: none\n    prompts: none\n    resources: none\n",
    ] {
        assert!(summary.contains(expected), "{expected}\n{summary}");
    }
}

#[test]
fn the_summary_says_what_each_profile_exposes_and_to_which_tokens() {
    let dir = TempDir::new("wasmgate-sec-");
    let text = "[servers.docs]\ncommand = \"x\"\n\
                [profiles.docs]\ntools = [\"docs__*\", \"gateway_status\"]\nservers = [\"docs\"]\n\
                [profiles.other]\n\
                [http]\ntokens = [{ name = \"bot\", token = \"${A}\", profiles = [\"docs\"] }, { name = \"ops\", token = \"${B}\" }]\n";
    let config = load(text, &dir, &[("A", LONG), ("B", "another-0123456789")]).unwrap();
    let summary = config.summary();
    assert!(
        summary.contains(
            "  profile docs: /mcp/docs\n    servers and plugins: docs\n    tools: docs__*, gateway_status\n    prompts: all\n    resources: all\n    tokens that may use it: bot, ops\n"
        ),
        "{summary}"
    );
    assert!(
        summary.contains("profile other: /mcp/other\n    servers and plugins: all\n"),
        "{summary}"
    );
    assert!(
        summary.contains("tokens that may use it: ops\n"),
        "{summary}"
    );
}

#[test]
fn remote_urls_with_credentials_are_refused_and_query_secrets_never_shown() {
    let dir = TempDir::new("wasmgate-sec-");
    let text = "[servers.r]\nurl = \"https://ada:${PW}@example.test/mcp\"\n";
    let found = errors(text, &dir, &[("PW", "hunter2")]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("carries credentials") && found[0].contains("bearer_token_file"),
        "{}",
        found[0]
    );
    assert!(!found[0].contains("hunter2"), "{}", found[0]);

    let text = "[servers.r]\nurl = \"https://example.test/mcp?api_key=${KEY}&v=2\"\n";
    let config = load(text, &dir, &[("KEY", "hunter2")]).unwrap();
    let summary = config.summary();
    assert!(
        summary.contains("r: https://example.test/mcp?api_key=***&v=*** (auto)"),
        "{summary}"
    );
    assert!(!summary.contains("hunter2"), "{summary}");
    let found = errors("[servers.r]\nurl = \"ftp://x/?k=hunter2\"\n", &dir, &[]);
    assert!(!found[0].contains("hunter2"), "{}", found[0]);
}

#[test]
fn a_bearer_token_file_others_may_read_is_refused_with_the_chmod() {
    let dir = TempDir::new("wasmgate-sec-");
    let file = dir.join("token");
    std::fs::write(&file, "s3cret").unwrap();
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = "[servers.r]\nurl = \"https://example.test/mcp\"\nbearer_token_file = \"token\"\n";
    let found = errors(text, &dir, &[]);
    assert_eq!(found.len(), 1, "{found:#?}");
    assert!(
        found[0].contains("gateway.toml:3:")
            && found[0].contains("mode 644")
            && found[0].contains(&format!("chmod 600 {}", file.display())),
        "{}",
        found[0]
    );
    // A disabled entry only warns.
    let config = load(&format!("{text}disabled = true\n"), &dir, &[]).unwrap();
    assert!(config.warnings.iter().any(|w| w.contains("chmod 600")));
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
    assert!(load(text, &dir, &[]).is_ok());
}

/// `[http.replicas]`: the shared key must be long enough and readable, the name plain, and
/// each peer another replica's http(s) URL.
#[test]
fn replicas_need_a_long_shared_key_and_other_replicas_urls() {
    let dir = TempDir::new("wasmgate-replicas-");
    std::fs::write(dir.join("short.key"), "too short").unwrap();
    std::fs::write(dir.join("good.key"), [7u8; 32]).unwrap();
    let table = |name: &str, key: &str, peers: &str| {
        format!("[http.replicas]\nname = \"{name}\"\nkey_file = \"{key}\"\npeers = {{ {peers} }}\n")
    };
    let ok = load(
        &table("a", "good.key", "b = \"http://10.0.0.2:8787\""),
        &dir,
        &[],
    )
    .unwrap();
    let replicas = ok.http.replicas.expect("replicas");
    assert_eq!((replicas.name.as_str(), replicas.key.len()), ("a", 32));
    assert_eq!(replicas.peers["b"].to_string(), "http://10.0.0.2:8787/");

    let short = errors(&table("a", "short.key", ""), &dir, &[]).join("\n");
    assert!(short.contains("fewer than 32 bytes"), "{short}");
    let missing = errors(&table("a", "none.key", ""), &dir, &[]).join("\n");
    assert!(missing.contains("none.key"), "{missing}");
    let peers = "a = \"http://10.0.0.1:1\", b = \"ftp://x\", c = \"not a url\"";
    let bad = errors(&table("a", "good.key", peers), &dir, &[]);
    assert_eq!(bad.len(), 3, "{bad:?}");
    for (error, what) in bad.iter().zip(["peer `a`", "peer `b`", "peer `c`"]) {
        assert!(error.contains(what), "{error}");
    }
    let unnamed = errors(&table("a b", "good.key", ""), &dir, &[]).join("\n");
    assert!(unnamed.contains("not plain"), "{unnamed}");
}

#[test]
fn oauth_is_validated_and_its_secret_never_shown() {
    let dir = TempDir::new("wasmgate-sec-");
    let text = r#"
[profiles.eng]
tools = ["*"]
[http.oauth]
issuer = "https://login.example.com"
resource = "https://mcp.example.com/"
introspection = { endpoint = "https://login.example.com/introspect", client_id = "gw", client_secret = "${INTRO_SECRET}" }
operator_scope = "admin"
[[http.oauth.rules]]
claim = "groups"
value = "eng"
profiles = ["eng"]
"#;
    let config = load(text, &dir, &[("INTRO_SECRET", "very-secret-value")]).unwrap();
    let oauth = config.http.oauth.as_deref().unwrap();
    assert_eq!(oauth.resource, "https://mcp.example.com");
    assert_eq!(oauth.scopes, ["mcp"]);
    assert_eq!(oauth.claim, "sub");
    assert_eq!(oauth.rules[0].profiles, ["eng"]);
    let summary = config.summary();
    assert!(
        summary.contains("oauth: issuer https://login.example.com"),
        "{summary}"
    );
    assert!(
        summary.contains("groups = \"eng\": profiles eng"),
        "{summary}"
    );
    assert!(!summary.contains("very-secret-value"), "{summary}");
    assert!(!format!("{config:?}").contains("very-secret-value"));

    let bad = r#"
[http.oauth]
issuer = "http://login.example.com"
resource = "https://mcp.example.com"
[[http.oauth.rules]]
claim = "groups"
value = "x"
profiles = ["nope"]
"#;
    let found = errors(bad, &dir, &[]);
    assert_eq!(found.len(), 2, "{found:#?}");
    assert!(found[0].contains("is not an https URL"), "{found:#?}");
    assert!(
        found[1].contains("profile `nope`, which is not defined"),
        "{found:#?}"
    );
}

#[test]
fn oauth_settings_are_checked_and_the_secret_never_shown() {
    let dir = TempDir::new("wasmgate-sec-");
    let text = "[gateway]\nauth_dir = \"tokens\"\n\
                [servers.billing]\nurl = \"https://billing.example.com/mcp\"\n\
                [servers.billing.oauth]\nclient_id = \"gw\"\nclient_secret = \"${SECRET}\"\n\
                scopes = [\"read\"]\n";
    let config = load(text, &dir, &[("SECRET", "s3cret-value-123")]).unwrap();
    assert_eq!(config.gateway.auth_dir, Some(dir.join("tokens")));
    let super::ServerTransport::Http(endpoint) = &config.servers["billing"].transport else {
        panic!("a remote server");
    };
    let oauth = endpoint.oauth.as_ref().unwrap();
    // A secret means client credentials unless the grant says otherwise.
    assert_eq!(oauth.grant, crate::oauth_client::Grant::ClientCredentials);
    assert_eq!(
        oauth.client_secret.as_ref().unwrap().expose(),
        "s3cret-value-123"
    );
    let summary = config.summary();
    assert!(
        summary.contains("OAuth client_credentials (client gw, scopes read)"),
        "{summary}"
    );
    assert!(!summary.contains("s3cret-value-123"), "{summary}");
    assert!(!format!("{config:?}").contains("s3cret-value-123"));

    let bad = "[servers.b]\nurl = \"https://b.example.com/mcp\"\n\
               [servers.b.oauth]\ngrant = \"password\"\n";
    let found = errors(bad, &dir, &[]);
    assert!(
        found[0].contains("unknown OAuth grant \"password\""),
        "{found:#?}"
    );
    let no_secret = "[servers.b]\nurl = \"https://b.example.com/mcp\"\n\
                     [servers.b.oauth]\ngrant = \"client_credentials\"\nclient_id = \"x\"\n";
    let found = errors(no_secret, &dir, &[]);
    assert!(
        found[0].contains("needs a client_id and a client_secret"),
        "{found:#?}"
    );
    let plain = "[servers.b]\nurl = \"https://b.example.com/mcp\"\n\
                 [servers.b.oauth]\nclient_metadata_url = \"http://x.example.com/c.json\"\n";
    let found = errors(plain, &dir, &[]);
    assert!(found[0].contains("is not an https:// URL"), "{found:#?}");
}
