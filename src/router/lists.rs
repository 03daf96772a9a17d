//! The `*/list` methods: one page of the catalog as the client's profile shows it, with
//! an opaque cursor (the offset) to the next.

use serde_json::Value;

use super::{RequestContext, Router};
use crate::catalog::view::{Kind, View};
use crate::protocol::{Reply, RpcError};

impl Router<'_> {
    /// One page of a catalog list ([`crate::catalog::Catalog::page`]).
    pub(super) async fn list(
        &self,
        context: &RequestContext,
        method: &str,
        params: &Option<Value>,
        kind: Kind,
        key: &str,
    ) -> Result<Reply, RpcError> {
        self.gateway.wait_for_startup().await;
        // After the start-up wait (this answer holds what joined meanwhile) and before
        // the catalog is read: a change from here on is announced to the client.
        context.peer.mark_listed(method);
        let catalog = self.gateway.catalog();
        let cursor = params.as_ref().and_then(|p| p.get("cursor"));
        let page_size = self.gateway.config.load().gateway.page_size.max(1);
        let chain = self.gateway.chain().await;
        let page = match self.edited(&chain, context, kind).await {
            // The view was applied before the chain's edits.
            Some(edited) => (edited.listing).page(kind, &View::All, cursor, page_size, key),
            // A profile that left the config shows nothing until its client reconnects.
            None => catalog.page(kind, &context.view, cursor, page_size, key),
        };
        page.map(Reply::Raw)
            .ok_or_else(|| RpcError::invalid_params("Invalid cursor"))
    }
}
