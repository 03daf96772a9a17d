//! A gateway that starts itself: a server entry that runs wasmgate with the same config
//! (directly, through `WASMGATE_CONFIG`, or through a wrapper such as `sh -c` or `npx`)
//! would start gateways without end. Each gateway tells the servers it starts which
//! configs the gateways above them serve; one started with a config already in that chain,
//! or nested [`MAX_DEPTH`] deep, refuses to start. Its parent then sees a server that
//! failed to start, and gives up after `max_restarts`.

use std::path::Path;
use std::sync::OnceLock;

/// The configs of the gateways above a process, one per line, outermost first.
pub const VAR: &str = "WASMGATE_PARENT_CONFIGS";

/// Gateways started by gateways, this deep, are a loop through different configs.
pub const MAX_DEPTH: usize = 8;

static CHAIN: OnceLock<String> = OnceLock::new();

/// Refuses a gateway that serves a config one of the gateways above it serves, or that has
/// [`MAX_DEPTH`] gateways above it; records the chain its own servers get. `config` is the
/// file given (none: the embedded default). A wrapper that clears the environment (`env
/// -i`) hides the chain: the gateways above are then counted among its ancestor processes.
pub fn enter(config: Option<&Path>) -> Result<(), String> {
    let parents = std::env::var(VAR).unwrap_or_default();
    let mut chain: Vec<&str> = parents.lines().filter(|l| !l.is_empty()).collect();
    let this = config.map(|path| {
        path.canonicalize()
            .unwrap_or_else(|_| path.to_path_buf())
            .to_string_lossy()
            .into_owned()
    });
    if let Some(this) = &this
        && chain.contains(&this.as_str())
    {
        return Err(format!(
            "wasmgate: not starting: a wasmgate that serves this same config ({this}) started \
             this one, so one of its servers runs wasmgate with it again, which would start \
             gateways without end. Remove that server entry from {this}."
        ));
    }
    let above = gateway_ancestors();
    if chain.len().max(above) >= MAX_DEPTH {
        let configs = if chain.is_empty() {
            "their environment was cleared on the way".to_string()
        } else {
            chain.join(" -> ")
        };
        return Err(format!(
            "wasmgate: not starting: {} gateways already run one inside the other ({configs}): \
             their configs start wasmgate in a loop",
            chain.len().max(above),
        ));
    }
    chain.push(this.as_deref().unwrap_or("(embedded default)"));
    let _ = CHAIN.set(chain.join("\n"));
    Ok(())
}

/// What the servers this gateway starts get in [`VAR`], once [`enter`] has run.
pub fn chain() -> Option<&'static str> {
    CHAIN.get().map(String::as_str)
}

/// The processes above this one that run the same executable (Linux `/proc`; 0 where it
/// cannot be read). Wrappers between them (`sh`, `env`) are passed through.
fn gateway_ancestors() -> usize {
    // A rebuilt binary shows as "PATH (deleted)" in processes started before the rebuild.
    let exe = |pid: &str| {
        std::fs::read_link(format!("/proc/{pid}/exe"))
            .ok()
            .map(|p| {
                let p = p.to_string_lossy().into_owned();
                p.strip_suffix(" (deleted)").map(str::to_owned).unwrap_or(p)
            })
    };
    let Some(me) = exe("self") else {
        return 0;
    };
    let mut count = 0;
    let mut pid = parent_of("self");
    // Bounded: a process tree is not deeper than this in practice.
    for _ in 0..256 {
        match pid {
            Some(p) if p > 1 => {
                if exe(&p.to_string()).as_deref() == Some(me.as_str()) {
                    count += 1;
                }
                pid = parent_of(&p.to_string());
            }
            _ => break,
        }
    }
    count
}

/// The parent of a process (`"self"` or a pid), from `/proc/PID/stat`: "pid (comm) state
/// ppid ...", where comm may hold spaces and parentheses, so the fields are counted after
/// its last `)`.
pub fn parent_of(pid: &str) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    after.split_whitespace().nth(1)?.parse().ok()
}

#[cfg(test)]
mod tests {
    /// The test runner has no wasmgate above it, and its parent is found.
    #[test]
    fn ancestors_are_read_from_proc() {
        assert!(super::parent_of("self").is_some_and(|p| p > 0));
        assert_eq!(super::gateway_ancestors(), 0);
    }
}
