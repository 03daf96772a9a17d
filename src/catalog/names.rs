//! The name-prefixing rule, in one place: `{namespace}{separator}{name}`, or the bare
//! name when the namespace is empty.

pub fn exposed(namespace: &str, separator: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}{separator}{name}")
    }
}

/// Tool names that pass the strictest common client rule (`^[A-Za-z0-9_-]{1,64}$`);
/// others are still served, with a warning, since the 2025-11-25 guidance allows `.` and 128 characters.
pub fn portable(name: &str) -> bool {
    (1..=64).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefixing() {
        assert_eq!(exposed("time", "__", "now"), "time__now");
        assert_eq!(exposed("", "__", "now"), "now");
        assert_eq!(exposed("t", ":", "now"), "t:now");
        assert!(portable("time__now"));
        assert!(!portable("t:now"));
    }
}
