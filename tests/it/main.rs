//! desk's integration tests: the real binary on real pseudo-terminals, each test under its own
//! temporary `DESK_HOME`.

mod sessions;
mod support;
mod wire_clients;
