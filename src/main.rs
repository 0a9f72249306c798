//! The `desk` binary: everything lives in the library; this only hands over the arguments.

fn main() {
    std::process::exit(desk::cli::main());
}
