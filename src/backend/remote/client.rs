//! The HTTP/1.1 client of one remote server: keep-alive connections kept for the next
//! request, TLS with the webpki roots (the same crates a plugin's outbound HTTP uses).

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::client::conn::http1::SendRequest;
use tokio::net::TcpStream;

pub(super) type Body = Full<Bytes>;

/// Idle connections kept per server; more in flight at once are opened and then closed.
const MAX_IDLE: usize = 16;

pub(super) struct HttpClient {
    host: String,
    port: u16,
    tls: Option<Arc<rustls::ClientConfig>>,
    idle: Mutex<Vec<SendRequest<Body>>>,
}

/// A connection lent for one exchange: given back with [`Lease::done`] once its response
/// body was read to the end, else dropped (and closed).
pub(super) struct Lease {
    client: Arc<HttpClient>,
    sender: Option<SendRequest<Body>>,
}

impl Lease {
    pub(super) fn done(mut self) {
        if let Some(sender) = self.sender.take() {
            let mut idle = self.client.idle.lock().unwrap();
            if idle.len() < MAX_IDLE {
                idle.push(sender);
            }
        }
    }
}

impl HttpClient {
    /// `ca_file`: PEM certificates trusted besides the webpki roots.
    pub(super) fn new(
        uri: &http::Uri,
        ca_file: Option<&std::path::Path>,
    ) -> Result<Arc<Self>, String> {
        let https = match uri.scheme_str() {
            Some("https") => true,
            Some("http") => false,
            _ => return Err(format!("`{uri}` is not an http:// or https:// URL")),
        };
        let host = uri.host().ok_or("the URL has no host")?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let tls = https.then(|| {
            let mut roots = rustls::RootCertStore {
                roots: webpki_roots::TLS_SERVER_ROOTS.into(),
            };
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
            let config = rustls::ClientConfig::builder_with_provider(Arc::new(
                rustls::crypto::ring::default_provider(),
            ))
            .with_safe_default_protocol_versions()
            .map(|b| b.with_root_certificates(roots).with_no_client_auth());
            config.map(Arc::new).map_err(|e| e.to_string())
        });
        Ok(Arc::new(HttpClient {
            port: uri.port_u16().unwrap_or(if https { 443 } else { 80 }),
            host,
            tls: tls.transpose()?,
            idle: Mutex::new(Vec::new()),
        }))
    }

    /// Sends `request` (its URI holding the path alone) on an idle connection or a new one.
    pub(super) async fn send(
        self: &Arc<Self>,
        request: http::Request<Body>,
        connect_timeout: Duration,
    ) -> Result<(http::Response<Incoming>, Lease), String> {
        let idle = self.take_idle();
        let mut sender = match idle {
            Some(sender) => sender,
            None => tokio::time::timeout(connect_timeout, self.connect())
                .await
                .map_err(|_| {
                    format!("no connection within {} ms", connect_timeout.as_millis())
                })??,
        };
        let response = sender
            .send_request(request)
            .await
            .map_err(|e| describe(&e))?;
        let lease = Lease {
            client: self.clone(),
            sender: Some(sender),
        };
        Ok((response, lease))
    }

    fn take_idle(&self) -> Option<SendRequest<Body>> {
        let mut idle = self.idle.lock().unwrap();
        while let Some(sender) = idle.pop() {
            if sender.is_ready() {
                return Some(sender);
            }
        }
        None
    }

    async fn connect(&self) -> Result<SendRequest<Body>, String> {
        let address = (self.host.as_str(), self.port);
        let tcp = TcpStream::connect(address)
            .await
            .map_err(|e| format!("cannot connect to {}:{}: {e}", self.host, self.port))?;
        let _ = tcp.set_nodelay(true);
        let io: Box<dyn Stream> = match &self.tls {
            Some(config) => {
                let name = rustls::pki_types::ServerName::try_from(self.host.clone())
                    .map_err(|e| format!("`{}` is not a valid TLS name: {e}", self.host))?;
                let tls = tokio_rustls::TlsConnector::from(config.clone())
                    .connect(name, tcp)
                    .await
                    .map_err(|e| format!("TLS with {} failed: {e}", self.host))?;
                Box::new(tls)
            }
            None => Box::new(tcp),
        };
        let (sender, connection) =
            hyper::client::conn::http1::handshake(wasmtime_wasi_http::io::TokioIo::new(io))
                .await
                .map_err(|e| describe(&e))?;
        tokio::spawn(async move {
            if let Err(err) = connection.await {
                tracing::debug!("a remote server's connection ended: {err}");
            }
        });
        Ok(sender)
    }
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
