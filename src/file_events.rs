//! What a file watcher (config hot reload, plugin hot reload) counts as a change.

use notify::EventKind;
use notify::event::{AccessKind, AccessMode};

/// Opening or reading a file is not a change: the gateway reads the files it watches
/// when they change, and counting that as a change would reload them forever (as would
/// an editor or a backup tool reading them).
pub fn is_change(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(AccessKind::Close(AccessMode::Write)) => true,
        EventKind::Access(_) => false,
        _ => true,
    }
}
