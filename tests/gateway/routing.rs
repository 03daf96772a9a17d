//! The catalog and routing: prefixed names, separators and namespaces, filters, argument
//! validation, transparency of what servers send, resources, prompts, completion,
//! several servers, and pagination on both sides of the gateway.

use std::collections::HashSet;

use serde_json::{Value, json};

use crate::harness::{config, text};

const EXAMPLE_TOOLS: [&str; 14] = [
    "echo",
    "add",
    "slow",
    "fail",
    "error",
    "log",
    "sample",
    "elicit",
    "roots",
    "notify_changed",
    "update_resource",
    "big",
    "hang",
    "pid",
];

#[test]
fn tools_are_listed_with_prefix_and_builtins_without() {
    let mut client = config().example("ex", &[]).start_initialized();
    let names = client.tool_names();
    let mut expected: Vec<String> = vec!["gateway_status".into(), "get_events".into()];
    expected.extend(EXAMPLE_TOOLS.iter().map(|t| format!("ex__{t}")));
    let got: HashSet<_> = names.iter().cloned().collect();
    let want: HashSet<_> = expected.iter().cloned().collect();
    assert_eq!(got, want, "tools/list: {names:?}");
    assert_eq!(names.len(), expected.len(), "no duplicates: {names:?}");
}

#[test]
fn call_is_routed_with_the_servers_own_name() {
    let mut client = config().example("ex", &[]).start_initialized();
    let result = client.call("ex__echo", json!({"text": "hello through the gateway"}));
    assert_eq!(text(&result), "hello through the gateway");
    assert!(result.get("isError").is_none_or(|e| e == false), "{result}");
    let result = client.call("ex__add", json!({"a": 2, "b": 3}));
    assert_eq!(text(&result), "5");
}

#[test]
fn custom_separator() {
    let mut client = config()
        .gateway(r#"separator = ".""#)
        .example("ex", &[])
        .start_initialized();
    let names = client.tool_names();
    assert!(names.contains(&"ex.echo".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("ex__")), "{names:?}");
    assert_eq!(text(&client.call("ex.echo", json!({"text": "dot"}))), "dot");
    let prompts = client.list_all("prompts/list", "prompts");
    assert!(
        prompts.iter().any(|p| p["name"] == "ex.greet"),
        "{prompts:?}"
    );
}

#[test]
fn namespace_override_and_empty_namespace() {
    let mut client = config()
        .example_with("first", &["--name", "first"], &[r#"namespace = "zz""#])
        .example_with(
            "second",
            &["--name", "second"],
            &[r#"namespace = """#, r#"tools = ["echo", "pid"]"#],
        )
        .start_initialized();
    let names = client.tool_names();
    assert!(names.contains(&"zz__echo".to_string()), "{names:?}");
    assert!(!names.iter().any(|n| n.starts_with("first__")), "{names:?}");
    assert!(names.contains(&"echo".to_string()), "{names:?}");
    assert!(names.contains(&"pid".to_string()), "{names:?}");
    let first = text(&client.call("zz__pid", json!({}))).to_string();
    let second = text(&client.call("pid", json!({}))).to_string();
    assert_ne!(first, second, "the two names reach two different servers");
    assert_eq!(text(&client.call("echo", json!({"text": "bare"}))), "bare");
}

#[test]
fn allow_and_deny_globs() {
    let mut client = config()
        .example_with(
            "ex",
            &[],
            &[
                r#"tools = ["e*", "add", "f?il"]"#,
                r#"disabled_tools = ["error", "fail"]"#,
            ],
        )
        .start_initialized();
    let names: HashSet<String> = client.tool_names().into_iter().collect();
    let want: HashSet<String> = [
        "gateway_status",
        "get_events",
        "ex__echo",
        "ex__elicit",
        "ex__add",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    assert_eq!(names, want);
    // A filtered tool cannot be called either.
    let error = client.call_error("ex__fail", json!({}));
    assert_eq!(error["code"], -32602, "{error}");
    let error = client.call_error("ex__pid", json!({}));
    assert_eq!(error["code"], -32602, "{error}");
    assert_eq!(
        text(&client.call("ex__echo", json!({"text": "allowed"}))),
        "allowed"
    );
}

#[test]
fn unknown_tool_is_invalid_params_naming_it() {
    let mut client = config().example("ex", &[]).start_initialized();
    for name in ["ex__nope", "nope", "other__echo", "echo"] {
        let error = client.call_error(name, json!({}));
        assert_eq!(error["code"], -32602, "{name}: {error}");
        assert!(
            error["message"].as_str().unwrap().contains(name),
            "{name}: {error}"
        );
    }
    let error = client.error("tools/call", json!({"arguments": {}}));
    assert_eq!(error["code"], -32602, "tools/call without a name: {error}");
}

#[test]
fn arguments_are_checked_against_the_input_schema() {
    let mut client = config().example("ex", &[]).start_initialized();
    let message = client.call_invalid("ex__echo", json!({}));
    assert!(message.contains("text"), "{message}");

    let message = client.call_invalid("ex__add", json!({"a": "two", "b": 3}));
    assert!(
        message.contains("/a: \"two\" is not of type"),
        "the message names the field: {message}"
    );

    let result = client.result(
        "tools/call",
        json!({"name": "ex__echo", "arguments": "text"}),
    );
    assert_eq!(
        result["content"][0]["text"],
        "Invalid arguments for tool ex__echo: `arguments` must be an object",
        "arguments that are not an object: {result}"
    );

    // Nothing of the failed calls reached the server: a good call still works.
    assert_eq!(text(&client.call("ex__echo", json!({"text": "ok"}))), "ok");
}

#[test]
fn results_and_definitions_pass_through_untouched() {
    let mut client = config().example("ex", &[]).start_initialized();
    let result = client.call("ex__add", json!({"a": 20, "b": 22}));
    assert_eq!(result["structuredContent"], json!({"sum": 42}), "{result}");
    assert_eq!(result["content"], json!([{"type": "text", "text": "42"}]));

    let tools = client.tools();
    let add = tools
        .iter()
        .find(|t| t["name"] == "ex__add")
        .expect("ex__add listed");
    assert_eq!(add["title"], "Add two numbers");
    assert_eq!(add["description"], "Adds a and b");
    assert_eq!(
        add["outputSchema"],
        json!({"type": "object", "properties": {"sum": {"type": "number"}}, "required": ["sum"]})
    );
    assert_eq!(add["annotations"], json!({"readOnlyHint": true}));
    assert_eq!(add["_meta"], json!({"example/extra": 1}));
    assert_eq!(add["x-custom"], json!({"keep": true}));
    assert_eq!(
        add["inputSchema"],
        json!({"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]})
    );
    // The tool error result is passed through as a result, not turned into an error.
    let failed = client.call("ex__fail", json!({}));
    assert_eq!(failed["isError"], true, "{failed}");
    assert_eq!(text(&failed), "this tool always fails");
}

#[test]
fn server_json_rpc_error_passes_through_with_its_code() {
    let mut client = config().example("ex", &[]).start_initialized();
    let error = client.call_error("ex__error", json!({"code": -32099}));
    assert_eq!(error["code"], -32099, "{error}");
    assert_eq!(error["message"], "example error", "{error}");
    assert_eq!(error["data"]["server"], "ex", "{error}");
    assert_eq!(error["data"]["originalError"]["code"], -32099, "{error}");
    assert_eq!(
        error["data"]["originalError"]["data"],
        json!({"detail": "x"}),
        "{error}"
    );
    let error = client.call_error("ex__error", json!({"code": 1234}));
    assert_eq!(error["code"], 1234, "{error}");
}

#[test]
fn resources_templates_and_reads() {
    let mut client = config().example("ex", &[]).start_initialized();
    let resources = client.list_all("resources/list", "resources");
    let uris: Vec<&str> = resources.iter().filter_map(|r| r["uri"].as_str()).collect();
    assert_eq!(uris, ["example://static/hello", "example://static/blob"]);
    let templates = client.list_all("resources/templates/list", "resourceTemplates");
    assert_eq!(
        templates,
        [json!({"uriTemplate": "example://item/{id}", "name": "item", "mimeType": "text/plain"})]
    );

    let read = client.result("resources/read", json!({"uri": "example://static/hello"}));
    assert_eq!(read["contents"][0]["text"], "hello from example", "{read}");
    let read = client.result("resources/read", json!({"uri": "example://static/blob"}));
    assert_eq!(read["contents"][0]["blob"], "AAECAwQFBgc=", "{read}");
    let read = client.result("resources/read", json!({"uri": "example://item/42"}));
    assert_eq!(read["contents"][0]["text"], "item 42", "{read}");
    assert_eq!(read["contents"][0]["uri"], "example://item/42", "{read}");

    let error = client.error("resources/read", json!({"uri": "example://nowhere"}));
    assert_eq!(error["code"], -32002, "{error}");
}

#[test]
fn prompts_are_prefixed_and_routed() {
    let mut client = config().example("ex", &[]).start_initialized();
    let prompts = client.list_all("prompts/list", "prompts");
    assert_eq!(prompts.len(), 1, "{prompts:?}");
    assert_eq!(prompts[0]["name"], "ex__greet");
    assert_eq!(prompts[0]["arguments"][0]["name"], "name");
    let prompt = client.result(
        "prompts/get",
        json!({"name": "ex__greet", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(
        prompt["messages"][0]["content"]["text"], "Hello, Ada!",
        "{prompt}"
    );
    let error = client.error(
        "prompts/get",
        json!({"name": "greet", "arguments": {"name": "Ada"}}),
    );
    assert_eq!(error["code"], -32602, "{error}");
}

#[test]
fn completion_for_prompts_and_templates() {
    let mut client = config().example("ex", &[]).start_initialized();
    let completion = client.result(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "ex__greet"}, "argument": {"name": "name", "value": "A"}}),
    );
    assert_eq!(
        completion["completion"]["values"],
        json!(["Alice"]),
        "{completion}"
    );
    let completion = client.result(
        "completion/complete",
        json!({"ref": {"type": "ref/resource", "uri": "example://item/{id}"}, "argument": {"name": "id", "value": "4"}}),
    );
    assert_eq!(
        completion["completion"]["values"],
        json!(["42"]),
        "{completion}"
    );
    let error = client.error(
        "completion/complete",
        json!({"ref": {"type": "ref/prompt", "name": "nope"}, "argument": {"name": "name", "value": ""}}),
    );
    assert_eq!(error["code"], -32602, "{error}");
}

#[test]
fn two_servers_are_aggregated() {
    let mut client = config()
        .example("one", &["--name", "one"])
        .example("two", &["--name", "two"])
        .start_initialized();
    let names = client.tool_names();
    for server in ["one", "two"] {
        for tool in EXAMPLE_TOOLS {
            assert!(
                names.contains(&format!("{server}__{tool}")),
                "{server}__{tool} missing: {names:?}"
            );
        }
    }
    assert_eq!(names.len(), 2 + 2 * EXAMPLE_TOOLS.len());
    let pid_one = text(&client.call("one__pid", json!({}))).to_string();
    let pid_two = text(&client.call("two__pid", json!({}))).to_string();
    assert_ne!(pid_one, pid_two);
    let prompts: Vec<Value> = client.list_all("prompts/list", "prompts");
    let prompt_names: HashSet<&str> = prompts.iter().filter_map(|p| p["name"].as_str()).collect();
    assert_eq!(prompt_names, HashSet::from(["one__greet", "two__greet"]));
    let greeting = client.result(
        "prompts/get",
        json!({"name": "two__greet", "arguments": {"name": "B"}}),
    );
    assert_eq!(greeting["messages"][0]["content"]["text"], "Hello, B!");
    let status = client.status();
    for server in ["one", "two"] {
        assert_eq!(status["backends"][server]["status"], "ready", "{status}");
        assert_eq!(
            status["backends"][server]["tool_count"],
            EXAMPLE_TOOLS.len(),
            "{status}"
        );
    }
    // The same URI from both: served once, by the first.
    let resources = client.list_all("resources/list", "resources");
    assert_eq!(
        resources
            .iter()
            .filter(|r| r["uri"] == "example://static/hello")
            .count(),
        1,
        "{resources:?}"
    );
    let read = client.result("resources/read", json!({"uri": "example://static/hello"}));
    assert_eq!(read["contents"][0]["text"], "hello from one");
}

#[test]
fn gateway_pagination_covers_the_list_exactly_once() {
    let mut client = config()
        .gateway("page_size = 5")
        .example("ex", &[])
        .start_initialized();
    let mut seen = Vec::new();
    let mut params = json!({});
    let mut pages = 0;
    loop {
        let page = client.result("tools/list", params);
        let tools = page["tools"].as_array().unwrap();
        assert!(tools.len() <= 5, "page of {}", tools.len());
        assert!(!tools.is_empty(), "an empty page: {page}");
        seen.extend(
            tools
                .iter()
                .map(|t| t["name"].as_str().unwrap().to_string()),
        );
        pages += 1;
        match page.get("nextCursor") {
            Some(Value::String(cursor)) => params = json!({"cursor": cursor}),
            None => break,
            Some(other) => panic!("nextCursor must be a string: {other}"),
        }
        assert!(pages < 20, "paging does not end");
    }
    let total = 2 + EXAMPLE_TOOLS.len();
    assert_eq!(seen.len(), total, "{seen:?}");
    assert_eq!(
        seen.iter().collect::<HashSet<_>>().len(),
        total,
        "each tool exactly once: {seen:?}"
    );
    assert_eq!(pages, total.div_ceil(5));

    for bad in [json!("garbage"), json!("o999999"), json!(12), json!("")] {
        let error = client.error("tools/list", json!({"cursor": bad}));
        assert_eq!(error["code"], -32602, "cursor {bad}: {error}");
    }
}

#[test]
fn server_side_pagination_is_followed() {
    let mut client = config()
        .example("ex", &["--tools", "25", "--page-size", "10"])
        .start_initialized();
    let names = client.tool_names();
    for i in 0..25 {
        assert!(
            names.contains(&format!("ex__gen_{i}")),
            "ex__gen_{i} missing: {names:?}"
        );
    }
    assert_eq!(names.len(), 2 + EXAMPLE_TOOLS.len() + 25, "{names:?}");
    assert_eq!(text(&client.call("ex__gen_24", json!({}))), "gen_24 called");
    // The server pages its resources too.
    let resources = client.list_all("resources/list", "resources");
    assert_eq!(resources.len(), 2);
}

#[test]
fn disabled_server_is_not_started_but_shown() {
    let mut client = config()
        .example("on", &[])
        .example_with("off", &[], &["disabled = true"])
        .start_initialized();
    let names = client.tool_names();
    assert!(!names.iter().any(|n| n.starts_with("off__")), "{names:?}");
    assert!(names.contains(&"on__echo".to_string()));
    let status = client.status();
    assert_eq!(status["backends"]["off"]["status"], "disabled", "{status}");
    assert_eq!(status["backends"]["on"]["status"], "ready", "{status}");
    let error = client.call_error("off__echo", json!({"text": "x"}));
    assert_eq!(error["code"], -32602, "{error}");
}

#[test]
fn server_env_and_cwd_are_applied() {
    // A shell wrapper names the example server after an environment variable and its
    // working directory, which the server then reports in a resource.
    let script = r#"exec "$WG_EXAMPLE" --name "$WG_GREETING-$(basename "$PWD")""#;
    let example = crate::harness::example_server();
    let env = format!(
        "env = {{ WG_EXAMPLE = {}, WG_GREETING = \"from-env\" }}",
        crate::harness::toml_str(example.to_str().unwrap())
    );
    let mut client = config()
        .folder("work-here")
        .server(
            "wrapped",
            "/bin/sh",
            &["-c", script],
            &[&env, r#"cwd = "work-here""#],
        )
        .start_initialized();
    let read = client.result("resources/read", json!({"uri": "example://static/hello"}));
    assert_eq!(
        read["contents"][0]["text"], "hello from from-env-work-here",
        "{read}"
    );
    let status = client.status();
    assert_eq!(
        status["backends"]["wrapped"]["server_info"]["name"], "from-env-work-here",
        "{status}"
    );
}

#[test]
fn gateway_status_describes_each_server() {
    let mut client = config()
        .gateway(r#"timeout = "7s""#)
        .example_with(
            "ex",
            &["--name", "described"],
            &[r#"tools = ["echo", "add", "pid"]"#],
        )
        .start_initialized();
    let pid: u64 = text(&client.call("ex__pid", json!({})))
        .parse()
        .expect("a pid");
    let status = client.status();
    let ex = &status["backends"]["ex"];
    assert_eq!(ex["status"], "ready", "{status}");
    assert_eq!(ex["namespace"], "ex");
    assert_eq!(
        ex["tool_count"], 3,
        "only the allowed tools count: {status}"
    );
    assert_eq!(ex["restarts"], 0);
    assert_eq!(ex["prompt_count"], 1);
    assert_eq!(ex["timeout_ms"], 7000);
    assert_eq!(ex["server_info"]["name"], "described");
    assert_eq!(ex["pid"], pid, "{status}");
    assert_eq!(
        status["gateway"]["tool_count"], 5,
        "two built-in tools and three of ex: {status}"
    );
    assert_eq!(status["gateway"]["config"]["separator"], "__");
}
