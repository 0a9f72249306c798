//! The delivery daemon's robustness: what it does with files, disks and clients that misbehave
//! (interrupted writes, full disks, unparsable records, greedy or idle control clients).

use crate::support::{Home, eventually, prompts};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

fn private_dir(dir: &Path) {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).expect("mkdir");
}

fn wait_ready(home: &Home, name: &str) {
    eventually(&format!("{name} to be ready"), || {
        let s = home.session(name).ok_or("no session")?;
        if s["state"]["ready"] == true { Ok(()) } else { Err(s["state"].to_string()) }
    });
}

/// A small tmpfs mounted over a directory for one test, unmounted (lazily) when dropped.
struct SmallDisk {
    at: PathBuf,
    filler: PathBuf,
}

impl SmallDisk {
    /// Mount a 256 KiB tmpfs at `at`, or `None` when this process may not mount (not root).
    fn mount(at: &Path) -> Option<SmallDisk> {
        private_dir(at);
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        ok.then(|| SmallDisk { at: at.to_path_buf(), filler: at.join("filler") })
    }

    /// Write a file until the disk is full.
    fn fill(&self) {
        let mut f = std::fs::File::create(&self.filler).expect("filler");
        let block = [0u8; 4096];
        while f.write_all(&block).is_ok() {}
        let _ = f.sync_all();
    }

    fn free(&self) {
        std::fs::remove_file(&self.filler).expect("remove filler");
    }
}

impl Drop for SmallDisk {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount").arg("-l").arg(&self.at).status();
    }
}

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
        private_dir(dir);
        let file = dir.join(format!(".01ARZ3NDEKTSV4RRFFQ69G5FAV.json.tmp.{pid}"));
        std::fs::write(&file, b"{\"half\":").expect("write tmp");
        left.push(file);
    }
    home.serve();
    // The sweep runs before the daemon reports itself started.
    let remaining: Vec<_> = left.iter().filter(|p| p.exists()).collect();
    assert!(remaining.is_empty(), "temporary files of dead writers survived a start: {remaining:?}");
}

#[test]
fn a_prompt_that_meets_a_full_disk_at_ingest_stays_in_the_intake_and_is_delivered_once_space_is_freed() {
    let home = Home::new();
    let Some(disk) = SmallDisk::mount(&home.path().join("state/delivery/queue")) else {
        eprintln!("skipped: cannot mount a tmpfs (needs root)");
        return;
    };
    let log = home.demo("d", &[]);
    wait_ready(&home, "d");
    home.serve();
    disk.fill();
    let out = home.desk(&["send", "d", "survives a full disk"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "send must not claim success: {stderr}");
    assert!(stderr.contains("has not queued"), "{stderr}");
    let id = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let intake = home.path().join(format!("state/delivery/intake/{id}.json"));
    assert!(intake.exists(), "the prompt stays in the intake");
    assert!(!home.path().join(format!("state/delivery/intake/{id}.json.bad")).exists(), "not set aside");
    let shown = home.ok(&["item", &id]);
    assert!(shown.contains("in the intake") && shown.contains("No space left"), "{shown}");
    let queue = home.ok(&["queue"]);
    assert!(queue.contains(&id) && queue.contains("survives a full disk"), "{queue}");
    disk.free();
    let item = home.settled(&id);
    assert_eq!(item["state"], "delivered", "{item:#}");
    eventually("the prompt to reach the agent", || {
        let p = prompts(&log);
        if p == ["survives a full disk"] { Ok(()) } else { Err(format!("{p:?}")) }
    });
}

#[test]
fn an_unparsable_intake_file_is_set_aside_and_shown() {
    let home = Home::new();
    home.serve();
    let id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";
    let intake = home.path().join("state/delivery/intake");
    // Written like desk send writes: complete, then renamed into place.
    let tmp = intake.join(format!(".{id}.json.tmp"));
    std::fs::write(&tmp, b"{\"half\":").expect("write");
    std::fs::rename(&tmp, intake.join(format!("{id}.json"))).expect("rename");
    let bad = intake.join(format!("{id}.json.bad"));
    eventually("the record to be set aside", || if bad.exists() { Ok(()) } else { Err("not yet".to_string()) });
    let queue = home.ok(&["queue"]);
    assert!(queue.contains("set aside") && queue.contains(&format!("{id}.json.bad")), "{queue}");
    let out = home.desk(&["item", id]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1));
    assert!(stderr.contains("set aside"), "{stderr}");
}
