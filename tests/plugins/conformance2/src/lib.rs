//! `conformance2`: the project's conformance fixture (examples/conformance_server/) as one
//! `wasmgate:plugin@0.2.0` component, on raw `wit_bindgen` bindings: every tool (those
//! that ask the client mid-call too), the resources and their template, the prompts and
//! the completions, so the official MCP conformance suite runs against the gateway with
//! no stdio fixture at all (tests/gateway/conformance.rs). Names, texts and behaviour are
//! the fixture's, which mirrors the suite's reference server.
//!
//! The trigger tools add or remove a tool and a prompt. The plugin's lists are read again
//! in a fresh instance, so the toggles live in files under `/state` when the config
//! grants that directory (`rw`), and in the instance otherwise.

wit_bindgen::generate!({
    path: "../../../wit/plugin-0.2",
    world: "wasmgate:plugin/plugin",
    generate_all,
});

mod asks;
mod catalog;
mod dynamic;
// The fixture's own plans; an `Ask`'s `capability` is unread here: the gateway checks
// what the client declared.
#[allow(dead_code)]
mod plans;
mod tools;

use exports::wasmgate::plugin::{completion, meta, prompts, resources, tool};
use wasmgate::plugin::results::Reply;
use wasmgate::plugin::types::{
    About, CallError, CompletionRequest, Completions, PromptInfo, PromptOutput, RequestError,
    ResourceInfo, ResourceTemplate, ToolInfo,
};

struct Conformance;

impl tool::Guest for Conformance {
    fn list_tools() -> Vec<ToolInfo> {
        tools::list()
    }

    fn call_tool(name: String, arguments: String, reply: &Reply) -> Result<(), CallError> {
        tools::call(&name, &arguments, reply)
    }
}

impl resources::Guest for Conformance {
    fn list_resources() -> Vec<ResourceInfo> {
        catalog::resources()
    }

    fn list_templates() -> Vec<ResourceTemplate> {
        catalog::templates()
    }

    fn read_resource(uri: String, reply: &Reply) -> Result<(), RequestError> {
        catalog::read(&uri, reply)
    }
}

impl prompts::Guest for Conformance {
    fn list_prompts() -> Vec<PromptInfo> {
        catalog::prompts()
    }

    fn get_prompt(
        name: String,
        arguments: Vec<(String, String)>,
    ) -> Result<PromptOutput, RequestError> {
        catalog::prompt(&name, &arguments)
    }
}

impl completion::Guest for Conformance {
    fn complete(request: CompletionRequest) -> Result<Completions, RequestError> {
        Ok(catalog::complete(&request))
    }
}

impl meta::Guest for Conformance {
    fn describe() -> About {
        // Whatever the operator chose: the state that must outlive a call is in `/state`.
        About { instance: None }
    }
}

export!(Conformance);
