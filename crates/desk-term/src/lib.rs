//! desk's terminal model: everything desk knows about what a program draws on its terminal,
//! with no I/O at all.
//!
//! Owns the screen model (`screen`: grid, cursor, modes, keyframes that rebuild it exactly) and
//! the output events its one parse of every byte finds (`events`: titles, bells, notifications,
//! mode changes and terminal state reports), drained by the caller of `Screen::feed`, and views
//! of a screen for terminals of another size (`view`: crop, pan, pad, and repaints diffed
//! against what a client was last sent), and the keys an operator names with the bytes a terminal
//! sends for them (`keys`). Invariants: feeding bytes never fails and never
//! allocates beyond the screen's bounds; the same bytes in any chunking give the same screen and
//! the same events.
//! May not depend on any other desk crate, on the clock, or on anything that makes a syscall
//! (no nix, libc, mio): its Cargo.toml is the boundary.

pub mod events;
pub mod keys;
pub mod screen;
pub mod view;
