//! `[[limits.rate]]`, checked: each wrong rule is told with its place in the file.

use super::Ctx;
use crate::config::limits::{self, LimitsConfig, RawLimits};

impl Ctx<'_> {
    pub(super) fn limits(&mut self, raw: RawLimits) -> LimitsConfig {
        match limits::validate(raw) {
            Ok(limits) => limits,
            Err(errors) => {
                for (index, message) in errors {
                    self.error(
                        &["limits", "rate"],
                        None,
                        format!("[[limits.rate]] #{}: {message}", index + 1),
                        "write per = \"principal\" | \"profile\" | \"tool\", rate = \"10/s\" \
                         (or \"600/min\"), and optionally match = \"GLOB\" and burst = N",
                    );
                }
                LimitsConfig::default()
            }
        }
    }
}
