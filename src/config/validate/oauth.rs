//! `[http.oauth]`: the issuer, the resource URL, introspection, scopes and the claim
//! rules that turn an access token into a principal.

use std::collections::BTreeMap;
use std::time::Duration;

use super::Ctx;
use crate::config::model::{OauthFront, OauthIntrospection, OauthRule, Profile};
use crate::config::raw;

/// Between two JWKS fetches for an unknown `kid`, unless `jwks_refresh` says otherwise.
const JWKS_REFRESH: Duration = Duration::from_secs(30);

impl Ctx<'_> {
    pub(super) fn oauth(
        &mut self,
        raw: raw::HttpOauth,
        profiles: &BTreeMap<String, Profile>,
    ) -> Option<OauthFront> {
        let key = ["http", "oauth"];
        let issuer = self.oauth_url(
            &raw.issuer,
            "issuer",
            "the authorization server's issuer, e.g. \"https://login.example.com\"",
        );
        let resource = self
            .oauth_url(
                &raw.resource,
                "resource",
                "the gateway's public base URL, e.g. \"https://mcp.example.com\"",
            )
            .map(|r| r.trim_end_matches('/').to_string());
        let jwks_uri = raw.jwks_uri.and_then(|u| {
            self.oauth_url(
                &u,
                "jwks_uri",
                "the issuer's JWKS URL, or remove it to read it from the issuer's metadata",
            )
        });
        let introspection = raw.introspection.and_then(|i| {
            let at = ["http", "oauth", "introspection"];
            let endpoint = self.oauth_url(&i.endpoint, "endpoint", "the RFC 7662 introspection endpoint");
            let client_id = self.expand(&i.client_id, &at, true);
            let client_secret = self.expand(&i.client_secret, &at, true);
            if client_id.is_empty() || client_secret.is_empty() {
                self.error(
                    &at,
                    None,
                    "client_id and client_secret must not be empty",
                    "give the gateway's client at the authorization server, the secret through ${VAR}",
                );
            }
            Some(OauthIntrospection {
                endpoint: endpoint?,
                client_id,
                client_secret,
            })
        });
        let scopes = raw.scopes.unwrap_or_else(|| vec!["mcp".into()]);
        for scope in scopes.iter().chain(&raw.operator_scope) {
            if scope.is_empty()
                || scope.contains(|c: char| c.is_whitespace() || c == '"' || c == '\\')
            {
                self.error(
                    &key,
                    Some(scope),
                    format!("scope `{scope}` is empty or has a space, quote or backslash"),
                    "scopes are single words, e.g. \"mcp\"",
                );
            }
        }
        let ca_file = raw
            .ca_file
            .as_deref()
            .and_then(|file| self.path(file, &["http", "oauth", "ca_file"], true));
        let claim = raw.claim.unwrap_or_else(|| "sub".into());
        let mut rules = Vec::new();
        for rule in raw.rules {
            for profile in &rule.profiles {
                if !profiles.contains_key(profile) {
                    self.error(
                        &["http", "oauth", "rules"],
                        Some(profile),
                        format!(
                            "rule {} = \"{}\" names profile `{profile}`, which is not defined",
                            rule.claim, rule.value
                        ),
                        "define [profiles.NAME] or remove the name",
                    );
                }
            }
            rules.push(OauthRule {
                claim: rule.claim,
                value: rule.value,
                profiles: rule.profiles,
                operator: rule.operator.unwrap_or(false),
            });
        }
        Some(OauthFront {
            issuer: issuer?,
            resource: resource?,
            jwks_uri,
            introspection,
            scopes,
            operator_scope: raw.operator_scope,
            ca_file,
            claim,
            jwks_refresh: raw.jwks_refresh.map_or(JWKS_REFRESH, |g| g.0),
            rules,
        })
    }

    /// An http(s) URL of `[http.oauth]`; plain http only to a loopback host.
    fn oauth_url(&mut self, url: &str, name: &str, fix: &str) -> Option<String> {
        let uri = url.parse::<http::Uri>().ok().filter(|u| u.host().is_some());
        let loopback = |host: &str| {
            host == "localhost"
                || host
                    .trim_start_matches('[')
                    .trim_end_matches(']')
                    .parse::<std::net::IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        };
        let fine = uri.as_ref().is_some_and(|u| match u.scheme_str() {
            Some("https") => true,
            Some("http") => u.host().is_some_and(loopback),
            _ => false,
        });
        if !fine {
            self.error(
                &["http", "oauth"],
                Some(url),
                format!("{name} `{url}` is not an https URL (plain http only for a loopback host)"),
                fix.to_string(),
            );
            return None;
        }
        Some(url.to_string())
    }
}
