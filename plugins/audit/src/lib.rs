//! `audit`: one JSON line per call, appended to a file in a granted folder.

mod record;
