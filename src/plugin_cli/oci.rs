//! `plugin push`, `pull`, `sign` and `keygen`: plugins published to OCI registries in the
//! layout `wkg` uses for components, signed as cosign signs images.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::Args;

use crate::oci::{OciError, OciRef, Pin, Registry};

/// Where a registry command goes.
#[derive(Args, Debug)]
pub struct Target {
    /// oci://REGISTRY/REPOSITORY:TAG (or @sha256:HEX).
    pub reference: String,
    /// Speak plain HTTP to this registry (a local test registry), not HTTPS.
    #[arg(long)]
    pub insecure: bool,
}

impl Target {
    fn parse(&self) -> Result<(Registry, OciRef), OciError> {
        let reference = OciRef::parse(&self.reference)?;
        let insecure = if self.insecure {
            vec![reference.registry.clone()]
        } else {
            Vec::new()
        };
        Ok((Registry::new(&insecure), reference))
    }
}

/// `plugin push FILE REF`: prints the pushed manifest's reference by digest.
pub async fn push(file: &Path, target: &Target) -> Result<ExitCode, OciError> {
    let (registry, reference) = target.parse()?;
    if let Pin::Digest(_) = reference.pin {
        return Err(OciError::Reference {
            reference: reference.to_string(),
            why: "push to a tag; the registry names the digest".into(),
        });
    }
    let wasm = std::fs::read(file).map_err(|error| OciError::Io {
        path: file.to_path_buf(),
        error,
    })?;
    let digest = crate::oci::push_component(&registry, &reference, wasm).await?;
    println!("{}", reference.at_digest(&digest));
    Ok(ExitCode::SUCCESS)
}

/// `plugin pull REF [-o FILE] [--public-key PEM]`: writes the verified component.
pub async fn pull(
    target: &Target,
    out: Option<PathBuf>,
    public_key: Option<&Path>,
) -> Result<ExitCode, OciError> {
    let (registry, reference) = target.parse()?;
    let pulled = crate::oci::pull(&registry, &reference, public_key).await?;
    let name = reference.repository.rsplit('/').next().unwrap_or("plugin");
    let out = out.unwrap_or_else(|| PathBuf::from(format!("{name}.wasm")));
    std::fs::write(&out, &pulled.wasm).map_err(|error| OciError::Io {
        path: out.clone(),
        error,
    })?;
    println!(
        "{} -> {}",
        reference.at_digest(&pulled.manifest_digest),
        out.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `plugin sign REF@sha256:… --key cosign.key`: prints the signature's reference.
pub async fn sign(target: &Target, key: &Path) -> Result<ExitCode, OciError> {
    let (registry, reference) = target.parse()?;
    let signature = crate::oci::sign(&registry, &reference, key).await?;
    println!("{signature}");
    Ok(ExitCode::SUCCESS)
}

/// `plugin keygen DIR`.
pub fn keygen(dir: &Path) -> Result<ExitCode, OciError> {
    let (private, public) = crate::oci::keygen(dir)?;
    println!("private key: {} (keep it secret)", private.display());
    println!(
        "public key:  {} (give it as public_key in the config)",
        public.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// The exit code of a registry command: its own, or 1 with the error on stderr.
pub fn finish(outcome: Result<ExitCode, OciError>) -> ExitCode {
    outcome.unwrap_or_else(|error| {
        eprintln!("wasmgate: {error}");
        ExitCode::from(1)
    })
}
