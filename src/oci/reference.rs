//! `oci://REGISTRY/REPOSITORY:TAG` and `oci://REGISTRY/REPOSITORY@sha256:HEX`: parsed
//! strictly (the registry is always named: no implied Docker Hub), so a typo is an error
//! at load time rather than a pull from somewhere else.

use std::fmt;
use std::path::PathBuf;

use super::OciError;

/// The scheme that marks a plugin `source` as a registry artifact.
pub const SCHEME: &str = "oci://";

/// A tag or a manifest digest.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Pin {
    Tag(String),
    /// `sha256:` and 64 lower-case hex digits.
    Digest(String),
}

/// A parsed `oci://` reference.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct OciRef {
    /// `host` or `host:port`.
    pub registry: String,
    pub repository: String,
    pub pin: Pin,
}

/// A plugin's `source = "oci://…"`, with the key its signature must verify with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OciSource {
    pub reference: OciRef,
    /// `public_key`: a cosign public key (PEM); without it no signature is asked for.
    pub public_key: Option<PathBuf>,
}

impl OciRef {
    /// Parses `text`, with or without the `oci://` scheme.
    pub fn parse(text: &str) -> Result<OciRef, OciError> {
        let bad = |why: &str| OciError::Reference {
            reference: text.to_owned(),
            why: why.to_owned(),
        };
        let rest = text.strip_prefix(SCHEME).unwrap_or(text);
        let (registry, rest) = rest
            .split_once('/')
            .ok_or_else(|| bad("expected oci://REGISTRY/REPOSITORY:TAG or …@sha256:HEX"))?;
        if registry.is_empty()
            || !(registry.contains('.') || registry.contains(':') || registry == "localhost")
            || !registry
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-.:[]".contains(c))
        {
            return Err(bad(
                "the registry comes first, as a host name with a dot or a port (ghcr.io, 127.0.0.1:5000)",
            ));
        }
        let (repository, pin) = if let Some((repository, digest)) = rest.split_once('@') {
            let hex = digest
                .strip_prefix("sha256:")
                .ok_or_else(|| bad("a digest is sha256:HEX"))?;
            if hex.len() != 64
                || !hex
                    .bytes()
                    .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
            {
                return Err(bad("a sha256 digest is 64 lower-case hex digits"));
            }
            (repository, Pin::Digest(digest.to_owned()))
        } else {
            let last = rest.rfind('/').map_or(0, |i| i + 1);
            let (repository, tag) = rest[last..]
                .split_once(':')
                .map(|(_, tag)| (&rest[..rest.len() - tag.len() - 1], tag))
                .ok_or_else(|| bad("name a tag (:1.0) or a digest (@sha256:…)"))?;
            let tag_ok = !tag.is_empty()
                && tag.len() <= 128
                && !tag.starts_with(['.', '-'])
                && tag
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "_.-".contains(c));
            if !tag_ok {
                return Err(bad("a tag is up to 128 letters, digits, `_`, `.` and `-`"));
            }
            (repository, Pin::Tag(tag.to_owned()))
        };
        let repo_ok = !repository.is_empty()
            && repository.split('/').all(|part| {
                !part.is_empty()
                    && part.starts_with(|c: char| c.is_ascii_lowercase() || c.is_ascii_digit())
                    && part
                        .chars()
                        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "._-".contains(c))
            });
        if !repo_ok {
            return Err(bad(
                "a repository is lower-case letters, digits, `.`, `_`, `-`, in `/`-separated parts",
            ));
        }
        Ok(OciRef {
            registry: registry.to_owned(),
            repository: repository.to_owned(),
            pin,
        })
    }

    /// The same repository at `digest`.
    pub fn at_digest(&self, digest: &str) -> OciRef {
        OciRef {
            pin: Pin::Digest(digest.to_owned()),
            ..self.clone()
        }
    }

    /// The same repository at `tag`.
    pub fn at_tag(&self, tag: &str) -> OciRef {
        OciRef {
            pin: Pin::Tag(tag.to_owned()),
            ..self.clone()
        }
    }

    /// `REGISTRY/REPOSITORY`, as cosign's payload names the image.
    pub fn repository_path(&self) -> String {
        format!("{}/{}", self.registry, self.repository)
    }

    pub(super) fn to_client(&self) -> oci_client::Reference {
        let (registry, repository) = (self.registry.clone(), self.repository.clone());
        match &self.pin {
            Pin::Tag(tag) => oci_client::Reference::with_tag(registry, repository, tag.clone()),
            Pin::Digest(d) => oci_client::Reference::with_digest(registry, repository, d.clone()),
        }
    }
}

impl fmt::Display for OciRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.pin {
            Pin::Tag(tag) => write!(f, "{SCHEME}{}/{}:{tag}", self.registry, self.repository),
            Pin::Digest(d) => write!(f, "{SCHEME}{}/{}@{d}", self.registry, self.repository),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{OciRef, Pin};

    #[test]
    fn tags_digests_and_ports_parse() {
        let r = OciRef::parse("oci://127.0.0.1:5000/tools/echo:1.0").unwrap();
        assert_eq!(r.registry, "127.0.0.1:5000");
        assert_eq!(r.repository, "tools/echo");
        assert_eq!(r.pin, Pin::Tag("1.0".into()));
        assert_eq!(r.to_string(), "oci://127.0.0.1:5000/tools/echo:1.0");
        let hex = "a".repeat(64);
        let r = OciRef::parse(&format!("oci://ghcr.io/me/echo@sha256:{hex}")).unwrap();
        assert_eq!(r.pin, Pin::Digest(format!("sha256:{hex}")));
    }

    #[test]
    fn bad_references_say_why() {
        for (text, why) in [
            ("oci://echo:1.0", "expected oci://"),
            ("oci://me/echo:1.0", "the registry comes first"),
            ("oci://ghcr.io/me/echo", "name a tag"),
            ("oci://ghcr.io/me/echo@sha256:abc", "64 lower-case hex"),
            ("oci://ghcr.io/me/echo@md5:abc", "sha256:HEX"),
            ("oci://ghcr.io/Me/echo:1", "lower-case letters"),
            ("oci://ghcr.io/me/echo:", "a tag is"),
        ] {
            let err = OciRef::parse(text).unwrap_err().to_string();
            assert!(err.contains(why), "{text}: {err}");
        }
    }
}
