//! Plugins through a real OCI registry: Debian's `docker-registry` (the CNCF distribution
//! registry, `WASMGATE_REGISTRY`), started on loopback by each test. Pushed with
//! `wasmgate plugin push`, served from `oci://…`, signed with `wasmgate plugin sign`.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{
    Client, TestDir, call_ok, eventually, fixture, fixture_path, has, is_executable, run_cli,
    setup, wait_event, wait_tools,
};
use crate::third_party::require;

const CLI: Duration = Duration::from_secs(60);

/// The registry binary `scripts/test.sh` installs; the test is skipped (loudly, and fails
/// under CI) without it.
fn registry_bin() -> Option<PathBuf> {
    let found = std::env::var_os("WASMGATE_REGISTRY").map(PathBuf::from);
    if let Some(path) = &found {
        assert!(
            is_executable(path),
            "WASMGATE_REGISTRY={} is not executable",
            path.display()
        );
    }
    require(
        "docker-registry",
        found,
        "apt-get install docker-registry and set WASMGATE_REGISTRY=/usr/bin/docker-registry; scripts/test.sh does",
    )
}

/// A registry of the test's own: storage and config in a temp folder, on a free port.
struct Registry {
    child: Option<Child>,
    addr: String,
    dir: TestDir,
}

impl Registry {
    fn start(bin: &Path) -> Registry {
        let dir = TestDir::new("registry");
        // A port found free may be taken before the registry binds it: try again then.
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .unwrap()
                .local_addr()
                .unwrap()
                .port();
            let addr = format!("127.0.0.1:{port}");
            let config = dir.write(
                "config.yml",
                &format!(
                    "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\n\
                     http:\n  addr: {addr}\n",
                    dir.join("storage").display()
                ),
            );
            let mut child = Command::new(bin)
                .arg("serve")
                .arg(&config)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(std::fs::File::create(dir.join("registry.stderr")).unwrap())
                .spawn()
                .expect("start docker-registry");
            let up = eventually(
                Duration::from_secs(20),
                "the registry to answer /v2/",
                || {
                    if child.try_wait().unwrap().is_some() {
                        return Some(false);
                    }
                    http_get(&addr, "/v2/", "*/*")
                        .map(|(status, _)| status == 200)
                        .filter(|ok| *ok)
                },
            );
            if up {
                return Registry {
                    child: Some(child),
                    addr,
                    dir,
                };
            }
        }
        let log = std::fs::read_to_string(dir.join("registry.stderr")).unwrap_or_default();
        panic!("the registry did not start in 5 tries: {log}");
    }

    fn stop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    fn reference(&self, rest: &str) -> String {
        format!("oci://{}/{rest}", self.addr)
    }

    /// `wasmgate plugin push FILE REF --insecure`: the printed `REF@sha256:…`.
    fn push(&self, file: &Path, rest: &str, dir: &Path) -> String {
        let reference = self.reference(rest);
        let out = run_cli(
            &[
                "plugin",
                "push",
                file.to_str().unwrap(),
                &reference,
                "--insecure",
            ],
            dir,
            CLI,
        );
        out.assert_exit(0);
        let pushed = out.stdout.trim().to_owned();
        assert!(pushed.contains("@sha256:"), "{pushed}");
        pushed
    }

    /// The file the registry keeps blob `digest` in.
    fn blob_file(&self, digest: &str) -> PathBuf {
        let hex = digest.strip_prefix("sha256:").unwrap();
        self.dir.join("storage").join(format!(
            "docker/registry/v2/blobs/sha256/{}/{hex}/data",
            &hex[..2]
        ))
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A plain GET (HTTP/1.0: the body ends with the connection); status and body.
fn http_get(addr: &str, path: &str, accept: &str) -> Option<(u16, Vec<u8>)> {
    let mut stream = TcpStream::connect(addr).ok()?;
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .ok()?;
    write!(
        stream,
        "GET {path} HTTP/1.0\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n"
    )
    .ok()?;
    let mut response = Vec::new();
    stream.read_to_end(&mut response).ok()?;
    let split = response.windows(4).position(|w| w == b"\r\n\r\n")?;
    let head = String::from_utf8_lossy(&response[..split]);
    let status = head.split_whitespace().nth(1)?.parse().ok()?;
    Some((status, response[split + 4..].to_vec()))
}

fn digest_of(pushed: &str) -> &str {
    pushed.split_once('@').unwrap().1
}

/// A gateway serving plugin `p` from `source` (with `extra` lines in its table), its
/// pull cache in `cache`.
fn gateway(registry: &Registry, source: &str, extra: &str, cache: &Path) -> Client {
    let config = setup().cache(cache.to_path_buf()).plugins(&format!(
        "oci_insecure = [\"{}\"]\n\n[plugins.p]\nsource = \"{source}\"\n{extra}",
        registry.addr
    ));
    let (client, _) = config.start_listed();
    client
}

/// Pushed with `plugin push`, served pinned by digest (a call works); the registry killed,
/// a new gateway serves the same pin from the cache, and a tag is served from its last
/// pull with a `plugin.pull_failed` event.
#[test]
fn a_pushed_plugin_serves_by_digest_and_from_the_cache_when_the_registry_is_down() {
    let Some(bin) = registry_bin() else { return };
    let mut registry = Registry::start(&bin);
    let work = TestDir::new("oci-work");
    let pushed = registry.push(&fixture_path("echo"), "tools/echo:1", &work.path);
    let cache = work.join("cache");

    let mut client = gateway(&registry, &pushed, "", &cache);
    let names = Client::tool_names(&mut client);
    assert!(has(&names, "p__echo"), "{names:?}\n{}", client.stderr());
    let result = call_ok(&mut client, "p__echo", json!({"text": "from a registry"}));
    assert_eq!(result["content"][0]["text"], "from a registry");
    // The tag too, so that its last pull is cached.
    drop(client);
    let mut client = gateway(&registry, &registry.reference("tools/echo:1"), "", &cache);
    assert!(has(&Client::tool_names(&mut client), "p__echo"));
    drop(client);

    registry.stop();
    let mut pinned = gateway(&registry, &pushed, "", &cache);
    assert!(
        has(&Client::tool_names(&mut pinned), "p__echo"),
        "{}",
        pinned.stderr()
    );
    assert!(
        pinned
            .events(json!({"event_type": "plugin.pull_failed"}))
            .is_empty()
    );
    drop(pinned);

    let mut tagged = gateway(&registry, &registry.reference("tools/echo:1"), "", &cache);
    let result = call_ok(&mut tagged, "p__echo", json!({"text": "offline"}));
    assert_eq!(result["content"][0]["text"], "offline");
    let event = wait_event(&mut tagged, "plugin.pull_failed", "p");
    assert_eq!(event["serving"], digest_of(&pushed), "{event}");
    assert!(
        event["error"].as_str().unwrap().contains("registry error"),
        "{event}"
    );
}

/// A tag pushed again names a new version: a config reload pulls it.
#[test]
fn a_moved_tag_is_pulled_again_on_config_reload() {
    let Some(bin) = registry_bin() else { return };
    let registry = Registry::start(&bin);
    let work = TestDir::new("oci-work");
    registry.push(&fixture_path("echo"), "tools/p:latest", &work.path);
    let source = registry.reference("tools/p:latest");
    let mut client = gateway(&registry, &source, "", &work.join("cache"));
    assert!(has(&Client::tool_names(&mut client), "p__kinds"));

    // `minimal` has `echo` and no `kinds`.
    registry.push(&fixture_path("minimal"), "tools/p:latest", &work.path);
    let config = std::fs::read_to_string(client.config_path()).unwrap();
    std::fs::write(client.config_path(), config + "\n# reload\n").unwrap();
    let names = wait_tools(&mut client, "the moved tag's tools", |names| {
        !has(names, "p__kinds") && has(names, "p__echo")
    });
    assert!(has(&names, "p__echo"));
    let result = call_ok(&mut client, "p__echo", json!({"text": "new"}));
    assert_eq!(result["content"][0]["text"], "new");
}

/// A blob whose bytes are not its digest (overwritten in the registry's storage) is
/// refused, and says so.
#[test]
fn a_tampered_blob_is_refused() {
    let Some(bin) = registry_bin() else { return };
    let registry = Registry::start(&bin);
    let work = TestDir::new("oci-work");
    let pushed = registry.push(&fixture_path("echo"), "tools/echo:1", &work.path);
    let wasm = fixture("echo");
    let layer = format!("sha256:{}", crate::harness::sha256_hex(&wasm));
    let file = registry.blob_file(&layer);
    let mut bytes = std::fs::read(&file).expect("the layer's blob in the registry's storage");
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0xff;
    std::fs::write(&file, &bytes).unwrap();

    let mut client = gateway(&registry, &pushed, "", &work.join("cache"));
    let event = wait_event(&mut client, "plugin.load_failed", "p");
    let error = event["error"].as_str().unwrap();
    assert!(
        error.contains("refused as tampered") && error.contains(&layer),
        "{error}"
    );
    assert!(!has(&Client::tool_names(&mut client), "p__echo"));

    let out = run_cli(
        &["plugin", "pull", &pushed, "--insecure", "-o", "x.wasm"],
        &work.path,
        CLI,
    );
    out.assert_exit(1);
    assert!(out.stderr.contains("tampered"), "{}", out.stderr);
    assert!(!work.join("x.wasm").exists());
}

/// `plugin keygen` and `plugin sign`: the right key serves, another key or no signature
/// is refused with the reason.
#[test]
fn a_signature_must_verify_with_the_configured_key() {
    let Some(bin) = registry_bin() else { return };
    let registry = Registry::start(&bin);
    let work = TestDir::new("oci-work");
    for who in ["alice", "mallory"] {
        run_cli(&["plugin", "keygen", who], &work.path, CLI).assert_exit(0);
    }
    let signed = registry.push(&fixture_path("echo"), "tools/echo:1", &work.path);
    let unsigned = registry.push(&fixture_path("minimal"), "tools/minimal:1", &work.path);
    let out = run_cli(
        &[
            "plugin",
            "sign",
            &signed,
            "--key",
            "alice/cosign.key",
            "--insecure",
        ],
        &work.path,
        CLI,
    );
    out.assert_exit(0);
    assert!(
        out.stdout
            .contains(&format!("{}.sig", digest_of(&signed).replace(':', "-"))),
        "{}",
        out.stdout
    );
    // Signing a tag is refused: the signature names one digest.
    let out = run_cli(
        &[
            "plugin",
            "sign",
            &registry.reference("tools/echo:1"),
            "--key",
            "alice/cosign.key",
            "--insecure",
        ],
        &work.path,
        CLI,
    );
    out.assert_exit(1);
    assert!(out.stderr.contains("sign a digest"), "{}", out.stderr);

    let key = |who: &str| {
        format!(
            "public_key = \"{}\"",
            work.join(who).join("cosign.pub").display()
        )
    };
    let mut good = gateway(&registry, &signed, &key("alice"), &work.join("cache-a"));
    let result = call_ok(&mut good, "p__echo", json!({"text": "signed"}));
    assert_eq!(result["content"][0]["text"], "signed");
    drop(good);

    for (source, who, cache, reason) in [
        (&signed, "mallory", "cache-m", "does not verify with"),
        (&unsigned, "alice", "cache-u", "no signature found"),
    ] {
        let mut client = gateway(&registry, source, &key(who), &work.join(cache));
        let event = wait_event(&mut client, "plugin.load_failed", "p");
        let error = event["error"].as_str().unwrap();
        assert!(
            error.contains("signature refused") && error.contains(reason),
            "{error}"
        );
        assert!(!has(&Client::tool_names(&mut client), "p__echo"));
    }

    // `plugin pull --public-key` checks the same way.
    let pull = |who: &str, out: &str| {
        let key = format!("{who}/cosign.pub");
        let args = [
            "plugin",
            "pull",
            &signed,
            "--insecure",
            "--public-key",
            &key,
            "-o",
            out,
        ];
        run_cli(&args, &work.path, CLI)
    };
    let out = pull("mallory", "m.wasm");
    out.assert_exit(1);
    assert!(out.stderr.contains("signature refused"), "{}", out.stderr);
    pull("alice", "a.wasm").assert_exit(0);
    assert_eq!(std::fs::read(work.join("a.wasm")).unwrap(), fixture("echo"));
}

/// What `plugin push` writes is the layout `wkg` publishes components in (its README's
/// "OCI" section, implemented by the Bytecode Alliance's oci-wasm): an OCI image manifest,
/// config `application/vnd.wasm.config.v0+json` (architecture `wasm`, os `wasip2`, the
/// layer digests, the component's imports and exports), one `application/wasm` layer.
#[test]
fn pushes_use_the_wkg_layout() {
    let Some(bin) = registry_bin() else { return };
    let registry = Registry::start(&bin);
    let work = TestDir::new("oci-work");
    let pushed = registry.push(&fixture_path("echo"), "tools/echo:1", &work.path);
    let (status, body) = http_get(
        &registry.addr,
        "/v2/tools/echo/manifests/1",
        "application/vnd.oci.image.manifest.v1+json",
    )
    .unwrap();
    assert_eq!(status, 200);
    assert_eq!(
        format!("sha256:{}", crate::harness::sha256_hex(&body)),
        digest_of(&pushed)
    );
    let manifest: Value = serde_json::from_slice(&body).unwrap();
    assert_eq!(manifest["schemaVersion"], 2);
    assert_eq!(
        manifest["mediaType"],
        "application/vnd.oci.image.manifest.v1+json"
    );
    assert_eq!(
        manifest["config"]["mediaType"],
        "application/vnd.wasm.config.v0+json"
    );
    let layers = manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 1, "{manifest}");
    assert_eq!(layers[0]["mediaType"], "application/wasm");
    let layer = format!("sha256:{}", crate::harness::sha256_hex(&fixture("echo")));
    assert_eq!(layers[0]["digest"], layer.as_str());

    let config_digest = manifest["config"]["digest"].as_str().unwrap();
    let (status, config) = http_get(
        &registry.addr,
        &format!("/v2/tools/echo/blobs/{config_digest}"),
        "*/*",
    )
    .unwrap();
    assert_eq!(status, 200);
    let config: Value = serde_json::from_slice(&config).unwrap();
    assert_eq!(config["architecture"], "wasm", "{config}");
    assert_eq!(config["os"], "wasip2", "{config}");
    assert_eq!(config["layerDigests"], json!([layer]), "{config}");
    let exports = config["component"]["exports"].to_string();
    assert!(exports.contains("wasmgate:plugin"), "{config}");

    // And it pulls back as it went.
    run_cli(
        &["plugin", "pull", &pushed, "--insecure", "-o", "back.wasm"],
        &work.path,
        CLI,
    )
    .assert_exit(0);
    assert_eq!(
        std::fs::read(work.join("back.wasm")).unwrap(),
        fixture("echo")
    );
}
