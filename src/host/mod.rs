//! The host machine as the server meets it, each platform difference in one place: names a
//! guest chooses against the host's file system ([`names`]), opening a path the guest
//! controls ([`open`]), renames another process holds up for a moment ([`retry`]), what the
//! file system says of a file beyond its size ([`marks`]), and mutexes whatever happened to
//! their last holder ([`lock`]). Nothing here knows of sandboxes.

pub mod lock;
pub mod marks;
pub mod names;
pub mod open;
pub mod retry;
