//! What the gateway tells about itself: `tracing` set-up for logs on stderr, and the
//! event log behind the `get_events` tool.

pub mod events;

use tracing_subscriber::EnvFilter;

/// Logs go to stderr only (stdout carries the protocol), without colour unless stderr
/// is a terminal. `RUST_LOG` wins over the configured level when set.
pub fn init_logging(level: &str) {
    use std::io::IsTerminal;
    let filter = EnvFilter::try_from_default_env()
        .or_else(|_| EnvFilter::try_new(level))
        .unwrap_or_else(|_| EnvFilter::new("info"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .try_init();
}
