//! desk's integration tests: one binary, one module per area, a shared PTY harness.

mod demo_agent;
mod harness;
