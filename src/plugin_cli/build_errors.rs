//! The first errors of a failed plugin build, for the one line a client reads (`dev` tells
//! clients at level `error`; `plugin build` ends with them): the compiler's own output
//! still goes to stderr in full, as it comes.
//!
//! Rust: cargo's JSON messages, each error as `file:line:col: error[CODE]: message`;
//! cargo's own errors (a broken Cargo.toml) when the compiler said nothing. Python and
//! JavaScript: the tool's first lines that name an error or a source line.

use std::io::{BufRead, BufReader, Read, Write};

use serde_json::Value;

/// Errors kept for the summary.
const MAX_ERRORS: usize = 5;
/// Bytes of summary at most: a log message, not the whole output.
const MAX_BYTES: usize = 2048;

/// The errors seen in a build's output, in order, the first [`MAX_ERRORS`] kept.
#[derive(Debug, Default)]
pub struct FirstErrors {
    kept: Vec<String>,
    total: usize,
}

impl FirstErrors {
    fn push(&mut self, error: String) {
        self.total += 1;
        if self.kept.len() < MAX_ERRORS {
            self.kept.push(error);
        }
    }

    /// Adds `other`'s errors after these (another stream of the same tool).
    pub fn append(&mut self, other: FirstErrors) {
        let unkept = other.total - other.kept.len();
        self.extend(other.kept);
        self.total += unkept;
    }

    pub fn is_empty(&self) -> bool {
        self.total == 0
    }

    /// `what` (e.g. "the build failed"), then the first errors a line each, cut to
    /// [`MAX_BYTES`]; with none, `what` and where the messages are.
    pub fn summary(&self, what: &str) -> String {
        if self.kept.is_empty() {
            return format!("{what} (its messages are on the gateway's stderr)");
        }
        let more = match self.total - self.kept.len() {
            0 => String::new(),
            n => format!(", {n} more"),
        };
        let mut text = format!(
            "{what}; {} (all on the gateway's stderr){more}:",
            if self.total == 1 {
                "1 error".to_owned()
            } else {
                format!("{} errors", self.total)
            }
        );
        for error in &self.kept {
            text.push('\n');
            text.push_str(error);
        }
        cut(text)
    }
}

fn cut(mut text: String) -> String {
    if text.len() <= MAX_BYTES {
        return text;
    }
    let mut end = MAX_BYTES - '…'.len_utf8();
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push('…');
    text
}

/// A rustc diagnostic of cargo's JSON (`reason: compiler-message`) at level error, as
/// `file:line:col: error[CODE]: message`; `None` for other lines and levels, and for
/// rustc's closing "aborting due to" line, which names no place.
fn rustc_error(message: &Value) -> Option<String> {
    if message["reason"] != "compiler-message" {
        return None;
    }
    let diagnostic = &message["message"];
    if diagnostic["level"] != "error" {
        return None;
    }
    let text = diagnostic["message"].as_str()?;
    let code = diagnostic["code"]["code"]
        .as_str()
        .map_or_else(String::new, |c| format!("[{c}]"));
    let spans = diagnostic["spans"].as_array();
    let primary = spans
        .into_iter()
        .flatten()
        .find(|s| s["is_primary"] == true);
    match primary {
        Some(span) => Some(format!(
            "{}:{}:{}: error{code}: {text}",
            span["file_name"].as_str().unwrap_or("?"),
            span["line_start"],
            span["column_start"]
        )),
        None if text.starts_with("aborting due to") => None,
        None => Some(format!("error{code}: {text}")),
    }
}

/// Reads cargo's `--message-format=json*` stdout: each compiler message's rendered text
/// goes to `stderr`, the errors are kept; the other JSON lines are returned, for the
/// artifacts.
pub fn read_cargo_json(stdout: impl Read, stderr: &mut impl Write) -> (Vec<Value>, FirstErrors) {
    let mut messages = Vec::new();
    let mut errors = FirstErrors::default();
    for line in BufReader::new(stdout).lines() {
        let Ok(line) = line else { break };
        let Ok(message) = serde_json::from_str::<Value>(&line) else {
            // A build script's output: not JSON, but the user's.
            let _ = writeln!(stderr, "{line}");
            continue;
        };
        if message["reason"] == "compiler-message" {
            if let Some(rendered) = message["message"]["rendered"].as_str() {
                let _ = stderr.write_all(rendered.as_bytes());
            }
            if let Some(error) = rustc_error(&message) {
                errors.push(error);
            }
        } else {
            messages.push(message);
        }
    }
    (messages, errors)
}

/// Copies a tool's output to `stderr` as it comes, keeping its first error lines: those
/// that say `error` (any case) or name a source line, up to a backtrace, which is the
/// tool's, not the plugin's.
pub fn tee_errors(output: impl Read, stderr: &mut impl Write) -> FirstErrors {
    let mut errors = FirstErrors::default();
    let mut in_backtrace = false;
    for line in BufReader::new(output).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(stderr, "{line}");
        let plain = strip_ansi(&line);
        let trimmed = plain.trim();
        in_backtrace |= trimmed.starts_with("Stack backtrace:");
        if in_backtrace || trimmed.is_empty() || trimmed.starts_with("Traceback") {
            continue;
        }
        let lower = trimmed.to_ascii_lowercase();
        if lower.contains("error") || names_a_line(trimmed) {
            errors.push(trimmed.to_owned());
        }
    }
    errors
}

/// `File "app.py", line 3` (Python) or `app.js:3:7` (JavaScript).
fn names_a_line(line: &str) -> bool {
    let python = line.contains("File \"") && line.contains(", line ");
    let script = [".js:", ".py:", ".ts:"].iter().any(|ext| {
        line.split(ext)
            .nth(1)
            .is_some_and(|rest| rest.starts_with(|c: char| c.is_ascii_digit()))
    });
    python || script
}

/// `text` without terminal colour codes (`ESC [ ... m`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            // Up to the final byte of the sequence, a letter.
            for next in chars.by_ref() {
                if next.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The first error lines of cargo's own stderr (not the compiler's: those come as JSON),
/// teed as they come: `error: ...` and the lines under it up to a blank one, joined.
pub fn tee_cargo_stderr(output: impl Read, stderr: &mut impl Write) -> FirstErrors {
    let mut errors = FirstErrors::default();
    let mut current: Option<String> = None;
    for line in BufReader::new(output).lines() {
        let Ok(line) = line else { break };
        let _ = writeln!(stderr, "{line}");
        let plain = strip_ansi(&line);
        if plain.starts_with("error") {
            errors.extend(current.take());
            current = Some(plain.trim().to_owned());
        } else if plain.trim().is_empty() {
            errors.extend(current.take());
        } else if let Some(error) = &mut current {
            error.push(' ');
            error.push_str(plain.trim());
        }
    }
    errors.extend(current);
    errors
}

impl Extend<String> for FirstErrors {
    fn extend<I: IntoIterator<Item = String>>(&mut self, errors: I) {
        for error in errors {
            self.push(error);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rustc_errors_are_kept_with_their_place_and_the_rest_rendered() {
        let lines = [
            r#"{"reason":"compiler-message","message":{"level":"error","message":"cannot find value `nam` in this scope","code":{"code":"E0425"},"spans":[{"file_name":"src/lib.rs","line_start":12,"column_start":30,"is_primary":true}],"rendered":"error[E0425]: cannot find value `nam`\n"}}"#,
            r#"{"reason":"compiler-message","message":{"level":"warning","message":"unused","code":null,"spans":[],"rendered":"warning: unused\n"}}"#,
            r#"{"reason":"compiler-message","message":{"level":"error","message":"aborting due to 1 previous error","code":null,"spans":[],"rendered":"error: aborting\n"}}"#,
            r#"{"reason":"build-finished","success":false}"#,
            "a build script's line",
        ]
        .join("\n");
        let mut stderr = Vec::new();
        let (messages, errors) = read_cargo_json(lines.as_bytes(), &mut stderr);
        assert_eq!(messages.len(), 1);
        let shown = String::from_utf8(stderr).unwrap();
        assert!(shown.contains("error[E0425]: cannot find value `nam`\nwarning: unused\n"));
        assert!(shown.contains("a build script's line"), "{shown}");
        let summary = errors.summary("the build failed");
        assert_eq!(
            summary,
            "the build failed; 1 error (all on the gateway's stderr):\n\
             src/lib.rs:12:30: error[E0425]: cannot find value `nam` in this scope"
        );
    }

    #[test]
    fn a_summary_keeps_five_errors_and_two_kib() {
        let mut errors = FirstErrors::default();
        for i in 0..8 {
            errors.push(format!("src/lib.rs:{i}:1: error: {}", "x".repeat(600)));
        }
        let summary = errors.summary("the build failed");
        assert!(
            summary.starts_with("the build failed; 8 errors"),
            "{summary}"
        );
        assert!(summary.contains(", 3 more:"), "{summary}");
        assert!(summary.len() <= MAX_BYTES && summary.ends_with('…'));
        assert_eq!(
            FirstErrors::default().summary("the build failed"),
            "the build failed (its messages are on the gateway's stderr)"
        );
    }

    #[test]
    fn a_tools_error_lines_are_kept_up_to_its_backtrace() {
        let output = "\u{1b}[31mTraceback (most recent call last):\u{1b}[0m\n  \
             File \"/0/app.py\", line 3\n    def f(self)\n               ^\n\
             SyntaxError: expected ':'\n\nStack backtrace:\n   0: anyhow::Error::msg\n";
        let mut stderr = Vec::new();
        let errors = tee_errors(output.as_bytes(), &mut stderr);
        assert_eq!(stderr, output.as_bytes());
        assert_eq!(
            errors.kept,
            ["File \"/0/app.py\", line 3", "SyntaxError: expected ':'"]
        );
        let js = tee_errors("app.js:3:7 Unexpected token\n".as_bytes(), &mut Vec::new());
        assert_eq!(js.kept, ["app.js:3:7 Unexpected token"]);
    }

    #[test]
    fn cargos_own_errors_are_kept_with_their_lines() {
        let output = "    Updating index\nerror: failed to parse manifest at `/p/Cargo.toml`\n\n\
             Caused by:\n  invalid type\n";
        let errors = tee_cargo_stderr(output.as_bytes(), &mut Vec::new());
        assert_eq!(
            errors.kept,
            ["error: failed to parse manifest at `/p/Cargo.toml`"]
        );
    }
}
