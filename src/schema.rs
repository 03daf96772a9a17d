//! JSON Schema checks shared by the router (a tool's arguments) and the plugin host (a
//! plugin's schemas at load, its structured output after a call).

use std::collections::HashMap;

use serde_json::Value;

/// Why `instance` does not match: the first few errors, each with its JSON pointer, or
/// `None` when it matches.
pub fn mismatch(validator: &jsonschema::Validator, instance: &Value) -> Option<String> {
    if validator.is_valid(instance) {
        return None;
    }
    let errors: Vec<String> = validator
        .iter_errors(instance)
        .take(5)
        .map(|e| {
            let message = e.masked_with(quote(&e.instance)).to_string();
            let path = e.instance_path.to_string();
            let whole = if path.is_empty() {
                message
            } else {
                format!("{path}: {message}")
            };
            crate::protocol::cut_short(&whole, MESSAGE_MAX).into_owned()
        })
        .collect();
    (!errors.is_empty()).then(|| errors.join("; "))
}

/// The longest rendering of a value an error message quotes in full.
const QUOTE_MAX: usize = 80;

/// The longest message about one mismatch (its path, and property names jsonschema quotes
/// whole, can be as long as the client made them).
const MESSAGE_MAX: usize = 400;

/// `value` as JSON for an error message, cut short past [`QUOTE_MAX`] bytes.
fn quote(value: &Value) -> String {
    crate::protocol::cut_short(&value.to_string(), QUOTE_MAX).into_owned()
}

/// Bounds on the regular expressions of `pattern` and `patternProperties`. Schemas come
/// from plugins and servers, and arguments are checked on the gateway's I/O thread, so one
/// crafted expression must not stall it, as a backtracking pattern or a big compiled one
/// did at jsonschema's defaults (1,000,000 steps).
/// A match that runs out of steps fails; a pattern too big to compile makes the schema invalid.
const REGEX_BACKTRACK_STEPS: usize = 10_000;
const REGEX_COMPILED_BYTES: usize = 256 << 10;
const REGEX_DFA_CACHE_BYTES: usize = 256 << 10;

/// What a plugin's schema may hold (`budget`): a plugin is sandboxed, but the gateway
/// compiles and applies its schemas in its own memory and time; past these, a big schema,
/// many patterns or a long repetition held gigabytes or took seconds per check.
pub const MAX_SCHEMA_BYTES: usize = 64 << 10;
pub const MAX_PATTERNS: usize = 32;
pub const MAX_REPETITION: u64 = 1000;

/// Compiles `schema`, refusing one that applies itself to the same value without end
/// (`{"allOf": [{"$ref": "#"}]}`): jsonschema would recurse on it until memory runs out.
/// `Err` completes a sentence whose subject is the schema.
pub fn compile(schema: &Value) -> Result<jsonschema::Validator, String> {
    if let Some(at) = self_application(schema) {
        return Err(format!(
            "applies itself to the same value without end (a `$ref` cycle through {at} \
             that never descends into a property or item)"
        ));
    }
    let patterns = jsonschema::PatternOptions::fancy_regex()
        .backtrack_limit(REGEX_BACKTRACK_STEPS)
        .size_limit(REGEX_COMPILED_BYTES)
        .dfa_size_limit(REGEX_DFA_CACHE_BYTES);
    let options = jsonschema::options().with_pattern_options(patterns);
    options.build(schema).map_err(|e| {
        // Where in the schema: the error alone may only name the meta-schema's rule.
        let at = e.instance_path.to_string();
        let at = if at.is_empty() { "/".into() } else { at };
        // jsonschema says "is not a regex" of a pattern over the size limit too.
        let hint = if e.to_string().ends_with("is not a \"regex\"") {
            format!(
                " (or compiles to more than {} KiB: a class such as \\p{{L}} repeated many times does)",
                REGEX_COMPILED_BYTES >> 10
            )
        } else {
            String::new()
        };
        format!("is not a valid JSON Schema at {at}: {e}{hint}")
    })
}

/// The regular expressions of a schema (`pattern` values and `patternProperties` keys).
#[derive(Debug, Default, Clone, Copy, PartialEq)]
pub struct Patterns {
    pub count: usize,
    /// Those that need the backtracking engine: a backreference, a lookaround or an atomic
    /// group. The others run on the linear-time engine.
    pub backtracking: usize,
    /// What the linear-time patterns compile to, in NFA states, summed: a match costs up
    /// to a fixed time per state per byte of text when the engine's DFA gives up. The
    /// backtracking ones are bounded by their step limit instead.
    pub states: u64,
}

/// States counted for a pattern the NFA compiler refuses (too big for it, or syntax it
/// does not have): about as many as the compiled-size limit holds.
const STATES_OF_UNCOUNTED: u64 = (REGEX_COMPILED_BYTES / 16) as u64;

/// NFA states of `pattern` (see [`Patterns::states`]), with `\d`, `\w` and `\s` meaning
/// what they mean in JSON Schema (ECMA-262), as jsonschema compiles them: ASCII classes,
/// where Rust's Unicode `\w` compiles to ~300 states.
fn states(pattern: &str) -> u64 {
    use regex_automata::nfa::thompson;
    thompson::Compiler::new()
        .configure(thompson::Config::new().nfa_size_limit(Some(REGEX_COMPILED_BYTES)))
        .build(&ecma_classes(pattern))
        .map_or(STATES_OF_UNCOUNTED, |nfa| nfa.states().len() as u64)
}

fn ecma_classes(pattern: &str) -> String {
    let mut out = String::with_capacity(pattern.len());
    let mut chars = pattern.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[A-Za-z0-9_]"),
            Some('W') => out.push_str("[^A-Za-z0-9_]"),
            Some('s') => out.push_str("[ \\t\\n\\r\\x0B\\x0C\\u{A0}\\u{FEFF}\\u{2003}\\u{2029}]"),
            Some('S') => out.push_str("[^ \\t\\n\\r\\x0B\\x0C\\u{A0}\\u{FEFF}\\u{2003}\\u{2029}]"),
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// Whether a plugin's schema of `text_len` bytes keeps within what the gateway takes on
/// for it, and its patterns; `Err` completes a sentence whose subject is the schema.
pub fn budget(schema: &Value, text_len: usize) -> Result<Patterns, String> {
    if text_len > MAX_SCHEMA_BYTES {
        return Err(format!(
            "is {text_len} bytes; a schema may have {} KiB",
            MAX_SCHEMA_BYTES >> 10
        ));
    }
    let mut all = Vec::new();
    patterns(schema, &mut all);
    if all.len() > MAX_PATTERNS {
        return Err(format!(
            "has {} patterns; a schema may have {MAX_PATTERNS}",
            all.len()
        ));
    }
    if let Some(p) = all.iter().find(|p| largest_repetition(p) > MAX_REPETITION) {
        return Err(format!(
            "has the pattern {:?}, which repeats more than {MAX_REPETITION} times",
            crate::protocol::cut_short(p, 100)
        ));
    }
    Ok(Patterns {
        count: all.len(),
        backtracking: all.iter().filter(|p| backtracks(p)).count(),
        states: all
            .iter()
            .filter(|p| !backtracks(p))
            .map(|p| states(p))
            .sum(),
    })
}

/// What checking text against a schema's patterns may cost, bounded before the check starts
/// (a running check cannot be stopped): strings times backtracking patterns, each match up
/// to the step limit, and bytes times the linear-time patterns' NFA states where their DFA
/// gives up.
#[derive(Debug, Clone, Copy)]
pub struct CheckBudget {
    pub matches: u64,
    pub work: u64,
}

/// On the gateway's I/O thread (a tool's arguments): ~0.1 s each at worst.
pub const INLINE_CHECK: CheckBudget = CheckBudget {
    matches: 500,
    work: 20_000_000,
};

/// Off it, within a call's time limit (a plugin's structured output): ~2 s each at worst.
pub const BLOCKING_CHECK: CheckBudget = CheckBudget {
    matches: 10_000,
    work: 400_000_000,
};

/// The bound of a [`CheckBudget`] a check would break.
#[derive(Debug, PartialEq)]
pub enum TooCostly {
    Matches {
        strings: u64,
        patterns: usize,
        max: u64,
    },
    Work {
        bytes: u64,
        states: u64,
        max: u64,
    },
}

impl Patterns {
    /// Which bound checking `strings` strings of `bytes` bytes in all against these
    /// patterns would break, if one.
    pub fn too_costly(&self, strings: u64, bytes: u64, budget: CheckBudget) -> Option<TooCostly> {
        if strings.saturating_mul(self.backtracking as u64) > budget.matches {
            return Some(TooCostly::Matches {
                strings,
                patterns: self.backtracking,
                max: budget.matches,
            });
        }
        (bytes.saturating_mul(self.states) > budget.work).then_some(TooCostly::Work {
            bytes,
            states: self.states,
            max: budget.work,
        })
    }
}

/// Whether checking `instance` against a schema with `patterns` keeps within
/// [`INLINE_CHECK`], counting every string (and key) as one the patterns may apply to.
pub fn quick_to_check(patterns: &Patterns, instance: &Value) -> bool {
    if patterns.count == 0 {
        return true;
    }
    let (mut strings, mut bytes) = (0u64, 0u64);
    let mut stack = vec![instance];
    while let Some(value) = stack.pop() {
        match value {
            Value::String(s) => (strings, bytes) = (strings + 1, bytes + s.len() as u64),
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => {
                for (key, value) in map {
                    (strings, bytes) = (strings + 1, bytes + key.len() as u64);
                    stack.push(value);
                }
            }
            _ => {}
        }
    }
    patterns.too_costly(strings, bytes, INLINE_CHECK).is_none()
}

/// The regular expressions of `schema`: `pattern` values and `patternProperties` keys.
fn patterns<'a>(schema: &'a Value, out: &mut Vec<&'a str>) {
    match schema {
        Value::Object(map) => {
            for (key, value) in map {
                match (key.as_str(), value) {
                    ("pattern", Value::String(p)) => out.push(p),
                    ("patternProperties", Value::Object(keys)) => {
                        out.extend(keys.keys().map(String::as_str));
                        keys.values().for_each(|v| patterns(v, out));
                    }
                    (key, _) if DATA.contains(&key) => {}
                    (_, value) => patterns(value, out),
                }
            }
        }
        Value::Array(items) => items.iter().for_each(|v| patterns(v, out)),
        _ => {}
    }
}

/// The largest count in a pattern's `{n}`, `{n,}` or `{n,m}`, or 0.
fn largest_repetition(pattern: &str) -> u64 {
    pattern
        .split('{')
        .skip(1)
        .filter_map(|rest| rest.split_once('}'))
        .filter(|(inside, _)| {
            !inside.is_empty() && inside.bytes().all(|b| b.is_ascii_digit() || b == b',')
        })
        .flat_map(|(inside, _)| inside.split(',').filter_map(|n| n.parse::<u64>().ok()))
        .max()
        .unwrap_or(0)
}

fn backtracks(pattern: &str) -> bool {
    ["(?=", "(?!", "(?<=", "(?<!", "(?>", "\\k<"]
        .iter()
        .any(|p| pattern.contains(p))
        || pattern
            .as_bytes()
            .windows(2)
            .any(|w| w[0] == b'\\' && w[1].is_ascii_digit() && w[1] != b'0')
}

/// Keywords whose subschemas apply to the same value as the schema holding them.
const IN_PLACE_ONE: [&str; 4] = ["not", "if", "then", "else"];
const IN_PLACE_MANY: [&str; 3] = ["allOf", "anyOf", "oneOf"];
const IN_PLACE_MAP: [&str; 2] = ["dependentSchemas", "dependencies"];
const REFS: [&str; 3] = ["$ref", "$dynamicRef", "$recursiveRef"];
/// Values that are data, not schemas.
const DATA: [&str; 4] = ["enum", "const", "default", "examples"];

/// A place in `schema` (a JSON pointer) from which the schema comes back to the same
/// place without moving to a part of the value: a cycle of `$ref`s and in-place keywords.
fn self_application(schema: &Value) -> Option<String> {
    let mut nodes: HashMap<String, &Value> = HashMap::new();
    let mut anchors: HashMap<&str, String> = HashMap::new();
    collect(schema, String::new(), &mut nodes, &mut anchors);
    let edges = |pointer: &str| -> Vec<String> {
        let Some(Value::Object(map)) = nodes.get(pointer) else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for key in IN_PLACE_ONE {
            if map.contains_key(key) {
                out.push(format!("{pointer}/{key}"));
            }
        }
        for key in IN_PLACE_MANY {
            if let Some(Value::Array(items)) = map.get(key) {
                out.extend((0..items.len()).map(|i| format!("{pointer}/{key}/{i}")));
            }
        }
        for key in IN_PLACE_MAP {
            if let Some(Value::Object(entries)) = map.get(key) {
                out.extend(
                    entries
                        .keys()
                        .map(|k| format!("{pointer}/{key}/{}", escape(k))),
                );
            }
        }
        for key in REFS {
            if let Some(Value::String(reference)) = map.get(key) {
                out.extend(resolve(reference, &anchors));
            }
        }
        out
    };
    // Depth-first, without recursion: a schema may be deep.
    let mut state: HashMap<String, bool> = HashMap::new(); // false: on the path; true: done
    for start in nodes.keys() {
        if state.contains_key(start) {
            continue;
        }
        let mut stack = vec![(start.clone(), edges(start), 0)];
        state.insert(start.clone(), false);
        while let Some((node, next, i)) = stack.last_mut() {
            if let Some(target) = next.get(*i).cloned() {
                *i += 1;
                if !nodes.contains_key(&target) {
                    continue;
                }
                match state.get(&target) {
                    Some(false) => {
                        return Some(if target.is_empty() {
                            "/".into()
                        } else {
                            target
                        });
                    }
                    Some(true) => {}
                    None => {
                        state.insert(target.clone(), false);
                        let out = edges(&target);
                        stack.push((target, out, 0));
                    }
                }
            } else {
                state.insert(node.clone(), true);
                stack.pop();
            }
        }
    }
    None
}

/// Every object in `value` by its JSON pointer, and its `$anchor`s.
fn collect<'a>(
    value: &'a Value,
    pointer: String,
    nodes: &mut HashMap<String, &'a Value>,
    anchors: &mut HashMap<&'a str, String>,
) {
    let mut pending = vec![(value, pointer)];
    while let Some((value, pointer)) = pending.pop() {
        match value {
            Value::Object(map) => {
                for key in ["$anchor", "$dynamicAnchor"] {
                    if let Some(Value::String(name)) = map.get(key) {
                        anchors.insert(name, pointer.clone());
                    }
                }
                for (key, child) in map.iter().filter(|(k, _)| !DATA.contains(&k.as_str())) {
                    pending.push((child, format!("{pointer}/{}", escape(key))));
                }
                nodes.insert(pointer, value);
            }
            Value::Array(items) => {
                for (i, child) in items.iter().enumerate() {
                    pending.push((child, format!("{pointer}/{i}")));
                }
            }
            _ => {}
        }
    }
}

/// The place a reference within the document points to: `#`, `#/json/pointer`, `#anchor`.
/// References to other documents are left to jsonschema.
fn resolve(reference: &str, anchors: &HashMap<&str, String>) -> Option<String> {
    let fragment = reference.strip_prefix('#')?;
    if fragment.is_empty() || fragment.starts_with('/') {
        Some(percent_decode(fragment))
    } else {
        anchors.get(fragment).cloned()
    }
}

fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = (bytes[i] == b'%')
            .then(|| text.get(i + 1..i + 3))
            .flatten()
            .and_then(|h| u8::from_str_radix(h, 16).ok());
        match hex {
            Some(byte) => {
                out.push(byte);
                i += 3;
            }
            None => {
                out.push(bytes[i]);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn schemas_that_apply_themselves_without_end_are_refused() {
        for endless in [
            json!({"type": "object", "allOf": [{"$ref": "#"}]}),
            json!({"type": "object", "$defs": {"a": {"$ref": "#/$defs/b"}, "b": {"anyOf": [{"$ref": "#/$defs/a"}]}},
                   "properties": {"x": {"$ref": "#/$defs/a"}}}),
            json!({"type": "object", "properties": {"a": {"not": {"$ref": "#/properties/a"}}}}),
            json!({"type": "object", "$defs": {"n": {"$anchor": "node", "oneOf": [{"$ref": "#node"}]}}}),
            json!({"type": "object", "$ref": "#"}),
        ] {
            let refused = compile(&endless).err().unwrap_or_default();
            assert!(refused.contains("without end"), "{endless}: {refused}");
        }
        // Recursion through a property or an item is a tree, and fine.
        for finite in [
            json!({"type": "object", "properties": {"child": {"$ref": "#"}}}),
            json!({"type": "object", "$defs": {"list": {"type": "array", "items": {"$ref": "#/$defs/list"}}},
                   "properties": {"l": {"$ref": "#/$defs/list"}}}),
            json!({"type": "object", "properties": {"a/b": {"type": "string"}, "c": {"$ref": "#/properties/a~1b"}}}),
            json!({"type": "object", "enum": [{"allOf": [{"$ref": "#"}]}]}),
        ] {
            if let Err(e) = compile(&finite) {
                panic!("{finite}: {e}");
            }
        }
    }

    /// An object whose `n`, if any, is an integer.
    fn integer_n() -> jsonschema::Validator {
        jsonschema::validator_for(&json!({
            "type": "object",
            "properties": {"n": {"type": "integer"}},
        }))
        .unwrap()
    }

    #[test]
    fn names_the_offending_field() {
        let v = integer_n();
        assert_eq!(mismatch(&v, &json!({"n": 1})), None);
        let why = mismatch(&v, &json!({"n": "x"})).unwrap();
        assert_eq!(why, r#"/n: "x" is not of type "integer""#);
    }

    #[test]
    fn a_long_value_is_quoted_cut_short() {
        let v = integer_n();
        let long = "é".repeat(100_000);
        let why = mismatch(&v, &json!({"n": long})).unwrap();
        assert!(why.len() < 200, "{why}");
        assert!(
            why.starts_with(r#"/n: "éé"#)
                && why.ends_with(r#"… (200002 bytes) is not of type "integer""#),
            "{why}"
        );
        // jsonschema quotes property names whole: the message is cut instead.
        let strict = jsonschema::validator_for(
            &json!({"properties": {"a": {}}, "additionalProperties": false}),
        )
        .unwrap();
        let why = mismatch(&strict, &json!({"k".repeat(100_000): 1})).unwrap();
        assert!(why.len() < 500 && why.ends_with(" bytes)"), "{why}");
    }

    /// A crafted pattern neither stalls the check nor takes megabytes: a backtracking
    /// match gives up (the value is refused, saying so), a huge pattern makes the
    /// schema invalid, and ordinary patterns, lookarounds included, work as before.
    #[test]
    fn patterns_are_bounded() {
        let backtracking = compile(&json!({"type": "string", "pattern": "^(a|a)*\\1$"})).unwrap();
        let why = mismatch(&backtracking, &json!("aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa!")).unwrap();
        assert!(why.contains("backtracking"), "{why}");
        let huge = compile(&json!({"type": "string", "pattern": "x\\p{L}{200}"})).unwrap_err();
        assert!(
            huge.starts_with("is not a valid JSON Schema at /"),
            "{huge}"
        );
        let huge_key = compile(&json!({"patternProperties": {"\\p{L}{200}": {}}}));
        assert!(huge_key.is_err());
        let ordinary =
            compile(&json!({"type": "string", "pattern": "^(?!tmp)[a-z]+\\p{L}*$"})).unwrap();
        assert_eq!(mismatch(&ordinary, &json!("report")), None);
        assert!(mismatch(&ordinary, &json!("tmpfile")).is_some());
    }

    #[test]
    fn backtracking_patterns_are_told_apart() {
        for fancy in [
            json!({"properties": {"a": {"pattern": "^(a|b)\\1$"}}}),
            json!({"items": [{"pattern": "^(?!tmp)"}]}),
            json!({"patternProperties": {"^(?<=x)y": {}}}),
        ] {
            assert_eq!(budget(&fancy, 0).unwrap().backtracking, 1, "{fancy}");
        }
        let two =
            json!({"anyOf": [{"pattern": "(?=a)"}, {"pattern": "[b]"}, {"pattern": "(.)\\1"}]});
        assert_eq!(budget(&two, 0).unwrap().backtracking, 2);
        for linear in [
            json!({"properties": {"a": {"pattern": "^[a-z]+\\d{2}\\\\0$"}}}),
            json!({"enum": [{"pattern": "(?=x)"}]}),
            json!({"properties": {"pattern": {"type": "string"}}}),
        ] {
            assert_eq!(budget(&linear, 0).unwrap().backtracking, 0, "{linear}");
        }
    }

    #[test]
    fn linear_patterns_are_weighed_by_what_they_compile_to() {
        let states = |schema: Value| budget(&schema, 0).unwrap().states;
        assert_eq!(states(json!({"pattern": "^[a-z]+$"})), 7);
        assert_eq!(states(json!({"pattern": "[ab]*a[ab]{1000}c"})), 1009);
        let both = json!({"anyOf": [{"pattern": "^[a-z]+$"}, {"pattern": "[ab]*a[ab]{1000}c"}]});
        assert_eq!(states(both), 1016);
        // A backtracking pattern is bounded by its step limit, not weighed.
        assert_eq!(states(json!({"pattern": "(.*)*\\1x"})), 0);
        // `\w` is ASCII in JSON Schema, as jsonschema compiles it (Unicode: 20,318 states).
        assert_eq!(states(json!({"pattern": "^\\w{1,64}$"})), 132);
        assert_eq!(states(json!({"pattern": "^\\d{4}-\\d{2}$"})), 12);
        assert_eq!(
            ecma_classes("\\\\w\\d[\\s]\\."),
            "\\\\w[0-9][[ \\t\\n\\r\\x0B\\x0C\\u{A0}\\u{FEFF}\\u{2003}\\u{2029}]]\\."
        );
        // One the NFA compiler refuses counts as the most a compiled pattern may hold.
        assert_eq!(
            states(json!({"pattern": "\\p{L}{1000}"})),
            STATES_OF_UNCOUNTED
        );
    }

    #[test]
    fn a_check_is_quick_when_its_strings_times_its_patterns_are_few() {
        let linear = Patterns {
            count: 1,
            backtracking: 0,
            states: 1000,
        };
        assert!(quick_to_check(&linear, &json!({"s": "x".repeat(19_990)})));
        assert!(!quick_to_check(&linear, &json!({"s": "x".repeat(20_000)})));
        // Keys count: `patternProperties` applies to them.
        let key = "k".repeat(20_001);
        assert!(!quick_to_check(&linear, &json!({ key: 1 })));
        let backtracking = Patterns {
            count: 10,
            backtracking: 10,
            states: 0,
        };
        assert!(quick_to_check(&backtracking, &json!(vec!["a"; 50])));
        assert!(!quick_to_check(&backtracking, &json!(vec!["a"; 51])));
        assert!(quick_to_check(
            &Patterns::default(),
            &json!("x".repeat(1 << 20))
        ));
    }

    #[test]
    fn a_plugin_schema_keeps_within_its_budget() {
        let ok = json!({"type": "object", "properties": {"d": {"type": "string", "pattern": "^\\d{4}-\\d{2}$"}}});
        assert_eq!(budget(&ok, 100).map(|p| p.count), Ok(1));
        assert!(
            budget(&ok, 70_000)
                .unwrap_err()
                .contains("a schema may have 64 KiB")
        );
        let many: serde_json::Map<String, Value> = (0..33)
            .map(|i| (format!("p{i}"), json!({"type": "string", "pattern": "^a$"})))
            .collect();
        let many = json!({"type": "object", "properties": many});
        assert_eq!(
            budget(&many, 100).unwrap_err(),
            "has 33 patterns; a schema may have 32"
        );
        let repeated = json!({"patternProperties": {"^[ab]*a[ab]{5000}c$": {}}});
        assert!(
            budget(&repeated, 100)
                .unwrap_err()
                .contains("repeats more than 1000 times")
        );
        assert_eq!(largest_repetition("a{2,}b{3,1001}"), 1001);
        assert_eq!(largest_repetition("a{x}b{}"), 0);
    }
}
