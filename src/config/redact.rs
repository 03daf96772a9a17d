//! URLs as `check`, logs, events and `gateway_status` show them: a remote server's URL may
//! carry a secret in its query string (`?api_key=...`) or its userinfo (`user:pass@`).

/// `url` with every query value, the userinfo's password (or a userinfo without one, which
/// is often a token) and any fragment replaced by `***`; parameter names, the scheme, the
/// host and the path stay, so that the URL is still recognisable.
pub fn redact_url(url: &str) -> String {
    let (scheme, rest) = match url.find("://") {
        Some(i) => url.split_at(i + 3),
        None => ("", url),
    };
    let (rest, fragment) = match rest.find('#') {
        Some(i) => (&rest[..i], true),
        None => (rest, false),
    };
    let (rest, query) = match rest.split_once('?') {
        Some((rest, query)) => (rest, Some(query)),
        None => (rest, None),
    };
    let mut out = String::from(scheme);
    let host_and_path = match userinfo_end(rest) {
        Some(at) => {
            match rest[..at].split_once(':') {
                Some((user, _)) => {
                    out.push_str(user);
                    out.push_str(":***");
                }
                None => out.push_str("***"),
            }
            &rest[at..]
        }
        None => rest,
    };
    out.push_str(host_and_path);
    if let Some(query) = query {
        out.push('?');
        let pairs: Vec<String> = query
            .split('&')
            .map(|pair| match pair.split_once('=') {
                Some((name, _)) => format!("{name}=***"),
                None if pair.is_empty() => String::new(),
                // A bare item may be the secret itself (`?TOKEN`).
                None => "***".to_string(),
            })
            .collect();
        out.push_str(&pairs.join("&"));
    }
    if fragment {
        out.push_str("#***");
    }
    out
}

/// Where the userinfo's `@` is in `rest` (authority and path, no query), if there is one.
fn userinfo_end(rest: &str) -> Option<usize> {
    let at = rest.rfind('@')?;
    let slash = rest.find('/').unwrap_or(rest.len());
    if at < slash {
        return Some(at);
    }
    // An `@` in the path is ordinary, unless what precedes the first `/` is no host[:port]:
    // then a password holding a `/` cut the authority short, and it is still a secret.
    let authority = &rest[..slash];
    let port_ok = authority.ends_with(']')
        || authority
            .rsplit_once(':')
            .is_none_or(|(_, port)| port.chars().all(|c| c.is_ascii_digit()));
    (!port_ok).then_some(at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn query_values_and_passwords_are_hidden_names_kept() {
        for (url, shown) in [
            ("https://example.com/mcp", "https://example.com/mcp"),
            (
                "https://example.com:8443/mcp?api_key=s3cret&mode=x",
                "https://example.com:8443/mcp?api_key=***&mode=***",
            ),
            (
                "https://ada:s3cret@example.com/mcp",
                "https://ada:***@example.com/mcp",
            ),
            (
                "https://ghp_token@example.com/mcp",
                "https://***@example.com/mcp",
            ),
            (
                "https://ada:p@ss@example.com/mcp?k=v#frag",
                "https://ada:***@example.com/mcp?k=***#***",
            ),
            (
                "https://ada:pa/ss@example.com/mcp",
                "https://ada:***@example.com/mcp",
            ),
            (
                "https://example.com/users/@me?TOKEN",
                "https://example.com/users/@me?***",
            ),
            ("http://[::1]:8080/a@b", "http://[::1]:8080/a@b"),
            ("http://h/?a=1&&b", "http://h/?a=***&&***"),
        ] {
            assert_eq!(redact_url(url), shown, "{url}");
        }
    }
}
