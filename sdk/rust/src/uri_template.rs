//! Matching a URI against a resource template (RFC 6570, the forms MCP servers use):
//! `{name}` takes one path segment's worth (no `/`, `?`, `#`), `{+name}` anything; the
//! values come back percent-decoded.

/// One part of a template.
#[derive(Debug, Clone, PartialEq)]
enum Part {
    Literal(String),
    Var { name: String, reserved: bool },
}

/// A parsed template, its variables in order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct UriTemplate {
    parts: Vec<Part>,
}

impl UriTemplate {
    /// Parses `template`; the error says what is wrong with it.
    pub(crate) fn parse(template: &str) -> Result<Self, String> {
        let mut parts = Vec::new();
        let mut rest = template;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                parts.push(Part::Literal(rest[..open].into()));
            }
            let close = rest[open..]
                .find('}')
                .ok_or_else(|| format!("`{template}`: a `{{` is not closed"))?;
            let expr = &rest[open + 1..open + close];
            let (name, reserved) = match expr.strip_prefix('+') {
                Some(name) => (name, true),
                None => (expr, false),
            };
            let valid = !name.is_empty()
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '.');
            if !valid {
                return Err(format!(
                    "`{template}`: `{{{expr}}}` is not a variable this SDK matches (`{{name}}` \
                     or `{{+name}}`)"
                ));
            }
            if matches!(parts.last(), Some(Part::Var { .. })) {
                return Err(format!(
                    "`{template}`: two variables with nothing between them cannot be told apart"
                ));
            }
            parts.push(Part::Var {
                name: name.into(),
                reserved,
            });
            rest = &rest[open + close + 1..];
        }
        if !rest.is_empty() {
            parts.push(Part::Literal(rest.into()));
        }
        Ok(Self { parts })
    }

    /// The variables' names, in order.
    pub(crate) fn variables(&self) -> impl Iterator<Item = &str> {
        self.parts.iter().filter_map(|p| match p {
            Part::Var { name, .. } => Some(name.as_str()),
            Part::Literal(_) => None,
        })
    }

    /// The variables' values if `uri` matches, decoded.
    pub(crate) fn matches(&self, uri: &str) -> Option<Vec<(String, String)>> {
        let mut values = Vec::new();
        matches_from(&self.parts, uri, &mut values).then_some(values)
    }
}

fn matches_from(parts: &[Part], uri: &str, values: &mut Vec<(String, String)>) -> bool {
    match parts {
        [] => uri.is_empty(),
        [Part::Literal(lit), rest @ ..] => uri
            .strip_prefix(lit.as_str())
            .is_some_and(|uri| matches_from(rest, uri, values)),
        [Part::Var { name, reserved }, rest @ ..] => {
            // Each place the value may end, shortest first: a later literal decides.
            let stop = uri
                .find(|c| !*reserved && matches!(c, '/' | '?' | '#'))
                .unwrap_or(uri.len());
            for end in (1..=stop).filter(|&end| uri.is_char_boundary(end)) {
                values.push((name.clone(), decode(&uri[..end])));
                if matches_from(rest, &uri[end..], values) {
                    return true;
                }
                values.pop();
            }
            false
        }
    }
}

fn decode(value: &str) -> String {
    percent_encoding::percent_decode_str(value)
        .decode_utf8_lossy()
        .into_owned()
}

#[cfg(test)]
mod tests {
    use super::UriTemplate;

    fn pairs(v: &[(&str, &str)]) -> Vec<(String, String)> {
        v.iter()
            .map(|(a, b)| (a.to_string(), b.to_string()))
            .collect()
    }

    #[test]
    fn simple_variables_take_one_segment_decoded() {
        let t = UriTemplate::parse("notes://{folder}/{id}.md").unwrap();
        assert_eq!(t.variables().collect::<Vec<_>>(), ["folder", "id"]);
        assert_eq!(
            t.matches("notes://work/a%20b.md"),
            Some(pairs(&[("folder", "work"), ("id", "a b")]))
        );
        assert_eq!(t.matches("notes://work/x/y.md"), None);
        assert_eq!(t.matches("notes:///y.md"), None);
        assert_eq!(t.matches("other://work/y.md"), None);
    }

    #[test]
    fn reserved_variables_take_slashes() {
        let t = UriTemplate::parse("file:///{+path}").unwrap();
        assert_eq!(
            t.matches("file:///a/b.txt"),
            Some(pairs(&[("path", "a/b.txt")]))
        );
    }

    #[test]
    fn templates_it_cannot_match_are_refused_with_the_reason() {
        for (bad, says) in [
            ("x://{id", "not closed"),
            ("x://{?q}", "`{?q}`"),
            ("x://{a}{b}", "nothing between"),
        ] {
            let err = UriTemplate::parse(bad).unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
    }
}
