//! The fleet part of `benches/sessions.rs`: many idle sessions of desk beside as many tmux
//! sessions, grown step by step (10, then 100, then 300 by default).
//!
//! At each size, after a settle: the private memory of every desk master (`Private_Clean +
//! Private_Dirty` from `smaps_rollup`, and of that the `[heap]` mapping from `smaps`), the tmux
//! server's private memory and what each session beyond the first added to its anonymous
//! memory, and the wall time of `desk ls` and `tmux ls` (medians over `--ls-runs`, the two
//! interleaved). `desk ls` is timed twice: as it runs (reading the info files the masters keep)
//! and with those files moved aside, so that it asks every master (what it did before the info
//! files, and what it still does for a master whose file it cannot believe). Nothing is pinned here: a
//! listing may use both cores, as it would for a user. Every process started is ended by pid
//! when the part ends, by return or by panic.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use super::{Opts, median, private_kib, run};

/// After a step of sessions is started: long enough for every master's one-shot readiness
/// timer (1 s) and start-up allocations to be over, as in the idle part.
const SETTLE: Duration = Duration::from_secs(3);

/// File descriptors each session may cost this process and its children at once (`desk ls`
/// holds one socket per session; `desk new` a few briefly), plus headroom for the rest.
const FDS_PER_SESSION: u64 = 2;
const FDS_BASE: u64 = 256;

pub(crate) fn unpin_self() {
    // SAFETY: plain syscalls on our own thread with an initialised cpu set.
    unsafe {
        let mut set: libc::cpu_set_t = std::mem::zeroed();
        for cpu in 0..std::thread::available_parallelism().map_or(1, |n| n.get()) {
            libc::CPU_SET(cpu, &mut set);
        }
        libc::sched_setaffinity(0, std::mem::size_of::<libc::cpu_set_t>(), &set);
    }
}

/// Make sure `sessions` sessions fit the open-file limit, raising the soft limit to the hard
/// one if needed; panics with what to change when even that is not enough.
fn check_limits(sessions: usize) {
    let need = FDS_BASE + FDS_PER_SESSION * sessions as u64;
    let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
    // SAFETY: getrlimit/setrlimit read and write only `lim`, which outlives the calls.
    unsafe {
        libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        if lim.rlim_cur < need && lim.rlim_max >= need {
            lim.rlim_cur = need;
            libc::setrlimit(libc::RLIMIT_NOFILE, &lim);
            libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim);
        }
    }
    assert!(
        lim.rlim_cur >= need,
        "{sessions} sessions need {need} open files; the limit is {} (raise it with ulimit -n)",
        lim.rlim_cur
    );
    let pid_max: u64 =
        std::fs::read_to_string("/proc/sys/kernel/pid_max").ok().and_then(|s| s.trim().parse().ok()).unwrap_or(0);
    // Each desk session is two processes, each tmux session one.
    assert!(pid_max > 3 * sessions as u64 + 1000, "pid_max {pid_max} is too small for {sessions} sessions");
}

/// `Private_Clean + Private_Dirty` of the process's `[heap]` mapping, in KiB.
fn heap_kib(pid: u32) -> u64 {
    let smaps = std::fs::read_to_string(format!("/proc/{pid}/smaps")).unwrap_or_default();
    let mut in_heap = false;
    let mut total = 0;
    for line in smaps.lines() {
        let first = line.split_whitespace().next().unwrap_or("");
        if first.contains('-') && first.chars().next().is_some_and(|c| c.is_ascii_hexdigit()) {
            in_heap = line.ends_with("[heap]");
        } else if in_heap && (first == "Private_Clean:" || first == "Private_Dirty:") {
            total += line.split_whitespace().nth(1).and_then(|n| n.parse::<u64>().ok()).unwrap_or(0);
        }
    }
    total
}

/// Wall time of one run of `cmd`, in ms; its output is read and thrown away.
pub(crate) fn time_ms(mut c: Command) -> f64 {
    c.stdout(Stdio::piped()).stderr(Stdio::piped());
    let t0 = Instant::now();
    let out = c.output().unwrap_or_else(|e| panic!("{c:?}: {e}"));
    let ms = t0.elapsed().as_secs_f64() * 1000.0;
    assert!(out.status.success(), "{c:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    ms
}

/// `Anonymous` KiB of a process (heap, stacks, anonymous maps): what a tmux server grows by
/// per session. Its private total also moves with the sharing of its executable's pages with
/// whatever other tmux servers run on the machine, which says nothing about sessions.
fn anon_kib(pid: u32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/smaps_rollup"))
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("Anonymous:"))
        .filter_map(|l| l.split_whitespace().nth(1)?.parse::<u64>().ok())
        .sum()
}

/// Move every `*.info` file of `from` into `to` (the masters keep them; an idle master does not
/// rewrite one it finds gone, since nothing it would answer changed).
fn move_info_files(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).expect("the directory of the info files") {
        let path = entry.expect("a directory entry").path();
        if path.extension().is_some_and(|e| e == "info") {
            std::fs::rename(&path, to.join(path.file_name().unwrap())).expect("move an info file");
        }
    }
}

/// Every process the part started, ended by pid on drop.
struct Fleet {
    desk: PathBuf,
    home: PathBuf,
    tmux_label: String,
    /// Masters and their children, as `desk ls --json` reported them.
    desk_pids: Vec<u32>,
    tmux_server: Option<u32>,
    desk_sessions: usize,
    tmux_sessions: usize,
}

impl Fleet {
    fn desk(&self) -> Command {
        let mut c = Command::new(&self.desk);
        c.env("DESK_HOME", &self.home);
        c
    }

    fn tmux(&self) -> Command {
        let mut c = Command::new("tmux");
        c.args(["-L", &self.tmux_label, "-f", "/dev/null"]);
        c
    }

    /// Grow both fleets to `n` sessions each.
    fn grow_to(&mut self, n: usize) {
        while self.desk_sessions < n {
            self.desk_sessions += 1;
            let name = format!("f{}", self.desk_sessions);
            run(self.desk().args(["new", &name, "--size", "120x40", "--", "sleep", "100000"]));
        }
        while self.tmux_sessions < n {
            self.tmux_sessions += 1;
            let name = format!("s{}", self.tmux_sessions);
            run(self.tmux().args(["new-session", "-d", "-s", &name, "-x", "120", "-y", "40", "sleep 100000"]));
            if self.tmux_server.is_none() {
                run(self.tmux().args(["set-option", "-g", "status", "off"]));
                self.tmux_server = Some(run(self.tmux().args(["display", "-p", "#{pid}"])).trim().parse().unwrap());
            }
        }
        let json = run(self.desk().args(["ls", "--json"]));
        let rows: serde_json::Value = serde_json::from_str(&json).unwrap();
        let rows = rows["data"].as_array().expect("desk ls --json: {\"kind\":\"sessions\",\"data\":[...]}");
        assert_eq!(rows.len(), n, "desk ls lists {} sessions, not {n}", rows.len());
        for row in rows {
            assert_eq!(row["status"], "running", "{row}");
        }
        self.desk_pids = rows
            .iter()
            .flat_map(|r| [r["master_pid"].as_u64(), r["pid"].as_u64()])
            .flatten()
            .map(|p| p as u32)
            .collect();
    }

    fn master_pids(&self) -> Vec<u32> {
        self.desk_pids.iter().step_by(2).copied().collect()
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.tmux().arg("kill-server").output();
        let kill = |pid: u32| {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
        };
        if let Some(pid) = self.tmux_server {
            kill(pid);
        }
        // Children first, so no master records a signal exit it would have to report; then the
        // masters (not our children: `desk new` detaches them).
        for pid in self.desk_pids.iter().skip(1).step_by(2) {
            kill(*pid);
        }
        for pid in self.desk_pids.iter().step_by(2) {
            kill(*pid);
        }
    }
}

/// The fleet part: a table of one row per size.
///
/// `also`: another build's `desk` (`--baseline`), whose `desk ls` is timed on this same fleet in
/// the same turns: the listing command before and after a change, side by side, the masters
/// being this build's for both.
pub(crate) fn measure(opts: &Opts, work: &Path, desk: &Path, home: &str, also: Option<&Path>) -> String {
    unpin_self();
    let largest = opts.sessions.iter().copied().max().unwrap_or(0);
    check_limits(largest);
    // A freshly linked executable's pages would count as dirty; see the idle part.
    nix::unistd::sync();
    let mut fleet = Fleet {
        desk: desk.to_path_buf(),
        home: work.join(home),
        tmux_label: format!("deskfleet{}{home}", std::process::id()),
        desk_pids: Vec::new(),
        tmux_server: None,
        desk_sessions: 0,
        tmux_sessions: 0,
    };
    // The tmux server with one session: what each further session adds is measured from here.
    fleet.grow_to(1);
    thread::sleep(SETTLE);
    let tmux_one = fleet.tmux_server.map_or(0, anon_kib);
    let mut table = String::from(
        "| sessions | desk private KiB per master (median) | of which heap | tmux server private KiB | tmux anonymous KiB per extra session | `desk ls` ms | `desk ls` ms, every master asked | `tmux ls` ms | baseline's `desk ls` ms, this fleet |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n",
    );
    for &n in &opts.sessions {
        fleet.grow_to(n);
        thread::sleep(SETTLE);
        let masters = fleet.master_pids();
        let mut private: Vec<f64> = masters.iter().map(|p| private_kib(*p) as f64).collect();
        let mut heap: Vec<f64> = masters.iter().map(|p| heap_kib(*p) as f64).collect();
        let tmux = fleet.tmux_server.map_or(0, private_kib);
        let tmux_anon = fleet.tmux_server.map_or(0, anon_kib);
        let per_extra = if n > 1 { (tmux_anon as f64 - tmux_one as f64) / (n - 1) as f64 } else { f64::NAN };
        // Interleaved, so a burst of load from elsewhere on the machine hits both alike.
        let (mut desk_ls, mut desk_asked, mut tmux_ls, mut also_ls) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
        let run_dir = fleet.home.join("run");
        let aside = work.join("fleet-info-aside");
        std::fs::create_dir_all(&aside).expect("a directory for the info files");
        for _ in 0..opts.ls_runs {
            let mut c = fleet.desk();
            c.arg("ls");
            desk_ls.push(time_ms(c));
            move_info_files(&run_dir, &aside);
            let mut c = fleet.desk();
            c.arg("ls");
            desk_asked.push(time_ms(c));
            move_info_files(&aside, &run_dir);
            let mut c = fleet.tmux();
            c.arg("ls");
            tmux_ls.push(time_ms(c));
            if let Some(other) = also {
                let mut c = Command::new(other);
                c.env("DESK_HOME", &fleet.home).arg("ls");
                also_ls.push(time_ms(c));
            }
        }
        let (desk_ls, desk_asked, tmux_ls) = (median(&mut desk_ls), median(&mut desk_asked), median(&mut tmux_ls));
        let also_ls = if also_ls.is_empty() { "-".to_string() } else { format!("{:.1}", median(&mut also_ls)) };
        table.push_str(&format!(
            "| {n} | {:.0} | {:.0} | {tmux} | {per_extra:.1} | {desk_ls:.1} | {desk_asked:.1} | {tmux_ls:.1} | {also_ls} |\n",
            median(&mut private),
            median(&mut heap),
        ));
    }
    format!(
        "Sessions running `sleep`, 120x40, no client attached; {} s settle after each step; `desk ls` \
         and `tmux ls` medians of {} runs each, interleaved; tmux's per-session figure is the growth of its server's \
         anonymous memory over the server with one session (its private total also moves with \
         the sharing of the tmux executable with other tmux servers on the machine).\n\n{table}",
        SETTLE.as_secs(),
        opts.ls_runs
    )
}
