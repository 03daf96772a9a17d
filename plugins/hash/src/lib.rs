//! `hash`: digests and encodings, pure compute with no grants.

use base64::Engine as _;
use base64::alphabet;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD, URL_SAFE};
use plugin_kit::{
    CallResult, Guest, ToolInfo, ToolInfoExt, args, failed, text, text_and_structured, tool,
    unknown_tool,
};
use serde::Deserialize;
use serde_json::json;
use sha2::{Digest, Sha256};

struct Hash;

#[derive(Deserialize)]
struct TextArgs {
    text: String,
}

#[derive(Deserialize)]
struct EncodeArgs {
    text: String,
    #[serde(default)]
    url_safe: bool,
}

#[derive(Deserialize)]
struct DecodeArgs {
    data: String,
    #[serde(default)]
    url_safe: bool,
}

impl Guest for Hash {
    fn list_tools() -> Vec<ToolInfo> {
        let text = json!({"type": "string", "description": "Text; its UTF-8 bytes are used"});
        let url_safe = json!({
            "type": "boolean",
            "default": false,
            "description": "Use the URL-safe alphabet (`-` and `_` instead of `+` and `/`)",
        });
        let base64 = json!({"type": "string", "description": "Base64 text"});
        vec![
            tool(
                "sha256",
                "SHA-256 digest of the UTF-8 bytes of `text`, as lowercase hex; structured: \
                 the digest and the input length.",
                json!({"text": text}),
                &["text"],
            )
            .title("SHA-256")
            .output_schema(digest_schema())
            .pure(),
            tool(
                "base64_encode",
                "Base64 encoding (padded) of the UTF-8 bytes of `text`.",
                json!({"text": text, "url_safe": url_safe}),
                &["text"],
            )
            .title("Base64 encode")
            .pure(),
            tool(
                "base64_decode",
                "Decodes Base64 `data`, padded or not, into UTF-8 text; fails if the bytes are \
                 not UTF-8.",
                json!({"data": base64, "url_safe": url_safe}),
                &["data"],
            )
            .title("Base64 decode")
            .pure(),
            tool(
                "hex_encode",
                "Lowercase hex of the UTF-8 bytes of `text`.",
                json!({"text": text}),
                &["text"],
            )
            .title("Hex encode")
            .pure(),
        ]
    }

    fn call_tool(name: String, arguments: String) -> CallResult {
        match name.as_str() {
            "sha256" => {
                let TextArgs { text } = args(&arguments)?;
                let digest = hex(&Sha256::digest(text.as_bytes()));
                text_and_structured(&digest, &json!({"sha256": digest, "bytes": text.len()}))
            }
            "base64_encode" => {
                let a: EncodeArgs = args(&arguments)?;
                Ok(text(engine(a.url_safe).encode(a.text)))
            }
            "base64_decode" => {
                let a: DecodeArgs = args(&arguments)?;
                let decoder = if a.url_safe {
                    &URL_SAFE_DECODER
                } else {
                    &STANDARD_DECODER
                };
                let bytes = decoder
                    .decode(a.data.trim())
                    .map_err(|e| failed(format!("not Base64: {e}")))?;
                let len = bytes.len();
                String::from_utf8(bytes)
                    .map(text)
                    .map_err(|_| failed(format!("the {len} decoded bytes are not UTF-8 text")))
            }
            "hex_encode" => {
                let TextArgs { text: t } = args(&arguments)?;
                Ok(text(hex(t.as_bytes())))
            }
            _ => Err(unknown_tool(&name)),
        }
    }
}

fn digest_schema() -> serde_json::Value {
    json!({
        "type": "object",
        "properties": {
            "sha256": {"type": "string", "pattern": "^[0-9a-f]{64}$"},
            "bytes": {"type": "integer", "description": "Length of the hashed input in bytes"},
        },
        "required": ["sha256", "bytes"],
    })
}

fn engine(url_safe: bool) -> &'static GeneralPurpose {
    if url_safe { &URL_SAFE } else { &STANDARD }
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

plugin_kit::export!(Hash);
