//! Ways clients reach the gateway. Each transport turns bytes into `Session::handle_line`
//! calls and writes what the session sends; nothing below the session knows which one it was.

pub mod stdio;
