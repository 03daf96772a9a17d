//! `${VAR}` and `~/` in config values, and paths made absolute against the config
//! file's folder.

use std::path::{Component, PathBuf};

use super::plugins::valid_env_name;
use super::{Ctx, EnvLookup};

impl Ctx<'_> {
    /// Expands `${VAR}`, `${VAR:-default}`, `${env:VAR}`; `$${` is a literal `${`. With
    /// `strict` false (a disabled server) an unset variable is only a warning.
    pub(super) fn expand(&mut self, text: &str, key: &[&str], strict: bool) -> String {
        match expand_vars(text, self.env) {
            Ok(expanded) => expanded,
            Err(ExpandError::Unset(name)) if !strict => {
                self.warnings.push(format!(
                    "{}: environment variable {name} is not set (the entry is disabled, so this is not an error yet)",
                    key.join(".")
                ));
                text.to_owned()
            }
            Err(ExpandError::Unset(name)) => {
                self.error(
                    key,
                    Some(text),
                    format!("environment variable {name} is not set"),
                    format!("set it, or write ${{{name}:-default}}"),
                );
                text.to_owned()
            }
            Err(ExpandError::Malformed(reference)) => {
                self.error(
                    key,
                    Some(text),
                    format!("`{reference}` is not a variable reference this gateway understands"),
                    "write ${NAME} or ${NAME:-default}, with NAME made of letters, digits and _; write $${ for a literal ${",
                );
                text.to_owned()
            }
        }
    }

    /// Expands variables and `~`, and makes the path absolute against the config's directory.
    pub(super) fn path(&mut self, text: &str, key: &[&str], strict: bool) -> Option<PathBuf> {
        if text.trim().is_empty() {
            self.error(
                key,
                None,
                "the path is empty",
                "write a path, or remove the key",
            );
            return None;
        }
        let expanded = self.expand(text, key, strict);
        let path = self.tilde(&expanded, key)?;
        let absolute = if path.is_absolute() {
            path
        } else {
            self.src.base_dir.join(path)
        };
        Some(
            absolute
                .components()
                .filter(|c| *c != Component::CurDir)
                .collect(),
        )
    }

    pub(super) fn tilde(&mut self, text: &str, key: &[&str]) -> Option<PathBuf> {
        let rest = match text.strip_prefix('~') {
            Some(rest) if rest.is_empty() || rest.starts_with('/') || rest.starts_with('\\') => {
                rest
            }
            _ => return Some(PathBuf::from(text)),
        };
        match (self.env)("HOME").filter(|h| !h.is_empty()) {
            Some(home) => Some(PathBuf::from(format!("{home}{rest}"))),
            None => {
                self.error(
                    key,
                    Some(text),
                    "cannot expand `~`: HOME is not set",
                    "write an absolute path",
                );
                None
            }
        }
    }
}

#[derive(Debug, PartialEq, Eq)]
pub(super) enum ExpandError {
    Unset(String),
    Malformed(String),
}

pub(super) fn expand_vars(text: &str, env: EnvLookup<'_>) -> Result<String, ExpandError> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(i) = rest.find('$') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        if let Some(after) = rest.strip_prefix("$${") {
            out.push_str("${");
            rest = after;
            continue;
        }
        let Some(after) = rest.strip_prefix("${") else {
            out.push('$');
            rest = &rest[1..];
            continue;
        };
        let Some(end) = after.find('}') else {
            return Err(ExpandError::Malformed(rest.to_owned()));
        };
        let inner = &after[..end];
        let reference = &rest[..end + 3];
        let body = inner.strip_prefix("env:").unwrap_or(inner);
        let (name, default) = match body.split_once(":-") {
            Some((name, default)) => (name, Some(default)),
            None => (body, None),
        };
        if !valid_env_name(name) {
            return Err(ExpandError::Malformed(reference.to_owned()));
        }
        match (
            env(name).filter(|v| !v.is_empty() || default.is_none()),
            default,
        ) {
            (Some(value), _) => out.push_str(&value),
            (None, Some(default)) => out.push_str(default),
            (None, None) => return Err(ExpandError::Unset(name.to_owned())),
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(name: &str) -> Option<String> {
        match name {
            "TOKEN" => Some("secret".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }

    #[test]
    fn expands_variables_defaults_and_escapes() {
        assert_eq!(expand_vars("a ${TOKEN} b", &env).unwrap(), "a secret b");
        assert_eq!(expand_vars("${env:TOKEN}", &env).unwrap(), "secret");
        assert_eq!(expand_vars("${NOPE:-fallback}", &env).unwrap(), "fallback");
        assert_eq!(expand_vars("${EMPTY:-fallback}", &env).unwrap(), "fallback");
        assert_eq!(expand_vars("${EMPTY}", &env).unwrap(), "");
        assert_eq!(
            expand_vars("$${TOKEN} $HOME 5$", &env).unwrap(),
            "${TOKEN} $HOME 5$"
        );
        assert_eq!(
            expand_vars("${NOPE}", &env),
            Err(ExpandError::Unset("NOPE".into()))
        );
        assert_eq!(
            expand_vars("${input:key}", &env),
            Err(ExpandError::Malformed("${input:key}".into()))
        );
        assert_eq!(
            expand_vars("x ${OPEN", &env),
            Err(ExpandError::Malformed("${OPEN".into()))
        );
    }
}
