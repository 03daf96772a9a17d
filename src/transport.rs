//! Ways clients reach the gateway. A transport hands the session each message
//! (`Session::handle`, or `stdio::handle_line` where answers share one stream with the rest) and
//! writes what the session's peer sends; nothing below the session knows which one it was.

pub mod http;
pub mod stdio;
