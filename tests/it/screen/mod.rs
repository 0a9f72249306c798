//! Screen model tests that need more than one module: fidelity of keyframes against an
//! independent emulator (the vt100 crate), recorded streams, and property tests.

mod fidelity;
mod oracle;
mod props;
mod streams;
mod tmux;
mod tmux_resize;
mod tmux_sequences;
mod vocabulary;
