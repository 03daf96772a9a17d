//! A component's bytes with a custom section appended: the same component
//! (custom sections may stand anywhere between sections, in a component as in a
//! module), other bytes, so another sha256 digest: the gateway takes it for new
//! code (a real reload, another compile-cache entry). Shared by the tests and
//! the bench (`benches/gateway/component.rs` includes this file).

/// `bytes` with a top-level custom section `name` holding `payload` at its end:
/// `0x00, size, name length, name, payload`, the sizes as unsigned LEB128.
pub fn with_custom_section(bytes: &[u8], name: &str, payload: &[u8]) -> Vec<u8> {
    let mut body = leb128(name.len());
    body.extend_from_slice(name.as_bytes());
    body.extend_from_slice(payload);
    let mut out = bytes.to_vec();
    out.push(0);
    out.extend(leb128(body.len()));
    out.extend(body);
    out
}

fn leb128(mut n: usize) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let byte = (n & 0x7f) as u8;
        n >>= 7;
        if n == 0 {
            out.push(byte);
            return out;
        }
        out.push(byte | 0x80);
    }
}
