//! A plugin's `oci://` source to a file: from the cache when pinned by digest, else pulled
//! and cached; when the registry is down, the last cached version of the reference.

use std::path::PathBuf;

use super::{OciError, OciSource, Pin, PullCache, Registry, digest_of, pull};

/// Where a source resolved to.
#[derive(Debug)]
pub struct Resolved {
    pub path: PathBuf,
    pub manifest_digest: String,
    /// Set when the registry could not be reached and a cached version stands in.
    pub stale: Option<OciError>,
}

/// Resolves `source` through `cache` (pulling with `registry` unless a digest pin is
/// cached already).
pub async fn resolve(
    registry: &Registry,
    cache: &PullCache,
    source: &OciSource,
) -> Result<Resolved, OciError> {
    let reference = &source.reference;
    let key_id = match &source.public_key {
        Some(path) => Some(digest_of(&std::fs::read(path).map_err(|error| {
            OciError::Io {
                path: path.clone(),
                error,
            }
        })?)),
        None => None,
    };
    let cached = cache.lookup(reference, key_id.as_deref());
    if let (Pin::Digest(_), Some((path, manifest_digest))) = (&reference.pin, &cached) {
        return Ok(Resolved {
            path: path.clone(),
            manifest_digest: manifest_digest.clone(),
            stale: None,
        });
    }
    match pull(registry, reference, source.public_key.as_deref()).await {
        Ok(pulled) => Ok(Resolved {
            path: cache.store(reference, &pulled, key_id.as_deref())?,
            manifest_digest: pulled.manifest_digest,
            stale: None,
        }),
        Err(error) if error.is_unreachable() => match cached {
            Some((path, manifest_digest)) => Ok(Resolved {
                path,
                manifest_digest,
                stale: Some(error),
            }),
            None => Err(error),
        },
        Err(error) => Err(error),
    }
}
