//! Attacks on the sandbox, through the real binary: a plugin (the `hostile` fixture) or
//! another local user rearranging files, grants over the gateway's own files, a poisoned
//! compile cache, code put in a granted plugin's place, and outbound HTTP aimed at the
//! gateway's own machine. Each test performs the attack and shows it refused while the
//! gateway goes on serving.

use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::Ordering;
use std::time::Duration;

use serde_json::json;

use crate::harness::{
    Client, Config, LOAD_TIMEOUT, TestDir, backend, call_failed, call_ok, first_list, fixture, has,
    plugin_dir, run_cli, setup, sha256_hex, text, wait_event,
};
use crate::plugins::{HttpServer, PAGE};

/// A granted folder swapped for a link while the gateway serves: every later instance still
/// opens the folder that was granted, never where the link points. The plugin itself cannot
/// make a link that leads out of its grant either.
#[test]
fn a_grant_swapped_for_a_link_keeps_opening_the_granted_folder() {
    let setup = setup()
        .file("hostile.wasm", fixture("hostile"))
        .folder("shared/sub")
        .folder("own")
        .folder("secret")
        .plugins(
            "[plugins.hostile]\n\
             allow_dirs = [{ host = \"{dir}/shared/sub\", guest = \"/sub\" },\n\
                           { host = \"{dir}/own\", guest = \"/own\", mode = \"rw\" }]",
        );
    let dir = TestDir::new("swap");
    let config = setup.write(&dir.path);
    std::fs::write(dir.join("shared/sub/inside.txt"), "granted").unwrap();
    std::fs::write(dir.join("secret/key.txt"), "the secret").unwrap();
    let mut client = setup.spawn(&config, dir);
    first_list(&mut client);
    let read = |client: &mut _, path: &str| -> Result<String, String> {
        let result = Client::call(client, "hostile__read", json!({"path": path}));
        if result["isError"] == json!(true) {
            Err(text(&result).to_string())
        } else {
            Ok(text(&result).to_string())
        }
    };
    assert_eq!(
        read(&mut client, "/sub/inside.txt").as_deref(),
        Ok("granted")
    );

    // Another user of the folder (or a plugin with a write grant over it) swaps it.
    let shared = client.dir.join("shared");
    std::fs::rename(shared.join("sub"), shared.join("moved")).unwrap();
    std::os::unix::fs::symlink(client.dir.join("secret"), shared.join("sub")).unwrap();
    for _ in 0..3 {
        // Fresh instances each call: every one gets the folder opened at load.
        assert_eq!(
            read(&mut client, "/sub/inside.txt").as_deref(),
            Ok("granted")
        );
        let leaked = read(&mut client, "/sub/key.txt");
        assert!(leaked.is_err(), "the link was followed: {leaked:?}");
    }

    // The plugin links out of its own read-write grant: the link is made, never followed.
    let made = call_ok(
        &mut client,
        "hostile__symlink",
        json!({"target": "../secret/key.txt", "link": "/own/key"}),
    );
    assert_eq!(text(&made), "linked");
    let through = read(&mut client, "/own/key");
    assert!(
        through.as_ref().is_err_and(|e| !e.contains("the secret")),
        "{through:?}"
    );
    // Absolute targets too.
    let absolute = client.dir.join("secret").to_str().unwrap().to_string();
    let _ = client.call(
        "hostile__symlink",
        json!({"target": absolute, "link": "/own/abs"}),
    );
    let through = read(&mut client, "/own/abs/key.txt");
    assert!(through.is_err(), "{through:?}");
    assert_eq!(
        text(&call_ok(
            &mut client,
            "hostile__read",
            json!({"path": "/sub/inside.txt"})
        )),
        "granted"
    );
}

/// `wasmgate check` on a config; its exit code and stderr.
fn check(dir: &TestDir, config: &str) -> (Option<i32>, String) {
    let path = dir.write("gateway.toml", config);
    let output = run_cli(
        &["check", "--config", path.to_str().unwrap()],
        &dir.path,
        Duration::from_secs(60),
    );
    (
        output.status.code(),
        format!("{}{}", output.stderr, output.stdout),
    )
}

/// A grant inside another read-write grant (of any plugin) is refused at load: a plugin that
/// writes the outer folder could swap the inner one for a link before the next config load.
#[test]
fn a_grant_inside_a_read_write_grant_is_refused() {
    let dir = TestDir::new("nested");
    std::fs::create_dir_all(dir.join("shared/sub")).unwrap();
    std::fs::write(dir.join("a.wasm"), fixture("minimal")).unwrap();
    let d = dir.path.to_str().unwrap();
    let config = format!(
        "[plugins.writer]\npath = \"{d}/a.wasm\"\n\
         allow_dirs = [{{ host = \"{d}/shared\", guest = \"/s\", mode = \"rw\" }}]\n\
         [plugins.reader]\npath = \"{d}/a.wasm\"\n\
         allow_dirs = [{{ host = \"{d}/shared/sub\", guest = \"/sub\" }}]\n"
    );
    let (code, out) = check(&dir, &config);
    assert_eq!(code, Some(1), "{out}");
    assert!(
        out.contains("plugins.reader.allow_dirs")
            && out.contains("lies inside plugin `writer`'s read-write grant"),
        "{out}"
    );
    // Read-only outside: allowed.
    let (code, out) = check(&dir, &config.replace("mode = \"rw\"", "mode = \"ro\""));
    assert_eq!(code, Some(0), "{out}");
}

/// A read-write grant that holds the config file, the plugin folder, a plugin's file, the
/// compile cache or the events file is refused, naming the file; `allow_gateway_files`
/// accepts it when meant.
#[test]
fn a_read_write_grant_over_the_gateways_own_files_is_refused() {
    let dir = TestDir::new("own-files");
    let d = dir.path.to_str().unwrap().to_string();
    std::fs::create_dir_all(dir.join("work")).unwrap();
    std::fs::create_dir_all(dir.join("plugins")).unwrap();
    let cases = [
        ("{d}", "gateway.toml", "the config file"),
        ("{d}/plugins", "plugins", "the plugin folder"),
        ("{d}/work", "work/cache", "the compiled-plugin cache"),
        ("{d}/work", "work/events.jsonl", "the events file"),
    ];
    for (host, exposed, what) in cases {
        let host = host.replace("{d}", &d);
        let config = format!(
            "[gateway]\nevents = \"{}\"\n[plugins]\ndir = \"{d}/plugins\"\n{}\n\
             [plugins.p]\npath = \"{d}/p.wasm\"\n\
             allow_dirs = [{{ host = \"{host}\", guest = \"/x\", mode = \"rw\" }}]\n",
            if exposed.contains("events") {
                format!("{d}/work/events.jsonl")
            } else {
                format!("{d}/events.jsonl")
            },
            if exposed.contains("cache") {
                format!("cache_dir = \"{d}/work/cache\"")
            } else {
                format!("cache_dir = \"{d}/cache\"")
            },
        );
        let (code, out) = check(&dir, &config);
        assert_eq!(code, Some(1), "{exposed}: {out}");
        assert!(
            out.contains(&format!("{d}/{exposed}")) && out.contains(what),
            "{exposed}: {out}"
        );
        let allowed = config.replace("mode = \"rw\"", "mode = \"rw\", allow_gateway_files = true");
        let (code, out) = check(&dir, &allowed);
        assert_eq!(code, Some(0), "{exposed} allowed: {out}");
    }
    // A plugin's own file, named by path.
    let config = format!(
        "[plugins.p]\npath = \"{d}/work/p.wasm\"\n\
         allow_dirs = [{{ host = \"{d}/work\", guest = \"/x\", mode = \"rw\" }}]\n"
    );
    let (code, out) = check(&dir, &config);
    assert_eq!(code, Some(1), "{out}");
    assert!(out.contains("plugin `p`'s component"), "{out}");
    // A plugin folder others may write: said, since a file dropped there is served.
    std::fs::set_permissions(dir.join("plugins"), PermissionsExt::from_mode(0o777)).unwrap();
    let (code, out) = check(&dir, &format!("[plugins]\ndir = \"{d}/plugins\"\n"));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("is writable by group or others"), "{out}");
}

/// Cache entries written by another cache, or crafted to pass the old checksum, are not
/// loaded: the plugin is compiled again and served. A cache folder others may write is not
/// used at all.
#[test]
fn a_poisoned_compile_cache_is_refused_and_the_plugin_recompiled() {
    let setup = setup().file("echo.wasm", fixture("echo"));
    let shared = TestDir::new("poison");
    let config = setup.write(&shared.path);
    drop(start_compiling_echo(&setup, &config, "cold"));

    // Craft: keep each entry's length and header, change the code, as an attacker with
    // write access to the folder would (the old format's sha256 would have matched this).
    let cache = shared.join("cache");
    let mut entries = 0;
    for entry in std::fs::read_dir(&cache).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "cwasm") {
            let mut bytes = std::fs::read(&path).unwrap();
            let n = bytes.len();
            bytes[n - 100..].fill(0xcc);
            std::fs::write(&path, bytes).unwrap();
            entries += 1;
        }
    }
    assert!(entries > 0, "no cache entry was written");
    let mut second = start_compiling_echo(&setup, &config, "crafted");
    assert_eq!(
        text(&call_ok(&mut second, "echo__echo", json!({"text": "ok"}))),
        "ok"
    );
    let stderr = second.stderr();
    assert!(stderr.contains("is not one this cache wrote"), "{stderr}");
    drop(second);

    // A folder others may write: not used, said once, plugins still served.
    std::fs::set_permissions(&cache, PermissionsExt::from_mode(0o777)).unwrap();
    let mut third = start_compiling_echo(&setup, &config, "open");
    assert_eq!(
        text(&call_ok(&mut third, "echo__echo", json!({"text": "ok"}))),
        "ok"
    );
    let stderr = third.stderr();
    assert!(
        stderr.contains("is not used") && stderr.contains("writable by group or others"),
        "{stderr}"
    );
}

/// A gateway on `config` with a folder of its own, `name`, once it listed its tools and
/// compiled `echo` afresh rather than take it from the cache.
fn start_compiling_echo(setup: &Config, config: &Path, name: &str) -> Client {
    let mut client = setup.spawn(config, TestDir::new(name));
    first_list(&mut client);
    assert_eq!(
        wait_event(&mut client, "plugin.loaded", "echo")["cached"],
        false
    );
    client
}

/// A grant pinned to a sha256 goes to that code only: other code under the plugin's name is
/// not loaded, and says why. Unpinned, a folder file that takes a table's grants by its name
/// is named in a warning.
#[test]
fn a_pinned_grant_goes_only_to_the_code_it_names() {
    let minimal = fixture("minimal");
    let pin = sha256_hex(&minimal);
    let table = |pin: &str| {
        format!(
            "[plugins.granted]\nsha256 = \"{pin}\"\nallow_dirs = [{{ host = \"{{dir}}/data\", guest = \"/data\" }}]"
        )
    };
    // The file in the folder is not the pinned code.
    let (mut client, names) = setup()
        .file("granted.wasm", fixture("echo"))
        .file("echo.wasm", fixture("echo"))
        .folder("data")
        .plugins(&table(&pin))
        .start_listed();
    assert!(has(&names, "echo__echo"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("granted__")),
        "{names:?}"
    );
    let status = backend(&mut client, "granted");
    assert_eq!(status["status"], "failed", "{status}");
    let reason = status["last_error"].as_str().unwrap_or_default();
    assert!(
        reason.contains(&format!("not the {pin} its config pins")),
        "{status}"
    );
    drop(client);

    // The pinned code itself is served.
    let (mut client, names) = setup()
        .file("granted.wasm", minimal)
        .folder("data")
        .plugins(&table(&pin))
        .start_listed();
    assert!(has(&names, "granted__echo"), "{names:?}");
    assert_eq!(
        text(&call_ok(
            &mut client,
            "granted__echo",
            json!({"text": "pinned"})
        )),
        "pinned"
    );

    // No pin: served, with a warning that the name alone carries the grants.
    let (client, names) = setup()
        .file("granted.wasm", fixture("minimal"))
        .folder("data")
        .plugins("[plugins.granted]\nallow_dirs = [{ host = \"{dir}/data\", guest = \"/data\" }]")
        .start_listed();
    assert!(has(&names, "granted__echo"), "{names:?}");
    let stderr = client.stderr();
    assert!(
        stderr.contains("takes the grants of [plugins.granted] by its file name alone"),
        "{stderr}"
    );
}

/// Outbound HTTP: a user name in the address, an address written as a number (which a
/// wildcard must not match), and names or wildcards that lead to the gateway's own machine
/// are refused before any connection; an address the grant lists is reached. A refusal is
/// logged with scheme, host and port only.
#[test]
fn outbound_http_reaches_only_what_the_grant_lists() {
    let server = HttpServer::start();
    let port = server.port;
    let (mut client, _) = setup()
        .file("listed.wasm", fixture("hostile"))
        .file("wild.wasm", fixture("hostile"))
        .file("open.wasm", fixture("hostile"))
        .plugins(&format!(
            "[plugins.listed]\nallow_hosts = [\"127.0.0.1:{port}\", \"*.0.0.1\"]\n\
             [plugins.wild]\nallow_hosts = [\"*\"]\n\
             [plugins.open]\nallow_hosts = [\"localhost:{port}\"]\nallow_private_addresses = true"
        ))
        .start_listed();
    let get = |client: &mut _, plugin: &str, url: String| {
        Client::call(client, &format!("{plugin}__http"), json!({"url": url}))
    };
    let refused = [
        (
            "listed",
            format!("http://user:pw@127.0.0.1:{port}/?token=SECRET1"),
        ),
        ("listed", format!("http://0x7f.0.0.2:{port}/")),
        ("listed", format!("http://2130706434:{port}/")),
        ("wild", format!("http://127.0.0.1:{port}/?token=SECRET2")),
        ("wild", format!("http://0177.0.0.1:{port}/")),
        ("wild", format!("http://localhost:{port}/")),
        (
            "wild",
            "http://169.254.169.254/latest/meta-data/".to_string(),
        ),
    ];
    for (plugin, url) in &refused {
        let result = get(&mut client, plugin, url.clone());
        assert_eq!(result["isError"], json!(true), "{plugin} {url}: {result}");
    }
    assert_eq!(
        server.hits.load(Ordering::SeqCst),
        0,
        "a refused request reached the server"
    );
    // Listed, in any spelling of the address.
    for url in [
        format!("http://127.0.0.1:{port}/a"),
        format!("http://2130706433:{port}/b"),
        format!("http://0x7f.0.0.1:{port}/c"),
    ] {
        let result = get(&mut client, "listed", url.clone());
        assert_eq!(result["structuredContent"]["body"], PAGE, "{url}: {result}");
    }
    // A name that leads to loopback, with private addresses allowed for the plugin.
    let result = get(&mut client, "open", format!("http://localhost:{port}/d"));
    assert_eq!(result["structuredContent"]["body"], PAGE, "{result}");
    assert_eq!(server.hits.load(Ordering::SeqCst), 4);

    let stderr = client.stderr();
    assert!(
        !stderr.contains("SECRET"),
        "a refused URL's query was logged:\n{stderr}"
    );
    assert!(stderr.contains("http://127.0.0.1:"), "{stderr}");
    let message = call_failed(
        &mut client,
        "wild__http",
        json!({"url": format!("http://localhost:{port}/")}),
    );
    assert!(
        message.contains("loopback, link-local or private"),
        "{message}"
    );
}

/// A component over the size cap, or one whose compiling outruns `compile_timeout`, is
/// refused, saying which; the second is not compiled again until its file changes, however
/// often the folder is looked at.
#[test]
fn a_component_too_big_or_too_slow_to_compile_is_refused() {
    let (mut client, names) = setup()
        .plugins("compile_timeout = \"1ms\"")
        .file("echo.wasm", fixture("echo"))
        .start_listed();
    assert!(!names.iter().any(|n| n.starts_with("echo__")), "{names:?}");
    let huge = plugin_dir(&client).join("huge.wasm");
    let file = std::fs::File::create(&huge).unwrap();
    file.set_len(300 << 20).unwrap(); // sparse: no disk, no memory
    drop(file);
    let status = crate::harness::eventually(LOAD, "huge to be refused", || {
        let status = backend(&mut client, "huge");
        (status["status"] == "failed").then_some(status)
    });
    let reason = status["last_error"].as_str().unwrap_or_default();
    assert!(
        reason.contains("is 300 MiB; a plugin may be at most 256 MiB"),
        "{status}"
    );
    let echo = backend(&mut client, "echo");
    let reason = echo["last_error"].as_str().unwrap_or_default();
    assert!(reason.contains("compile_timeout"), "{echo}");
    assert!(reason.contains("refused until the file changes"), "{echo}");
    // Another look at the folder (a new file) compiles nothing of echo's again.
    std::fs::write(plugin_dir(&client).join("other.wasm"), fixture("minimal")).unwrap();
    crate::harness::eventually(LOAD, "other to be looked at", || {
        let status = backend(&mut client, "other");
        (status["status"] == "failed").then_some(())
    });
    let compiles = client.stderr().matches("compiling plugin echo").count();
    assert_eq!(compiles, 1, "{}", client.stderr());
    // The gateway's own tools serve throughout.
    assert!(client.status()["backends"].is_object());
}

const LOAD: Duration = LOAD_TIMEOUT;

/// Plugins that open one file thousands of times, several calls at once, each get an error
/// at their share of the descriptors while the gateway goes on opening what it needs
/// (another plugin's granted file, a server's answer, a config reload).
#[test]
fn plugins_opening_files_without_end_leave_the_gateway_its_descriptors() {
    let setup = setup()
        .file("hostile.wasm", fixture("hostile"))
        .file("echo.wasm", fixture("echo"))
        .folder("data")
        .plugins(
            "[plugins.hostile]\nallow_dirs = [{ host = \"{dir}/data\", guest = \"/data\" }]\n\
             [plugins.echo]\nallow_dirs = [{ host = \"{dir}/data\", guest = \"/data\" }]",
        );
    let dir = TestDir::new("descriptors");
    let config = setup.write(&dir.path);
    std::fs::write(dir.join("data/f.txt"), "contents").unwrap();
    let mut client = setup.spawn(&config, dir);
    first_list(&mut client);
    // Calls that hold what they opened for a while, all at once.
    let ids: Vec<_> = (0..4)
        .map(|_| {
            client.send_request(
                "tools/call",
                json!({"name": "hostile__open_many",
                       "arguments": {"path": "/data/f.txt", "n": 1_000_000, "hold_ms": 3000}}),
            )
        })
        .collect();
    std::thread::sleep(Duration::from_millis(1500));
    // Meanwhile: another plugin opens its files, and the gateway answers.
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__read",
            json!({"path": "/data/f.txt"})
        )),
        "contents"
    );
    assert!(client.status()["backends"]["echo"].is_object());
    for id in &ids {
        let response = client.wait_response(id, crate::harness::TIMEOUT);
        let result = &response["result"];
        // Stopped at its share: an error result naming the limit, never the whole table.
        let said = text(result).to_string();
        assert_eq!(result["isError"], true, "{response}");
        assert!(said.contains("host resources at once"), "{said}");
    }
    assert_eq!(
        text(&call_ok(
            &mut client,
            "echo__read",
            json!({"path": "/data/f.txt"})
        )),
        "contents"
    );
}

/// One plugin's instances cannot take all the memory plugins may have together: a call that
/// allocates without end is stopped at `total_memory` (below its own limit here), saying so,
/// and what it held is free again for the next calls.
#[test]
fn the_plugins_together_stay_within_total_memory() {
    let (mut client, _) = setup()
        .plugins("total_memory = \"48MiB\"\nmemory = \"256MiB\"")
        .file("faulty.wasm", fixture("faulty"))
        .file("echo.wasm", fixture("echo"))
        .start_listed();
    for _ in 0..2 {
        let message = call_failed(&mut client, "faulty__hog", json!({}));
        assert!(
            message.contains("ran out of memory") && message.contains("total_memory"),
            "{message}"
        );
        assert_eq!(
            text(&call_ok(
                &mut client,
                "echo__echo",
                json!({"text": "still"})
            )),
            "still"
        );
    }
}
