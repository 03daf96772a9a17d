//! The masking: which patterns (built-in kinds and the config's), and how every string of
//! a JSON value is rewritten with them. Pure, so the host's `cargo test` checks it.

use regex::Regex;
use serde_json::Value;

/// The built-in kinds, in the order they are applied (a private-key block before the
/// tokens inside it, a JWT before the bearer that carries it). A group named `secret`
/// is what gets masked; without one, the whole match.
const BUILTIN: &[(&str, &str, &str)] = &[
    (
        "private-key",
        "secrets",
        r"-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY-----[\s\S]*?-----END (?:[A-Z0-9]+ )*PRIVATE KEY-----",
    ),
    ("aws", "secrets", r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    (
        "github",
        "secrets",
        r"\b(?:gh[pousr]_[A-Za-z0-9]{36,255}|github_pat_[A-Za-z0-9_]{22,255})\b",
    ),
    (
        "slack",
        "secrets",
        r"\bxox[abposr]-[A-Za-z0-9-]{10,}|https://hooks\.slack\.com/services/[A-Za-z0-9/_-]+",
    ),
    (
        "jwt",
        "secrets",
        r"\beyJ[A-Za-z0-9_-]{5,}\.eyJ[A-Za-z0-9_-]{5,}\.[A-Za-z0-9_-]{5,}",
    ),
    (
        "bearer",
        "secrets",
        r"(?i)\bbearer\s+(?P<secret>[A-Za-z0-9\-._~+/]{16,}=*)",
    ),
    (
        "openai",
        "secrets",
        r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}",
    ),
    (
        "email",
        "emails",
        r"\b[A-Za-z0-9._%+-]+@[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.[A-Za-z]{2,}\b",
    ),
];

/// What `builtin` is when the config does not set it.
pub const DEFAULT_BUILTIN: &str = "secrets,emails";

/// The patterns and the mask of one configuration.
#[derive(Debug)]
pub struct Masker {
    patterns: Vec<(String, Regex)>,
    mask: String,
}

impl Masker {
    /// From the config's values: `builtin` (a comma list of sets, `secrets` and `emails`,
    /// or kinds, such as `aws`; empty for none), `patterns` (a JSON list of regexes, kind
    /// `pattern`), `mask` (`{kind}` in it is replaced by the kind).
    pub fn new(builtin: &str, patterns: Option<&str>, mask: &str) -> Result<Self, String> {
        let mut chosen = Vec::new();
        for word in builtin.split(',').map(str::trim).filter(|w| !w.is_empty()) {
            let before = chosen.len();
            for (kind, set, pattern) in BUILTIN {
                if (word == *set || word == *kind) && !chosen.iter().any(|(k, _)| k == kind) {
                    chosen.push((kind.to_string(), Regex::new(pattern).expect("built-in")));
                }
            }
            let known = BUILTIN.iter().any(|(k, s, _)| word == *k || word == *s);
            if chosen.len() == before && !known {
                let kinds: Vec<&str> = BUILTIN.iter().map(|(k, _, _)| *k).collect();
                return Err(format!(
                    "`builtin`: no set or kind `{word}` (sets: secrets, emails; kinds: {})",
                    kinds.join(", ")
                ));
            }
        }
        // In the order of BUILTIN, whatever order `builtin` names them in.
        chosen.sort_by_key(|(kind, _)| BUILTIN.iter().position(|(k, _, _)| k == kind));
        if let Some(text) = patterns {
            let list: Vec<String> = serde_json::from_str(text)
                .map_err(|e| format!("`patterns` is not a JSON list of strings: {e}"))?;
            for (i, pattern) in list.iter().enumerate() {
                let regex = Regex::new(pattern).map_err(|e| format!("`patterns`[{i}]: {e}"))?;
                chosen.push(("pattern".into(), regex));
            }
        }
        Ok(Self {
            patterns: chosen,
            mask: mask.into(),
        })
    }

    /// `text` with every match masked; none if nothing matched.
    pub fn text(&self, text: &str) -> Option<String> {
        let mut current = std::borrow::Cow::Borrowed(text);
        for (kind, regex) in &self.patterns {
            if !regex.is_match(&current) {
                continue;
            }
            let mask = self.mask.replace("{kind}", kind);
            let masked = regex.replace_all(&current, |caps: &regex::Captures| {
                let whole = caps.get(0).expect("group 0").as_str();
                match caps.name("secret") {
                    Some(secret) => {
                        let start = secret.start() - caps.get(0).expect("group 0").start();
                        format!(
                            "{}{mask}{}",
                            &whole[..start],
                            &whole[start + secret.len()..]
                        )
                    }
                    None => mask.clone(),
                }
            });
            current = std::borrow::Cow::Owned(masked.into_owned());
        }
        match current {
            std::borrow::Cow::Owned(masked) if masked != text => Some(masked),
            _ => None,
        }
    }

    /// Masks every string in `value` (object values, not keys; not `blob`s, which are
    /// base64 of bytes); whether anything changed.
    pub fn value(&self, value: &mut Value) -> bool {
        match value {
            Value::String(text) => match self.text(text) {
                Some(masked) => {
                    *text = masked;
                    true
                }
                None => false,
            },
            Value::Array(items) => items
                .iter_mut()
                .fold(false, |changed, item| self.value(item) | changed),
            Value::Object(fields) => fields
                .iter_mut()
                .filter(|(key, _)| *key != "blob")
                .fold(false, |changed, (_, item)| self.value(item) | changed),
            _ => false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn all() -> Masker {
        Masker::new(DEFAULT_BUILTIN, None, "[REDACTED:{kind}]").unwrap()
    }

    #[test]
    fn each_builtin_kind_is_masked() {
        let m = all();
        let cases = [
            ("key AKIAIOSFODNN7EXAMPLE here", "key [REDACTED:aws] here"),
            (
                "t=ghp_0123456789abcdefghijABCDEFGHIJ012345",
                "t=[REDACTED:github]",
            ),
            (
                "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
                "[REDACTED:github]",
            ),
            ("xoxb-1234567890-abcdefghij", "[REDACTED:slack]"),
            (
                "Authorization: Bearer abcdefghijklmnop1234",
                "Authorization: Bearer [REDACTED:bearer]",
            ),
            (
                "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJlXzEy",
                "[REDACTED:jwt]",
            ),
            (
                "OPENAI=sk-proj-abcdefghijklmnopqrstuvwx",
                "OPENAI=[REDACTED:openai]",
            ),
            ("mail ada@example.org now", "mail [REDACTED:email] now"),
            (
                "a\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\nxyz\n-----END RSA PRIVATE KEY-----\nb",
                "a\n[REDACTED:private-key]\nb",
            ),
        ];
        for (input, want) in cases {
            assert_eq!(m.text(input).as_deref(), Some(want), "{input}");
        }
        assert_eq!(m.text("nothing to see, sk-short, AKIA123"), None);
    }

    #[test]
    fn sets_kinds_and_patterns_are_chosen_by_config() {
        let emails = Masker::new("emails", None, "[REDACTED]").unwrap();
        assert_eq!(emails.text("AKIAIOSFODNN7EXAMPLE"), None);
        assert_eq!(emails.text("a@b.io").as_deref(), Some("[REDACTED]"));
        let own = Masker::new(
            "",
            Some(r#"["ACME-\\d{4}", "(?i)pw=(?P<secret>\\S+)"]"#),
            "#",
        )
        .unwrap();
        assert_eq!(
            own.text("ACME-1234 PW=hunter2 a@b.io").as_deref(),
            Some("# PW=# a@b.io")
        );
        let aws = Masker::new("aws", None, "{kind}!").unwrap();
        assert_eq!(aws.text("AKIAIOSFODNN7EXAMPLE").as_deref(), Some("aws!"));
        let bad = Masker::new("secrets,tokens", None, "").unwrap_err();
        assert!(bad.contains("no set or kind `tokens`"), "{bad}");
        let bad = Masker::new("", Some(r#"["("]"#), "").unwrap_err();
        assert!(bad.starts_with("`patterns`[0]: "), "{bad}");
        let bad = Masker::new("", Some("ACME"), "").unwrap_err();
        assert!(bad.contains("not a JSON list"), "{bad}");
    }

    #[test]
    fn every_string_of_a_result_is_masked_but_blobs_and_keys() {
        let m = all();
        let mut result = json!({
            "content": [{"type": "text", "text": "token AKIAIOSFODNN7EXAMPLE"}],
            "structuredContent": {"owner": {"mail": "ada@example.org"}, "n": 3},
            "contents": [{"uri": "x", "blob": "AKIAIOSFODNN7EXAMPLE"}],
            "ada@example.org": true
        });
        assert!(m.value(&mut result));
        assert_eq!(result["content"][0]["text"], "token [REDACTED:aws]");
        assert_eq!(
            result["structuredContent"]["owner"]["mail"],
            "[REDACTED:email]"
        );
        assert_eq!(result["contents"][0]["blob"], "AKIAIOSFODNN7EXAMPLE");
        assert_eq!(result["ada@example.org"], true);
        assert!(!m.value(&mut json!({"content": [{"type": "text", "text": "fine"}]})));
    }
}
