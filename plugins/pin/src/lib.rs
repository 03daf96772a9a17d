//! `pin`: pins the definitions of tools and prompts when first seen, and flags (or, with
//! `block`, hides) one that changes until it is approved.

mod pinning;
mod store;
