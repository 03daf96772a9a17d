//! What the gateway tells about itself: `tracing` set-up for logs on stderr, the event
//! log behind the `get_events` tool, and OpenTelemetry traces.

pub mod budget;
pub mod events;
pub mod metrics;
pub mod traces;

use std::sync::{Mutex, OnceLock};

use tracing_subscriber::EnvFilter;

/// The log filter in effect, once logging is set up: what `gateway_status` reports.
static EFFECTIVE_LEVEL: Mutex<Option<String>> = Mutex::new(None);

/// Swaps the filter of the running subscriber; set when the level came from the config
/// file, so that an edit of `log_level` applies at once (`RUST_LOG` and `--log-level` win).
type Reload = Box<dyn Fn(EnvFilter) -> Result<(), String> + Send + Sync>;
static CONFIG_RELOAD: OnceLock<Reload> = OnceLock::new();

/// Logs go to stderr only (stdout carries the protocol), without colour unless stderr
/// is a terminal. `RUST_LOG` wins over the level given (`--log-level`, else the config's,
/// `from_config`).
pub fn init_logging(level: &str, from_config: bool) {
    use std::io::IsTerminal;
    let from_env = std::env::var("RUST_LOG").ok().filter(|v| !v.is_empty());
    let (filter, effective) = [from_env.as_deref(), Some(level), Some("info")]
        .into_iter()
        .flatten()
        .find_map(|wanted| Some((EnvFilter::try_new(quiet(wanted)).ok()?, wanted.to_string())))
        .unwrap_or_else(|| (EnvFilter::new("info"), "info".into()));
    let followed_config = from_config && from_env.is_none() && effective == level;
    *EFFECTIVE_LEVEL.lock().unwrap() = Some(effective);
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_target(false)
        .with_filter_reloading();
    let handle = builder.reload_handle();
    if builder.try_init().is_ok() && followed_config {
        let _ = CONFIG_RELOAD.set(Box::new(move |filter| {
            handle.reload(filter).map_err(|e| e.to_string())
        }));
    }
}

/// The config's `log_level` changed: applied now when the level in effect came from the
/// config; otherwise (`RUST_LOG`, `--log-level`) it is left as it is, with a note.
pub fn config_level_changed(level: &str) {
    let Some(reload) = CONFIG_RELOAD.get() else {
        tracing::info!(
            "log_level = \"{level}\" in the config is not applied: RUST_LOG or --log-level set the level"
        );
        return;
    };
    let applied = EnvFilter::try_new(quiet(level))
        .map_err(|e| e.to_string())
        .and_then(reload);
    match applied {
        Ok(()) => {
            *EFFECTIVE_LEVEL.lock().unwrap() = Some(level.to_string());
            tracing::info!("log level is now {level}");
        }
        Err(err) => tracing::warn!("log_level = \"{level}\" is not applied: {err}"),
    }
}

/// Why `level` is not a log filter the gateway takes: empty, not a `tracing` filter, or a
/// bare word that is not a level (`tracing` would read `verbose` as a module name and log
/// nothing). `Err` completes "invalid log level \"{level}\": ".
pub fn check_filter(level: &str) -> Result<(), String> {
    const LEVELS: [&str; 6] = ["off", "error", "warn", "info", "debug", "trace"];
    if level.trim().is_empty() {
        return Err("it is empty".into());
    }
    if let Err(e) = EnvFilter::builder().parse(level) {
        return Err(e.to_string());
    }
    if !level.contains(['=', ',']) && !LEVELS.iter().any(|l| l.eq_ignore_ascii_case(level.trim())) {
        return Err(format!("`{level}` is not a level ({})", LEVELS.join(", ")));
    }
    Ok(())
}

/// How to write a log filter, for the end of an error about one.
pub const FILTER_HELP: &str =
    "write error, warn, info, debug or trace, or a filter like \"info,wasmgate=debug\"";

/// The log filter set up by [`init_logging`] (or a config reload since); `None` before
/// (or in tests that skip it).
pub fn effective_level() -> Option<String> {
    EFFECTIVE_LEVEL.lock().unwrap().clone()
}

/// A bare level (`info`) also keeps the file watcher's own messages (notify's "unable to
/// remove watch descriptor" when a watched folder is deleted) to warnings; a filter with
/// directives is taken as written.
fn quiet(wanted: &str) -> String {
    if wanted.contains(['=', ',']) {
        wanted.to_string()
    } else {
        format!("{wanted},notify=warn")
    }
}

/// `text` as one line of the gateway's log, for text a plugin wrote: every control
/// character but tab escaped (`\r`, `\n`, `\u{8}`), so that it can neither start a line
/// that looks like the gateway's nor rewrite one on a terminal.
pub fn one_line(text: &str) -> std::borrow::Cow<'_, str> {
    if !text.chars().any(|c| c.is_control() && c != '\t') {
        return text.into();
    }
    let mut line = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() && c != '\t' {
            line.extend(c.escape_default());
        } else {
            line.push(c);
        }
    }
    line.into()
}

#[cfg(test)]
mod tests {
    #[test]
    fn plugin_text_stays_one_plain_line() {
        assert_eq!(super::one_line("plain\ttext ü"), "plain\ttext ü");
        assert_eq!(
            super::one_line("a\r\nINFO fake\u{8}\u{1b}[2J\u{7f}"),
            "a\\r\\nINFO fake\\u{8}\\u{1b}[2J\\u{7f}"
        );
    }
}
