//! `desk-master`: the per-session master process that `desk new` starts. A separate, smaller
//! executable than `desk` so that a lone idle master keeps fewer pages of code resident; all
//! behaviour lives in `desk::master`.

fn main() {
    std::process::exit(desk::master::main(std::env::args_os().skip(1)));
}
