//! `plugin call --repeat N` and `--script FILE`: several calls on the one kept instance of
//! a `plugin call` run, one result a line on stdout (`{"error": ...}` for a JSON-RPC
//! error), so that what a plugin keeps between calls shows, and a script can read them.

use std::path::Path;
use std::process::ExitCode;

use serde::Deserialize;
use serde_json::{Value, json};
use tokio::io::{AsyncBufRead, AsyncBufReadExt, BufReader};

use super::call::Caller;

/// One line of a script.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ScriptCall {
    tool: String,
    #[serde(default = "no_arguments")]
    arguments: Value,
}

fn no_arguments() -> Value {
    json!({})
}

/// Where the calls of a run come from: one call repeated, or a script's lines, read as
/// they come (a script on stdin can be typed).
pub enum Calls {
    Repeat {
        tool: String,
        arguments: Value,
        left: u32,
    },
    Script {
        lines: Box<dyn AsyncBufRead + Unpin + Send>,
        line: usize,
    },
}

impl Calls {
    pub fn repeat(tool: &str, arguments: Value, times: u32) -> Calls {
        Calls::Repeat {
            tool: tool.to_owned(),
            arguments,
            left: times,
        }
    }

    /// The calls of `file` (`-`: stdin).
    pub async fn script(file: &Path) -> Result<Calls, String> {
        let lines: Box<dyn AsyncBufRead + Unpin + Send> = if file == Path::new("-") {
            Box::new(BufReader::new(tokio::io::stdin()))
        } else {
            let opened = tokio::fs::File::open(file)
                .await
                .map_err(|e| format!("--script {}: {e}", file.display()))?;
            Box::new(BufReader::new(opened))
        };
        Ok(Calls::Script { lines, line: 0 })
    }

    /// The next call, `None` at the end; `Err` says which line is not a call, and why.
    async fn next(&mut self) -> Option<Result<(String, Value), String>> {
        match self {
            Calls::Repeat {
                tool,
                arguments,
                left,
            } => {
                *left = left.checked_sub(1)?;
                Some(Ok((tool.clone(), arguments.clone())))
            }
            Calls::Script { lines, line } => loop {
                let mut text = String::new();
                *line += 1;
                match lines.read_line(&mut text).await {
                    Ok(0) => return None,
                    Ok(_) if text.trim().is_empty() => continue,
                    Ok(_) => return Some(parse_line(&text, *line)),
                    Err(e) => return Some(Err(format!("script line {line}: {e}"))),
                }
            },
        }
    }
}

fn parse_line(text: &str, line: usize) -> Result<(String, Value), String> {
    let call: ScriptCall = serde_json::from_str(text).map_err(|e| {
        format!(
            "script line {line}: {e}; write one JSON object a line, \
             {{\"tool\": NAME, \"arguments\": {{...}}}}"
        )
    })?;
    if !call.arguments.is_object() {
        return Err(format!(
            "script line {line}: \"arguments\" is {}, not an object",
            call.arguments
        ));
    }
    Ok((call.tool, call.arguments))
}

/// Makes each call in turn on the caller's one session. Exit 0 when every call
/// succeeded, 1 when one had an error result or error, 2 when a line is not a call (the
/// run stops there) or the plugin has no such tool.
pub async fn run(caller: &Caller<'_>, file: &Path, mut calls: Calls) -> ExitCode {
    let mut failed = false;
    let mut made = 0usize;
    while let Some(next) = calls.next().await {
        let (tool, arguments) = match next {
            Ok(call) => call,
            Err(e) => {
                eprintln!("wasmgate: {e}");
                return ExitCode::from(2);
            }
        };
        if !caller.has_tool(file, &tool) {
            return ExitCode::from(2);
        }
        let line = match caller.call(&tool, arguments).await {
            Ok(result) => {
                failed |= result.get("isError").and_then(Value::as_bool) == Some(true);
                result
            }
            Err(error) => {
                failed = true;
                json!({"error": error.to_value()})
            }
        };
        made += 1;
        println!("{line}");
    }
    eprintln!("{made} calls on one instance");
    if failed {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn script_lines_are_calls_or_say_what_is_wrong() {
        let (tool, arguments) = parse_line(r#"{"tool": "count"}"#, 1).unwrap();
        assert_eq!((tool.as_str(), arguments), ("count", json!({})));
        let bad = parse_line("count", 3).unwrap_err();
        assert!(bad.starts_with("script line 3: "), "{bad}");
        let not_object = parse_line(r#"{"tool": "a", "arguments": [1]}"#, 2).unwrap_err();
        assert!(not_object.contains("not an object"), "{not_object}");
        let unknown = parse_line(r#"{"tool": "a", "args": {}}"#, 4).unwrap_err();
        assert!(unknown.contains("unknown field `args`"), "{unknown}");
    }
}
