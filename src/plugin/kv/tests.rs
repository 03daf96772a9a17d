//! The key-value store against a real folder: persistence, the limit, scopes, files
//! that are not the store's, concurrent writers, and the instance mode a call gets.

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use super::{KvError, KvStores, MAX_KEY, effective_instance, file, scope_for};
use crate::config::InstanceMode;

fn stores(dir: &std::path::Path) -> KvStores {
    KvStores::new(Some(dir.to_path_buf()), 1 << 20)
}

#[test]
fn values_survive_a_new_kv_stores() {
    let tmp = tempfile::tempdir().unwrap();
    let kv = stores(tmp.path()).open("notes", "local");
    kv.set("note:1", b"buy milk".to_vec()).unwrap();
    kv.set("note:2", vec![0xff, 0x00, 0xfe]).unwrap();
    kv.set("count", b"2".to_vec()).unwrap();
    kv.delete("count").unwrap();
    drop(kv);

    let again = stores(tmp.path()).open("notes", "local");
    assert_eq!(again.get("note:1").as_deref(), Some(&b"buy milk"[..]));
    assert_eq!(again.get("note:2"), Some(vec![0xff, 0x00, 0xfe]));
    assert_eq!(again.get("count"), None);
    assert_eq!(again.keys("note:"), ["note:1", "note:2"]);
    let file = tmp.path().join("notes").join("local.json");
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(
        text.contains("buy milk"),
        "text values stay readable: {text}"
    );
    let mode = std::fs::metadata(&file).unwrap().permissions().mode();
    assert_eq!(mode & 0o077, 0, "only the gateway's user reads a store");
}

#[test]
fn keys_are_sorted_and_filtered_by_prefix() {
    let tmp = tempfile::tempdir().unwrap();
    let kv = stores(tmp.path()).open("p", "local");
    for key in ["b", "a/2", "a/1", "ab", "a"] {
        kv.set(key, Vec::new()).unwrap();
    }
    assert_eq!(kv.keys("a"), ["a", "a/1", "a/2", "ab"]);
    assert_eq!(kv.keys("a/"), ["a/1", "a/2"]);
    assert_eq!(kv.keys(""), ["a", "a/1", "a/2", "ab", "b"]);
    assert!(kv.keys("c").is_empty());
}

#[test]
fn a_set_past_the_limit_is_full_and_changes_nothing() {
    let tmp = tempfile::tempdir().unwrap();
    let kv = KvStores::new(Some(tmp.path().to_path_buf()), 10).open("p", "local");
    kv.set("k", b"12345".to_vec()).unwrap(); // 6 bytes
    match kv.set("j", b"12345".to_vec()) {
        Err(KvError::Full { used: 6, limit: 10 }) => {}
        other => panic!("expected Full, got {other:?}"),
    }
    assert_eq!(kv.get("j"), None);
    // Replacing a value counts the new one instead of the old: 1 + 9 = 10 fits.
    kv.set("k", b"123456789".to_vec()).unwrap();
    let err = kv.set("k", b"1234567890".to_vec()).unwrap_err();
    assert!(err.to_string().contains("10 of 10 bytes"), "{err}");
    assert_eq!(kv.get("k").as_deref(), Some(&b"123456789"[..]));
    kv.delete("k").unwrap();
    kv.set("j", b"123456789".to_vec()).unwrap();
}

#[test]
fn keys_are_one_to_512_bytes() {
    let tmp = tempfile::tempdir().unwrap();
    let kv = stores(tmp.path()).open("p", "local");
    assert!(matches!(kv.set("", vec![1]), Err(KvError::InvalidKey(_))));
    assert!(matches!(kv.delete(""), Err(KvError::InvalidKey(_))));
    let long = "k".repeat(MAX_KEY + 1);
    let err = kv.set(&long, vec![1]).unwrap_err();
    assert!(err.to_string().contains("513"), "{err}");
    kv.set(&"k".repeat(MAX_KEY), vec![1]).unwrap();
}

#[test]
fn scopes_and_plugins_never_cross() {
    let tmp = tempfile::tempdir().unwrap();
    let all = stores(tmp.path());
    let alice = scope_for(false, Some("alice-token-0123456789"));
    let bob = scope_for(false, Some("bob-token-0123456789"));
    all.open("notes", &alice)
        .set("n", b"alice".to_vec())
        .unwrap();
    all.open("notes", &bob).set("n", b"bob".to_vec()).unwrap();
    all.open("other", &alice)
        .set("n", b"other".to_vec())
        .unwrap();
    assert_eq!(
        all.open("notes", &alice).get("n").as_deref(),
        Some(&b"alice"[..])
    );
    assert_eq!(
        all.open("notes", &bob).get("n").as_deref(),
        Some(&b"bob"[..])
    );
    assert_eq!(all.open("notes", "local").get("n"), None);
    assert_eq!(all.open("notes", "shared").get("n"), None);
    // A plugin name that is a path stays inside data_dir, in a folder of its own.
    all.open("../notes", &alice)
        .set("n", b"x".to_vec())
        .unwrap();
    assert!(!tmp.path().parent().unwrap().join("notes").exists());
    assert_eq!(
        all.open("notes", &alice).get("n").as_deref(),
        Some(&b"alice"[..])
    );
}

#[test]
fn a_scope_is_a_hash_never_the_token() {
    let token = "s3cret-token-that-is-long-enough";
    let scope = scope_for(false, Some(token));
    assert_eq!(scope.len(), 32);
    assert!(scope.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(!scope.contains("s3cret"));
    assert_eq!(scope, scope_for(false, Some(token)));
    assert_ne!(scope, scope_for(false, Some("another-token-that-is-long")));
    assert_eq!(scope_for(false, None), "local");
    assert_eq!(scope_for(true, Some(token)), "shared");
    assert_eq!(scope_for(true, None), "shared");
}

#[test]
fn a_corrupt_file_is_unavailable_with_its_path_and_kept() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("notes");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("local.json");
    std::fs::write(&file, "{ not json").unwrap();
    let kv = stores(tmp.path()).open("notes", "local");
    assert_eq!(kv.get("a"), None);
    assert!(kv.keys("").is_empty());
    match kv.set("a", b"1".to_vec()) {
        Err(KvError::Unavailable(why)) => {
            assert!(why.contains(&file.display().to_string()), "{why}")
        }
        other => panic!("expected Unavailable, got {other:?}"),
    }
    assert!(matches!(kv.delete("a"), Err(KvError::Unavailable(_))));
    // The operator's file is not overwritten: it may be fixed by hand.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "{ not json");
    // Once it is, the store reads it again.
    std::fs::write(
        &file,
        r#"{"wasmgate_store":1,"entries":{"a":{"text":"ok"}}}"#,
    )
    .unwrap();
    assert_eq!(kv.get("a").as_deref(), Some(&b"ok"[..]));
}

#[test]
fn a_failed_write_leaves_memory_and_disk_as_before() {
    let tmp = tempfile::tempdir().unwrap();
    let kv = stores(tmp.path()).open("notes", "local");
    kv.set("a", b"1".to_vec()).unwrap();
    let dir = tmp.path().join("notes");
    let before = std::fs::read(dir.join("local.json")).unwrap();
    std::fs::write(dir.join(file::FAIL_WRITES), "").unwrap();
    let err = kv.set("a", b"2".to_vec()).unwrap_err();
    assert!(matches!(err, KvError::Unavailable(_)), "{err:?}");
    assert!(matches!(
        kv.set("b", b"2".to_vec()),
        Err(KvError::Unavailable(_))
    ));
    assert!(matches!(kv.delete("a"), Err(KvError::Unavailable(_))));
    assert_eq!(kv.get("a").as_deref(), Some(&b"1"[..]));
    assert_eq!(kv.get("b"), None);
    assert_eq!(kv.keys(""), ["a"]);
    assert_eq!(std::fs::read(dir.join("local.json")).unwrap(), before);
    std::fs::remove_file(dir.join(file::FAIL_WRITES)).unwrap();
    kv.set("b", b"2".to_vec()).unwrap();
    assert_eq!(
        stores(tmp.path()).open("notes", "local").keys(""),
        ["a", "b"]
    );
}

#[test]
fn no_data_folder_is_unavailable_not_a_panic() {
    let kv = KvStores {
        dir: None,
        limit: 1 << 20,
        open: Default::default(),
    }
    .open("notes", "local");
    assert_eq!(kv.get("a"), None);
    assert!(kv.keys("").is_empty());
    let err = kv.set("a", vec![1]).unwrap_err();
    assert!(err.to_string().contains("data_dir"), "{err}");
}

#[test]
fn concurrent_writers_lose_no_key_and_never_tear_the_file() {
    let tmp = tempfile::tempdir().unwrap();
    // Two hosts on one folder stand for two replicas sharing data_dir; each runs
    // several writers, as several instances of one plugin would.
    let hosts = [Arc::new(stores(tmp.path())), Arc::new(stores(tmp.path()))];
    let threads: Vec<_> = (0..8)
        .map(|t| {
            let kv = hosts[t % 2].open("notes", "shared");
            std::thread::spawn(move || {
                for i in 0..10 {
                    kv.set(&format!("t{t}/{i}"), vec![b'x'; 100]).unwrap();
                    kv.set("last", format!("{t}").into_bytes()).unwrap();
                }
            })
        })
        .collect();
    for thread in threads {
        thread.join().unwrap();
    }
    for host in &hosts {
        let kv = host.open("notes", "shared");
        assert_eq!(kv.keys("t").len(), 8 * 10);
        assert!(kv.get("last").is_some());
    }
    let fresh = stores(tmp.path()).open("notes", "shared");
    assert_eq!(fresh.keys("t").len(), 8 * 10);
    let leftovers: Vec<_> = std::fs::read_dir(tmp.path().join("notes"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.ends_with(".tmp"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

#[test]
fn a_declared_session_is_honoured() {
    for configured in [None, Some(InstanceMode::Call), Some(InstanceMode::Shared)] {
        let got = effective_instance(Some(InstanceMode::Session), configured);
        assert_eq!(got, (InstanceMode::Session, None), "{configured:?}");
    }
}

#[test]
fn a_declared_shared_needs_the_operator() {
    let got = effective_instance(Some(InstanceMode::Shared), Some(InstanceMode::Shared));
    assert_eq!(got, (InstanceMode::Shared, None));
    for configured in [None, Some(InstanceMode::Call), Some(InstanceMode::Session)] {
        let (mode, warning) = effective_instance(Some(InstanceMode::Shared), configured);
        assert_eq!(mode, InstanceMode::Session, "{configured:?}");
        let warning = warning.expect("a warning");
        assert!(warning.contains("instance = \"shared\""), "{warning}");
    }
}

#[test]
fn no_declaration_or_call_is_the_operators_choice() {
    for declared in [None, Some(InstanceMode::Call)] {
        assert_eq!(
            effective_instance(declared, None),
            (InstanceMode::Call, None)
        );
        for configured in [
            InstanceMode::Call,
            InstanceMode::Session,
            InstanceMode::Shared,
        ] {
            let got = effective_instance(declared, Some(configured));
            assert_eq!(got, (configured, None));
        }
    }
}
