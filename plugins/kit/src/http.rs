//! Outbound HTTP GET through the host's `wasi:http/outgoing-handler`.
//!
//! The host links that interface only for plugins with an `allow_hosts` grant
//! and refuses requests to other hosts; the refusal comes back from `handle`
//! as a wasi:http error code, which ends up in the `failed` message. `wstd`
//! supplies the wasi:http bindings and a small executor.

use crate::{CallError, failed};
use serde::Serialize;
use serde_json::{Value, json};
use wstd::http::{Body, BodyExt as _, Client, Error, Request};

/// What a GET brought back.
#[derive(Serialize)]
pub struct Page {
    pub status: u16,
    pub content_type: Option<String>,
    /// Where a redirect points; redirects are not followed.
    pub location: Option<String>,
    /// The body as text (invalid UTF-8 replaced), cut at `max_bytes`.
    pub body: String,
    pub truncated: bool,
}

/// GETs `url`, keeping at most `max_bytes` of the body. Blocks the call
/// until the response is in: a plugin call is synchronous.
pub fn get(url: &str, max_bytes: usize) -> Result<Page, CallError> {
    wstd::runtime::block_on(fetch(url, max_bytes))
        // `:#` prints the whole chain, down to the wasi:http error code.
        .map_err(|e| failed(format!("GET {url}: {e:#}")))
}

/// JSON Schema of [`Page`], for a tool's output schema.
pub fn page_schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "status": {"type": "integer"},
            "content_type": {"type": ["string", "null"]},
            "location": {"type": ["string", "null"]},
            "body": {"type": "string"},
            "truncated": {"type": "boolean"},
        },
        "required": ["status", "content_type", "location", "body", "truncated"],
    })
}

async fn fetch(url: &str, max_bytes: usize) -> Result<Page, Error> {
    let request = Request::get(url).body(Body::empty())?;
    let response = Client::new().send(request).await?;
    let header = |name: &str| {
        let value = response.headers().get(name)?;
        value.to_str().ok().map(str::to_owned)
    };
    let content_type = header("content-type");
    let location = header("location");
    let status = response.status().as_u16();

    // Read frame by frame and stop at the limit, rather than collecting a
    // body of unknown size first.
    let mut body = response.into_body().into_boxed_body();
    let mut bytes = Vec::new();
    let mut truncated = false;
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame?.into_data() else {
            continue;
        }; // trailers
        let room = max_bytes - bytes.len();
        if data.len() > room {
            bytes.extend_from_slice(&data[..room]);
            truncated = true;
            break;
        }
        bytes.extend_from_slice(&data);
    }
    Ok(Page {
        status,
        content_type,
        location,
        body: utf8_text(bytes),
        truncated,
    })
}

/// Text of `bytes`, without a replacement character for a code point that
/// the truncation cut in half.
fn utf8_text(mut bytes: Vec<u8>) -> String {
    if let Err(e) = std::str::from_utf8(&bytes) {
        if e.error_len().is_none() {
            bytes.truncate(e.valid_up_to());
        }
    }
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::utf8_text;

    #[test]
    fn drops_a_code_point_cut_in_half() {
        let mut bytes = "né".as_bytes().to_vec();
        bytes.pop();
        assert_eq!(utf8_text(bytes), "n");
        assert_eq!(utf8_text(b"a\xffb".to_vec()), "a\u{fffd}b");
    }
}
