//! The tools and the prompt that ask the client mid-call: plans.rs (the fixture's) says
//! what each asks, round by round, and the result it ends with; here each question goes
//! through the `client` import, which the gateway carries in the client's era (a request
//! on its session in 2025-11-25, an `input_required` round in 2026-07-28).
//!
//! A round of one question goes through its own function (`elicit`, `sample`, `roots`);
//! a round of several through `ask-all`, which sends them together, as the fixture does
//! (a 2026-07-28 client gets them in one `input_required` round).

use serde_json::{Value, json};

use crate::plans::{Answers, Ask, Plan};
use crate::wasmgate::plugin::client::{self, Request};
use crate::wasmgate::plugin::types::AskError;

/// Where a question's `_meta` names its `inputRequests` key (wasmgate's convention, as
/// the fixture writes it).
const INPUT_KEY: &str = "dev.wasmgate/inputKey";

/// Asks every question of `plan`, round after round; the result it ends with (a tool's or
/// a prompt's, as MCP JSON).
pub fn run(plan: Plan) -> Value {
    let mut answers = Answers::new();
    for round in plan.rounds {
        let answered: Vec<Option<Value>> = match &round[..] {
            [ask] => vec![ask_client(ask)],
            _ => ask_together(&round),
        };
        for (ask, answer) in round.iter().zip(answered) {
            if let Some(answer) = answer {
                answers.insert(ask.key.to_owned(), answer);
            }
        }
    }
    (plan.finish)(&answers)
}

/// The client's answers to `round`, asked at once; `None` for each it gave none to.
fn ask_together(round: &[Ask]) -> Vec<Option<Value>> {
    let requests: Vec<Request> = round
        .iter()
        .map(|ask| match ask.method {
            "elicitation/create" => Request::Elicit(params(ask)),
            "sampling/createMessage" => Request::Sample(params(ask)),
            _ => Request::Roots,
        })
        .collect();
    let Ok(answered) = client::ask_all(&requests) else {
        return round.iter().map(|_| None).collect();
    };
    let kinds = round.iter().map(|ask| ask.method);
    (answered.into_iter().zip(kinds))
        .map(|(answer, method)| parse(method, answer))
        .collect()
}

/// The client's answer to `ask`; `None` when it gave none (it lacks the capability,
/// answered with an error, or went away): the plan decides without it, as the fixture's.
fn ask_client(ask: &Ask) -> Option<Value> {
    let answered: Result<String, AskError> = match ask.method {
        "elicitation/create" => client::elicit(&params(ask)),
        "sampling/createMessage" => client::sample(&params(ask)),
        "roots/list" => client::roots(),
        _ => return None,
    };
    parse(ask.method, answered)
}

/// The params of `ask`, with its key in `_meta`.
fn params(ask: &Ask) -> String {
    let mut params = ask.params.clone();
    params["_meta"] = json!({ INPUT_KEY: ask.key });
    params.to_string()
}

/// An answer as the plans read it: `roots` gives the list, the plans read the result of
/// `roots/list`.
fn parse(method: &str, answered: Result<String, AskError>) -> Option<Value> {
    let answer: Value = serde_json::from_str(&answered.ok()?).ok()?;
    Some(match method {
        "roots/list" => json!({ "roots": answer }),
        _ => answer,
    })
}
