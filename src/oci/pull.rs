//! One pull: the manifest (its digest checked against a pin), its layout checked to be a
//! wasm component's, the layer (its digest checked), and the signature when a key is given.

use std::path::Path;

use oci_wasm::{WASM_LAYER_MEDIA_TYPE, WASM_MANIFEST_CONFIG_MEDIA_TYPE};

use super::{OciError, OciRef, Registry, signature};

/// A verified component.
pub struct Pulled {
    /// The manifest's digest, `sha256:HEX`.
    pub manifest_digest: String,
    /// The wasm layer's digest, `sha256:HEX`.
    pub layer_digest: String,
    pub wasm: Vec<u8>,
}

/// Pulls `reference`; with `public_key`, refused unless a signature verifies with it.
pub async fn pull(
    registry: &Registry,
    reference: &OciRef,
    public_key: Option<&Path>,
) -> Result<Pulled, OciError> {
    let (manifest, manifest_digest) = registry.manifest(reference).await?;
    let layout = |why: String| OciError::Layout {
        reference: reference.to_string(),
        why,
    };
    if manifest.config.media_type != WASM_MANIFEST_CONFIG_MEDIA_TYPE {
        return Err(layout(format!(
            "its config is {}, not {WASM_MANIFEST_CONFIG_MEDIA_TYPE}",
            manifest.config.media_type
        )));
    }
    let [layer] = manifest.layers.as_slice() else {
        return Err(layout(format!(
            "it has {} layers, not one",
            manifest.layers.len()
        )));
    };
    if layer.media_type != WASM_LAYER_MEDIA_TYPE {
        return Err(layout(format!(
            "its layer is {}, not {WASM_LAYER_MEDIA_TYPE}",
            layer.media_type
        )));
    }
    // The signature before the download: a refused artifact costs no layer.
    if let Some(key) = public_key {
        signature::verify(registry, reference, &manifest_digest, key).await?;
    }
    let wasm = registry.blob(reference, layer).await?;
    Ok(Pulled {
        manifest_digest,
        layer_digest: layer.digest.clone(),
        wasm,
    })
}
