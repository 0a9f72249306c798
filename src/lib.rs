//! desk keeps coding agents alive on pseudo-terminals, lets people attach terminals to them and
//! reports their state. This crate holds every module; `src/main.rs` only parses arguments.

pub mod screen;
