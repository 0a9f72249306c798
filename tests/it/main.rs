//! desk's integration tests: the real binaries on real pseudo-terminals, one module per area,
//! each test under its own temporary `DESK_HOME`, sharing a PTY harness (`harness`) and desk
//! helpers (`support`).

mod architecture;
mod attach;
mod attention;
mod channels;
mod cli;
mod cli_contract;
mod cli_render;
mod composer;
mod corpus;
mod daemon;
mod dash;
mod delivery;
mod delivery_crash;
mod delivery_restart;
mod demo_agent;
mod first_hour;
mod fleet;
mod formats;
mod harness;
mod history;
mod inbox;
mod keys;
mod native;
mod notify;
mod remote;
mod resume_corpus;
mod scope;
mod screen;
mod sessions;
mod shells;
mod sshd;
mod state;
mod suite;
mod supervise;
mod support;
mod unsent;
mod up;
mod upgrade;
mod versions;
mod views;
mod wire_clients;
mod worktrees;
