//! Newline-delimited JSON-RPC over pipes, both ways and for both ends: reading bounded lines
//! (`lines`) and a bounded queue of lines with its writer (`outbox`). The stdio front uses
//! them towards its client, subprocess backends towards their servers.

pub mod lines;
pub mod outbox;
