//! Signatures in cosign's layout: beside an artifact, a manifest tagged `sha256-HEX.sig`
//! whose layer is the "simple signing" payload naming the artifact's manifest digest, with
//! the base64 ECDSA P-256 (SHA-256, DER) signature of that payload in the layer's
//! annotation `dev.cosignproject.cosign/signature`. Keys are PKCS#8 / SPKI PEM, as
//! `cosign import-key-pair` and `cosign verify --key` take them.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine as _;
use oci_client::manifest::{
    IMAGE_CONFIG_MEDIA_TYPE, OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest, OciManifest,
};
use p256::ecdsa::signature::{Signer as _, Verifier as _};
use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
use p256::pkcs8::{
    DecodePrivateKey as _, DecodePublicKey as _, EncodePrivateKey as _, EncodePublicKey as _,
    LineEnding,
};

use super::client::registry_error;
use super::{OciError, OciRef, Pin, Registry, digest_of};

const PAYLOAD_MEDIA_TYPE: &str = "application/vnd.dev.cosign.simplesigning.v1+json";
const SIGNATURE_ANNOTATION: &str = "dev.cosignproject.cosign/signature";

/// The tag cosign keeps the signatures of manifest `digest` under.
fn signature_tag(digest: &str) -> String {
    format!("{}.sig", digest.replace(':', "-"))
}

/// The simple-signing payload for `reference`'s manifest `digest`.
fn payload(reference: &OciRef, digest: &str) -> Vec<u8> {
    serde_json::json!({
        "critical": {
            "identity": {"docker-reference": reference.repository_path()},
            "image": {"docker-manifest-digest": digest},
            "type": "cosign container image signature",
        },
        "optional": null,
    })
    .to_string()
    .into_bytes()
}

/// The key in the PEM file at `path`, parsed by `parse`; `what` names it in the error.
fn read_key<K, E: std::fmt::Display>(
    path: &Path,
    parse: impl FnOnce(&str) -> Result<K, E>,
    what: &str,
) -> Result<K, OciError> {
    let pem = std::fs::read_to_string(path).map_err(|error| OciError::Io {
        path: path.to_path_buf(),
        error,
    })?;
    parse(&pem).map_err(|e| OciError::Key {
        path: path.to_path_buf(),
        why: format!("not an ECDSA P-256 {what}: {e}"),
    })
}

/// Writes a new key pair to `dir`: `cosign.key` (PKCS#8 PEM, owner-only) and `cosign.pub`
/// (SPKI PEM). Refuses to overwrite either.
pub fn keygen(dir: &Path) -> Result<(PathBuf, PathBuf), OciError> {
    let (private, public) = (dir.join("cosign.key"), dir.join("cosign.pub"));
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |error| OciError::Io { path, error }
    };
    for path in [&private, &public] {
        if path.exists() {
            return Err(OciError::Key {
                path: path.clone(),
                why: "exists already; not overwritten".into(),
            });
        }
    }
    std::fs::create_dir_all(dir).map_err(io(dir))?;
    let key = SigningKey::random(&mut p256::elliptic_curve::rand_core::OsRng);
    let bad = |why: String| OciError::Key {
        path: private.clone(),
        why,
    };
    let pem = key
        .to_pkcs8_pem(LineEnding::LF)
        .map_err(|e| bad(e.to_string()))?;
    let public_pem = key
        .verifying_key()
        .to_public_key_pem(LineEnding::LF)
        .map_err(|e| bad(e.to_string()))?;
    {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&private)
            .map_err(io(&private))?;
        file.write_all(pem.as_bytes()).map_err(io(&private))?;
    }
    std::fs::write(&public, public_pem).map_err(io(&public))?;
    Ok((private, public))
}

/// Signs the manifest `reference` pins by digest with the PKCS#8 PEM key at `key`, and
/// pushes the signature beside it; the signature's reference.
pub async fn sign(registry: &Registry, reference: &OciRef, key: &Path) -> Result<OciRef, OciError> {
    let Pin::Digest(digest) = &reference.pin else {
        return Err(OciError::Reference {
            reference: reference.to_string(),
            why:
                "sign a digest (…@sha256:HEX, as `plugin push` prints it), not a tag that may move"
                    .into(),
        });
    };
    let signing = read_key(key, SigningKey::from_pkcs8_pem, "private key in PKCS#8 PEM")?;
    // The manifest must exist: a signature of nothing is a mistake.
    registry.manifest(reference).await?;
    let payload = payload(reference, digest);
    let signature: Signature = signing.sign(&payload);
    let encoded = base64::engine::general_purpose::STANDARD.encode(signature.to_der().as_bytes());
    let payload_digest = digest_of(&payload);
    let config = serde_json::json!({
        "architecture": "", "created": "0001-01-01T00:00:00Z",
        "history": [{"created": "0001-01-01T00:00:00Z"}], "os": "",
        "rootfs": {"type": "layers", "diff_ids": [payload_digest]}, "config": {},
    })
    .to_string()
    .into_bytes();
    let target = reference.at_tag(&signature_tag(digest));
    let client_ref = target.to_client();
    registry.login(&target).await;
    let client = registry.client();
    let config_digest = digest_of(&config);
    let descriptor = |media_type: &str, bytes: &[u8], digest: String| OciDescriptor {
        media_type: media_type.to_owned(),
        digest,
        size: bytes.len() as i64,
        ..OciDescriptor::default()
    };
    let manifest = OciImageManifest {
        schema_version: 2,
        media_type: Some(OCI_IMAGE_MEDIA_TYPE.to_owned()),
        config: descriptor(IMAGE_CONFIG_MEDIA_TYPE, &config, config_digest.clone()),
        layers: vec![OciDescriptor {
            annotations: Some(BTreeMap::from([(SIGNATURE_ANNOTATION.to_owned(), encoded)])),
            ..descriptor(PAYLOAD_MEDIA_TYPE, &payload, payload_digest.clone())
        }],
        ..OciImageManifest::default()
    };
    client
        .push_blob(&client_ref, payload, &payload_digest)
        .await
        .map_err(|e| registry_error(&target, e))?;
    client
        .push_blob(&client_ref, config, &config_digest)
        .await
        .map_err(|e| registry_error(&target, e))?;
    client
        .push_manifest(&client_ref, &OciManifest::Image(manifest))
        .await
        .map_err(|e| registry_error(&target, e))?;
    Ok(target)
}

/// Checks that a signature beside `reference`'s manifest `digest` verifies with the SPKI
/// PEM public key at `key` and names that digest; the reason when none does.
pub async fn verify(
    registry: &Registry,
    reference: &OciRef,
    digest: &str,
    key: &Path,
) -> Result<(), OciError> {
    let refused = |why: String| OciError::Signature {
        reference: reference.to_string(),
        why,
    };
    let verifying = read_key(key, VerifyingKey::from_public_key_pem, "public key in PEM")?;
    let target = reference.at_tag(&signature_tag(digest));
    let manifest = match registry.manifest(&target).await {
        Ok((manifest, _)) => manifest,
        Err(OciError::Registry {
            unreachable: false, ..
        }) => {
            return Err(refused(format!(
                "no signature found ({} is absent)",
                target
            )));
        }
        Err(e) => return Err(e),
    };
    let mut reasons = Vec::new();
    for layer in manifest
        .layers
        .iter()
        .filter(|l| l.media_type == PAYLOAD_MEDIA_TYPE)
    {
        let Some(encoded) = layer
            .annotations
            .as_ref()
            .and_then(|a| a.get(SIGNATURE_ANNOTATION))
        else {
            reasons.push("a payload without a signature annotation".to_owned());
            continue;
        };
        let payload = registry.blob(&target, layer).await?;
        let signature = base64::engine::general_purpose::STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|der| Signature::from_der(&der).ok());
        let Some(signature) = signature else {
            reasons.push("a signature that is not base64 DER ECDSA".to_owned());
            continue;
        };
        if verifying.verify(&payload, &signature).is_err() {
            reasons.push(format!(
                "a signature that does not verify with {}",
                key.display()
            ));
            continue;
        }
        let named = serde_json::from_slice::<serde_json::Value>(&payload)
            .ok()
            .and_then(|p| {
                p["critical"]["image"]["docker-manifest-digest"]
                    .as_str()
                    .map(str::to_owned)
            });
        if named.as_deref() != Some(digest) {
            reasons.push(format!(
                "a signed payload naming {}, not {digest}",
                named.unwrap_or_else(|| "no digest".into())
            ));
            continue;
        }
        return Ok(());
    }
    if reasons.is_empty() {
        reasons.push(format!("{target} holds no cosign signature layer"));
    }
    Err(refused(reasons.join("; ")))
}

#[cfg(test)]
mod tests {
    use p256::ecdsa::signature::{Signer as _, Verifier as _};
    use p256::ecdsa::{Signature, SigningKey, VerifyingKey};
    use p256::pkcs8::{DecodePrivateKey as _, DecodePublicKey as _};

    use super::keygen;

    #[test]
    fn keygen_writes_a_pair_that_signs_and_verifies() {
        let dir = tempfile::tempdir().unwrap();
        let (private, public) = keygen(dir.path()).unwrap();
        let key = SigningKey::from_pkcs8_pem(&std::fs::read_to_string(&private).unwrap()).unwrap();
        let public =
            VerifyingKey::from_public_key_pem(&std::fs::read_to_string(&public).unwrap()).unwrap();
        let signature: Signature = key.sign(b"payload");
        assert!(public.verify(b"payload", &signature).is_ok());
        assert!(public.verify(b"other", &signature).is_err());
        let again = keygen(dir.path()).unwrap_err().to_string();
        assert!(again.contains("exists already"), "{again}");
    }
}
