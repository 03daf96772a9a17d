//! WASM plugins end to end: the real binary with plugin components in a watched folder.
//! Listing and calling, every content kind, progress, limits, the sandbox's grants,
//! components that must be refused, hot reload with a client connected (also under a
//! steady stream of calls), the compilation cache, the bundled plugins of the embedded
//! default, and a plugin written in Python.
//!
//! Components: the fixtures (`echo`, `faulty`, `minimal`, `wrongworld`) and the shipped plugins
//! (`hash`, `json`, ...) are built by `build.rs`; the Python one by
//! `plugins/python/text/build.sh` (scripts/test.sh runs it). A file per topic below; the
//! config builder and the helpers other test files share are in `harness`.

use std::path::Path;

use crate::harness::{Client, LIST_CHANGED, LOAD_TIMEOUT, wait_tools};

mod calls;
mod folders;
mod limits;
mod loading;
mod reload;
mod sandbox;

pub(crate) use sandbox::{HttpServer, PAGE};

/// Bytes that are no WebAssembly at all (a fixed pseudo-random sequence).
fn noise(len: usize) -> Vec<u8> {
    let mut state: u64 = 0x2545_f491_4f6c_dd1d;
    (0..len)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (state >> 33) as u8
        })
        .collect()
}

/// Replaces `path` as build tools do: the new bytes go to a temporary name in the same
/// folder (not `*.wasm`, so not a plugin), which is then renamed over the old file.
fn replace_atomically(path: &Path, bytes: &[u8]) {
    let partial = path.with_extension("wasm.partial");
    std::fs::write(&partial, bytes).expect("write the new version");
    std::fs::rename(&partial, path).expect("rename it over the old one");
}

/// Waits for `notifications/tools/list_changed` (at least one), then until the tool list
/// satisfies `want`, waiting for further notifications while it does not.
fn wait_list_change(
    client: &mut Client,
    what: &str,
    want: impl Fn(&[String]) -> bool,
) -> Vec<String> {
    client.next_notification(LIST_CHANGED, LOAD_TIMEOUT);
    wait_tools(client, what, want)
}
