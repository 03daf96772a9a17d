//! `hash`: digests and encodings, pure compute with no grants.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD, URL_SAFE};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use wasmgate_plugin::{Plugin, Structured, Tool, ToolError};

#[derive(Deserialize, JsonSchema)]
struct TextArgs {
    /// Text; its UTF-8 bytes are used
    text: String,
}

#[derive(Deserialize, JsonSchema)]
struct EncodeArgs {
    /// Text; its UTF-8 bytes are used
    text: String,
    /// Use the URL-safe alphabet (`-` and `_` instead of `+` and `/`)
    #[serde(default)]
    url_safe: bool,
}

#[derive(Deserialize, JsonSchema)]
struct DecodeArgs {
    /// Base64 text
    data: String,
    /// Use the URL-safe alphabet (`-` and `_` instead of `+` and `/`)
    #[serde(default)]
    url_safe: bool,
}

#[derive(Serialize, JsonSchema)]
struct DigestOutput {
    #[schemars(regex(pattern = "^[0-9a-f]{64}$"))]
    sha256: String,
    /// Length of the hashed input in bytes
    bytes: usize,
}

fn plugin() -> Plugin {
    Plugin::new()
        .tool(
            Tool::new(
                "sha256",
                "SHA-256 digest of the UTF-8 bytes of `text`, as lowercase hex; structured: \
                 the digest and the input length.",
                sha256,
            )
            .title("SHA-256")
            .pure(),
        )
        .tool(
            Tool::new(
                "base64_encode",
                "Base64 encoding (padded) of the UTF-8 bytes of `text`.",
                base64_encode,
            )
            .title("Base64 encode")
            .pure(),
        )
        .tool(
            Tool::new(
                "base64_decode",
                "Decodes Base64 `data`, padded or not, into UTF-8 text; fails if the bytes are \
                 not UTF-8.",
                base64_decode,
            )
            .title("Base64 decode")
            .pure(),
        )
        .tool(
            Tool::new(
                "hex_encode",
                "Lowercase hex of the UTF-8 bytes of `text`.",
                |a: TextArgs| Ok(hex(a.text.as_bytes())),
            )
            .title("Hex encode")
            .pure(),
        )
}

wasmgate_plugin::export!(plugin);

fn sha256(a: TextArgs) -> Result<Structured<DigestOutput>, ToolError> {
    let digest = hex(&Sha256::digest(a.text.as_bytes()));
    Ok(Structured::new(DigestOutput {
        sha256: digest.clone(),
        bytes: a.text.len(),
    })
    .with_text(digest))
}

fn base64_encode(a: EncodeArgs) -> Result<String, ToolError> {
    let engine = if a.url_safe { &URL_SAFE } else { &STANDARD };
    Ok(engine.encode(a.text))
}

fn base64_decode(a: DecodeArgs) -> Result<String, ToolError> {
    let decoder = if a.url_safe {
        &URL_SAFE_DECODER
    } else {
        &STANDARD_DECODER
    };
    let bytes = decoder
        .decode(a.data.trim())
        .map_err(|e| ToolError::new(format!("not Base64: {e}")))?;
    let len = bytes.len();
    String::from_utf8(bytes)
        .map_err(|_| ToolError::new(format!("the {len} decoded bytes are not UTF-8 text")))
}

/// Decoders that take Base64 with or without its `=` padding: URL-safe Base64 (JWTs,
/// URLs) usually comes without it.
const ANY_PADDING: GeneralPurposeConfig =
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent);
const STANDARD_DECODER: GeneralPurpose = GeneralPurpose::new(&alphabet::STANDARD, ANY_PADDING);
const URL_SAFE_DECODER: GeneralPurpose = GeneralPurpose::new(&alphabet::URL_SAFE, ANY_PADDING);

fn hex(bytes: &[u8]) -> String {
    use std::fmt::Write;
    bytes
        .iter()
        .fold(String::with_capacity(bytes.len() * 2), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        })
}
