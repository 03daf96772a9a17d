//! Plugins as OCI artifacts: references, the registry client (in the layout `wkg` uses for
//! components), the pull cache, and cosign-style signatures.

mod auth;
mod cache;
mod client;
mod pull;
mod reference;
mod resolve;
mod signature;

use std::path::PathBuf;

pub use cache::PullCache;
pub use client::{MAX_BLOB, Registry, push_component};
pub use pull::{Pulled, pull};
pub use reference::{OciRef, OciSource, Pin, SCHEME};
pub use resolve::{Resolved, resolve};
pub use signature::{keygen, sign};

/// What can go wrong with an `oci://` source, a push, a pull or a signature.
#[derive(Debug, thiserror::Error)]
pub enum OciError {
    #[error("`{reference}` is not an OCI reference: {why}")]
    Reference { reference: String, why: String },
    /// The registry could not be reached, or answered with an error.
    #[error("registry error for {reference}: {error}")]
    Registry {
        reference: String,
        error: String,
        /// Down or failing (no answer, a 5xx), rather than answering no.
        unreachable: bool,
    },
    /// The artifact is not a wasm component in the layout `wkg` uses.
    #[error("{reference} is not a wasm component artifact: {why}")]
    Layout { reference: String, why: String },
    /// A manifest or blob whose content is not the digest that names it.
    #[error("{reference}: {what} has digest {actual}, not {expected}: refused as tampered")]
    Digest {
        reference: String,
        what: &'static str,
        expected: String,
        actual: String,
    },
    #[error("{reference}: signature refused: {why}")]
    Signature { reference: String, why: String },
    #[error("key {}: {why}", path.display())]
    Key { path: PathBuf, why: String },
    #[error("{}: {error}", path.display())]
    Io {
        path: PathBuf,
        error: std::io::Error,
    },
}

impl OciError {
    /// Whether the registry itself failed (down, refusing), as opposed to what it served
    /// being wrong: only then may a cached copy stand in.
    pub fn is_unreachable(&self) -> bool {
        matches!(
            self,
            OciError::Registry {
                unreachable: true,
                ..
            }
        )
    }
}

/// `sha256:HEX` of `bytes`.
pub fn digest_of(bytes: &[u8]) -> String {
    use sha2::Digest as _;
    let hash = sha2::Sha256::digest(bytes);
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for b in hash {
        out.push_str(&format!("{b:02x}"));
    }
    out
}
