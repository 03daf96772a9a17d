//! The rules: parsed from the config's JSON, and checked against a request's arguments.
//! Pure, so the host's `cargo test` checks it.

use globset::{Glob, GlobMatcher};
use regex::Regex;
use serde_json::{Map, Value};

/// One rule as the config writes it.
#[derive(Debug, serde::Deserialize)]
#[serde(deny_unknown_fields)]
struct RuleText {
    tool: Option<String>,
    arg: String,
    under: Option<String>,
    matching: Option<String>,
    not_matching: Option<String>,
    min: Option<f64>,
    max: Option<f64>,
    message: Option<String>,
}

/// What a rule asks of its argument.
#[derive(Debug)]
enum Check {
    /// A path, lexically normalised, at or below this (normalised) prefix.
    Under(String),
    Matching(Regex),
    NotMatching(Regex),
    Range(Option<f64>, Option<f64>),
}

#[derive(Debug)]
pub struct Rule {
    tool: Option<GlobMatcher>,
    arg: String,
    checks: Vec<Check>,
    message: Option<String>,
}

/// The rules of a `rules` config value (a JSON list of objects).
pub fn parse(text: &str) -> Result<Vec<Rule>, String> {
    let texts: Vec<RuleText> = serde_json::from_str(text)
        .map_err(|e| format!("`rules` is not a JSON list of rules: {e}"))?;
    texts
        .into_iter()
        .enumerate()
        .map(|(i, t)| rule(t).map_err(|e| format!("`rules`[{i}]: {e}")))
        .collect()
}

fn rule(t: RuleText) -> Result<Rule, String> {
    let tool = match &t.tool {
        Some(glob) => Some(
            Glob::new(glob)
                .map_err(|e| format!("`tool`: {e}"))?
                .compile_matcher(),
        ),
        None => None,
    };
    let regex = |key: &str, p: &str| Regex::new(p).map_err(|e| format!("`{key}`: {e}"));
    let mut checks = Vec::new();
    if let Some(under) = &t.under {
        checks.push(Check::Under(normalise(under)));
    }
    if let Some(p) = &t.matching {
        checks.push(Check::Matching(regex("matching", p)?));
    }
    if let Some(p) = &t.not_matching {
        checks.push(Check::NotMatching(regex("not_matching", p)?));
    }
    if t.min.is_some() || t.max.is_some() {
        checks.push(Check::Range(t.min, t.max));
    }
    if checks.is_empty() {
        return Err(
            "it checks nothing: give `under`, `matching`, `not_matching`, `min` or `max`".into(),
        );
    }
    Ok(Rule {
        tool,
        arg: t.arg,
        checks,
        message: t.message,
    })
}

/// `path` with `.`, empty parts and `..` resolved without the file system; a `..` above
/// the root stays at the root (`/data/../..` is `/`), so it cannot pass for the prefix.
pub fn normalise(path: &str) -> String {
    let absolute = path.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                if parts.last().is_some_and(|p| *p != "..") {
                    parts.pop();
                } else if !absolute {
                    parts.push("..");
                }
            }
            _ => parts.push(part),
        }
    }
    let joined = parts.join("/");
    if absolute {
        format!("/{joined}")
    } else {
        joined
    }
}

/// Whether `path` is `prefix` or below it; a relative path is never under an absolute
/// prefix (what it is relative to is the server's business).
fn is_under(path: &str, prefix: &str) -> bool {
    let path = normalise(path);
    if prefix == "/" {
        return path.starts_with('/');
    }
    if path.starts_with("..") || path.starts_with('/') != prefix.starts_with('/') {
        return false;
    }
    path == prefix
        || path
            .strip_prefix(prefix)
            .is_some_and(|rest| rest.starts_with('/'))
}

impl Rule {
    /// The refusal's message if the `tool`'s `arguments` break this rule; an argument
    /// that is absent is not checked.
    /// `strings_as_numbers`: a numeric text passes for its number (prompt arguments are
    /// all strings).
    pub fn check(
        &self,
        tool: &str,
        arguments: &Map<String, Value>,
        strings_as_numbers: bool,
    ) -> Option<String> {
        if self.tool.as_ref().is_some_and(|glob| !glob.is_match(tool)) {
            return None;
        }
        let value = arguments.get(&self.arg)?;
        let number = match value {
            Value::String(text) if strings_as_numbers => text.trim().parse().ok(),
            other => other.as_f64(),
        };
        let broken = self
            .checks
            .iter()
            .find_map(|check| self.broken(check, value, number))?;
        Some(match &self.message {
            Some(message) => message.clone(),
            None => format!("argument `{}` of `{tool}` {broken}", self.arg),
        })
    }

    /// What is wrong with `value` under `check`, said after the argument's name.
    fn broken(&self, check: &Check, value: &Value, number: Option<f64>) -> Option<String> {
        let text = || match value {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        match check {
            Check::Under(prefix) => match value.as_str() {
                Some(path) if is_under(path, prefix) => None,
                Some(_) => Some(format!("must be a path under {prefix}")),
                None => Some(format!("must be a path (a string) under {prefix}")),
            },
            Check::Matching(regex) => {
                (!regex.is_match(&text())).then(|| format!("must match {}", regex.as_str()))
            }
            Check::NotMatching(regex) => regex
                .is_match(&text())
                .then(|| format!("must not match {}", regex.as_str())),
            Check::Range(min, max) => {
                let Some(n) = number else {
                    return Some("must be a number".into());
                };
                let low = min.is_some_and(|min| n < min);
                let high = max.is_some_and(|max| n > max);
                (low || high).then(|| match (min, max) {
                    (Some(min), Some(max)) => format!("must be from {min} to {max}"),
                    (Some(min), None) => format!("must be at least {min}"),
                    (None, _) => format!("must be at most {}", max.unwrap_or_default()),
                })
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn args(value: Value) -> Map<String, Value> {
        value.as_object().unwrap().clone()
    }

    #[test]
    fn paths_are_normalised_lexically() {
        assert_eq!(normalise("/data/./a//b/../c"), "/data/a/c");
        assert_eq!(normalise("/data/../../etc"), "/etc");
        assert_eq!(normalise("a/../../b"), "../b");
        assert!(is_under("/data/x/../y", "/data"));
        assert!(is_under("/data", "/data"));
        for outside in [
            "/data/../etc/passwd",
            "/database",
            "x/y",
            "/data/../../data2",
            "../data",
        ] {
            assert!(!is_under(outside, "/data"), "{outside}");
        }
        assert!(is_under("/anything", "/"));
    }

    #[test]
    fn rules_refuse_with_their_message_or_a_precise_one() {
        let rules = parse(
            r#"[{"tool":"files_*","arg":"path","under":"/data/"},
                {"arg":"query","not_matching":"(?i)drop\\s+table","message":"no drops"},
                {"arg":"limit","min":1,"max":100}]"#,
        )
        .unwrap();
        let first = |tool: &str, a: Value| {
            let a = args(a);
            rules.iter().find_map(|r| r.check(tool, &a, false))
        };
        assert_eq!(
            first("files_read", json!({"path": "/data/../etc/passwd"})).as_deref(),
            Some("argument `path` of `files_read` must be a path under /data")
        );
        assert_eq!(first("files_read", json!({"path": "/data/a.txt"})), None);
        assert_eq!(first("other_read", json!({"path": "/etc"})), None);
        assert_eq!(
            first("files_read", json!({"path": 3})).as_deref(),
            Some("argument `path` of `files_read` must be a path (a string) under /data")
        );
        assert_eq!(
            first("db_q", json!({"query": "x; DROP  TABLE t"})).as_deref(),
            Some("no drops")
        );
        assert_eq!(
            first("db_q", json!({"limit": 0})).as_deref(),
            Some("argument `limit` of `db_q` must be from 1 to 100")
        );
        assert_eq!(
            first("db_q", json!({"limit": "9"})).as_deref(),
            Some("argument `limit` of `db_q` must be a number")
        );
        assert_eq!(
            first("db_q", json!({"limit": 100, "query": "select"})),
            None
        );
        assert_eq!(first("db_q", json!({})), None);
        let a = args(json!({"limit": "500"}));
        assert_eq!(
            rules[2].check("p", &a, true).as_deref(),
            Some("argument `limit` of `p` must be from 1 to 100")
        );
        assert_eq!(
            rules[2].check("p", &args(json!({"limit": "5"})), true),
            None
        );
    }

    #[test]
    fn bad_rules_are_told_precisely() {
        let err = |text: &str| parse(text).unwrap_err();
        assert!(err("{}").contains("not a JSON list"));
        assert!(err(r#"[{"arg":"a"}]"#).starts_with("`rules`[0]: it checks nothing"));
        assert!(
            err(r#"[{"arg":"a","min":1},{"arg":"b","matching":"("}]"#)
                .starts_with("`rules`[1]: `matching`: ")
        );
        assert!(err(r#"[{"arg":"a","max":1,"color":"red"}]"#).contains("unknown field `color`"));
        assert!(err(r#"[{"tool":"a[","arg":"a","max":1}]"#).starts_with("`rules`[0]: `tool`: "));
    }
}
