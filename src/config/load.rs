//! Reading a configuration file: choosing TOML or JSON, turning parser errors into
//! diagnostics with positions, and handing the raw schema to validation.

use std::path::{Path, PathBuf};

use super::error::{ConfigError, Diagnostic, line_col};
use super::model::*;
use super::raw;
use super::validate::{self, EnvLookup, Format, Source};

/// The gateway's own environment, for `${VAR}` expansion.
pub fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Loads `gateway.toml` or a client's `mcpServers` JSON, expanding variables from the
/// process environment. The format follows the extension (`.toml`, `.json`); for any
/// other name, a file whose first non-blank character is `{` is JSON, otherwise TOML.
pub fn load(path: &Path) -> Result<Config, ConfigError> {
    load_with_env(path, &process_env)
}

/// `load` with the environment given, so tests and `check` can control it.
pub fn load_with_env(path: &Path, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
    load_given(path, env, &[])
}

/// `load_with_env` knowing which plugins' files the command line gives (`--plugin`).
pub(crate) fn load_given(
    path: &Path,
    env: EnvLookup<'_>,
    given_plugins: &[String],
) -> Result<Config, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|error| ConfigError::Read {
        path: path.to_path_buf(),
        error,
    })?;
    let absolute = std::path::absolute(path).unwrap_or_else(|_| path.to_path_buf());
    let absolute = absolute.canonicalize().unwrap_or(absolute);
    let base_dir = absolute
        .parent()
        .map_or_else(|| PathBuf::from("/"), Path::to_path_buf);
    let source = Source {
        file: path,
        text: &text,
        format: Format::detect(path, &text),
        base_dir: &base_dir,
        source: Some(absolute.clone()),
        given_plugins,
    };
    parse(&source, env)
}

/// Loads TOML text. `path` names the file in messages; relative paths in the config are
/// resolved against `base_dir` (made absolute against the working directory if needed).
pub fn from_toml_str(
    text: &str,
    path: &Path,
    base_dir: &Path,
    env: EnvLookup<'_>,
) -> Result<Config, ConfigError> {
    from_str(text, Format::Toml, path, base_dir, env)
}

/// Loads `mcpServers` JSON text; see `from_toml_str`.
pub fn from_json_str(
    text: &str,
    path: &Path,
    base_dir: &Path,
    env: EnvLookup<'_>,
) -> Result<Config, ConfigError> {
    from_str(text, Format::Json, path, base_dir, env)
}

fn from_str(
    text: &str,
    format: Format,
    path: &Path,
    base_dir: &Path,
    env: EnvLookup<'_>,
) -> Result<Config, ConfigError> {
    let base_dir = std::path::absolute(base_dir).unwrap_or_else(|_| base_dir.to_path_buf());
    let source = std::path::absolute(base_dir.join(path)).ok();
    let source = Source {
        file: path,
        text,
        format,
        base_dir: &base_dir,
        source,
        given_plugins: &[],
    };
    parse(&source, env)
}

fn parse(src: &Source<'_>, env: EnvLookup<'_>) -> Result<Config, ConfigError> {
    match src.format {
        Format::Toml => {
            let raw: raw::TomlFile = toml::from_str(src.text).map_err(|e| toml_error(src, &e))?;
            validate::from_toml(raw, src, env)
        }
        Format::Json => {
            let raw: raw::ClientFile =
                serde_json::from_str(src.text).map_err(|e| json_error(src, &e))?;
            validate::from_client(raw, src, env)
        }
    }
}

/// The configuration used when none is given: no servers, the bundled plugins, and
/// every default.
pub fn embedded_default() -> Config {
    embedded_default_with_env(&process_env)
}

pub(crate) fn embedded_default_with_env(env: EnvLookup<'_>) -> Config {
    Config {
        gateway: validate::default_gateway(),
        servers: Default::default(),
        plugins: PluginsConfig {
            dir: None,
            watch: false,
            cache_dir: validate::default_cache_dir(env),
            data_dir: validate::default_data_dir(env),
            store_size: super::model::DEFAULT_STORE_SIZE,
            bundled: true,
            limits: PluginLimits::default(),
            compile_timeout: super::model::DEFAULT_COMPILE_TIMEOUT,
            total_memory: validate::default_total_memory(),
            oci_insecure: Vec::new(),
            plugins: Default::default(),
        },
        http: HttpConfig::default(),
        profiles: Default::default(),
        middleware: Vec::new(),
        telemetry: validate::telemetry_from_env(env),
        limits: Default::default(),
        source: None,
        warnings: Vec::new(),
    }
}

fn toml_error(src: &Source<'_>, e: &toml::de::Error) -> ConfigError {
    let (line, column) = match e.span() {
        Some(span) => {
            let (line, column) = line_col(src.text, span.start);
            (Some(line), Some(column))
        }
        None => (None, None),
    };
    let message = e.message().trim_end().to_owned();
    let fix = syntax_fix(&message, "TOML");
    ConfigError::Syntax(Box::new(Diagnostic {
        file: src.file.to_path_buf(),
        line,
        column,
        key: line.and_then(|l| key_before(src.text, l, column, &message)),
        message,
        fix,
    }))
}

/// Whether the parser stopped at a `//` or `/*` comment (at or just after `column`, 1-based).
fn at_comment(text: &str, line: usize, column: usize) -> bool {
    let Some(line) = line.checked_sub(1).and_then(|l| text.lines().nth(l)) else {
        return false;
    };
    let start = column.saturating_sub(2).min(line.len());
    line.get(start..)
        .map(str::trim_start)
        .is_some_and(|rest| rest.starts_with("//") || rest.starts_with("/*"))
}

fn json_error(src: &Source<'_>, e: &serde_json::Error) -> ConfigError {
    let full = e.to_string();
    // serde_json appends the position to its message; we print it in front instead.
    let message = match full.rfind(" at line ") {
        Some(i) if e.line() > 0 => full[..i].to_owned(),
        _ => full,
    };
    let (line, column) = if e.line() > 0 {
        (Some(e.line()), Some(e.column()))
    } else {
        (None, None)
    };
    let fix = if e.is_syntax() && at_comment(src.text, e.line(), e.column()) {
        Some("JSON has no comments (some editors allow them): remove this one".to_owned())
    } else if e.is_syntax() || e.is_eof() {
        Some(
            "fix the JSON syntax here: a missing comma, quote or brace, or a trailing comma?"
                .to_owned(),
        )
    } else {
        syntax_fix(&message, "JSON")
    };
    ConfigError::Syntax(Box::new(Diagnostic {
        file: src.file.to_path_buf(),
        line,
        column,
        key: line
            .filter(|_| !e.is_syntax() && !e.is_eof())
            .and_then(|l| key_before(src.text, l, column, &message)),
        message,
        fix,
    }))
}

/// The key a value error is about, read off the text before its position (`key = value`
/// in TOML, `"key": value` in JSON): the parser's message has the position but not the
/// name. `None` when the message names it already.
fn key_before(text: &str, line: usize, column: Option<usize>, message: &str) -> Option<String> {
    let line = text.lines().nth(line.checked_sub(1)?)?;
    let end = column.map_or(line.len(), |c| c.saturating_sub(1).min(line.len()));
    let before = line.get(..end).unwrap_or(line);
    let key = match before.trim_end().rsplit_once(':') {
        // JSON: the last `"key":` before the value.
        Some((head, _)) if head.trim_end().ends_with('"') => {
            let head = head.trim_end().strip_suffix('"')?;
            &head[head.rfind('"')? + 1..]
        }
        _ => line
            .trim_start()
            .split_once('=')?
            .0
            .trim_end()
            .trim_matches('"'),
    };
    let plain = !key.is_empty()
        && key
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'));
    (plain && !message.contains(&format!("`{key}`"))).then(|| key.to_string())
}

/// A hint for the parser's own messages; ours already say what to write.
fn syntax_fix(message: &str, format: &str) -> Option<String> {
    let hint = if message.contains("unknown field") || message.contains("unknown key") {
        "remove the key or correct its spelling; docs/configuration.md lists every key"
    } else if message.contains("missing field") {
        "add the missing key"
    } else if message.contains("unknown variant") {
        "use one of the values listed"
    } else if message.contains("invalid type") {
        "change the value to the type expected"
    } else if message.contains("invalid value") {
        "change the value to one of those expected"
    } else if message.contains("; write")
        || message.contains("must be")
        || message.contains("needs a unit")
    {
        return None;
    } else if format == "TOML" {
        "fix the TOML syntax at this position"
    } else {
        "fix the value at this position"
    };
    Some(hint.to_owned())
}
