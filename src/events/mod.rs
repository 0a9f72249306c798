//! Session events as the shells use them: the vocabulary from desk-wire and its on-disk journal.

pub use crate::journal;
pub use desk_wire::events::*;
