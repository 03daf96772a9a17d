//! A 0.2 plugin said its lists changed (`notify`): they are read again from a fresh
//! instance of the version serving, which then serves with the new lists. Its kept
//! instances stay: only what it lists changed, not its code.

use std::sync::Arc;
use std::time::Instant;

use super::loading::{LIST_TOOLS_TIMEOUT, Loader};
use super::version::{Code, TimeLimit, Version};
use super::{PluginEvent, ms};

impl Loader {
    pub(super) async fn relist(&self, name: &str) -> Result<(), String> {
        // Serialised with loads and reloads: a new version meanwhile lists anew anyway.
        let _control = self.control.lock().await;
        let started = Instant::now();
        let Some(slot) = self.calls.slots.load().get(name).cloned() else {
            return Ok(());
        };
        let current = slot.current.load_full();
        if !current.code.pre.is_v2() {
            return Ok(());
        }
        let time = TimeLimit {
            limit: current.settings.limits.timeout.min(LIST_TOOLS_TIMEOUT),
            since: Instant::now(),
        };
        let (tools, output_schemas, listing) = self.probe_tools(current.clone(), time).await?;
        let old = &current.code;
        let code = Arc::new(Code {
            digest: old.digest.clone(),
            pre: old.pre.clone(),
            interest: None,
            listing: listing.map(Arc::new),
            tools,
            output_schemas,
            big_runtime: old.big_runtime,
            units: old.units,
        });
        let mut version = Version::new(
            current.name.clone(),
            current.source.clone(),
            code,
            current.settings.clone(),
        );
        version.kept = current.kept.clone();
        let tools = version.tools.len();
        self.install(name, version);
        self.emit(PluginEvent::Reloaded {
            name: name.to_string(),
            tools,
            compile_ms: None,
            total_ms: ms(started),
            new_code: false,
        });
        Ok(())
    }
}
