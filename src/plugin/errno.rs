//! A hint after a plugin's failure text that carries a WASI error number a missing or
//! read-only grant causes: `os error 44` alone does not say that the plugin sees no such
//! directory because none was granted. Numbers as wasi-libc's `__WASI_ERRNO_*`; the text
//! as Rust's `io::Error` (`(os error N)`) and Python's OSError (`[Errno N]`) print them.

/// The hint for WASI errno `number`, if a grant can be the cause.
fn hint(number: u32) -> Option<&'static str> {
    Some(match number {
        // ENOENT
        44 => "no such file: is its directory granted? (allow_dirs; --allow-dir in `plugin call`)",
        // ENOTCAPABLE
        76 => "not within the grants: is the directory granted? (allow_dirs)",
        // EACCES, EPERM, EROFS
        2 | 63 | 69 => {
            "not permitted: a write needs a read-write grant (allow_dirs mode = \"rw\"; --allow-dir HOST:GUEST:rw)"
        }
        _ => return None,
    })
}

/// The first error number `text` prints, as `(os error N)` or `[Errno N]`.
fn errno_in(text: &str) -> Option<u32> {
    ["(os error ", "[Errno "].iter().find_map(|prefix| {
        let at = text.find(prefix)? + prefix.len();
        let digits: String = text[at..]
            .chars()
            .take_while(char::is_ascii_digit)
            .collect();
        digits.parse().ok()
    })
}

/// `text` with the hint its error number calls for, once.
pub fn with_hint(text: String) -> String {
    match errno_in(&text).and_then(hint) {
        Some(hint) if !text.contains(hint) => format!("{text} ({hint})"),
        _ => text,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grant_errors_get_a_hint_and_others_do_not() {
        let rust = with_hint("read /data/a.txt: No such file or directory (os error 44)".into());
        assert!(rust.ends_with("(no such file: is its directory granted? (allow_dirs; --allow-dir in `plugin call`))"), "{rust}");
        let python = with_hint("[Errno 76] Capabilities insufficient: '/x'".into());
        assert!(python.contains("is the directory granted?"), "{python}");
        let write = with_hint("write /data/b: Permission denied (os error 2)".into());
        assert!(write.contains("read-write grant"), "{write}");
        assert_eq!(
            with_hint("timed out (os error 73)".into()),
            "timed out (os error 73)"
        );
        assert_eq!(with_hint("no number".into()), "no number");
        // Already hinted (a failure that passed through twice): not again.
        assert_eq!(with_hint(rust.clone()), rust);
    }
}
