//! The detach key: how it is named on the command line and found in typed input.
//!
//! Owns the default detach key; finding it (as its plain control byte or in the kitty keyboard
//! protocol's form) is `desk_term::kept`'s, shared with a master that holds the terminal.

/// Ctrl-\ (0x1c), as in dtach and atch: rarely bound by shells or agents.
pub const DEFAULT_DETACH_KEY: u8 = 0x1c;

/// Position and length of the first occurrence of the detach key in `input`.
pub use desk_term::kept::find_key as find_detach_key;
