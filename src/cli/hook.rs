//! `desk hook`: the command an agent's hooks run.
//!
//! Owns reading one hook invocation (the hook's JSON on stdin, or as the last argument for
//! Codex's notify program), finding the session from the environment desk gave the agent
//! (`DESK_SESSION`, `DESK_GENERATION`, `DESK_HOME`) and handing the payload to that session's
//! master as a HOOK frame, then recording what it says of the agent's conversation for a
//! restart to resume (`crate::launch::conversation`). Invariants: it prints nothing on stdout (agents read hook stdout);
//! it exits 0 — always, and within [`HOOK_DEADLINE`] — so a hook can never break or slow the
//! agent, whether desk is reachable or not.

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::time::Duration;

use desk_common::paths::{Paths, SessionName};
use desk_common::session;
use desk_wire::hook::HookReport;
use desk_wire::{Frame, Role};

/// The hook gives up after 1 s: a master answers in microseconds, and an agent waits for its
/// hooks before going on.
pub(super) const HOOK_DEADLINE: Duration = Duration::from_secs(1);

/// Hook payloads above 1 MiB are cut off (a transcript pasted whole into a prompt); the master
/// keeps only a short excerpt anyway.
const MAX_PAYLOAD: usize = 1 << 20;

pub(crate) fn debug(message: &str) {
    if std::env::var_os("DESK_HOOK_DEBUG").is_some() {
        eprintln!("desk hook: {message}");
    }
}

/// Run the hook; the caller exits 0 whatever this returns.
pub(super) fn hook(provider: Option<String>, arg: Option<String>) -> i32 {
    // A watchdog: whatever happens below, the agent gets its hook back in time.
    std::thread::spawn(|| {
        std::thread::sleep(HOOK_DEADLINE);
        debug("deadline reached");
        std::process::exit(0);
    });
    if let Err(why) = deliver(provider, arg) {
        debug(&why);
    }
    0
}

fn read_payload(arg: Option<String>) -> serde_json::Value {
    let text = match arg {
        Some(arg) => arg.into_bytes(),
        None => {
            let mut buf = Vec::new();
            if !nix::unistd::isatty(std::io::stdin()).unwrap_or(false) {
                let _ = std::io::stdin().take(MAX_PAYLOAD as u64).read_to_end(&mut buf);
            }
            buf
        }
    };
    serde_json::from_slice(&text).unwrap_or(serde_json::Value::Null)
}

fn deliver(provider: Option<String>, arg: Option<String>) -> Result<(), String> {
    let payload = read_payload(arg);
    let name = std::env::var("DESK_SESSION").map_err(|_| "DESK_SESSION is not set; not a desk session".to_string())?;
    let name = SessionName::parse(&name).map_err(|e| e.to_string())?;
    let paths = Paths::from_env().map_err(|e| format!("{e:#}"))?;
    let socket = paths.session(&name).socket;
    let generation = std::env::var("DESK_GENERATION").ok().and_then(|g| g.parse::<u64>().ok());
    // What the payload says of the agent's conversation is kept for a restart to resume; after
    // the master has the hook (a restart needs it much later than the master needs the hook).
    let capture = (generation, provider.clone(), payload.clone());
    let report = HookReport { generation, provider, payload };
    let mut stream = UnixStream::connect(&socket).map_err(|e| format!("cannot reach {}: {e}", socket.display()))?;
    stream.set_write_timeout(Some(HOOK_DEADLINE)).map_err(|e| e.to_string())?;
    let mut bytes = Frame::Hello {
        version: session::hello_version(&socket),
        role: Role::Query,
        cols: 0,
        rows: 0,
        status_line: false,
        view: false,
    }
    .to_bytes();
    report.to_frame().encode(&mut bytes);
    stream.write_all(&bytes).map_err(|e| format!("cannot write to the session: {e}"))?;
    // Closing after the write is enough: the master reads what was sent before the EOF.
    let _ = stream.shutdown(std::net::Shutdown::Write);
    if let (Some(generation), provider, payload) = capture {
        let provider = match provider {
            Some(p) => p.parse().ok(),
            None => desk_common::launch_record::read(&paths, &name).ok().flatten().map(|l| l.provider),
        };
        if let (Some(provider), Ok(generation)) = (provider, u32::try_from(generation)) {
            crate::launch::conversation::record_hook(&paths, &name, generation, provider, &payload)
                .map_err(|e| format!("cannot record the conversation: {e:#}"))?;
        }
    }
    Ok(())
}
