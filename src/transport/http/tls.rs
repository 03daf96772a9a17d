//! HTTPS for a team without a TLS-terminating proxy (`[http] tls_cert`, `tls_key`), with
//! rustls. Handshakes run in tasks of their own, so a client that stalls in one does not
//! hold up the connections behind it.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, Result};
use axum::extract::connect_info::Connected;
use axum::serve::IncomingStream;
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::server::TlsStream;

/// How long a client may take over its TLS handshake.
const HANDSHAKE: Duration = Duration::from_secs(10);

/// The peer's address, for either listener.
#[derive(Clone, Copy, Debug)]
pub struct Remote(pub SocketAddr);

impl Connected<IncomingStream<'_, TcpListener>> for Remote {
    fn connect_info(stream: IncomingStream<'_, TcpListener>) -> Remote {
        Remote(*stream.remote_addr())
    }
}

impl Connected<IncomingStream<'_, TlsListener>> for Remote {
    fn connect_info(stream: IncomingStream<'_, TlsListener>) -> Remote {
        Remote(*stream.remote_addr())
    }
}

/// Connections whose handshake is done.
pub struct TlsListener {
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
    local: SocketAddr,
}

impl TlsListener {
    pub fn new(tcp: TcpListener, cert: &Path, key: &Path) -> Result<TlsListener> {
        // Validation checked the pair already; this reads the files as they are now.
        let (certs, key) = crate::config::load_tls(cert, key)?;
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()?
            .with_no_client_auth()
            .with_single_cert(certs, key)
            .context("tls_cert and tls_key do not make a certificate and its key")?;
        config.alpn_protocols = vec![b"http/1.1".to_vec()];
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let local = tcp.local_addr()?;
        let (done, ready) = mpsc::channel(256);
        tokio::spawn(async move {
            loop {
                let (stream, remote) = match tcp.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        // Out of descriptors, most likely: wait for some to be freed.
                        tracing::warn!("accepting a connection: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                if done.is_closed() {
                    return;
                }
                let (acceptor, done) = (acceptor.clone(), done.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(HANDSHAKE, acceptor.accept(stream)).await {
                        Ok(Ok(tls)) => {
                            let _ = done.send((tls, remote)).await;
                        }
                        Ok(Err(e)) => tracing::debug!(%remote, "TLS handshake failed: {e}"),
                        Err(_) => tracing::debug!(%remote, "TLS handshake timed out"),
                    }
                });
            }
        });
        Ok(TlsListener { ready, local })
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(connection) => connection,
            // The accepting task is gone: no more connections.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
}
