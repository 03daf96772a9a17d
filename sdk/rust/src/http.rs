//! Outbound HTTP through the host's `wasi:http/outgoing-handler`, on the `wasip2`
//! crate's bindings (the ones Rust's std is built on): [`get`], or any method with
//! headers and a body, [`request`]`("POST", url).header(..).body(..).send()`.
//!
//! The host refuses requests to hosts not in the plugin's `allow_hosts` (the
//! wasi:http error code `HTTP-request-denied`); the error says so, and names the
//! grant that would allow it.
//!
//! A request without a body never asks for an outgoing body: a body once asked for is a
//! stream the host must send, chunked when its length is unknown, which a server that
//! answers and hangs up before reading it turns into "connection reset", hiding the real
//! answer, or the real error. A request with a body says its `content-length` (unless
//! given), so the host sends it in one piece, and writes it after the request is handed
//! over, before waiting for the answer.

use crate::ToolError;
use schemars::JsonSchema;
use serde::Serialize;
use wasip2::http::outgoing_handler;
use wasip2::http::types::{
    ErrorCode, Fields, HeaderError, IncomingResponse, Method, OutgoingBody, OutgoingRequest, Scheme,
};
use wasip2::io::streams::{InputStream, StreamError};

/// Bytes of a response body [`Request::send`] keeps unless [`Request::max_bytes`] says.
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

/// The most a blocking write of a `wasi:io` output stream takes at once.
const WRITE_CHUNK: usize = 4096;

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
    request("GET", url).max_bytes(max_bytes).send()
}

/// A request of `method` (`GET`, `POST`, ... or any other token) to `url`, to give
/// headers and a body, then [`Request::send`]. Redirects are not followed.
///
/// ```no_run
/// # fn post() -> Result<wasmgate_plugin::http::Page, wasmgate_plugin::ToolError> {
/// use wasmgate_plugin::http;
/// let page = http::request("POST", "https://api.example.com/notes")
///     .header("content-type", "application/json")
///     .body(r#"{"text": "milk"}"#)
///     .send()?;
/// # Ok(page) }
/// ```
pub fn request(method: &str, url: &str) -> Request {
    Request {
        method: method.to_owned(),
        url: url.to_owned(),
        headers: Vec::new(),
        body: None,
        max_bytes: DEFAULT_MAX_BYTES,
    }
}

/// An HTTP request being built: [`request`].
#[derive(Debug, Clone)]
pub struct Request {
    method: String,
    url: String,
    headers: Vec<(String, Vec<u8>)>,
    body: Option<Vec<u8>>,
    max_bytes: usize,
}

impl Request {
    /// Adds a header (a name given twice sends both values).
    pub fn header(mut self, name: &str, value: impl Into<Vec<u8>>) -> Self {
        self.headers.push((name.to_owned(), value.into()));
        self
    }

    /// The body to send.
    pub fn body(mut self, body: impl Into<Vec<u8>>) -> Self {
        self.body = Some(body.into());
        self
    }

    /// Keeps at most `max_bytes` of the response body ([`DEFAULT_MAX_BYTES`] if unsaid);
    /// `Page::truncated` says whether more was left.
    pub fn max_bytes(mut self, max_bytes: usize) -> Self {
        self.max_bytes = max_bytes;
        self
    }

    /// Sends the request and reads the answer; `Err` says what failed, in words the
    /// model reads (`POST https://...: the host is denied by the gateway: ...`).
    pub fn send(self) -> Result<Page, ToolError> {
        let what = format!("{} {}", self.method, self.url);
        self.fetch()
            .map_err(|e| ToolError::new(format!("{what}: {e}")))
    }

    fn fetch(mut self) -> Result<Page, String> {
        let target = Target::parse(&self.url)?;
        let has_length = self
            .headers
            .iter()
            .any(|(name, _)| name.eq_ignore_ascii_case("content-length"));
        if let Some(body) = &self.body
            && !has_length
        {
            self.headers
                .push(("content-length".into(), body.len().to_string().into_bytes()));
        }
        let headers = Fields::from_list(&self.headers).map_err(header_error)?;
        let request = OutgoingRequest::new(headers);
        let refused = |part: &str| format!("the request refused the {part}");
        request
            .set_method(&method(&self.method))
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
        let outgoing = match &self.body {
            Some(_) => Some(request.body().map_err(|()| "the request body was taken")?),
            None => None,
        };

        let pending = outgoing_handler::handle(request, None).map_err(describe)?;
        if let (Some(outgoing), Some(body)) = (outgoing, &self.body) {
            write_body(outgoing, body)?;
        }
        pending.subscribe().block();
        let response = match pending.get() {
            Some(Ok(result)) => result.map_err(describe)?,
            // Neither happens after `block`, on the first `get`.
            Some(Err(())) | None => return Err("the response was not ready".into()),
        };
        read_page(&response, self.max_bytes)
    }
}

/// Writes `body` to the request's body and finishes it; the stream is dropped before the
/// body is finished, as the wasi:http resource rules require.
fn write_body(outgoing: OutgoingBody, body: &[u8]) -> Result<(), String> {
    {
        let stream = outgoing
            .write()
            .map_err(|()| "the request body stream was taken")?;
        for chunk in body.chunks(WRITE_CHUNK) {
            stream
                .blocking_write_and_flush(chunk)
                .map_err(|e| match e {
                    StreamError::Closed => "the connection closed while the body was sent".into(),
                    StreamError::LastOperationFailed(e) => {
                        let cause = wasip2::http::types::http_error_code(&e);
                        cause.map_or_else(|| e.to_debug_string(), describe)
                    }
                })?;
        }
    }
    OutgoingBody::finish(outgoing, None).map_err(describe)
}

/// The WIT method of `name`: the standard ones by name (any case), any other as it is.
fn method(name: &str) -> Method {
    match name.to_ascii_uppercase().as_str() {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        "PUT" => Method::Put,
        "DELETE" => Method::Delete,
        "CONNECT" => Method::Connect,
        "OPTIONS" => Method::Options,
        "TRACE" => Method::Trace,
        "PATCH" => Method::Patch,
        _ => Method::Other(name.to_owned()),
    }
}

fn header_error(error: HeaderError) -> String {
    match error {
        HeaderError::InvalidSyntax => "a header name or value is not valid HTTP".into(),
        HeaderError::Forbidden => {
            "a header is one the host sets itself (such as host, connection or \
             transfer-encoding) and refuses from a plugin"
                .into()
        }
        HeaderError::Immutable => "the headers could not be changed".into(),
    }
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
    use super::{Method, Scheme, Target, method, request, utf8_text};

    #[test]
    fn a_request_keeps_its_method_headers_and_body() {
        assert!(matches!(method("post"), Method::Post));
        assert!(matches!(method("PROPFIND"), Method::Other(m) if m == "PROPFIND"));
        let built = request("PUT", "http://h/x")
            .header("x-a", "1")
            .header("x-a", b"2".to_vec())
            .body("text")
            .max_bytes(10);
        assert_eq!(built.headers.len(), 2);
        assert_eq!(built.body.as_deref(), Some(&b"text"[..]));
        assert_eq!(built.max_bytes, 10);
    }

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
