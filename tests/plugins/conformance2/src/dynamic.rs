//! Whether the tool and the prompt that the trigger tools add are listed now. Each
//! trigger toggles its own, so the list it announces as changed has changed. The lists
//! are read again in a fresh instance, so a toggle is a file under `/state` when the
//! config grants that directory; without the grant it lives in this instance only.

use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};

/// One of the toggles.
#[derive(Clone, Copy)]
pub enum Toggle {
    Tool,
    Prompt,
}

static TOOL: AtomicBool = AtomicBool::new(false);
static PROMPT: AtomicBool = AtomicBool::new(false);

impl Toggle {
    fn file(self) -> &'static str {
        match self {
            Toggle::Tool => "/state/dynamic_tool",
            Toggle::Prompt => "/state/dynamic_prompt",
        }
    }

    fn flag(self) -> &'static AtomicBool {
        match self {
            Toggle::Tool => &TOOL,
            Toggle::Prompt => &PROMPT,
        }
    }

    /// Whether the toggled item is listed now.
    pub fn on(self) -> bool {
        match Path::new("/state").is_dir() {
            true => Path::new(self.file()).exists(),
            false => self.flag().load(Ordering::Relaxed),
        }
    }

    /// Adds the item, or removes it again.
    pub fn flip(self) {
        if !Path::new("/state").is_dir() {
            self.flag().fetch_xor(true, Ordering::Relaxed);
            return;
        }
        // A failure leaves the list as it was; the announcement then changes nothing.
        let _ = match self.on() {
            true => std::fs::remove_file(self.file()),
            false => std::fs::write(self.file(), b"listed"),
        };
    }
}
