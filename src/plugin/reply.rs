//! The `reply` resource of the 0.2 world: where a call writes its result, item by item.
//! What the host keeps of one result is bounded as it is written: an item that would take
//! the result past [`convert::MAX_RESULT_BYTES`] (or [`convert::MAX_RESULT_ITEMS`]) is
//! refused and dropped, so a result is never held whole before it is measured. One item's
//! own size is bounded by the plugin's memory limit (it is copied out of its memory).

use super::bindings::{Blob, Content, EmbeddedResource, ToolOutput};
use super::bindings_v2::wasmgate::plugin::types as v2;
use super::convert::{MAX_RESULT_BYTES, MAX_RESULT_ITEMS};

/// What a reply is for: a read's items must be resource contents.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplyFor {
    Tool,
    Read,
}

/// A call's result as it is written.
pub struct Reply {
    pub purpose: ReplyFor,
    pub output: ToolOutput,
    used: usize,
}

impl Reply {
    pub fn new(purpose: ReplyFor) -> Reply {
        Reply {
            purpose,
            output: ToolOutput {
                content: Vec::new(),
                structured: None,
                is_error: false,
            },
            used: 0,
        }
    }

    /// Bytes the reply may still take.
    pub fn room(&self) -> u64 {
        MAX_RESULT_BYTES.saturating_sub(self.used) as u64
    }

    pub fn add(&mut self, item: v2::Content) -> Result<(), String> {
        if self.purpose == ReplyFor::Read && !matches!(item, v2::Content::Resource(_)) {
            return Err(
                "a resource read's reply takes `resource` items (the contents of a URI)".into(),
            );
        }
        if self.output.content.len() >= MAX_RESULT_ITEMS {
            return Err(format!(
                "a result may hold {MAX_RESULT_ITEMS} items; this one was not kept"
            ));
        }
        let item = from_v2(item);
        self.take(item_bytes(&item))?;
        self.output.content.push(item);
        Ok(())
    }

    pub fn structured(&mut self, json: String) -> Result<(), String> {
        if self.purpose == ReplyFor::Read {
            return Err("a resource read has no structured result".into());
        }
        let before = self.output.structured.as_ref().map_or(0, String::len);
        self.used -= before;
        if let Err(why) = self.take(json.len()) {
            self.used += before;
            return Err(why);
        }
        self.output.structured = Some(json);
        Ok(())
    }

    pub fn mark_error(&mut self) {
        self.output.is_error = true;
    }

    fn take(&mut self, bytes: usize) -> Result<(), String> {
        if self.used + bytes > MAX_RESULT_BYTES {
            return Err(format!(
                "the result would pass {} MiB (it holds {} bytes; this item has {bytes}); \
                 the item was not kept",
                MAX_RESULT_BYTES >> 20,
                self.used
            ));
        }
        self.used += bytes;
        Ok(())
    }
}

/// Bytes of one item, as the 0.1 result's size counts them.
fn item_bytes(item: &Content) -> usize {
    match item {
        Content::Text(t) => t.len(),
        Content::Image(b) | Content::Audio(b) => b.data.len() + b.mime_type.len(),
        Content::Resource(r) => {
            r.uri.len()
                + r.mime_type.as_ref().map_or(0, String::len)
                + r.text.as_ref().map_or(0, String::len)
                + r.blob.as_ref().map_or(0, Vec::len)
        }
    }
}

/// A 0.2 content item as the 0.1 types the conversion to MCP reads (the same shape).
pub fn from_v2(item: v2::Content) -> Content {
    let blob = |b: v2::Blob| Blob {
        data: b.data,
        mime_type: b.mime_type,
    };
    match item {
        v2::Content::Text(t) => Content::Text(t),
        v2::Content::Image(b) => Content::Image(blob(b)),
        v2::Content::Audio(b) => Content::Audio(blob(b)),
        v2::Content::Resource(r) => Content::Resource(EmbeddedResource {
            uri: r.uri,
            mime_type: r.mime_type,
            text: r.text,
            blob: r.blob,
        }),
    }
}
