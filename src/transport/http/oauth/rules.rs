//! A token's claims to a principal: its name (the `claim` of `[http.oauth]`), the profiles
//! and operator access its matching `[[http.oauth.rules]]` give, and its scopes.

use serde_json::{Map, Value};

use super::Refusal;
use crate::config::OauthFront;

/// Who an access token speaks for.
#[derive(Clone, Debug)]
pub struct Principal {
    pub name: String,
    /// Profiles it may use; `None`: every one, and `/mcp`.
    pub profiles: Option<Vec<String>>,
    pub operator: bool,
}

pub fn principal(config: &OauthFront, claims: &Map<String, Value>) -> Result<Principal, Refusal> {
    let name = match claims.get(&config.claim) {
        Some(Value::String(s)) if !s.is_empty() => s.clone(),
        Some(Value::Number(n)) => n.to_string(),
        _ => {
            return Err(Refusal::Invalid(format!(
                "it has no `{}` claim to name its principal",
                config.claim
            )));
        }
    };
    let mut operator =
        (config.operator_scope.as_deref()).is_some_and(|s| scopes(claims).contains(&s));
    if config.rules.is_empty() {
        return Ok(Principal {
            name,
            profiles: None,
            operator,
        });
    }
    let mut profiles = Some(Vec::new());
    let mut matched = false;
    for rule in config
        .rules
        .iter()
        .filter(|r| holds(claims.get(&r.claim), &r.value))
    {
        matched = true;
        operator |= rule.operator;
        match (&mut profiles, rule.profiles.is_empty()) {
            (_, true) => profiles = None,
            (Some(list), false) => list.extend(rule.profiles.iter().cloned()),
            (None, false) => {}
        }
    }
    if !matched && !operator {
        return Err(Refusal::Forbidden(format!(
            "no [[http.oauth.rules]] gives principal `{name}` access"
        )));
    }
    Ok(Principal {
        name,
        profiles,
        operator,
    })
}

/// The space-separated `scope` claim (or an `scp` list, as some issuers write it).
pub fn scopes(claims: &Map<String, Value>) -> Vec<&str> {
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) => s.split_whitespace().collect(),
        (_, Some(Value::Array(list))) => list.iter().filter_map(Value::as_str).collect(),
        (_, Some(Value::String(s))) => s.split_whitespace().collect(),
        _ => Vec::new(),
    }
}

/// The claim is `value`, or a list holding it.
fn holds(claim: Option<&Value>, value: &str) -> bool {
    match claim {
        Some(Value::String(s)) => s == value,
        Some(Value::Array(list)) => list.iter().any(|v| v.as_str() == Some(value)),
        Some(Value::Bool(b)) => b.to_string() == value,
        Some(Value::Number(n)) => n.to_string() == value,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::principal;
    use crate::config::{OauthFront, OauthRule};

    #[test]
    fn rules_give_profiles_and_an_unmatched_token_nothing() {
        let config = OauthFront {
            issuer: "https://as".into(),
            resource: "https://gw".into(),
            jwks_uri: None,
            introspection: None,
            scopes: vec!["mcp".into()],
            operator_scope: Some("admin".into()),
            ca_file: None,
            claim: "sub".into(),
            jwks_refresh: std::time::Duration::from_secs(30),
            rules: vec![OauthRule {
                claim: "groups".into(),
                value: "eng".into(),
                profiles: vec!["eng".into()],
                operator: false,
            }],
        };
        let claims = json!({"sub": "ann", "groups": ["eng", "x"]});
        let p = principal(&config, claims.as_object().unwrap()).unwrap();
        assert_eq!(p.name, "ann");
        assert_eq!(p.profiles, Some(vec!["eng".to_string()]));
        assert!(!p.operator);
        let claims = json!({"sub": "bob", "groups": "ops"});
        assert!(principal(&config, claims.as_object().unwrap()).is_err());
        let claims = json!({"sub": "eve", "scope": "mcp admin"});
        assert!(
            principal(&config, claims.as_object().unwrap())
                .unwrap()
                .operator
        );
        assert!(principal(&config, json!({"groups": "eng"}).as_object().unwrap()).is_err());
    }
}
