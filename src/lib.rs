//! desk keeps coding agents alive on pseudo-terminals, lets people attach terminals to them and
//! reports their state. This crate is the `desk` command line; `src/main.rs` only hands over.
//!
//! desk runs as three kinds of process, each with its own crate:
//!
//! - a **master** per session (`desk-master`, crate desk-master): owns the agent's PTY and
//!   child, the screen model and the socket terminals attach to; started by `desk new`.
//! - the **daemon** (`desk serve`, crate desk-daemon), one per user: delivers prompts and
//!   channel messages into sessions, verifiably, and notifies the operator.
//! - the **CLI** (`desk`, this crate): the commands ([`cli`]), `desk attach` ([`attach`]) and
//!   `desk dash` ([`dash`]); it starts the other two (`desk serve` and `desk master` run their
//!   crates' code from this executable) and talks to them through the clients in desk-common.
//!   Starting a session is [`launch`] (for `desk new`, `desk up`, `desk restart`, and the
//!   daemon's supervisor, which runs `desk restart`); the fleet's `desk.toml` is [`manifest`]
//!   and its per-session git worktrees [`worktree`]. Beside those, what the commands and the
//!   dashboard share: starting `desk serve` when a command needs it ([`autostart`]), every
//!   session's pending prompts ([`queues`]), the one spelling of a session's state ([`words`])
//!   and the agent commands of the providers ([`providers`]).
//!
//! ```text
//!                 desk  (this crate: cli, attach, dash)
//!                /   |   \
//!               v    |    v
//!     desk-daemon    |    desk-master
//!               \    |    /
//!                v   v   v
//!               desk-common   (paths, files, session records, journal, /proc, PTYs, config,
//!                    |         failures, the clients of a master and of the daemon)
//!                    v
//!               desk-core --> desk-wire --> desk-term   (pure: the clock is an argument,
//!                                                        no syscalls)
//! ```
//!
//! An arrow is "may depend on"; nothing points up (Cargo refuses a cycle between crates, and
//! `tests/it/architecture.rs` checks what each crate imports and that no module of a shell
//! crate imports from a sibling that imports it back). desk-demo-agent, the stand-in agent,
//! depends on no desk crate.

pub mod attach;
pub mod attention;
pub mod autostart;
pub mod cli;
pub mod dash;
pub mod inbox;
pub mod launch;
pub mod manifest;
pub mod providers;
pub mod queues;
pub mod words;
pub mod worktree;
