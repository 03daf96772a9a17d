//! The HTTP client of one remote server: a pool of keep-alive HTTP/1.1 connections, at
//! most `max_connections` of them lent at once, or one HTTP/2 connection that every
//! request shares when the server picks h2 over TLS (ALPN). TLS trusts the platform's roots,
//! the webpki roots and the entry's `ca_file`.

use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::{http1, http2};
use tokio::net::TcpStream;
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

pub type Body = Full<Bytes>;

pub struct HttpClient {
    host: String,
    port: u16,
    /// `host:port`, without any userinfo: the `Host` header of HTTP/1.1 requests and the
    /// `:authority` of HTTP/2 ones.
    origin: Option<http::uri::Authority>,
    tls: Option<Arc<rustls::ClientConfig>>,
    idle: Mutex<Vec<http1::SendRequest<Body>>>,
    /// One permit per HTTP/1.1 connection lent for a request: what bounds the pool.
    lendable: Arc<Semaphore>,
    max_connections: usize,
    /// The server's HTTP/2 connection, once it chose h2.
    shared: Mutex<Option<http2::SendRequest<Body>>>,
}

/// A connection lent for one exchange: given back with [`Lease::done`] once its response
/// body was read to the end, else dropped (and closed).
pub struct Lease {
    client: Arc<HttpClient>,
    sender: Option<http1::SendRequest<Body>>,
    _permit: Option<OwnedSemaphorePermit>,
}

impl Lease {
    pub fn done(mut self) {
        if let Some(sender) = self.sender.take() {
            let mut idle = self.client.idle.lock().unwrap();
            if idle.len() < self.client.max_connections {
                idle.push(sender);
            }
        }
    }
}

/// What a request goes out on.
enum Sender {
    One(http1::SendRequest<Body>),
    Shared(http2::SendRequest<Body>),
}

/// Whether a request counts against `max_connections`. The server's `GET` stream, and the
/// messages that answer the server or notify it, go aside: a stream held open must not
/// starve the requests, and a request waiting on a client's answer (sampling) must never
/// keep that answer from reaching the server.
#[derive(Clone, Copy, PartialEq)]
pub enum Hold {
    Request,
    Aside,
}

impl HttpClient {
    /// `ca_file`: PEM certificates trusted besides the platform's and the webpki roots.
    pub fn new(
        uri: &http::Uri,
        ca_file: Option<&std::path::Path>,
        max_connections: usize,
    ) -> Result<Arc<Self>, String> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => {
                let shown = crate::config::redact_url(&uri.to_string());
                return Err(format!("`{shown}` is not an http:// or https:// URL"));
            }
        };
        let host = uri.host().ok_or("the URL has no host")?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let tls = https.then(|| tls_config(ca_file)).transpose()?;
        Ok(Arc::new(HttpClient {
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
            host,
            origin: without_userinfo(uri.authority()),
            tls,
            idle: Mutex::new(Vec::new()),
            lendable: Arc::new(Semaphore::new(max_connections)),
            max_connections,
            shared: Mutex::new(None),
        }))
    }

    /// Sends `request` (its URI holding the path alone) on the shared HTTP/2 connection,
    /// or on an idle HTTP/1.1 one, or a new one, waiting while `max_connections` are lent.
    pub async fn send(
        self: &Arc<Self>,
        mut request: http::Request<Body>,
        connect_timeout: Duration,
        hold: Hold,
    ) -> Result<(http::Response<Incoming>, Lease), String> {
        if let Some(origin) = &self.origin
            && let Ok(host) = http::HeaderValue::from_str(origin.as_str())
        {
            request.headers_mut().insert(http::header::HOST, host);
        }
        if let Some(shared) = self.live_shared() {
            return self.send_shared(shared, request).await;
        }
        let permit = match hold {
            Hold::Request => Some(
                self.lendable
                    .clone()
                    .acquire_owned()
                    .await
                    .map_err(|_| "the connection pool is closed".to_string())?,
            ),
            Hold::Aside => None,
        };
        let mut sender = match self.take_idle() {
            Some(sender) => sender,
            None => {
                let connected = tokio::time::timeout(connect_timeout, self.connect())
                    .await
                    .map_err(|_| {
                        format!("no connection within {} ms", connect_timeout.as_millis())
                    })??;
                match connected {
                    Sender::One(sender) => sender,
                    Sender::Shared(shared) => {
                        *self.shared.lock().unwrap() = Some(shared.clone());
                        return self.send_shared(shared, request).await;
                    }
                }
            }
        };
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| describe(&e))?;
        let lease = Lease {
            client: self.clone(),
            sender: Some(sender),
            _permit: permit,
        };
        Ok((response, lease))
    }

    fn live_shared(&self) -> Option<http2::SendRequest<Body>> {
        let mut shared = self.shared.lock().unwrap();
        if shared.as_ref().is_some_and(http2::SendRequest::is_closed) {
            *shared = None;
        }
        shared.clone()
    }

    /// HTTP/2 wants the scheme and authority as pseudo-headers, not a `Host` header.
    async fn send_shared(
        self: &Arc<Self>,
        mut shared: http2::SendRequest<Body>,
        mut request: http::Request<Body>,
    ) -> Result<(http::Response<Incoming>, Lease), String> {
        let mut parts = request.uri().clone().into_parts();
        parts.scheme = Some(http::uri::Scheme::HTTPS);
        parts.authority = self.origin.clone();
        *request.uri_mut() = http::Uri::from_parts(parts).map_err(|e| e.to_string())?;
        request.headers_mut().remove(http::header::HOST);
        shared.ready().await.map_err(|e| describe(&e))?;
        let response = shared
            .send_request(request)
            .await
            .map_err(|e| describe(&e))?;
        let lease = Lease {
            client: self.clone(),
            sender: None,
            _permit: None,
        };
        Ok((response, lease))
    }

    fn take_idle(&self) -> Option<http1::SendRequest<Body>> {
        let mut idle = self.idle.lock().unwrap();
        while let Some(sender) = idle.pop() {
            if sender.is_ready() {
                return Some(sender);
            }
        }
        None
    }

    async fn connect(&self) -> Result<Sender, String> {
        let address = (self.host.as_str(), self.port);
        let tcp = TcpStream::connect(address)
            .await
            .map_err(|e| format!("cannot connect to {}:{}: {e}", self.host, self.port))?;
        let _ = tcp.set_nodelay(true);
        let (io, h2): (Box<dyn Stream>, bool) = match &self.tls {
            Some(config) => {
                let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                    .map_err(|e| format!("`{}` is not a valid TLS name: {e}", self.host))?;
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS with {} failed: {e}", self.host))?;
                let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
                (Box::new(tls), h2)
            }
            None => (Box::new(tcp), false),
        };
        let io = wasmtime_wasi_http::io::TokioIo::new(io);
        if h2 {
            let (sender, connection) = http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                .await
                .map_err(|e| describe(&e))?;
            tokio::spawn(async move {
                if let Err(err) = connection.await {
                    tracing::debug!("a remote server's HTTP/2 connection ended: {err}");
                }
            });
            return Ok(Sender::Shared(sender));
        }
        let (sender, connection) = http1::handshake(io).await.map_err(|e| describe(&e))?;
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!("a remote server's connection ended: {err}");
            }
        });
        Ok(Sender::One(sender))
    }
}

/// The authority as `Host` carries it: validation refuses a URL with userinfo, and none
/// may reach the wire even so (it would travel in the clear over http://).
fn without_userinfo(authority: Option<&http::uri::Authority>) -> Option<http::uri::Authority> {
    let authority = authority?.as_str();
    let host = authority
        .rsplit_once('@')
        .map_or(authority, |(_, host)| host);
    host.parse().ok()
}

/// TLS 1.2 and 1.3 with ALPN offering h2 and HTTP/1.1.
fn tls_config(ca_file: Option<&std::path::Path>) -> Result<Arc<rustls::ClientConfig>, String> {
    let mut roots = rustls::RootCertStore {
        roots: webpki_roots::TLS_SERVER_ROOTS.into(),
    };
    roots.add_parsable_certificates(platform_roots().iter().cloned());
    if let Some(file) = ca_file {
        use rustls::pki_types::{CertificateDer, pem::PemObject};
        let certs = CertificateDer::pem_file_iter(file)
            .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
            .map_err(|e| format!("ca_file {}: {e}", file.display()))?;
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("ca_file {}: {e}", file.display()))?;
        }
    }
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map(|b| b.with_root_certificates(roots).with_no_client_auth())
    .map_err(|e| e.to_string())?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The platform's trusted certificates (on Linux the distribution's bundle, or the files
/// `SSL_CERT_FILE` / `SSL_CERT_DIR` name), read once per process.
fn platform_roots() -> &'static [rustls::pki_types::CertificateDer<'static>] {
    static ROOTS: OnceLock<Vec<rustls::pki_types::CertificateDer<'static>>> = OnceLock::new();
    ROOTS.get_or_init(|| {
        let found = rustls_native_certs::load_native_certs();
        for err in &found.errors {
            tracing::debug!("a platform certificate was not read: {err}");
        }
        found.certs
    })
}

/// hyper's error with its cause, which holds the useful part ("connection reset").
fn describe(err: &hyper::Error) -> String {
    match std::error::Error::source(err) {
        Some(cause) => format!("{err}: {cause}"),
        None => err.to_string(),
    }
}

trait Stream: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}
impl<T> Stream for T where T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Send + Unpin + 'static {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn host_never_carries_userinfo() {
        let uri: http::Uri = "https://ada:s3cret@example.test:8443/mcp".parse().unwrap();
        let client = HttpClient::new(&uri, None, 1).unwrap();
        assert_eq!(
            client.origin.as_ref().map(|a| a.as_str()),
            Some("example.test:8443")
        );
    }
}
