//! Matching a URI against an RFC 6570 template such as `file:///{path}` or
//! `example://item/{id}`: enough to route `resources/read` to the server that owns it.

/// Literal pieces between the `{...}` expressions of a template.
pub struct UriTemplate {
    pieces: Vec<String>,
    starts_with_var: bool,
}

impl UriTemplate {
    pub fn parse(template: &str) -> Self {
        let mut pieces = Vec::new();
        let mut rest = template;
        let starts_with_var = template.starts_with('{');
        while let Some(open) = rest.find('{') {
            pieces.push(rest[..open].to_string());
            rest = match rest[open..].find('}') {
                Some(close) => &rest[open + close + 1..],
                None => "",
            };
        }
        pieces.push(rest.to_string());
        UriTemplate {
            pieces,
            starts_with_var,
        }
    }

    /// True when the literal pieces occur in order and anchor both ends.
    pub fn matches(&self, uri: &str) -> bool {
        let (first, rest) = self.pieces.split_first().expect("at least one piece");
        if self.pieces.len() == 1 {
            return uri == first;
        }
        if !self.starts_with_var && !uri.starts_with(first.as_str()) {
            return false;
        }
        let mut at = first.len();
        let (last, middle) = rest.split_last().expect("two pieces at least");
        for piece in middle {
            // Each variable must expand to at least one character.
            match uri.get(at + 1..).and_then(|s| s.find(piece.as_str())) {
                Some(pos) => at = at + 1 + pos + piece.len(),
                None => return false,
            }
        }
        uri.len() > at + last.len() && uri.ends_with(last.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn matching() {
        let t = UriTemplate::parse("example://item/{id}");
        assert!(t.matches("example://item/42"));
        assert!(!t.matches("example://item/"));
        assert!(!t.matches("other://item/42"));
        let t = UriTemplate::parse("repo://{owner}/{name}/readme");
        assert!(t.matches("repo://a/b/readme"));
        assert!(!t.matches("repo://a/b/license"));
        assert!(UriTemplate::parse("plain://x").matches("plain://x"));
    }
}
