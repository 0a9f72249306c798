//! The command part of `benches/sessions.rs` (issue 22): the wall time of starting a detached
//! session, `desk new` beside `tmux new-session -d` and `dtach -n`, in one run.
//!
//! Each start runs `sleep 100000` at 120x40 and is timed from the command's start until it
//! exits (each tool's own contract: the session exists when the command returns). tmux is
//! timed twice: into a server that already runs (a user's usual case: the server starts once,
//! with the first session) and with a server of its own to start each time (which is what
//! `desk new`, one master per session, always does). The starts take turns, `--new-runs` of
//! each, so a burst of load from elsewhere hits all alike; every session started is ended by
//! pid when the part ends, by return or by panic. Nothing is pinned (a start may use both
//! cores, as it would for a user).

use std::path::{Path, PathBuf};
use std::process::Command;

use super::{Opts, find_pid, median, run};
use crate::fleet::{time_ms, unpin_self};

/// Every session the part started, ended on drop.
struct Started {
    desk: PathBuf,
    home: PathBuf,
    /// Another build's `desk` (`--baseline`) and the home its sessions are started in.
    baseline: Option<(PathBuf, PathBuf)>,
    /// tmux server labels (`-L`) started.
    tmux: Vec<String>,
    /// dtach sockets started.
    dtach: Vec<PathBuf>,
}

impl Started {
    fn desk(&self) -> Command {
        let mut c = Command::new(&self.desk);
        c.env("DESK_HOME", &self.home);
        c
    }

    /// The desks whose sessions this part started: this build's, and the baseline's.
    fn desks(&self) -> Vec<Command> {
        let mut desks = vec![self.desk()];
        if let Some((desk, home)) = &self.baseline {
            let mut c = Command::new(desk);
            c.env("DESK_HOME", home);
            desks.push(c);
        }
        desks
    }
}

impl Drop for Started {
    fn drop(&mut self) {
        for label in &self.tmux {
            let _ = Command::new("tmux").args(["-L", label, "kill-server"]).output();
        }
        for sock in &self.dtach {
            if let Some(pid) = find_pid(&format!("dtach -n {}", sock.display())) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
            }
        }
        for mut desk in self.desks() {
            let Ok(json) = desk.args(["ls", "--json"]).output() else { continue };
            let rows: serde_json::Value = serde_json::from_slice(&json.stdout).unwrap_or_default();
            let pids = |key: &str| -> Vec<i32> {
                rows["data"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|r| r[key].as_u64())
                    .map(|p| p as i32)
                    .collect()
            };
            // Children first, so no master records a signal exit; then the masters.
            for pid in pids("pid").into_iter().chain(pids("master_pid")) {
                let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
            }
        }
    }
}

fn tmux_new(label: &str, name: &str) -> Command {
    let mut c = Command::new("tmux");
    c.args(["-L", label, "-f", "/dev/null", "new-session", "-d", "-s", name, "-x", "120", "-y", "40", "sleep 100000"]);
    c
}

/// The command part: one table of medians.
/// `baseline`: another build's `desk` (`--baseline`), whose `desk new` takes its turn too.
pub(super) fn measure(opts: &Opts, work: &Path, desk: &Path, baseline: Option<&Path>) -> String {
    unpin_self();
    let tag = std::process::id();
    let shared = format!("deskcmd{tag}");
    let mut started = Started {
        desk: desk.to_path_buf(),
        home: work.join("commands-home"),
        baseline: baseline.map(|b| (b.to_path_buf(), work.join("commands-home-baseline"))),
        tmux: vec![shared.clone()],
        dtach: Vec::new(),
    };
    // The shared server, started by a first session that is not timed.
    run(&mut tmux_new(&shared, "first"));
    let (mut desk_new, mut tmux_warm, mut tmux_cold, mut dtach) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let mut baseline_new = Vec::new();
    for i in 0..opts.new_runs {
        let name = format!("c{i}");
        let mut desks = started.desks().into_iter();
        if let Some(mut c) = desks.next() {
            c.args(["new", &name, "--size", "120x40", "--", "sleep", "100000"]);
            desk_new.push(time_ms(c));
        }
        if let Some(mut c) = desks.next() {
            c.args(["new", &name, "--size", "120x40", "--", "sleep", "100000"]);
            baseline_new.push(time_ms(c));
        }
        tmux_warm.push(time_ms(tmux_new(&shared, &name)));
        let own = format!("deskcmd{tag}-{i}");
        started.tmux.push(own.clone());
        tmux_cold.push(time_ms(tmux_new(&own, &name)));
        let sock = work.join(format!("cmd-{i}.sock"));
        started.dtach.push(sock.clone());
        let mut c = Command::new("dtach");
        c.arg("-n").arg(&sock).args(["-r", "none", "sleep", "100000"]);
        dtach.push(time_ms(c));
    }
    let mut rows = vec![("`desk new NAME -- sleep 100000`", median(&mut desk_new))];
    if !baseline_new.is_empty() {
        rows.push(("`desk new NAME -- sleep 100000`, the baseline", median(&mut baseline_new)));
    }
    rows.extend([
        ("`tmux new-session -d`, its server running", median(&mut tmux_warm)),
        ("`tmux new-session -d`, a server of its own", median(&mut tmux_cold)),
        ("`dtach -n SOCKET`", median(&mut dtach)),
    ]);
    let mut table = String::from("| command | median ms |\n|---|---:|\n");
    for (what, ms) in rows {
        table.push_str(&format!("| {what} | {ms:.2} |\n"));
    }
    format!(
        "A detached session of `sleep 100000` at 120x40, started {} times by each command, the commands \
         taking turns; wall time until the command exits.\n\n{table}",
        opts.new_runs
    )
}
