//! The registry client: oci-client (token auth, chunked uploads) speaking plain HTTP to the
//! registries `oci_insecure` lists, and pushes in the layout `wkg` uses for components
//! (oci-wasm: config `application/vnd.wasm.config.v0+json`, one `application/wasm` layer).

use std::time::Duration;

use futures_util::StreamExt as _;
use oci_client::client::{ClientConfig, ClientProtocol};
use oci_client::errors::{DigestError, OciDistributionError};
use oci_client::manifest::{OCI_IMAGE_MEDIA_TYPE, OciDescriptor, OciImageManifest};
use oci_client::secrets::RegistryAuth;

use super::{OciError, OciRef, Pin, auth, digest_of};

/// The most a component (or a signature payload) pulled may weigh: past it the pull stops.
pub const MAX_BLOB: usize = 512 << 20;

/// A client for the registries of one config.
pub struct Registry {
    client: oci_client::Client,
}

impl Registry {
    /// A client that speaks plain HTTP to `insecure` (`host:port`) and HTTPS elsewhere.
    pub fn new(insecure: &[String]) -> Registry {
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(insecure.to_vec()),
            connect_timeout: Some(Duration::from_secs(10)),
            read_timeout: Some(Duration::from_secs(60)),
            ..ClientConfig::default()
        };
        Registry {
            client: oci_client::Client::new(config),
        }
    }

    pub(super) fn client(&self) -> &oci_client::Client {
        &self.client
    }

    /// Authenticates for `reference`'s registry if not done yet (a no-op for anonymous).
    pub(super) async fn login(&self, reference: &OciRef) -> RegistryAuth {
        let auth = auth::for_registry(&reference.registry);
        self.client
            .store_auth_if_needed(&reference.registry, &auth)
            .await;
        auth
    }

    /// The image manifest `reference` names, its raw bytes' digest checked against a
    /// digest pin; with the digest.
    pub async fn manifest(
        &self,
        reference: &OciRef,
    ) -> Result<(OciImageManifest, String), OciError> {
        let auth = self.login(reference).await;
        let (raw, _) = self
            .client
            .pull_manifest_raw(&reference.to_client(), &auth, &[OCI_IMAGE_MEDIA_TYPE])
            .await
            .map_err(|e| registry_error(reference, e))?;
        let digest = digest_of(&raw);
        if let Pin::Digest(expected) = &reference.pin
            && *expected != digest
        {
            return Err(OciError::Digest {
                reference: reference.to_string(),
                what: "the manifest",
                expected: expected.clone(),
                actual: digest,
            });
        }
        let manifest = serde_json::from_slice(&raw).map_err(|e| OciError::Layout {
            reference: reference.to_string(),
            why: format!("its manifest does not parse as an OCI image manifest: {e}"),
        })?;
        Ok((manifest, digest))
    }

    /// The blob `layer` describes, refused unless its bytes have the layer's digest.
    pub async fn blob(
        &self,
        reference: &OciRef,
        layer: &OciDescriptor,
    ) -> Result<Vec<u8>, OciError> {
        if !usize::try_from(layer.size).is_ok_and(|size| size <= MAX_BLOB) {
            return Err(OciError::Layout {
                reference: reference.to_string(),
                why: format!(
                    "a layer of {} bytes is over the {MAX_BLOB}-byte limit",
                    layer.size
                ),
            });
        }
        let mut stream = self
            .client
            .pull_blob_stream(&reference.to_client(), layer)
            .await
            .map_err(|e| registry_error(reference, e))?;
        let mut bytes = Vec::new();
        while let Some(chunk) = stream.next().await {
            let chunk = chunk.map_err(|e| stream_error(reference, e))?;
            if bytes.len() + chunk.len() > MAX_BLOB {
                return Err(OciError::Layout {
                    reference: reference.to_string(),
                    why: format!("a layer is over the {MAX_BLOB}-byte limit"),
                });
            }
            bytes.extend_from_slice(&chunk);
        }
        let actual = digest_of(&bytes);
        if actual != layer.digest {
            return Err(OciError::Digest {
                reference: reference.to_string(),
                what: "a layer",
                expected: layer.digest.clone(),
                actual,
            });
        }
        Ok(bytes)
    }
}

/// An error while a blob streams in: the client's own digest check (the bytes are not the
/// layer's: refused as tampered, never stood in for by a cached copy), or the registry
/// failing mid-stream.
fn stream_error(reference: &OciRef, error: std::io::Error) -> OciError {
    let digest = (error.get_ref()).and_then(|inner| inner.downcast_ref::<DigestError>());
    match digest {
        Some(DigestError::VerificationError { expected, actual }) => OciError::Digest {
            reference: reference.to_string(),
            what: "a layer",
            expected: expected.clone(),
            actual: actual.clone(),
        },
        _ => OciError::Registry {
            reference: reference.to_string(),
            error: error.to_string(),
            unreachable: true,
        },
    }
}

/// An oci-client error, saying whether the registry is down (not answering, or failing
/// with a 5xx) rather than answering no.
pub(super) fn registry_error(reference: &OciRef, error: OciDistributionError) -> OciError {
    let unreachable = match &error {
        OciDistributionError::RequestError(_) => true,
        OciDistributionError::ServerError { code, .. } => *code >= 500,
        _ => false,
    };
    OciError::Registry {
        reference: reference.to_string(),
        error: error.to_string(),
        unreachable,
    }
}

/// Pushes `wasm` (a component) to `reference` in `wkg`'s layout; the manifest's digest.
pub async fn push_component(
    registry: &Registry,
    reference: &OciRef,
    wasm: Vec<u8>,
) -> Result<String, OciError> {
    let layout = |why: String| OciError::Layout {
        reference: reference.to_string(),
        why,
    };
    let (config, layer) = oci_wasm::WasmConfig::from_raw_component(wasm, None)
        .map_err(|e| layout(format!("the file is not a component: {e:#}")))?;
    let auth = registry.login(reference).await;
    let client = oci_wasm::WasmClient::new(registry.client().clone());
    client
        .push(&reference.to_client(), &auth, layer, config, None)
        .await
        .map_err(|e| match e.downcast::<OciDistributionError>() {
            Ok(e) => registry_error(reference, e),
            Err(e) => layout(format!("{e:#}")),
        })?;
    // The digest of what the registry now serves under the tag.
    let (_, digest) = registry.manifest(reference).await?;
    Ok(digest)
}
