//! The delivery daemon's robustness: what it does with files, disks and clients that misbehave
//! (interrupted writes, full disks, unparsable records, greedy or idle control clients).

use crate::support::Home;
use std::os::unix::fs::DirBuilderExt;
use std::path::PathBuf;

/// A pid that no process has: a child that already exited and was reaped.
fn dead_pid() -> u32 {
    let mut child = std::process::Command::new("true").spawn().expect("spawn true");
    let pid = child.id();
    child.wait().expect("wait true");
    pid
}

#[test]
fn the_daemon_sweeps_temporary_files_left_by_killed_writers_on_start() {
    let home = Home::new();
    let pid = dead_pid();
    let state = home.path().join("state");
    let dirs = [
        state.join("delivery"),
        state.join("delivery/intake"),
        state.join("delivery/queue/s"),
        state.join("sessions/s"),
        home.run_dir(),
    ];
    let mut left: Vec<PathBuf> = Vec::new();
    for dir in &dirs {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).expect("mkdir");
        let file = dir.join(format!(".01ARZ3NDEKTSV4RRFFQ69G5FAV.json.tmp.{pid}"));
        std::fs::write(&file, b"{\"half\":").expect("write tmp");
        left.push(file);
    }
    home.serve();
    // The sweep runs before the daemon reports itself started.
    let remaining: Vec<_> = left.iter().filter(|p| p.exists()).collect();
    assert!(remaining.is_empty(), "temporary files of dead writers survived a start: {remaining:?}");
}
