//! `[servers.NAME.oauth]`: the gateway as a remote server's OAuth client.

use super::Ctx;
use crate::config::raw;
use crate::oauth_client::{Grant, OAuthSettings, Secret};

impl Ctx<'_> {
    pub(super) fn oauth_client(
        &mut self,
        name: &str,
        raw: &raw::OAuth,
        strict: bool,
    ) -> Option<OAuthSettings> {
        let s = self.servers_key();
        let client_secret = raw
            .client_secret
            .as_deref()
            .map(|value| Secret(self.expand(value, &[s, name, "oauth", "client_secret"], strict)));
        let client_id = raw
            .client_id
            .as_deref()
            .map(|value| self.expand(value, &[s, name, "oauth", "client_id"], strict));
        let grant = match raw.grant.as_deref() {
            Some("client_credentials") => Grant::ClientCredentials,
            Some("authorization_code") => Grant::AuthorizationCode,
            None if client_secret.is_some() => Grant::ClientCredentials,
            None => Grant::AuthorizationCode,
            Some(other) => {
                self.error(
                    &[s, name, "oauth", "grant"],
                    None,
                    format!("server `{name}`: unknown OAuth grant \"{other}\""),
                    "write \"authorization_code\" (a user logs in) or \"client_credentials\"",
                );
                return None;
            }
        };
        if grant == Grant::ClientCredentials && (client_id.is_none() || client_secret.is_none()) {
            self.error(
                &[s, name, "oauth"],
                None,
                format!("server `{name}`: the client_credentials grant needs a client_id and a client_secret"),
                "add both (client_secret = \"${VAR}\"), or use grant = \"authorization_code\"",
            );
            return None;
        }
        if client_secret.is_some() && client_id.is_none() {
            self.error(
                &[s, name, "oauth", "client_secret"],
                None,
                format!("server `{name}`: a client_secret without its client_id"),
                "add the client_id the authorization server gave with the secret",
            );
        }
        if let Some(url) = &raw.client_metadata_url
            && !url.starts_with("https://")
        {
            self.error(
                &[s, name, "oauth", "client_metadata_url"],
                None,
                format!("server `{name}`: client_metadata_url \"{url}\" is not an https:// URL"),
                "a client ID metadata document is served over HTTPS, e.g. https://example.com/wasmgate.json",
            );
        }
        Some(OAuthSettings {
            client_id,
            client_secret,
            scopes: raw.scopes.clone().unwrap_or_default(),
            grant,
            client_metadata_url: raw.client_metadata_url.clone(),
        })
    }
}
