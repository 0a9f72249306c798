//! `desk-demo-agent`: a small but faithful coding-agent TUI for desk's tests, benchmarks and
//! demos.
//!
//! It behaves like the agents desk supervises in the ways that matter to delivery and state
//! detection: it is not ready at once (and swallows early input), asks the terminal for the
//! cursor position at start, enables bracketed paste only once its UI is drawn, collapses large
//! pastes into `[Pasted text #K +L lines]`, can swallow an Enter that follows a paste too
//! closely (Codex's paste burst), queues prompts typed mid-turn, shows a braille spinner title
//! while working, blocks on an approval dialog that an Enter answers, can crash on demand, and
//! calls Claude-Code-style hooks. Every prompt it submits is appended to a prompt log, the
//! ground truth desk's delivery tests compare against. docs/demo-agent.md lists the flags.
//!
//! Layout: [`agent`] is the pure state machine (events in, outputs out, clock passed in);
//! [`input`] decodes terminal bytes; [`composer`] holds the input box's text; [`render`] turns
//! a frame into bytes; [`hook`] builds hook JSON; [`channel`] reads desk channel messages out of
//! a prompt and decides the replies; [`config`] is the flag surface. The I/O edge
//! is [`event_loop`] (one thread, mio), with [`terminal`], [`prompt_log`], [`transcript`] (what
//! `--resume ID` reads back) and [`hook_runner`].
//! [`replay`] is a second, separate mode: it plays back a recorded real agent instead.

pub mod agent;
pub mod channel;
pub mod composer;
pub mod config;
pub mod event_loop;
pub mod hook;
pub mod hook_runner;
pub mod input;
pub mod prompt_log;
pub mod render;
pub mod replay;
pub mod terminal;
pub mod text;
pub mod transcript;

pub use agent::{Agent, Event, ExitRequest, Output};
pub use config::{Args, Config};
pub use prompt_log::{PromptRecord, read_prompt_log};
