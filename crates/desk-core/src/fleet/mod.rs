//! The fleet as a file: a declared set of sessions, what `desk up` must do to reach it, how the
//! daemon restarts what stops, and which conversation a restarted agent may resume — with no I/O.
//!
//! Owns four decisions, each a pure function or state machine the desk package's shells feed:
//! - [`manifest`]: `desk.toml` parsed and checked whole (the schema, docs/fleet.md); an error
//!   names the line, the column and what was expected, and a manifest with any error yields
//!   nothing to act on.
//! - [`plan`]: given the declared sessions and what runs, what `desk up` and `desk down` do
//!   (start, leave alone, report a difference, recreate, stop).
//! - [`supervise`]: restart policies (never, on-failure, always), the backoff (1 s doubling to
//!   5 min), the crash-loop limit (per session, and at most one restart a minute across the
//!   fleet), and what holds a session down (the operator stopped it, its agent rejected the
//!   conversation, a rate-limit or login error) — durable state that survives the daemon.
//! - [`resume`]: which conversation id an agent reported for a session generation (from the
//!   agent's own evidence only), whether a restart may resume it, and the agent's command with
//!   its resume flags replaced.
//!
//! And the pure half of per-session git worktrees ([`worktree`]): where one lives, what a
//! branch may be called, and how to read git's porcelain answers.
//!
//! Invariants: every entry point takes the clock (Unix milliseconds) as an argument; nothing
//! here reads a file, the environment or the clock. May not depend on the desk package, nor on
//! anything that makes a syscall.

pub mod manifest;
pub mod plan;
pub mod resume;
pub mod supervise;
pub mod worktree;
