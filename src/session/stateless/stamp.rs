//! What the stateless era adds to every result (`resultType`, the gateway's identity in
//! `_meta`, cache hints), written into the result's JSON text as a server sent it: no tree is
//! built and written out again for a result the gateway otherwise passes through as text.

use serde::{Deserialize, Deserializer};
use serde_json::value::RawValue;

use crate::protocol::modern::META_SERVER_INFO;

/// A field that is present, whatever its value (`null` included: a plain `Option` would
/// read `null` as absent, and the stamp would then repeat the key).
fn present<'de, D: Deserializer<'de>>(d: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(d).map(Some)
}

/// The top-level fields the stamp writes or keeps; the rest are skipped unread. A repeated
/// one of these fails the read, and the result takes the general path.
#[derive(Deserialize)]
struct Top<'a> {
    #[serde(rename = "resultType", borrow, default, deserialize_with = "present")]
    result_type: Option<&'a RawValue>,
    #[serde(rename = "_meta", borrow, default, deserialize_with = "present")]
    meta: Option<&'a RawValue>,
    #[serde(rename = "ttlMs", borrow, default, deserialize_with = "present")]
    ttl: Option<&'a RawValue>,
    #[serde(rename = "cacheScope", borrow, default, deserialize_with = "present")]
    scope: Option<&'a RawValue>,
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(
        rename = "io.modelcontextprotocol/serverInfo",
        borrow,
        default,
        deserialize_with = "present"
    )]
    server_info: Option<&'a RawValue>,
}

/// `raw`, a result's JSON text, with what [`super::finish`] adds: `resultType` unless it has
/// one, `server_info` (JSON text) in its `_meta` when that is an object or absent, and, with
/// `cache_scope`, `ttlMs` 0 and that scope. The members come in the order the general path
/// (a parsed tree, keys in insertion order) writes them. `None` when the text needs that
/// path: not an object, or a key to overwrite (a server's own serverInfo or cache hints).
pub(super) fn stamp(raw: &str, server_info: &str, cache_scope: Option<&str>) -> Option<String> {
    let body = raw.trim();
    if !(body.starts_with('{') && body.ends_with('}')) {
        return None;
    }
    let top: Top = serde_json::from_str(body).ok()?;
    if cache_scope.is_some() && (top.ttl.is_some() || top.scope.is_some()) {
        return None;
    }
    // Another kind of result (a stateless server's `input_required`, relayed) takes no
    // cache hints: the general path knows.
    if top.result_type.is_some_and(|t| t.get() != "\"complete\"") {
        return None;
    }
    let mut out = String::with_capacity(body.len() + server_info.len() + 96);
    let member = |key: &str, value: &str, out: &mut String, first: bool| {
        if !first {
            out.push(',');
        }
        out.push('"');
        out.push_str(key);
        out.push_str("\":");
        out.push_str(value);
    };
    let open = &body[..body.len() - 1];
    match top.meta {
        Some(meta) if meta.get().starts_with('{') => {
            if serde_json::from_str::<Meta>(meta.get())
                .ok()?
                .server_info
                .is_some()
            {
                return None;
            }
            let text = meta.get();
            // The borrowed `_meta` is a slice of `body`: where it ends there.
            let start = (text.as_ptr() as usize).checked_sub(body.as_ptr() as usize)?;
            let end = start + text.len();
            if body.get(start..end) != Some(text) {
                return None;
            }
            out.push_str(&body[..end - 1]);
            let empty = text[1..text.len() - 1].trim().is_empty();
            member(META_SERVER_INFO, server_info, &mut out, empty);
            out.push('}');
            out.push_str(&body[end..body.len() - 1]);
        }
        // Not an object: kept as it is, without the identity (as the general path does).
        _ => out.push_str(open),
    }
    let mut first = open[1..].trim().is_empty();
    if top.result_type.is_none() {
        member("resultType", "\"complete\"", &mut out, first);
        first = false;
    }
    if top.meta.is_none() {
        let meta = format!("{{\"{META_SERVER_INFO}\":{server_info}}}");
        member("_meta", &meta, &mut out, first);
        first = false;
    }
    if let Some(scope) = cache_scope {
        member("ttlMs", "0", &mut out, first);
        member("cacheScope", &format!("\"{scope}\""), &mut out, false);
    }
    out.push('}');
    Some(out)
}

#[cfg(test)]
mod tests {
    use serde_json::{Map, Value, json};

    use super::stamp;

    const INFO: &str = r#"{"name":"gw","version":"1"}"#;

    /// The general path of `finish`, on a parsed tree: what the stamp must equal.
    fn by_tree(raw: &str, cache_scope: Option<&str>) -> Value {
        let mut value: Value = serde_json::from_str(raw).unwrap();
        let result = value.as_object_mut().unwrap();
        result
            .entry("resultType")
            .or_insert_with(|| Value::String("complete".into()));
        let meta = result
            .entry("_meta")
            .or_insert_with(|| Value::Object(Map::new()));
        if let Some(meta) = meta.as_object_mut() {
            meta.insert(
                "io.modelcontextprotocol/serverInfo".into(),
                serde_json::from_str(INFO).unwrap(),
            );
        }
        if let Some(scope) = cache_scope {
            result.insert("ttlMs".into(), json!(0));
            result.insert("cacheScope".into(), json!(scope));
        }
        value
    }

    #[test]
    fn a_stamped_text_reads_as_the_tree_and_in_its_order() {
        for raw in [
            r#"{"content":[{"type":"text","text":"hi"}]}"#,
            "{}",
            " { } ",
            r#"{"content":[],"_meta":{}}"#,
            r#"{"_meta":{"a":1},"isError":false}"#,
            r#"{ "_meta" : { "a" : {"_meta":{}} } , "x" : "}" }"#,
            r#"{"resultType":"complete","_meta":null}"#,
            r#"{"_meta":"text"}"#,
            r#"{"tools":[{"name":"a","_meta":{"k":1}}],"nextCursor":"c"}"#,
        ] {
            for scope in [None, Some("public"), Some("private")] {
                let stamped = stamp(raw, INFO, scope).expect(raw);
                let ours: Value = serde_json::from_str(&stamped).expect(&stamped);
                let tree = by_tree(raw, scope);
                assert_eq!(ours, tree, "{raw}");
                // Same members in the same order: the tree's text, written again.
                assert_eq!(
                    serde_json::to_string(&ours).unwrap(),
                    serde_json::to_string(&tree).unwrap(),
                    "{raw}"
                );
            }
        }
    }

    #[test]
    fn what_the_stamp_would_overwrite_takes_the_general_path() {
        let own_info = r#"{"_meta":{"io.modelcontextprotocol/serverInfo":{"name":"up"}}}"#;
        assert_eq!(stamp(own_info, INFO, None), None);
        assert_eq!(stamp(r#"{"ttlMs":5}"#, INFO, Some("public")), None);
        assert_eq!(stamp(r#"{"cacheScope":"x"}"#, INFO, Some("public")), None);
        assert_eq!(stamp(r#"{"_meta":{},"_meta":{}}"#, INFO, None), None);
        assert_eq!(stamp("[1,2]", INFO, None), None);
        assert_eq!(stamp("null", INFO, None), None);
        assert_eq!(stamp("{\"a\":", INFO, None), None);
        // Another kind of result (a relayed `input_required`) gets no cache hints there.
        let asking = r#"{"resultType":"input_required","inputRequests":{}}"#;
        assert_eq!(stamp(asking, INFO, Some("public")), None);
        assert_eq!(stamp(r#"{"resultType":null}"#, INFO, None), None);
        // Without cache hints asked for, a server's own are kept as they are.
        let kept = stamp(r#"{"ttlMs":5}"#, INFO, None).unwrap();
        assert!(kept.starts_with(r#"{"ttlMs":5,"resultType""#), "{kept}");
    }
}
