//! Config mistakes that `check` and start-up refuse alike (TLS files, short or shared
//! tokens, profiles naming no server, credentials in a URL, a token file others may read),
//! and secrets that stay out of `check`, logs, events and servers' environments.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::harness::{
    Client, TIMEOUT, TestDir, config, eventually, example_server, run_cli_with_env, toml_str,
};
use crate::http_client::{HttpGateway, spawn};
use crate::http_front::with_example;

const LIMIT: Duration = Duration::from_secs(30);
const LONG: &str = "a-long-token-0123456789abcdef";

/// `wasmgate check --config FILE` with `env`.
fn check(dir: &TestDir, file: &Path, env: &[(&str, &str)]) -> crate::harness::Output {
    run_cli_with_env(
        &["check", "--config", file.to_str().unwrap()],
        &dir.path,
        env,
        LIMIT,
    )
}

/// `serve --http 127.0.0.1:0` on `file`: its stderr once it exited, or a panic if it said
/// it was listening.
fn serve_refuses(dir: &TestDir, file: &Path, env: &[(&str, &str)]) -> String {
    let (mut child, addr) = spawn(file, dir, "127.0.0.1:0", env);
    let stderr = std::fs::read_to_string(dir.join("gateway.stderr")).unwrap_or_default();
    if addr.is_some() {
        let _ = child.kill();
    }
    let status = child.wait().unwrap();
    assert!(
        addr.is_none(),
        "serve said it was listening, then: {status}\n{stderr}"
    );
    assert_eq!(status.code(), Some(1), "{stderr}");
    stderr
}

/// A self-signed certificate for localhost and its key, made by openssl.
fn certificate(dir: &TestDir, stem: &str) -> (PathBuf, PathBuf) {
    let (cert, key) = (
        dir.join(&format!("{stem}-cert.pem")),
        dir.join(&format!("{stem}-key.pem")),
    );
    let made = std::process::Command::new("openssl")
        .args(["req", "-x509", "-newkey", "ec", "-pkeyopt"])
        .args(["ec_paramgen_curve:prime256v1", "-nodes", "-days", "1"])
        .args(["-subj", "/CN=localhost", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output()
        .expect("openssl");
    assert!(made.status.success(), "{made:?}");
    (cert, key)
}

/// A missing certificate, the key given as the certificate, the certificate given as the
/// key and another certificate's key: `check` names the file, what is wrong and the fix,
/// and `serve` exits 1 the same way without ever saying it listens.
#[test]
fn tls_mistakes_fail_check_and_serve_before_listening() {
    let dir = TestDir::new("tls-check");
    let (cert, key) = certificate(&dir, "a");
    let (_, other_key) = certificate(&dir, "b");
    let missing = dir.join("missing.pem");
    let write = |cert: &Path, key: &Path| {
        dir.write(
            "gateway.toml",
            &format!(
                "[http]\ntls_cert = {}\ntls_key = {}\n",
                toml_str(cert.to_str().unwrap()),
                toml_str(key.to_str().unwrap())
            ),
        )
    };
    let file = write(&cert, &key);
    check(&dir, &file, &[]).assert_exit(0);
    for (cert, key, line, says) in [
        (&missing, &key, 2, "missing.pem cannot be read"),
        (
            &key,
            &key,
            2,
            "a-key.pem holds a private key, not a certificate",
        ),
        (
            &cert,
            &cert,
            3,
            "a-cert.pem holds a certificate, not a private key",
        ),
        (
            &cert,
            &other_key,
            3,
            "b-key.pem is not the private key of the certificate",
        ),
    ] {
        let file = write(cert, key);
        let out = check(&dir, &file, &[]);
        out.assert_exit(1);
        assert!(
            out.stderr.contains(&format!("gateway.toml:{line}:"))
                && out.stderr.contains(says)
                && out.stderr.contains(" ("),
            "{says}:\n{}",
            out.stderr
        );
        assert!(!out.stdout.contains("config OK"), "{}", out.stdout);
        let stderr = serve_refuses(&dir, &file, &[]);
        assert!(stderr.contains(says), "{says}:\n{stderr}");
    }
}

/// `WASMGATE_TOKEN` has the 16-character minimum of `[http] tokens`: `check` and `serve`
/// refuse a shorter one, naming the variable, with a config file or without one.
#[test]
fn a_short_wasmgate_token_is_refused_naming_the_variable() {
    let dir = TestDir::new("env-token");
    let file = dir.write("gateway.toml", &with_example(""));
    let short = [("WASMGATE_TOKEN", "letmein")];
    let says = "environment variable WASMGATE_TOKEN is shorter than 16 characters";
    let out = check(&dir, &file, &short);
    out.assert_exit(1);
    assert!(out.stderr.contains(says), "{}", out.stderr);
    let stderr = serve_refuses(&dir, &file, &short);
    assert!(stderr.contains(says), "{stderr}");
    for args in [&["check"][..], &["serve", "--http", "127.0.0.1:0"]] {
        let out = run_cli_with_env(args, &dir.path, &short, LIMIT);
        out.assert_exit(1);
        assert!(out.stderr.contains(says), "{args:?}: {}", out.stderr);
        assert!(!out.stderr.contains("listening"), "{}", out.stderr);
    }
    let out = check(&dir, &file, &[("WASMGATE_TOKEN", LONG)]);
    out.assert_exit(0);
    assert!(
        out.stdout.contains("tokens: WASMGATE_TOKEN"),
        "{}",
        out.stdout
    );
}

/// One value given to two token names is refused without showing it; a token whose
/// `${VAR}` is unset is said to be unset, not short.
#[test]
fn shared_and_unset_tokens_are_named_by_check() {
    let dir = TestDir::new("tokens");
    let file = dir.write(
        "gateway.toml",
        "[http]\ntokens = [\n  { name = \"alice\", token = \"${ALICE}\" },\n  { name = \"bob\", token = \"${BOB}\" },\n]\n",
    );
    let out = check(&dir, &file, &[("ALICE", LONG), ("BOB", LONG)]);
    out.assert_exit(1);
    assert!(
        out.stderr
            .contains("tokens `alice` and `bob` have the same value"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains(LONG), "{}", out.stderr);
    let out = check(&dir, &file, &[("ALICE", LONG)]);
    out.assert_exit(1);
    assert!(
        out.stderr.contains("environment variable BOB is not set"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("shorter"), "{}", out.stderr);
}

/// A profile naming a server that does not exist is refused; `check` prints what each
/// profile exposes and warns of one whose servers are all disabled; `serve` warns, once
/// the catalog is known, of a profile whose globs match nothing.
#[test]
fn profiles_must_name_real_servers_and_check_shows_what_they_expose() {
    let dir = TestDir::new("profiles");
    let file = dir.write(
        "gateway.toml",
        &with_example("[profiles.a]\nservers = [\"ex\", \"exx\"]\n"),
    );
    let out = check(&dir, &file, &[]);
    out.assert_exit(1);
    assert!(
        out.stderr
            .contains("profile `a` names `exx`, which is no server or plugin"),
        "{}",
        out.stderr
    );
    let stderr = serve_refuses(&dir, &file, &[]);
    assert!(stderr.contains("`exx`"), "{stderr}");

    let extra = "[servers.off]\ncommand = \"x\"\ndisabled = true\n\
                 [profiles.a]\ntools = [\"nomatch__*\"]\nservers = [\"ex\"]\n\
                 [profiles.b]\nservers = [\"off\"]\n";
    let file = dir.write("gateway.toml", &with_example(extra));
    let out = check(&dir, &file, &[]);
    out.assert_exit(0);
    assert!(
        out.stdout.contains(
            "profile a: /mcp/a\n    servers and plugins: ex\n    tools: nomatch__*\n    prompts: all\n    resources: all\n"
        ),
        "{}",
        out.stdout
    );
    assert!(
        out.stdout
            .contains("profile `b`: every server it names is disabled (off)"),
        "{}",
        out.stdout
    );
    let gateway = HttpGateway::start(&with_example(extra), &[]);
    eventually(TIMEOUT, "the warning of profile a", || {
        let stderr = gateway.stderr();
        stderr
            .contains("profile `a`: tools = [nomatch__*] match nothing")
            .then_some(())
    });
}

/// A secret in a remote server's URL query is shown as `***` by `check`, and stays out of
/// the log and the events file of a gateway that uses it; credentials in the URL are
/// refused, as they would go out in the `Host` header.
#[test]
fn a_secret_in_a_remote_url_stays_out_of_check_logs_and_events() {
    let secret = "query-secret-0123456789";
    let inner = HttpGateway::start(&with_example(""), &[]);
    let dir = TestDir::new("url-secret");
    let events = dir.join("events.jsonl");
    let url = format!("{}?key={secret}", inner.url("/mcp"));
    let text = config()
        .gateway(&format!("events = {}", toml_str(events.to_str().unwrap())))
        .remote("up", &url, &[])
        .render(&dir.path);
    let file = dir.write("gateway.toml", &text);
    let out = check(&dir, &file, &[]);
    out.assert_exit(0);
    assert!(out.stdout.contains("/mcp?key=***"), "{}", out.stdout);
    assert!(!out.stdout.contains(secret), "{}", out.stdout);

    let file = file.to_str().unwrap().to_string();
    let mut client = Client::spawn_with_env(&["serve", "--config", &file], dir, &[]);
    client.initialize();
    client.wait_ready();
    let written = std::fs::read_to_string(&events).unwrap();
    assert!(written.contains("backend.ready"), "{written}");
    assert!(!written.contains(secret), "{written}");
    let stderr = client.stderr();
    assert!(stderr.contains("key=***"), "{stderr}");
    assert!(!stderr.contains(secret), "{stderr}");

    let dir = TestDir::new("url-userinfo");
    let url = inner.url("/mcp").replace("http://", "http://ada:hunter2@");
    let file = dir.write(
        "gateway.toml",
        &config().remote("up", &url, &[]).render(&dir.path),
    );
    let out = check(&dir, &file, &[]);
    out.assert_exit(1);
    assert!(
        out.stderr.contains("carries credentials") && out.stderr.contains("bearer_token_file"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("hunter2"), "{}", out.stderr);
}

/// A bearer token file that other users may read is refused, with the chmod that fixes it.
#[test]
fn a_token_file_others_may_read_is_refused() {
    let dir = TestDir::new("token-file");
    let token = dir.write("token", LONG);
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o644)).unwrap();
    let text = config()
        .remote(
            "up",
            "http://127.0.0.1:9/mcp",
            &[&format!(
                "bearer_token_file = {}",
                toml_str(token.to_str().unwrap())
            )],
        )
        .render(&dir.path);
    let file = dir.write("gateway.toml", &text);
    let out = check(&dir, &file, &[]);
    out.assert_exit(1);
    assert!(
        out.stderr.contains("mode 644")
            && out
                .stderr
                .contains(&format!("chmod 600 {}", token.display())),
        "{}",
        out.stderr
    );
    std::fs::set_permissions(&token, std::fs::Permissions::from_mode(0o600)).unwrap();
    check(&dir, &file, &[]).assert_exit(0);
}

/// `inherit_env = true` passes the gateway's environment on, but never `WASMGATE_TOKEN`.
#[test]
fn servers_never_inherit_wasmgate_token() {
    let dir = TestDir::new("inherit-token");
    let dump = dir.join("env.txt");
    let script = dir.write(
        "dump-env.sh",
        &format!(
            "#!/bin/sh\nenv > {}\nexec {} \"$@\"\n",
            dump.display(),
            example_server().display()
        ),
    );
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let text = config()
        .server("s", script.to_str().unwrap(), &[], &["inherit_env = true"])
        .render(&dir.path);
    let file = dir.write("gateway.toml", &text);
    let out = run_cli_with_env(
        &[
            "call",
            "--config",
            file.to_str().unwrap(),
            "s__echo",
            r#"{"text":"x"}"#,
        ],
        &dir.path,
        &[("WASMGATE_TOKEN", LONG), ("INHERITED_MARK", "yes")],
        Duration::from_secs(60),
    );
    out.assert_exit(0);
    let seen = std::fs::read_to_string(&dump).unwrap();
    assert!(seen.contains("INHERITED_MARK=yes"), "{seen}");
    assert!(!seen.contains(LONG), "{seen}");
}
