//! Every rule about names, in one place: how a served name is made from a namespace and a
//! backend's own name, which names clients accept, and what a namespace may hold.

/// Characters clients accept in any tool name (the strictest common rule), and so in a
/// namespace; MCP's 2025-11-25 advice adds `.`.
fn portable_char(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_' || b == b'-'
}

/// The longest name the strictest common client rule allows.
pub const PORTABLE_LEN: usize = 64;

/// The served name: `{namespace}{separator}{name}`, or the bare name when the namespace is
/// empty.
pub fn exposed(namespace: &str, separator: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}{separator}{name}")
    }
}

/// Tool names that pass the strictest common client rule (`^[A-Za-z0-9_-]{1,64}$`);
/// others are still served, with a warning, since the 2025-11-25 guidance allows `.` and 128
/// characters.
pub fn portable(name: &str) -> bool {
    (1..=PORTABLE_LEN).contains(&name.len()) && name.bytes().all(portable_char)
}

/// MCP's advice for tool names (2025-11-25): 1 to `max` characters of `A-Z a-z 0-9 _ - .`
/// (`max` is 128 in the advice; plugins are held to [`PORTABLE_LEN`]).
pub fn follows_mcp_advice(name: &str, max: usize) -> bool {
    (1..=max).contains(&name.len()) && name.bytes().all(|b| portable_char(b) || b == b'.')
}

/// Whether `namespace` holds only characters every client accepts in a tool name.
pub fn valid_namespace(namespace: &str) -> bool {
    namespace.bytes().all(portable_char)
}

/// The namespace a backend gets by default: its name, with every character clients refuse in
/// a tool name made `_`.
pub fn namespace_for(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii() && portable_char(c as u8) {
                c
            } else {
                '_'
            }
        })
        .collect()
}

/// A backend's namespace: the one its config entry sets, else [`namespace_for`] its name.
pub fn namespace_of(configured: Option<&str>, name: &str) -> String {
    configured.map_or_else(|| namespace_for(name), str::to_string)
}

/// Whether the served `name` is one of `namespace`'s (`{namespace}{separator}...`); the
/// empty namespace is nobody's, since bare names do not say whose they are.
pub fn in_namespace(name: &str, namespace: &str, separator: &str) -> bool {
    !namespace.is_empty()
        && name
            .strip_prefix(namespace)
            .is_some_and(|rest| rest.starts_with(separator))
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

    #[test]
    fn rules() {
        assert!(follows_mcp_advice("a.b-c_9", 128));
        assert!(!follows_mcp_advice("", 128));
        assert!(!follows_mcp_advice("a b", 128));
        assert!(!follows_mcp_advice(&"x".repeat(65), PORTABLE_LEN));
        assert!(follows_mcp_advice(&"x".repeat(128), 128));
        assert!(!follows_mcp_advice("é", 128));
        assert_eq!(namespace_for("my plugin.v2"), "my_plugin_v2");
        assert_eq!(namespace_for("é-x"), "_-x");
        assert!(valid_namespace("a-b_c") && !valid_namespace("a.b"));
    }

    #[test]
    fn namespaces() {
        assert_eq!(namespace_of(Some("t"), "time server"), "t");
        assert_eq!(namespace_of(None, "time server"), "time_server");
        assert!(in_namespace("time__now", "time", "__"));
        assert!(!in_namespace("timer__now", "time", "__"));
        assert!(!in_namespace("time_now", "time", "__"));
        assert!(!in_namespace("now", "", "__"));
    }
}
