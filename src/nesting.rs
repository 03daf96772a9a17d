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

/// Refuses a gateway that serves a config one of the gateways above it serves; records the
/// chain its own servers get. `config` is the file given (none: the embedded default).
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
    if chain.len() >= MAX_DEPTH {
        return Err(format!(
            "wasmgate: not starting: {} gateways already run one inside the other ({}): \
             their configs start wasmgate in a loop",
            chain.len(),
            chain.join(" -> ")
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
