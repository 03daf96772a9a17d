//! Outbound HTTP GET through the host's `wasi:http/outgoing-handler`, on the
//! `wasip2` crate's bindings (the ones Rust's std is built on).
//!
//! The host refuses requests to hosts not in the plugin's `allow_hosts` (the
//! wasi:http error code `HTTP-request-denied`); the error says so, and names the
//! grant that would allow it.
//!
//! The request never asks for an outgoing body. A GET has none, and a body
//! once asked for is a stream the host must send (chunked), which a server
//! that answers and hangs up before reading it turns into "connection reset",
//! hiding the real answer, or the real error.

use crate::ToolError;
use schemars::JsonSchema;
use serde::Serialize;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{ErrorCode, Fields, IncomingResponse, Method, OutgoingRequest, Scheme};
use wasip2::io::streams::{InputStream, StreamError};

// Doc comments here are the output schema's descriptions, which the model reads; as a
// tool's output, a page is `Structured::new(page)`.
/// What a GET brought back.
#[derive(Serialize, JsonSchema)]
pub struct Page {
    pub status: u16,
    pub content_type: Option<String>,
    /// Where a redirect points; redirects are not followed.
    pub location: Option<String>,
    /// The body as text (invalid UTF-8 replaced), cut at `max_bytes`.
    pub body: String,
    pub truncated: bool,
}

/// GETs `url`, keeping at most `max_bytes` of the body. Redirects are not followed.
pub fn get(url: &str, max_bytes: usize) -> Result<Page, ToolError> {
    fetch(url, max_bytes).map_err(|e| ToolError::new(format!("GET {url}: {e}")))
}

fn fetch(url: &str, max_bytes: usize) -> Result<Page, String> {
    let target = Target::parse(url)?;
    let request = OutgoingRequest::new(Fields::new());
    let refused = |part: &str| format!("the request refused the {part}");
    request
        .set_method(&Method::Get)
        .map_err(|()| refused("method"))?;
    request
        .set_scheme(Some(&target.scheme))
        .map_err(|()| refused("scheme"))?;
    request
        .set_authority(Some(target.authority))
        .map_err(|()| refused("authority"))?;
    request
        .set_path_with_query(Some(&target.path))
        .map_err(|()| refused("path"))?;

    let pending = outgoing_handler::handle(request, None).map_err(describe)?;
    pending.subscribe().block();
    let response = match pending.get() {
        Some(Ok(result)) => result.map_err(describe)?,
        // Neither happens after `block`, on the first `get`.
        Some(Err(())) | None => return Err("the response was not ready".into()),
    };
    read_page(&response, max_bytes)
}

/// Reads status, headers and up to `max_bytes` of the body. Child resources
/// (headers, body, stream) are dropped here, before `response` is, as the
/// wasi:http resource rules require.
fn read_page(response: &IncomingResponse, max_bytes: usize) -> Result<Page, String> {
    let (content_type, location) = {
        let headers = response.headers();
        let first = |name: &str| {
            let values = headers.get(name);
            values
                .into_iter()
                .next()
                .map(|v| String::from_utf8_lossy(&v).into_owned())
        };
        (first("content-type"), first("location"))
    };
    let body = response
        .consume()
        .map_err(|()| "the response body was taken")?;
    let (bytes, truncated) = {
        let stream = body
            .stream()
            .map_err(|()| "the response body stream was taken")?;
        read_at_most(&stream, max_bytes)?
    };
    Ok(Page {
        status: response.status(),
        content_type,
        location,
        body: utf8_text(bytes),
        truncated,
    })
}

/// Reads until the stream ends or `max` bytes are in; `true` if more was left.
fn read_at_most(stream: &InputStream, max: usize) -> Result<(Vec<u8>, bool), String> {
    const CHUNK: usize = 64 * 1024;
    let mut bytes = Vec::new();
    loop {
        // At the limit, ask for one byte more only to learn whether any is left.
        let want = (max - bytes.len()).clamp(1, CHUNK);
        match stream.blocking_read(want as u64) {
            Ok(chunk) if bytes.len() == max => return Ok((bytes, !chunk.is_empty())),
            Ok(chunk) => bytes.extend_from_slice(&chunk),
            Err(StreamError::Closed) => return Ok((bytes, false)),
            Err(StreamError::LastOperationFailed(e)) => {
                let cause = wasip2::http::types::http_error_code(&e);
                return Err(cause.map_or_else(|| e.to_debug_string(), describe));
            }
        }
    }
}

/// A wasi:http error in words, for the errors a user can act on.
fn describe(code: ErrorCode) -> String {
    match code {
        ErrorCode::HttpRequestDenied => "the host is denied by the gateway: add it to \
            `allow_hosts` in the plugin's [plugins.NAME] table (HTTP-request-denied)"
            .into(),
        ErrorCode::DestinationIpProhibited => "the host resolves to a loopback, link-local or \
            private address, which the gateway refuses unless `allow_hosts` lists that address \
            (or the plugin's table sets allow_private_addresses = true)"
            .into(),
        ErrorCode::DnsError(_) | ErrorCode::DestinationNotFound => {
            "the host name does not resolve".into()
        }
        ErrorCode::ConnectionRefused => "the connection was refused".into(),
        ErrorCode::DnsTimeout
        | ErrorCode::ConnectionTimeout
        | ErrorCode::ConnectionReadTimeout
        | ErrorCode::ConnectionWriteTimeout
        | ErrorCode::HttpResponseTimeout => "timed out".into(),
        ErrorCode::TlsCertificateError => "the server's TLS certificate is not trusted".into(),
        ErrorCode::InternalError(Some(message)) => message,
        other => format!("{other:?}"),
    }
}

/// The parts of an http(s) URL that a wasi:http request takes.
struct Target<'a> {
    scheme: Scheme,
    authority: &'a str,
    path: String,
}

impl<'a> Target<'a> {
    fn parse(url: &'a str) -> Result<Self, String> {
        let bad = || format!("not an http or https URL: {url:?}");
        let (scheme, rest) = url.split_once("://").ok_or_else(bad)?;
        let scheme = match scheme.to_ascii_lowercase().as_str() {
            "http" => Scheme::Http,
            "https" => Scheme::Https,
            _ => return Err(bad()),
        };
        // The fragment is the client's business, never sent.
        let rest = rest.split('#').next().unwrap_or_default();
        let end = rest.find(['/', '?']).unwrap_or(rest.len());
        let (authority, path) = rest.split_at(end);
        if authority.is_empty() || authority.contains(char::is_whitespace) {
            return Err(bad());
        }
        // An origin-form request target starts with `/`, even for a bare query.
        let path = if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/{path}")
        };
        Ok(Target {
            scheme,
            authority,
            path,
        })
    }
}

/// Text of `bytes`, without a replacement character for a code point that
/// the truncation cut in half.
fn utf8_text(mut bytes: Vec<u8>) -> String {
    if let Err(e) = std::str::from_utf8(&bytes)
        && e.error_len().is_none()
    {
        bytes.truncate(e.valid_up_to());
    }
    String::from_utf8(bytes).unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned())
}

#[cfg(test)]
mod tests {
    use super::{Scheme, Target, utf8_text};

    #[test]
    fn splits_urls() {
        let t = Target::parse("https://example.com:8443/a/b?q=1#frag").unwrap();
        assert!(matches!(t.scheme, Scheme::Https));
        assert_eq!(
            (t.authority, t.path.as_str()),
            ("example.com:8443", "/a/b?q=1")
        );
        let t = Target::parse("HTTP://127.0.0.1?x").unwrap();
        assert!(matches!(t.scheme, Scheme::Http));
        assert_eq!((t.authority, t.path.as_str()), ("127.0.0.1", "/?x"));
        assert_eq!(Target::parse("http://h").unwrap().path, "/");
        for bad in ["ftp://h/", "http:///x", "no scheme", "http://a b/"] {
            assert!(Target::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn drops_a_code_point_cut_in_half() {
        let mut bytes = "né".as_bytes().to_vec();
        bytes.pop();
        assert_eq!(utf8_text(bytes), "n");
        assert_eq!(utf8_text(b"a\xffb".to_vec()), "a\u{fffd}b");
    }
}
