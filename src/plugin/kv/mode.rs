//! The instance mode a plugin's calls run in: what its component declares
//! (`meta.describe`) weighed against what the operator configured (`instance`).

use crate::config::InstanceMode;

/// The instance mode a call runs in, from what the component declared and what the
/// operator configured (`None`: the operator did not set `instance`). A declared
/// `session` is honoured; a declared `shared` (state every principal sees) only when the
/// operator also said `shared`, else `session` with the warning returned; a declared
/// `call`, or none: the operator's choice (default `call`).
pub fn effective_instance(
    declared: Option<InstanceMode>,
    configured: Option<InstanceMode>,
) -> (InstanceMode, Option<String>) {
    match (declared, configured) {
        (Some(InstanceMode::Session), _) => (InstanceMode::Session, None),
        (Some(InstanceMode::Shared), Some(InstanceMode::Shared)) => (InstanceMode::Shared, None),
        (Some(InstanceMode::Shared), _) => (
            InstanceMode::Session,
            Some(
                "the component declares instance \"shared\" (one instance whose state every \
                 principal sees); it runs as \"session\" until its [plugins.NAME] table says \
                 instance = \"shared\""
                    .into(),
            ),
        ),
        (Some(InstanceMode::Call) | None, configured) => (configured.unwrap_or_default(), None),
    }
}
