//! The fixture's 2026-07-28 form, with `--eras both`: a request whose `_meta` names a
//! protocol version (or `server/discover`) is served statelessly, from what that request
//! carries (version, client capabilities, log level), as the suite's reference server
//! does. Tools and the prompt that ask the client answer `input_required` with the
//! questions of plans.rs and a signed `requestState` (state.rs), and read
//! `inputResponses` on the retry; `subscriptions/listen` stays open and gets the list
//! changes it asked for (listen.rs). Everything else is the 2025 form's answer, with
//! `resultType` and, on lists and reads, cache hints.

use serde_json::{Map, Value, json};
use wasmgate::protocol::log_rank;

use crate::plans::{self, Answers, PROMPT, Plan};
use crate::{Fixture, state};

pub const VERSION: &str = "2026-07-28";
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";
const INVALID_PARAMS: i64 = -32602;
const METHOD_NOT_FOUND: i64 = -32601;
const MISSING_CAPABILITY: i64 = -32021;
const UNSUPPORTED_VERSION: i64 = -32022;

/// A JSON-RPC error object.
type Error = Value;

fn error(code: i64, message: impl Into<String>) -> Error {
    json!({"code": code, "message": message.into()})
}

fn invalid(message: impl Into<String>) -> Error {
    error(INVALID_PARAMS, message)
}

/// Whether a request is of the stateless era: it claims a version in its `_meta`, or it
/// is `server/discover` (which a 2025 session never sends).
pub fn is_modern(method: &str, params: &Value) -> bool {
    method == "server/discover" || params["_meta"].get(META_VERSION).is_some()
}

/// What one stateless request declares in its `_meta`.
struct Request {
    capabilities: Map<String, Value>,
    /// The rank of the least severe message it wants; none: no logs.
    log_level: Option<u8>,
}

impl Request {
    fn read(params: &Value) -> Result<Request, Error> {
        let Some(meta) = params.get("_meta").and_then(Value::as_object) else {
            return Err(invalid("a request of 2026-07-28 must carry _meta"));
        };
        let Some(version) = meta.get(META_VERSION).and_then(Value::as_str) else {
            return Err(invalid(format!("_meta must name {META_VERSION}")));
        };
        if version != VERSION {
            let mut failure = error(
                UNSUPPORTED_VERSION,
                format!("unsupported protocol version {version}"),
            );
            failure["data"] = json!({"supported": [VERSION], "requested": version});
            return Err(failure);
        }
        let Some(capabilities) = meta.get(META_CAPABILITIES).and_then(Value::as_object) else {
            return Err(invalid(format!("_meta must carry {META_CAPABILITIES}")));
        };
        let log_level = match meta.get(META_LOG_LEVEL) {
            None => None,
            Some(level) => Some(
                level
                    .as_str()
                    .and_then(log_rank)
                    .ok_or_else(|| invalid(format!("unknown logLevel {level}")))?,
            ),
        };
        Ok(Request {
            capabilities: capabilities.clone(),
            log_level,
        })
    }

    fn declares(&self, capability: &str) -> bool {
        self.capabilities.contains_key(capability)
    }

    /// Whether messages at `level` are wanted.
    fn logs(&self, level: &str) -> bool {
        let rank = log_rank(level).unwrap_or(0);
        self.log_level.is_some_and(|wanted| rank >= wanted)
    }
}

/// Answers the stateless request `id`; `None` when nothing is to be sent (a listen that
/// the client cancelled).
pub async fn handle(
    fixture: &Fixture,
    id: &Value,
    method: &str,
    params: &Value,
) -> Option<Result<Value, Error>> {
    let request = match Request::read(params) {
        Ok(request) => request,
        Err(failure) => return Some(Err(failure)),
    };
    let answer = match method {
        "server/discover" => Ok(discover()),
        "subscriptions/listen" => return listen(fixture, id, params).await,
        "tools/list" | "prompts/list" | "resources/list" | "resources/templates/list" => {
            fixture.handle(method, params).await.map(cached)
        }
        "completion/complete" => fixture.handle(method, params).await,
        "resources/read" => {
            let uri = params["uri"].as_str().unwrap_or_default();
            return Some(match crate::read(uri) {
                Ok(result) => Ok(complete(cached(result))),
                // SEP-2164: not found is invalid params now, naming the resource.
                Err((_, message)) => {
                    let mut failure = invalid(message);
                    failure["data"] = json!({ "uri": uri });
                    Err(failure)
                }
            });
        }
        "prompts/get" if params["name"] == PROMPT => {
            return Some(rounds(
                &subject(method, params),
                plans::prompt(),
                &request,
                params,
            ));
        }
        "prompts/get" => fixture.handle(method, params).await,
        "tools/call" => return Some(call(fixture, &request, params).await.map(complete)),
        // `initialize`, `ping`, `logging/setLevel`, `resources/(un)subscribe` are gone.
        _ => Err((METHOD_NOT_FOUND, format!("Method not found: {method}"))),
    };
    Some(
        answer
            .map(complete)
            .map_err(|(code, message)| error(code, message)),
    )
}

/// `server/discover`: both eras, and what `initialize` declares.
fn discover() -> Value {
    let mut versions: Vec<&str> = crate::VERSIONS.to_vec();
    versions.push(VERSION);
    let initialized = crate::initialize(&json!({}));
    cached(json!({
        "supportedVersions": versions,
        "capabilities": initialized["capabilities"],
        "_meta": { META_SERVER_INFO: initialized["serverInfo"] },
    }))
}

/// `result` with `resultType: complete`, unless it says otherwise.
fn complete(mut result: Value) -> Value {
    if let Some(map) = result.as_object_mut() {
        map.entry("resultType").or_insert_with(|| json!("complete"));
    }
    result
}

/// `result` with cache hints: not to be kept (the trigger tools change the lists), and the
/// same for every client.
fn cached(mut result: Value) -> Value {
    result["ttlMs"] = json!(0);
    result["cacheScope"] = json!("public");
    result
}

/// What a `requestState` is bound to: the method, the name and the arguments.
fn subject(method: &str, params: &Value) -> String {
    format!("{method} {} {}", params["name"], params["arguments"])
}

async fn call(fixture: &Fixture, request: &Request, params: &Value) -> Result<Value, Error> {
    let name = params["name"].as_str().unwrap_or_default();
    let declared = |capability: &str| request.declares(capability);
    if let Some(plan) = plans::tool(name, &params["arguments"], &declared) {
        if name == "test_streaming_elicitation" && params.get("requestState").is_none() {
            crate::scenarios_2026::streaming_progress(&fixture.peer, params);
        }
        return rounds(&subject("tools/call", params), plan, request, params);
    }
    let logs = request.logs("info");
    let answer = fixture.call(params, logs).await;
    answer.map_err(|(code, message)| error(code, message))
}

/// The round of `plan` that the retry in `params` reaches: the next questions as
/// `input_required`, or the final result once every round is answered. A round whose
/// answers are missing is asked again; a malformed answer or state is refused.
fn rounds(subject: &str, plan: Plan, request: &Request, params: &Value) -> Result<Value, Error> {
    let needed = plan.rounds.iter().flatten().map(|a| a.capability);
    if let Some(capability) = needed.into_iter().find(|c| !request.declares(c)) {
        let mut failure = error(
            MISSING_CAPABILITY,
            format!("this request needs the client capability `{capability}`"),
        );
        failure["data"] = json!({"requiredCapabilities": { capability: {} }});
        return Err(failure);
    }
    let (mut round, mut answers) = match params.get("requestState") {
        None => (0, Answers::new()),
        Some(sealed) => state::open(sealed, subject).map_err(invalid)?,
    };
    let responses = match params.get("inputResponses") {
        None => Map::new(),
        Some(Value::Object(responses)) => responses.clone(),
        Some(_) => return Err(invalid("inputResponses must be an object")),
    };
    while let Some(asks) = plan.rounds.get(round) {
        for ask in asks {
            if responses.get(ask.key).is_some_and(|r| !r.is_object()) {
                return Err(invalid(format!(
                    "inputResponses.{} must be an object",
                    ask.key
                )));
            }
        }
        if !asks.iter().all(|a| responses.contains_key(a.key)) {
            let requests: Map<String, Value> = asks
                .iter()
                .map(|a| {
                    let asked = json!({"method": a.method, "params": a.params});
                    (a.key.to_owned(), asked)
                })
                .collect();
            return Ok(
                json!({"resultType": "input_required", "inputRequests": requests,
                "requestState": state::seal(subject, round, &answers)}),
            );
        }
        for ask in asks {
            answers.insert(ask.key.to_owned(), responses[ask.key].clone());
        }
        round += 1;
    }
    Ok(complete((plan.finish)(&answers)))
}

/// `subscriptions/listen`: acknowledged with what of the filter this server sends, then
/// open until the client cancels it (no result follows then).
async fn listen(fixture: &Fixture, id: &Value, params: &Value) -> Option<Result<Value, Error>> {
    let Some(asked) = params.get("notifications").and_then(Value::as_object) else {
        return Some(Err(invalid(
            "subscriptions/listen needs its notifications filter",
        )));
    };
    let mut honoured = Map::new();
    for flag in [
        "toolsListChanged",
        "promptsListChanged",
        "resourcesListChanged",
    ] {
        if asked.get(flag) == Some(&json!(true)) {
            honoured.insert(flag.to_owned(), json!(true));
        }
    }
    // Per-resource updates are accepted, though no resource of this fixture changes.
    if let Some(uris) = asked.get("resourceSubscriptions").filter(|u| u.is_array()) {
        honoured.insert("resourceSubscriptions".to_owned(), uris.clone());
    }
    let peer = &fixture.peer;
    let ended = peer.listens.open(id.clone(), honoured, &|m| peer.send(m));
    let _ = ended.await;
    None
}
