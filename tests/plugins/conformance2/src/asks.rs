//! The tools and the prompt that ask the client mid-call: plans.rs (the fixture's) says
//! what each asks, round by round, and the result it ends with; here each question goes
//! through the `client` import, which the gateway carries in the client's era (a request
//! on its session in 2025-11-25, an `input_required` round in 2026-07-28).
//!
//! A component's call runs on one thread: the questions of a round go one after the
//! other, where the fixture sends them at once.

use serde_json::{Value, json};

use crate::plans::{Answers, Ask, Plan};
use crate::wasmgate::plugin::client;
use crate::wasmgate::plugin::types::AskError;

/// Where a question's `_meta` names its `inputRequests` key (wasmgate's convention, as
/// the fixture writes it).
const INPUT_KEY: &str = "dev.wasmgate/inputKey";

/// Asks every question of `plan`, round after round; the result it ends with (a tool's or
/// a prompt's, as MCP JSON).
pub fn run(plan: Plan) -> Value {
    let mut answers = Answers::new();
    for round in plan.rounds {
        for ask in round {
            if let Some(answer) = ask_client(&ask) {
                answers.insert(ask.key.to_owned(), answer);
            }
        }
    }
    (plan.finish)(&answers)
}

/// The client's answer to `ask`; `None` when it gave none (it lacks the capability,
/// answered with an error, or went away): the plan decides without it, as the fixture's.
fn ask_client(ask: &Ask) -> Option<Value> {
    let mut params = ask.params.clone();
    params["_meta"] = json!({ INPUT_KEY: ask.key });
    let answered: Result<String, AskError> = match ask.method {
        "elicitation/create" => client::elicit(&params.to_string()),
        "sampling/createMessage" => client::sample(&params.to_string()),
        // `roots` gives the list; the plans read the result of `roots/list`.
        "roots/list" => client::roots().map(|roots| format!(r#"{{"roots":{roots}}}"#)),
        _ => return None,
    };
    serde_json::from_str(&answered.ok()?).ok()
}
