//! desk-core: desk's decisions, with no I/O.
//!
//! Owns the provider profiles ([`provider`]: every agent desk knows and what it knows about
//! each), the state authority ([`state`]: what a session's agent is doing and why, from hooks,
//! provider rules over title, screen and notifications, and the process), hook interpretation
//! ([`state::hooks`]), the provider rule tables ([`state::rules`]), the delivery engine
//! ([`delivery`]: a prompt delivered exactly once or visibly stuck), channels ([`channel`]:
//! message model, file format, mentions, routing and prompts) and the master's session
//! policy ([`session`]: handshakes, roles, slow clients, the client limit, the session's size,
//! kill escalation and the exit flush), when to notify the operator ([`notify`]: what needs a
//! person, rate-limited per session), which title changes are news ([`title`]), fleet
//! attention ([`attention`]: who needs a person, in what order), agents' dialogs ([`dialog`]:
//! read off a screen, fingerprinted, answered with the provider's keys) and the fleet
//! ([`fleet`]: the `desk.toml` manifest, what `desk up` does, restart policies and their
//! backoff, which conversation a restarted agent resumes, the pure half of per-session
//! worktrees). Every entry point takes the clock as an argument and returns what to do; the
//! shells' event loops carry it out (the master runs the session policy, the state authority
//! and the title rule, the daemon the delivery engine, channel routing and restart
//! supervision). May not depend on the shell crates, nor on anything that makes a syscall (no
//! nix, libc, mio, no file or socket access): its Cargo.toml is the boundary.
//!
//! Its place in the map: desk runs as three kinds of process — a master per session
//! (desk-master: the PTY, the screen model, the socket terminals attach to), the daemon (`desk
//! serve`, desk-daemon: prompt delivery, channels, notifications, restarts) and the CLI (`desk`,
//! the desk package: commands, `desk attach`, `desk dash`) — over a common shell (desk-common)
//! and three pure crates. Arrows run one way, and `tests/it/architecture.rs` checks each:
//!
//! ```text
//!   desk --> desk-daemon, desk-master --> desk-common --> desk-core --> desk-wire --> desk-term
//! ```

pub mod attention;
pub mod channel;
pub mod delivery;
pub mod dialog;
pub mod fleet;
pub mod notify;
pub mod provider;
pub mod session;
pub mod state;
pub mod time;
pub mod title;
