//! HTTPS for a team without a TLS-terminating proxy (`[http] tls_cert`, `tls_key`), with
//! rustls. Handshakes run in each connection's own task (`connections.rs`), bounded by
//! `header_timeout`, so a client that stalls in one holds up no other connection.

use std::path::Path;
use std::sync::Arc;

use anyhow::{Context, Result};
use tokio_rustls::TlsAcceptor;

/// The acceptor for `cert` (a PEM chain) and its `key`.
pub fn acceptor(cert: &Path, key: &Path) -> Result<TlsAcceptor> {
    // Validation checked the pair already; this reads the files as they are now.
    let (certs, key) = crate::config::load_tls(cert, key)?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .context("tls_cert and tls_key do not make a certificate and its key")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}
