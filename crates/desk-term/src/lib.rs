//! desk's terminal model: everything desk knows about what a program draws on its terminal,
//! with no I/O at all.
//!
//! Owns the screen model (`screen`: grid, cursor, modes, keyframes that rebuild it exactly) and
//! the output events its one parse of every byte finds (`events`: titles, bells, notifications,
//! mode changes and terminal state reports), drained by the caller of `Screen::feed`, and views
//! of a screen for terminals of another size (`view`: crop, pan, pad, and repaints diffed
//! against what a client was last sent), and the keys an operator names with the bytes a terminal
//! sends for them (`keys`), and the keys a client keeps for itself found in typed input (`kept`). Invariants: feeding bytes never fails and never
//! allocates beyond the screen's bounds; the same bytes in any chunking give the same screen and
//! the same events.
//! May not depend on any other desk crate, on the clock, or on anything that makes a syscall
//! (no nix, libc, mio): its Cargo.toml is the boundary.
//!
//! Its place in the map: desk runs as three kinds of process — a master per session
//! (desk-master: the PTY, the screen model, the socket terminals attach to), the daemon (`desk
//! serve`, desk-daemon: prompt delivery, channels, notifications) and the CLI (`desk`, the desk
//! package: commands, `desk attach`, `desk dash`) — over a common shell (desk-common) and three
//! pure crates. Arrows run one way, and `tests/it/architecture.rs` checks each:
//!
//! ```text
//!   desk --> desk-daemon, desk-master --> desk-common --> desk-core --> desk-wire --> desk-term
//! ```
//!
//! This crate is the bottom of the map: the master feeds every byte of a session's output to
//! one `Screen`; the CLI and the dashboard build screens from keyframes.

pub mod events;
pub mod kept;
pub mod keys;
pub mod screen;
pub mod text;
pub mod view;
