//! `[http] tls_cert` and `tls_key`, read, parsed and matched as the HTTPS listener uses
//! them: validation (so `check` and start-up alike) refuses a pair that would fail at the
//! first handshake, naming the file, what is wrong and the fix.

use std::path::{Path, PathBuf};

use rustls::pki_types::pem::{self, PemObject};
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// What is wrong with one of the two files.
#[derive(Debug, thiserror::Error)]
#[error("{key} {}: {message} ({fix})", path.display())]
pub struct TlsFileError {
    /// `tls_cert` or `tls_key`.
    pub key: &'static str,
    pub path: PathBuf,
    pub message: String,
    pub fix: String,
}

/// The certificate chain and its private key, checked to belong together.
pub type TlsPair = (Vec<CertificateDer<'static>>, PrivateKeyDer<'static>);

/// Reads both PEM files and checks that rustls can serve with them.
pub fn load_tls(cert: &Path, key: &Path) -> Result<TlsPair, TlsFileError> {
    let error = |which: &'static str, path: &Path, message: String, fix: &str| TlsFileError {
        key: which,
        path: path.to_path_buf(),
        message,
        fix: fix.to_string(),
    };
    let cert_pem = read(cert, "tls_cert")?;
    let key_pem = read(key, "tls_key")?;
    let certs = CertificateDer::pem_slice_iter(&cert_pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| {
            error(
                "tls_cert",
                cert,
                format!("is not valid PEM: {}", pem_error(&e)),
                "give the certificate chain in PEM (-----BEGIN CERTIFICATE-----)",
            )
        })?;
    if certs.is_empty() {
        let (message, fix) = if PrivateKeyDer::from_pem_slice(&cert_pem).is_ok() {
            (
                "holds a private key, not a certificate",
                "tls_cert is the certificate chain, tls_key its private key: are the two swapped?",
            )
        } else {
            (
                "holds no PEM certificate",
                "give the certificate chain in PEM (-----BEGIN CERTIFICATE-----); \
                 `openssl x509 -inform der -in CERT -out cert.pem` converts a DER file",
            )
        };
        return Err(error("tls_cert", cert, message.into(), fix));
    }
    let private = PrivateKeyDer::from_pem_slice(&key_pem).map_err(|e| {
        let (message, fix) = match e {
            pem::Error::NoItemsFound if CertificateDer::from_pem_slice(&key_pem).is_ok() => (
                "holds a certificate, not a private key".to_string(),
                "tls_key is the private key of the certificate in tls_cert: are the two swapped?",
            ),
            pem::Error::NoItemsFound if contains(&key_pem, b"ENCRYPTED PRIVATE KEY") => (
                "holds an encrypted private key".to_string(),
                "the gateway cannot ask for a passphrase: write the key unencrypted \
                 (`openssl pkey -in KEY -out key.pem`) and make it readable by the gateway's user only",
            ),
            pem::Error::NoItemsFound => (
                "holds no PEM private key".to_string(),
                "give the private key in PEM (-----BEGIN PRIVATE KEY-----)",
            ),
            other => (
                format!("is not valid PEM: {}", pem_error(&other)),
                "give the private key in PEM (-----BEGIN PRIVATE KEY-----)",
            ),
        };
        error("tls_key", key, message, fix)
    })?;
    let provider = rustls::crypto::ring::default_provider();
    match rustls::sign::CertifiedKey::from_der(certs.clone(), private.clone_key(), &provider) {
        Ok(_) => Ok((certs, private)),
        Err(rustls::Error::InconsistentKeys(_)) => Err(error(
            "tls_key",
            key,
            format!(
                "is not the private key of the certificate in {}",
                cert.display()
            ),
            "give the key the certificate was made for: `openssl x509 -noout -pubkey -in CERT` \
             and `openssl pkey -pubout -in KEY` print the same key for a matching pair",
        )),
        Err(rustls::Error::InvalidCertificate(why)) => Err(error(
            "tls_cert",
            cert,
            format!("its first certificate cannot be read: {why}"),
            "put the server's own certificate first, then the intermediates, in PEM",
        )),
        Err(other) => Err(error(
            "tls_key",
            key,
            format!("cannot be used: {other}"),
            "use an RSA, ECDSA (P-256 or P-384) or Ed25519 key in PEM",
        )),
    }
}

fn read(path: &Path, which: &'static str) -> Result<Vec<u8>, TlsFileError> {
    std::fs::read(path).map_err(|e| TlsFileError {
        key: which,
        path: path.to_path_buf(),
        message: format!("cannot be read: {e}"),
        fix: "check the path, and that the gateway's user may read the file".into(),
    })
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

fn pem_error(e: &pem::Error) -> String {
    match e {
        pem::Error::MissingSectionEnd { .. } => "a section has no END line".into(),
        pem::Error::IllegalSectionStart { .. } => "a BEGIN line is malformed".into(),
        other => other.to_string(),
    }
}
