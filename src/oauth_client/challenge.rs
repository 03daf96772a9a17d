//! `WWW-Authenticate: Bearer …` challenges (RFC 6750 section 3, RFC 9728 section 5.1):
//! the resource metadata URL, the scope asked for, and the error.

/// What a 401 or 403 said.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Challenge {
    pub resource_metadata: Option<String>,
    pub scope: Option<String>,
    pub error: Option<String>,
}

impl Challenge {
    /// The Bearer challenge among `header`'s, if any; parameters of other schemes ignored.
    pub fn parse(header: &str) -> Option<Challenge> {
        let start = find_scheme(header, "bearer")?;
        let mut rest = &header[start + "bearer".len()..];
        let mut found = Challenge::default();
        loop {
            rest = rest.trim_start_matches([' ', '\t', ',']);
            let Some(eq) = rest.find('=') else { break };
            let name = rest[..eq].trim();
            // Another scheme begins: `Basic realm=…` has a space inside its name part.
            if name.contains(' ') || name.is_empty() {
                break;
            }
            rest = rest[eq + 1..].trim_start();
            let value;
            if let Some(quoted) = rest.strip_prefix('"') {
                let mut out = String::new();
                let mut chars = quoted.char_indices();
                let mut end = quoted.len();
                while let Some((i, c)) = chars.next() {
                    match c {
                        '\\' => {
                            if let Some((_, next)) = chars.next() {
                                out.push(next);
                            }
                        }
                        '"' => {
                            end = i + 1;
                            break;
                        }
                        c => out.push(c),
                    }
                }
                value = out;
                rest = &quoted[end.min(quoted.len())..];
            } else {
                let end = rest.find([',', ' ']).unwrap_or(rest.len());
                value = rest[..end].to_string();
                rest = &rest[end..];
            }
            match name.to_ascii_lowercase().as_str() {
                "resource_metadata" => found.resource_metadata = Some(value),
                "scope" => found.scope = Some(value),
                "error" => found.error = Some(value),
                _ => {}
            }
        }
        Some(found)
    }

    pub fn insufficient_scope(&self) -> bool {
        self.error.as_deref() == Some("insufficient_scope")
    }
}

/// Where the `Bearer` scheme's name starts, matched case-insensitively as a whole word.
fn find_scheme(header: &str, scheme: &str) -> Option<usize> {
    let lower = header.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(scheme) {
        let at = from + at;
        let before = at == 0 || matches!(lower.as_bytes()[at - 1], b' ' | b',');
        let after = lower.as_bytes().get(at + scheme.len());
        if before && after.is_none_or(|b| *b == b' ') {
            return Some(at);
        }
        from = at + scheme.len();
    }
    None
}

#[cfg(test)]
mod tests {
    use super::Challenge;

    #[test]
    fn reads_quoted_and_bare_parameters() {
        let c = Challenge::parse(
            r#"Bearer error="insufficient_scope", scope="a b", resource_metadata="https://x/.well-known/oauth-protected-resource/mcp""#,
        )
        .unwrap();
        assert!(c.insufficient_scope());
        assert_eq!(c.scope.as_deref(), Some("a b"));
        assert_eq!(
            c.resource_metadata.as_deref(),
            Some("https://x/.well-known/oauth-protected-resource/mcp")
        );
        let c = Challenge::parse("Basic realm=\"x\", Bearer error=invalid_token").unwrap();
        assert_eq!(c.error.as_deref(), Some("invalid_token"));
        assert!(Challenge::parse("Basic realm=\"x\"").is_none());
        assert_eq!(Challenge::parse("Bearer"), Some(Challenge::default()));
    }
}
