//! Configuration errors. Every one names the file, the line (and column) when it is
//! known, and what to change; `locate` finds the line of a key the validation stage
//! objects to, since the validated values no longer carry positions.

use std::fmt;
use std::path::PathBuf;

/// One problem in a configuration file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file as it was named to the loader.
    pub file: PathBuf,
    /// 1-based.
    pub line: Option<usize>,
    /// 1-based, in characters.
    pub column: Option<usize>,
    /// The key in the file's own terms, e.g. `servers.time.env.TOKEN`.
    pub key: Option<String>,
    pub message: String,
    /// What to change, shown in parentheses after the message.
    pub fix: Option<String>,
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.file.display())?;
        if let Some(line) = self.line {
            write!(f, ":{line}")?;
            if let Some(column) = self.column {
                write!(f, ":{column}")?;
            }
        }
        write!(f, ": ")?;
        if let Some(key) = &self.key {
            write!(f, "{key}: ")?;
        }
        write!(f, "{}", self.message)?;
        if let Some(fix) = &self.fix {
            write!(f, " ({fix})")?;
        }
        Ok(())
    }
}

/// Why a configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The file could not be read.
    #[error("{}: cannot read the configuration: {error} (check the path and its permissions)", path.display())]
    Read {
        path: PathBuf,
        error: std::io::Error,
    },
    /// Not valid TOML or JSON, or a value of the wrong shape; the parser stops at the first.
    #[error("{0}")]
    Syntax(Box<Diagnostic>),
    /// Well-formed, but with values that cannot work; all of them, in file order.
    #[error("{}", render_all(.0))]
    Invalid(Vec<Diagnostic>),
}

impl ConfigError {
    /// The individual problems (none for `Read`).
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            ConfigError::Read { .. } => &[],
            ConfigError::Syntax(d) => std::slice::from_ref(&**d),
            ConfigError::Invalid(ds) => ds,
        }
    }
}

fn render_all(diagnostics: &[Diagnostic]) -> String {
    match diagnostics {
        [one] => one.to_string(),
        many => {
            let mut out = format!("{} problems in the configuration:", many.len());
            for d in many {
                out.push_str("\n  ");
                out.push_str(&d.to_string());
            }
            out
        }
    }
}

/// 1-based line and column (in characters) of a byte offset.
pub(crate) fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    (line, before[line_start..].chars().count() + 1)
}

/// Best-effort byte offset of a key path (`["servers", "time", "env", "TOKEN"]`) in TOML
/// or JSON text: each segment is searched as a key after the previous one, so table
/// headers, dotted keys, inline tables and JSON objects all work. When `needle` is given
/// (a value such as an argument) and appears shortly after the key, its offset is
/// returned instead. Falls back to the deepest segment found.
pub(crate) fn locate(text: &str, path: &[&str], needle: Option<&str>) -> Option<usize> {
    let mut from = 0;
    let mut found = None;
    let mut complete = true;
    for segment in path {
        match find_key(text, from, segment) {
            Some(at) => {
                found = Some(at);
                from = at + segment.len();
            }
            None => {
                complete = false;
                break;
            }
        }
    }
    if let (true, Some(needle), Some(_)) = (complete, needle, found) {
        // Only within the next few lines: a value of this key, not a later one.
        let window_end = text[from..]
            .match_indices('\n')
            .nth(15)
            .map_or(text.len(), |(i, _)| from + i);
        if let Some(i) = text[from..window_end].find(needle) {
            return Some(from + i);
        }
    }
    found
}

fn find_key(text: &str, from: usize, key: &str) -> Option<usize> {
    if key.is_empty() {
        return None;
    }
    let mut start = from;
    while let Some(i) = text[start..].find(key) {
        let at = start + i;
        start = at + key.len();
        if in_comment(text, at) {
            continue;
        }
        let before = text[..at].chars().next_back();
        let quoted = matches!(before, Some('"' | '\''));
        let boundary_before = matches!(
            before,
            None | Some(' ' | '\t' | '\n' | '\r' | '[' | '.' | '{' | ',' | '"' | '\'')
        );
        if !boundary_before {
            continue;
        }
        let mut rest = text[at + key.len()..].chars().peekable();
        if quoted && !matches!(rest.next(), Some('"' | '\'')) {
            continue;
        }
        while rest.peek().is_some_and(|c| *c == ' ' || *c == '\t') {
            rest.next();
        }
        if matches!(rest.next(), Some('=' | ':' | '.' | ']')) {
            return Some(at);
        }
    }
    None
}

/// Whether a `#` comes before `at` on its line (TOML comments; JSON has none).
fn in_comment(text: &str, at: usize) -> bool {
    let line_start = text[..at].rfind('\n').map_or(0, |i| i + 1);
    text[line_start..at].contains('#')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn line_and_column_of_offsets() {
        let text = "a = 1\nbb = 2\n";
        assert_eq!(line_col(text, 0), (1, 1));
        assert_eq!(line_col(text, 6), (2, 1));
        assert_eq!(line_col(text, 11), (2, 6));
    }

    #[test]
    fn locates_keys_in_toml_and_json() {
        let toml = "# servers.time is below\n[servers.other]\ntime = 1\n[servers.time]\nenv = { A = \"x\", TOKEN = \"${T}\" }\n";
        let at = locate(toml, &["servers", "time", "env", "TOKEN"], None).unwrap();
        assert_eq!(line_col(toml, at).0, 5);
        let json =
            "{\n \"mcpServers\": {\n  \"time\": {\n   \"args\": [\"a\",\n    \"${X}\"]\n  }\n }\n}";
        let at = locate(json, &["mcpServers", "time", "args"], Some("${X}")).unwrap();
        assert_eq!(line_col(json, at), (5, 6));
        // A missing key falls back to the deepest one found.
        let at = locate(json, &["mcpServers", "time", "namespace"], None).unwrap();
        assert_eq!(line_col(json, at).0, 3);
    }
}
