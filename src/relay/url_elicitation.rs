//! URL-mode elicitation between the eras. A 2025-11-25 server may end a call with error
//! -32042 listing URLs the user must open before a retry; a 2026-07-28 client hears that as
//! an `input_required` result whose requests are those URL elicitations (the era reserves
//! -32042), and its retry is simply the call again. A 2026-07-28 server's URL-mode request
//! names no `elicitationId`, which a 2025-11-25 client needs. Either way the client must
//! have declared `elicitation.url`: `elicitation: {}` alone means forms only.

use serde_json::{Map, Value, json};

use crate::protocol::modern::MISSING_CLIENT_CAPABILITY;
use crate::protocol::{RpcError, URL_ELICITATION_REQUIRED, methods};

/// The capability path a URL-mode elicitation needs.
pub const CAPABILITY: &str = "elicitation.url";

/// Whether an `elicitation/create`'s params ask for a URL to be opened (not a form).
pub fn is_url_mode(params: Option<&Value>) -> bool {
    params.and_then(|p| p.get("mode")).and_then(Value::as_str) == Some("url")
}

/// -32021 for a 2026-07-28 request that did not declare URL-mode elicitation.
pub fn missing_capability() -> RpcError {
    RpcError::new(
        MISSING_CLIENT_CAPABILITY,
        format!("Missing required client capability: {CAPABILITY}"),
    )
    .with_data(json!({"requiredCapabilities": {"elicitation": {"url": {}}}}))
}

/// The `input_required` result standing for `error` when it is a -32042 listing URL
/// elicitations; each keyed by its `elicitationId` (the era has none in the request).
pub fn as_input_required(error: &RpcError) -> Option<Value> {
    if error.code != URL_ELICITATION_REQUIRED {
        return None;
    }
    let listed = error.data.as_ref()?.get("elicitations")?.as_array()?;
    let mut requests = Map::new();
    for (n, elicitation) in listed.iter().enumerate() {
        let mut params = elicitation.as_object()?.clone();
        let key = match params.remove("elicitationId") {
            Some(Value::String(id)) if !requests.contains_key(&id) => id,
            _ => format!("url-elicitation-{}", n + 1),
        };
        params.insert("mode".into(), "url".into());
        let request = json!({"method": methods::ELICITATION_CREATE, "params": params});
        requests.insert(key, request);
    }
    (!requests.is_empty())
        .then(|| json!({"resultType": "input_required", "inputRequests": requests}))
}

/// A URL-mode request's params for a 2025-11-25 client: with an `elicitationId` (the
/// request's key in its round) when the server gave none.
pub fn with_elicitation_id(params: Option<Value>, key: &str) -> Option<Value> {
    let mut params = params?;
    if is_url_mode(Some(&params))
        && let Some(map) = params.as_object_mut()
    {
        map.entry("elicitationId")
            .or_insert_with(|| Value::String(key.to_string()));
    }
    Some(params)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_32042_becomes_a_round_of_url_requests() {
        let error = RpcError::new(URL_ELICITATION_REQUIRED, "authorize first").with_data(json!({
            "elicitations": [
                {"mode": "url", "url": "https://a.example", "message": "A", "elicitationId": "e1"},
                {"mode": "url", "url": "https://b.example", "message": "B"},
            ]
        }));
        let result = as_input_required(&error).unwrap();
        assert_eq!(result["resultType"], "input_required");
        let requests = &result["inputRequests"];
        assert_eq!(requests["e1"]["method"], "elicitation/create");
        assert_eq!(requests["e1"]["params"]["url"], "https://a.example");
        assert!(requests["e1"]["params"].get("elicitationId").is_none());
        assert_eq!(requests["url-elicitation-2"]["params"]["message"], "B");
        let other = RpcError::new(URL_ELICITATION_REQUIRED, "no list");
        assert!(as_input_required(&other).is_none());
    }

    #[test]
    fn a_url_request_gets_an_id_for_the_session_era() {
        let params = json!({"mode": "url", "url": "https://a.example", "message": "m"});
        let given = with_elicitation_id(Some(params), "k").unwrap();
        assert_eq!(given["elicitationId"], "k");
        let form = json!({"message": "m", "requestedSchema": {}});
        let kept = with_elicitation_id(Some(form.clone()), "k").unwrap();
        assert_eq!(kept, form);
    }
}
