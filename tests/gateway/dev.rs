//! `wasmgate dev` against a local attacker and big trees: the folder of its links is its
//! own (not a name another user can make first), and its watcher stays in the project,
//! out of build output. The project is a JavaScript one whose `componentize-js` (in its
//! `node_modules/.bin`) is a script that copies a test plugin: no toolchain, builds in
//! milliseconds.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::json;

use crate::harness::{Client, TIMEOUT, TestDir, fixture_path};

/// A project in `dir/proj` whose build copies the test plugin `minimal` (tool `echo`) to
/// `fake_js.wasm` and appends a line to `dir/builds.txt`. The build also makes, as
/// another local user would have done before, the folder `dev` used to put its links in:
/// `$TMPDIR/wasmgate-dev-<pid of dev>`, open to all (and given to `nobody` when the test
/// runs as root).
fn fake_project(dir: &TestDir) -> PathBuf {
    let proj = dir.join("proj");
    std::fs::create_dir_all(proj.join("wit")).unwrap();
    std::fs::create_dir_all(proj.join("node_modules/.bin")).unwrap();
    std::fs::write(proj.join("package.json"), r#"{"name": "fake-js"}"#).unwrap();
    std::fs::write(proj.join("app.js"), "// the tool\n").unwrap();
    let plugin = fixture_path("minimal");
    let script = format!(
        "#!/bin/sh\n\
         # componentize-js --wit wit --world-name plugin --out OUT ENTRY\n\
         decoy=\"$TMPDIR/wasmgate-dev-$PPID\"\n\
         mkdir -m 0777 \"$decoy\" 2>/dev/null && chown 65534 \"$decoy\" 2>/dev/null\n\
         echo built >> {builds:?}\n\
         cp {plugin:?} \"$6\"\n",
        builds = dir.join("builds.txt"),
    );
    let bin = proj.join("node_modules/.bin/componentize-js");
    std::fs::write(&bin, script).unwrap();
    std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
    proj
}

/// `dev --config gw.toml` serving `proj` as plugin `other` (its build writes
/// `fake_js.wasm`, so `dev` serves it through a link named `other.wasm`), with its
/// temp folder in the test's folder.
fn start_dev(dir: TestDir) -> Client {
    let tmp = dir.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    dir.write("gw.toml", "[plugins.other]\nsource = \"proj\"\n");
    let env = [("TMPDIR", tmp.to_str().unwrap())];
    let mut client = Client::spawn_with_env(&["dev", "--config", "gw.toml"], dir, &env);
    client.initialize();
    let echoed = client.call("other__echo", json!({"text": "served"}));
    assert_eq!(crate::harness::text(&echoed), "served", "{echoed}");
    client
}

fn builds(dir: &Path) -> usize {
    std::fs::read_to_string(dir.join("builds.txt"))
        .unwrap_or_default()
        .lines()
        .count()
}

/// The folder another user made at the name `dev` would have used stays untouched;
/// `dev`'s links are in a folder of its own, mode 0700, owned by the gateway's user,
/// removed when it exits.
#[test]
fn dev_keeps_its_links_in_a_private_folder() {
    let dir = TestDir::new("dev-private");
    fake_project(&dir);
    let tmp = dir.join("tmp");
    let mut client = start_dev(dir);
    let decoy = tmp.join(format!("wasmgate-dev-{}", client.pid()));
    assert!(decoy.is_dir(), "the build made the decoy folder");
    let in_decoy: Vec<_> = std::fs::read_dir(&decoy).unwrap().collect();
    assert!(in_decoy.is_empty(), "dev used the decoy: {in_decoy:?}");
    let own: Vec<PathBuf> = std::fs::read_dir(&tmp)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p != &decoy)
        .collect();
    assert_eq!(own.len(), 1, "{own:?}");
    let meta = std::fs::symlink_metadata(&own[0]).unwrap();
    assert!(meta.is_dir(), "{}", own[0].display());
    assert_eq!(meta.mode() & 0o777, 0o700, "{}", own[0].display());
    // SAFETY: geteuid has no preconditions and cannot fail.
    assert_eq!(meta.uid(), unsafe { libc::geteuid() });
    let link = std::fs::read_link(own[0].join("other.wasm")).unwrap();
    assert!(link.ends_with("proj/fake_js.wasm"), "{}", link.display());

    client.close_stdin();
    assert!(client.wait_exit(TIMEOUT).is_some(), "dev did not exit");
    assert!(!own[0].exists(), "{} is left behind", own[0].display());
}

/// inotify watches the process holds, from /proc/PID/fdinfo (Linux).
fn inotify_watches(pid: u32) -> usize {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap();
    fds.filter_map(|fd| {
        let fd = fd.ok()?;
        let target = std::fs::read_link(fd.path()).ok()?;
        (target.to_str()? == "anon_inode:inotify").then(|| {
            let info =
                std::fs::read_to_string(format!("/proc/{pid}/fdinfo/{}", fd.file_name().to_str()?))
                    .ok()?;
            Some(
                info.lines()
                    .filter(|l| l.starts_with("inotify wd:"))
                    .count(),
            )
        })?
    })
    .sum()
}

/// Makes `count` folders under `root`.
fn folders(root: &Path, count: usize) {
    for i in 0..count {
        std::fs::create_dir_all(root.join(format!("d{i}"))).unwrap();
    }
}

/// A link in the project to a big folder outside it, and big `target/`, `node_modules/`
/// and `.git/` folders: none is watched (a few watches, not hundreds), and a change
/// under the link's target rebuilds nothing, while an edit of the source does.
#[test]
fn dev_watches_neither_links_out_of_the_project_nor_build_output() {
    let dir = TestDir::new("dev-watch");
    let proj = fake_project(&dir);
    let outside = dir.join("outside");
    folders(&outside, 300);
    std::os::unix::fs::symlink(&outside, proj.join("big")).unwrap();
    for skipped in ["target", "node_modules", ".git"] {
        folders(&proj.join(skipped), 300);
    }
    folders(&proj.join("src"), 3);
    let root = dir.path.clone();
    let client = start_dev(dir);
    let watches = inotify_watches(client.pid());
    eprintln!("{watches} inotify watches");
    assert!(
        watches < 30,
        "{watches} inotify watches: dev watches more than the project's own folders"
    );

    let built = builds(&root);
    std::fs::write(outside.join("d7/changed.txt"), "x").unwrap();
    std::fs::write(proj.join("target/d3/changed.rs"), "x").unwrap();
    // No readiness to wait for: the time a rebuild would take to start (200 ms of
    // quiet, then a build of a few milliseconds), several times over.
    std::thread::sleep(Duration::from_millis(1500));
    assert_eq!(builds(&root), built, "a change outside the sources rebuilt");
    // A new folder is a change, and is watched from then on: an edit in it rebuilds.
    std::fs::create_dir(proj.join("src/new")).unwrap();
    let rebuilt = |after: usize| {
        crate::harness::eventually(TIMEOUT, "a rebuild", || {
            (builds(&root) > after).then_some(())
        })
    };
    rebuilt(built);
    std::fs::write(proj.join("src/new/tool.js"), "// edited\n").unwrap();
    rebuilt(built + 1);
}
