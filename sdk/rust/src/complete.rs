//! Completions (MCP `completion/complete`) of prompt arguments and template variables:
//! a function per argument, its values cut to what MCP passes on.

use crate::wit::Completions;

/// MCP passes at most this many values.
const MAX_VALUES: usize = 100;

type Complete = Box<dyn Fn(&str) -> Vec<String>>;

/// The completion functions of one prompt or template, by argument name.
#[derive(Default)]
pub(crate) struct Completers {
    by_name: Vec<(String, Complete)>,
}

impl Completers {
    pub(crate) fn add(&mut self, name: &str, complete: impl Fn(&str) -> Vec<String> + 'static) {
        self.by_name.push((name.into(), Box::new(complete)));
    }

    /// The values for `name` given what was typed; none for an argument nobody completes.
    pub(crate) fn complete(&self, name: &str, typed: &str) -> Completions {
        let values = self
            .by_name
            .iter()
            .find(|(n, _)| n == name)
            .map_or_else(Vec::new, |(_, complete)| complete(typed));
        cut(values)
    }
}

/// The first [`MAX_VALUES`] of `values`, saying how many there were.
pub(crate) fn cut(mut values: Vec<String>) -> Completions {
    let total = values.len();
    values.truncate(MAX_VALUES);
    Completions {
        values,
        total: Some(u32::try_from(total).unwrap_or(u32::MAX)),
        has_more: total > MAX_VALUES,
    }
}
