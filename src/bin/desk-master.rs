//! `desk-master`: the per-session master process that `desk new` starts. A separate, smaller
//! executable than `desk` so that a lone idle master keeps fewer pages of code resident: it
//! links the desk-master crate and what that depends on, not the CLI's argument parser or
//! dashboard. All behaviour lives in `desk_master`.

fn main() {
    std::process::exit(desk_master::main(std::env::args_os().skip(1)));
}
