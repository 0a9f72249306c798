//! `desk-demo-agent`: a stand-in coding-agent TUI. All behaviour lives in the
//! `desk-demo-agent` crate; this file only parses flags and exits as the agent asks. It is
//! built with desk's binaries so `make demo` and the tests find it beside `desk`.

use clap::Parser;
use desk_demo_agent::{Args, event_loop};

fn main() {
    let args = Args::parse();
    if let Some(cast) = &args.replay {
        let Err(e) = desk_demo_agent::replay::run(cast, args.replay_speed, args.replay_until);
        eprintln!("desk-demo-agent: error: {e:#}");
        std::process::exit(1);
    }
    let result = args.into_config().and_then(event_loop::run);
    match result {
        Ok(request) => event_loop::exit_process(request),
        Err(e) => {
            eprintln!("desk-demo-agent: error: {e:#}");
            std::process::exit(1);
        }
    }
}
