//! The `*/list` methods: one page of the catalog as the client's profile shows it, with
//! an opaque cursor (the offset) to the next.

use serde_json::{Value, json};

use super::{RequestContext, Router};
use crate::catalog::view::Kind;
use crate::protocol::RpcError;

impl Router<'_> {
    /// One page of a catalog list; the cursor is the offset, opaque to the client.
    pub(super) async fn list(
        &self,
        context: &RequestContext,
        method: &str,
        params: &Option<Value>,
        kind: Kind,
        key: &str,
    ) -> Result<Value, RpcError> {
        self.gateway.wait_for_startup().await;
        // After the start-up wait (this answer holds what joined meanwhile) and before
        // the catalog is read: a change from here on is announced to the client.
        context.peer.mark_listed(method);
        let catalog = self.gateway.catalog();
        // A profile that left the config shows nothing until its client reconnects.
        let items = context.view.items(&catalog, kind);
        let page_size = self.gateway.config.load().gateway.page_size.max(1);
        let start = match params.as_ref().and_then(|p| p.get("cursor")) {
            None | Some(Value::Null) => 0,
            Some(cursor) => decode_cursor(cursor)
                .filter(|n| *n <= items.len())
                .ok_or_else(|| RpcError::invalid_params("Invalid cursor"))?,
        };
        let end = (start + page_size).min(items.len());
        let mut result = json!({ key: items[start..end] });
        if end < items.len() {
            result["nextCursor"] = Value::String(encode_cursor(end));
        }
        Ok(result)
    }
}

fn encode_cursor(offset: usize) -> String {
    format!("o{offset:x}")
}

fn decode_cursor(cursor: &Value) -> Option<usize> {
    cursor
        .as_str()?
        .strip_prefix('o')
        .and_then(|hex| usize::from_str_radix(hex, 16).ok())
}
