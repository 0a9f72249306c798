//! `cargo bench --bench remote`: sessions on another host through a real sshd on 127.0.0.1
//! (issue 25's targets, docs/benchmarks.md §15):
//!
//! - keystroke echo: one byte typed into `desk attach HOST:NAME` until its echo is back on the
//!   terminal, against the same through `ssh -t HOST 'stty raw -echo; cat'` (target: ratio ≤ 1.2),
//!   with a local `desk attach` of the same session, `ssh -T` to `cat` (no pty on the host), and
//!   other makers' session keepers (tmux, dtach, where installed) attached through `ssh -t`
//!   for reference: a keeper between ssh and the program costs each of them a hop `cat` alone
//!   does not pay;
//! - listing: `desk ls --all` over 3 hosts of N sessions each against a local `desk ls` of 3×N
//!   (target: ≤ 3×);
//! - fan-out: a file `cat` in a remote session, to one `desk attach HOST:NAME`, against `ssh HOST
//!   cat FILE` into a pipe, each timed from a go signal after the connection is up to the last
//!   byte (target: ≥ 0.8×); beside them, the program on a bare terminal on the host read as
//!   fast as it writes (the most any session on a terminal can give) and the keepers through
//!   `ssh -t`.
//!
//! The "hosts" are the one sshd with a `desk` setting per host that gives each its own
//! `DESK_HOME` (as tests/it/remote.rs does). Every session runs under a temp home and is killed by
//! its pids at the end, with sshd and the ControlMasters. Options: `--runs N` (5), `--keys N`
//! (200), `--sessions N` (50), `--mb N` (20), `--part echo|listing|fanout` (all), `--baseline
//! DIR` (another build's `desk` in DIR, e.g. a release build of main: its remote attach and
//! listing are timed beside this build's, alternating, each with its own desk at both ends).
//! Echo runs `--runs` rounds of `--keys` keystrokes per way, the ways alternating round by
//! round, and reports each round's ratio and their median.

#[path = "../tests/it/sshd.rs"]
mod sshd;

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use desk_common::pty::{Spawn, spawn};
use sshd::{Sshd, kill_control_masters, kill_shared_links};

const DESK: &str = env!("CARGO_BIN_EXE_desk");

struct Opts {
    runs: usize,
    keys: usize,
    sessions: usize,
    mb: usize,
    /// Only this part (`echo`, `listing`, `fanout`).
    part: Option<String>,
    /// Another build's `desk` (its directory), timed beside this one's.
    baseline: Option<PathBuf>,
}

fn parse_opts() -> Opts {
    let mut opts = Opts { runs: 5, keys: 200, sessions: 50, mb: 20, part: None, baseline: None };
    let args: Vec<String> = std::env::args().skip(1).collect();
    let mut i = 0;
    while i < args.len() {
        let value = || args.get(i + 1).and_then(|v| v.parse().ok()).expect("a number after the option");
        match args[i].as_str() {
            "--runs" => opts.runs = value(),
            "--keys" => opts.keys = value(),
            "--sessions" => opts.sessions = value(),
            "--mb" => opts.mb = value(),
            "--part" => opts.part = args.get(i + 1).cloned(),
            "--baseline" => opts.baseline = args.get(i + 1).map(|d| PathBuf::from(d).join("desk")),
            "--bench" => {
                i += 1;
                continue;
            }
            other => panic!("unknown option {other}"),
        }
        i += 2;
    }
    opts
}

/// `desk ARGS` under `home`, which must succeed.
fn desk(home: &Path, args: &[&str]) -> String {
    desk_of(DESK, home, args)
}

/// `desk ARGS` of the desk at `exe` under `home`, which must succeed.
fn desk_of(exe: &str, home: &Path, args: &[&str]) -> String {
    let out = Command::new(exe)
        .env("DESK_HOME", home)
        .env("DESK_AUTOSTART", "0")
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run desk");
    assert!(out.status.success(), "desk {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Stop every session under `home`: each one's master and child, by the pids `desk ls` names.
fn stop_sessions(home: &Path) {
    let listing: serde_json::Value = serde_json::from_str(&desk(home, &["ls", "--json"])).unwrap_or_default();
    let rows = listing["data"].as_array().cloned().unwrap_or_default();
    let pids: Vec<i32> = rows
        .iter()
        .flat_map(|row| [&row["pid"], &row["master_pid"]])
        .filter_map(|p| p.as_i64())
        .map(|p| p as i32)
        .collect();
    for pid in pids {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
    }
}

/// A local home whose config names `hosts`.
fn local_home(dir: &Path, hosts: &[String]) -> PathBuf {
    std::fs::create_dir_all(dir.join("config")).unwrap();
    std::fs::write(dir.join("config").join("config.toml"), hosts.concat()).unwrap();
    dir.to_path_buf()
}

fn desk_on(home: &Path) -> String {
    desk_of_on(DESK, home)
}

/// The host's `desk` setting that runs the desk at `exe` under `home` there.
fn desk_of_on(exe: &str, home: &Path) -> String {
    format!("env DESK_HOME={} DESK_AUTOSTART=0 {exe}", home.display())
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn p95(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    v[(v.len() * 95 / 100).min(v.len() - 1)]
}

/// A program on a pseudo-terminal, read by poll with a deadline.
struct Term {
    child: desk_common::pty::Child,
}

impl Term {
    fn start(program: &str, args: &[&str], env: &[(&str, &Path)]) -> Term {
        let mut envs: Vec<(OsString, OsString)> = vec![("TERM".into(), "xterm-256color".into())];
        envs.extend(env.iter().map(|(k, v)| (OsString::from(k), v.as_os_str().to_owned())));
        envs.push(("DESK_AUTOSTART".into(), "0".into()));
        let child = spawn(&Spawn {
            program: program.into(),
            args: args.iter().map(OsString::from).collect(),
            cwd: None,
            env: envs,
            cols: 120,
            rows: 40,
        })
        .expect("spawn on a pty");
        Term { child }
    }

    fn write(&self, bytes: &[u8]) {
        let mut off = 0;
        while off < bytes.len() {
            off += nix::unistd::write(self.child.master.as_fd(), &bytes[off..]).expect("write the pty");
        }
    }

    /// Read until `done` says so of what was read, or `within` passes (then false).
    fn read_until(&self, within: Duration, mut done: impl FnMut(&[u8]) -> bool) -> bool {
        let deadline = Instant::now() + within;
        let mut buf = vec![0u8; 256 * 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            let mut fds = [nix::poll::PollFd::new(self.child.master.as_fd(), nix::poll::PollFlags::POLLIN)];
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)).unwrap_or(0) == 0 {
                continue;
            }
            match nix::unistd::read(self.child.master.as_fd(), &mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    if done(&buf[..n]) {
                        return true;
                    }
                }
            }
        }
    }

    /// Read what arrives until nothing has for `quiet`.
    fn drain(&self, quiet: Duration) {
        while self.read_until(quiet, |_| true) {}
    }

    /// Wait until the program on the terminal echoes a Ctrl-A back as itself: the terminal
    /// here is raw (its own echo would show `^A`) and the far end answers.
    fn wait_raw_echo(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            self.write(&[0x01]);
            if self.read_until(Duration::from_millis(500), |bytes| bytes.contains(&0x01)) {
                return;
            }
        }
        panic!("{name}: no raw echo within 60 s");
    }

    /// Set the terminal raw without echo from this end (termios set on a pty's master applies
    /// to its terminal): a key seen afterwards came back from the far end, never from here.
    fn raw(&self) {
        let mut t = nix::sys::termios::tcgetattr(self.child.master.as_fd()).expect("termios");
        nix::sys::termios::cfmakeraw(&mut t);
        nix::sys::termios::tcsetattr(self.child.master.as_fd(), nix::sys::termios::SetArg::TCSANOW, &t).expect("raw");
    }

    /// Wait until `key` typed comes back (the terminal set [`Term::raw`] first): for far ends
    /// that draw a screen of their own, where a Ctrl-A shows as nothing.
    fn wait_echo(&self, name: &str, key: u8) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while Instant::now() < deadline {
            self.write(&[key]);
            if self.read_until(Duration::from_millis(500), |bytes| bytes.contains(&key)) {
                return;
            }
        }
        panic!("{name}: no echo of {key:?} within 60 s");
    }

    /// One keystroke's round trip: write `key`, wait until it is read back.
    fn echo(&self, key: u8) -> Option<Duration> {
        let start = Instant::now();
        self.write(&[key]);
        self.read_until(Duration::from_secs(10), |bytes| bytes.contains(&key)).then(|| start.elapsed())
    }
}

impl Drop for Term {
    /// The program on the terminal is killed by its pid however the bench ends (a panic too).
    fn drop(&mut self) {
        let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(self.child.pid as i32), nix::sys::signal::SIGKILL);
    }
}

/// The shared links and ControlMasters of a local home killed when it goes out of scope, a panic
/// included.
struct Masters(PathBuf);

impl Drop for Masters {
    fn drop(&mut self) {
        kill_shared_links(&self.0.join("run"));
        kill_control_masters(&self.0.join("run"));
    }
}

/// Sessions of a home stopped when it goes out of scope, a panic included.
struct Sessions<'a>(&'a Path);

impl Drop for Sessions<'_> {
    fn drop(&mut self) {
        stop_sessions(self.0);
    }
}

/// Session keepers of other makers on the "host" (this machine), each running `script` on its
/// own terminal (`script` says what, given the keeper's program name), for the rows that show what keeping a session costs whoever keeps it: a tmux
/// server (status bar off) and a dtach master, both killed by their pids when this goes out of
/// scope. A keeper whose program is not installed is left out.
struct Keepers {
    /// `(program, command line that attaches to it from a terminal on the host)`.
    attach: Vec<(String, String)>,
    pids: Vec<i32>,
    children: Vec<std::process::Child>,
}

impl Keepers {
    fn start(work: &Path, tag: &str, script: &dyn Fn(&str) -> String) -> Keepers {
        let mut keepers = Keepers { attach: Vec::new(), pids: Vec::new(), children: Vec::new() };
        let installed = |p: &str| {
            Command::new("sh").args(["-c", &format!("command -v {p}")]).output().is_ok_and(|o| o.status.success())
        };
        if installed("tmux") {
            let sock = work.join(format!("tmux-{tag}.sock"));
            let sock = sock.to_str().unwrap();
            let ok = Command::new("tmux")
                .args([
                    "-S",
                    sock,
                    "-f",
                    "/dev/null",
                    "new-session",
                    "-d",
                    "-s",
                    tag,
                    "-x",
                    "120",
                    "-y",
                    "40",
                    &script("tmux"),
                ])
                .status()
                .is_ok_and(|s| s.success());
            let _ = Command::new("tmux").args(["-S", sock, "set", "-g", "status", "off"]).status();
            let pid = Command::new("tmux").args(["-S", sock, "display", "-p", "#{pid}"]).output().ok();
            if let Some(pid) = pid.and_then(|o| String::from_utf8_lossy(&o.stdout).trim().parse().ok()).filter(|_| ok) {
                keepers.pids.push(pid);
                keepers.attach.push(("tmux".into(), format!("tmux -S {sock} attach -t {tag}")));
            }
        }
        if installed("dtach") {
            let sock = work.join(format!("dtach-{tag}.sock"));
            let child = Command::new("dtach")
                .arg("-N")
                .arg(&sock)
                .args(["-E", "sh", "-c", &script("dtach")])
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .spawn();
            if let Ok(child) = child {
                let deadline = Instant::now() + Duration::from_secs(10);
                while !sock.exists() && Instant::now() < deadline {
                    std::thread::sleep(Duration::from_millis(10));
                }
                keepers.children.push(child);
                keepers.attach.push(("dtach".into(), format!("dtach -a {} -E -r none", sock.display())));
            }
        }
        keepers
    }
}

impl Drop for Keepers {
    /// Each keeper and its session's program, by pid (the program dies with its terminal).
    fn drop(&mut self) {
        for pid in &self.pids {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(*pid), nix::sys::signal::SIGKILL);
        }
        for child in &mut self.children {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// Starts a flood by writing its `go` fifo and reads `term` until the flood's end marker:
/// the seconds it took and the bytes `term` received on the way.
fn flood_through(term: &Term, go: &Path, what: &str) -> (f64, u64) {
    let start = Instant::now();
    std::fs::write(go, "go\n").unwrap();
    let (mut got, mut tail) = (0u64, Vec::new());
    let arrived = term.read_until(Duration::from_secs(300), |bytes| {
        got += bytes.len() as u64;
        tail.extend_from_slice(bytes);
        let found = tail.windows(12).any(|w| w == b"END-OF-FLOOD");
        let keep = tail.len().saturating_sub(11);
        tail.drain(..keep);
        found
    });
    assert!(arrived, "{what} got {got} bytes and never the end");
    (start.elapsed().as_secs_f64(), got)
}

/// Keystroke echo through each way in, `--runs` rounds of `--keys` keystrokes, the ways taking
/// turns within each round (so a change in the machine's load meets every way alike); median and
/// p95 in ms over all rounds, and the ratio to `ssh -t` round by round.
fn echo_latency(opts: &Opts, sshd: &Sshd, work: &Path) -> String {
    let host_home = work.join("echo-host");
    let _stop = Sessions(&host_home);
    desk(&host_home, &["new", "echo", "--", "sh", "-c", "stty raw -echo; exec cat"]);
    let local = local_home(&work.join("echo-local"), &[sshd.host_entry("e", &desk_on(&host_home))]);
    let _masters = Masters(local.clone());
    let config = sshd.ssh_config();
    let config = config.to_str().unwrap();
    let mut ways: Vec<(String, Term)> = vec![
        // Without the status line (the host's attach shows the host's, and renders the session a
        // view from the screen model, where a Ctrl-A echoes as nothing), as the reference below.
        (
            "desk attach HOST:NAME (--no-status)".into(),
            Term::start(DESK, &["attach", "--no-status", "e:echo"], &[("DESK_HOME", &local)]),
        ),
        (
            "ssh -t HOST cat".into(),
            Term::start("ssh", &["-F", config, "-t", "desk-test", "stty raw -echo; exec cat"], &[]),
        ),
        // Without attach's own status line (with it the terminal gets a view rendered from the
        // screen model, where a Ctrl-A echoes as nothing).
        (
            "desk attach NAME (local, --no-status)".into(),
            Term::start(DESK, &["attach", "--no-status", "echo"], &[("DESK_HOME", &host_home)]),
        ),
    ];
    let _base_masters;
    if let Some(base) = &opts.baseline {
        let base = base.to_str().unwrap();
        let home = local_home(&work.join("echo-local-base"), &[sshd.host_entry("e", &desk_of_on(base, &host_home))]);
        ways.push((
            "baseline desk attach HOST:NAME".into(),
            Term::start(base, &["attach", "e:echo"], &[("DESK_HOME", &home)]),
        ));
        _base_masters = Masters(home);
    }
    // For reference: the host's own attach on the terminal ssh -t makes there (it lends that
    // terminal to its master, docs/protocol.md §5.16): what a remote attach costs with nothing
    // of desk's own between ssh and the host's master.
    let host_attach = format!("{} attach --no-status echo", desk_on(&host_home));
    ways.push((
        "ssh -t HOST desk attach NAME".into(),
        Term::start("ssh", &["-F", config, "-t", "desk-test", &host_attach], &[]),
    ));
    // Other makers' session keepers on the host, attached through ssh -t as the host's attach
    // above: what keeping a session between ssh and the program costs them.
    // ssh without a terminal on the host (pipes to cat, this end raw): whether the pty ssh makes
    // there costs the remote attach anything it could save by taking sshd's pipes instead.
    let term = Term::start("ssh", &["-F", config, "-T", "desk-test", "exec cat"], &[]);
    term.raw();
    ways.push(("ssh -T HOST cat (pipes there)".into(), term));
    let keepers = Keepers::start(work, "echo", &|_| "stty raw -echo; exec cat".into());
    let first_keeper = ways.len();
    for (program, line) in &keepers.attach {
        let term = Term::start("ssh", &["-F", config, "-t", "desk-test", line], &[]);
        term.raw();
        ways.push((format!("ssh -t HOST {program} attach"), term));
    }
    for (w, (name, term)) in ways.iter().enumerate() {
        // Those set raw here answer a printable key; the rest prove their raw mode by a Ctrl-A.
        if w + 1 < first_keeper {
            term.wait_raw_echo(name);
        } else {
            term.wait_echo(name, b'Z');
        }
        term.drain(Duration::from_millis(300));
    }
    let mut keeper_ratios: Vec<Vec<f64>> = vec![Vec::new(); keepers.attach.len()];
    let mut samples: Vec<Vec<f64>> = vec![Vec::new(); ways.len()];
    let mut rounds = String::from("| round | load (1 min) |");
    for (name, _) in &ways {
        rounds.push_str(&format!(" {name} median ms |"));
    }
    rounds.push_str(" ratio remote / ssh -t |");
    if opts.baseline.is_some() {
        rounds.push_str(" ratio baseline / ssh -t |");
    }
    rounds.push('\n');
    rounds.push_str(&"|---".repeat(ways.len() + 3 + usize::from(opts.baseline.is_some())));
    rounds.push_str("|\n");
    let (mut ratios, mut base_ratios) = (Vec::new(), Vec::new());
    for round in 0..opts.runs {
        let mut medians = Vec::new();
        for (w, (name, term)) in ways.iter().enumerate() {
            let mut these: Vec<f64> = (0..opts.keys)
                .filter_map(|i| term.echo(b'a' + (i % 26) as u8))
                .map(|d| d.as_secs_f64() * 1000.0)
                .collect();
            assert_eq!(these.len(), opts.keys, "{name}: some keystrokes never came back");
            medians.push(median(&mut these));
            samples[w].extend(these);
        }
        ratios.push(medians[0] / medians[1]);
        for (k, ratios) in keeper_ratios.iter_mut().enumerate() {
            ratios.push(medians[0] / medians[first_keeper + k]);
        }
        rounds.push_str(&format!("| {} | {} |", round + 1, load()));
        for m in &medians {
            rounds.push_str(&format!(" {m:.3} |"));
        }
        rounds.push_str(&format!(" {:.2} |", medians[0] / medians[1]));
        if opts.baseline.is_some() {
            base_ratios.push(medians[3] / medians[1]);
            rounds.push_str(&format!(" {:.2} |", medians[3] / medians[1]));
        }
        rounds.push('\n');
    }
    let mut table = String::from("| way | keystrokes | median ms | p95 ms |\n|---|---|---|---|\n");
    for ((name, _), samples) in ways.iter().zip(&mut samples) {
        table.push_str(&format!("| {name} | {} | {:.3} | {:.3} |\n", samples.len(), median(samples), p95(samples)));
    }
    table.push_str(&format!(
        "\n{rounds}\nMedian of the rounds' ratios, desk attach HOST:NAME / ssh -t: {:.2}\n",
        median(&mut ratios)
    ));
    if opts.baseline.is_some() {
        table.push_str(&format!("Median of the rounds' ratios, baseline / ssh -t: {:.2}\n", median(&mut base_ratios)));
    }
    for ((name, _), ratios) in keepers.attach.iter().zip(&mut keeper_ratios) {
        table.push_str(&format!(
            "Median of the rounds' ratios, desk attach HOST:NAME / ssh -t HOST {name} attach: {:.2}\n",
            median(ratios)
        ));
    }
    table
}

/// The machine's load average over the last minute, as `/proc/loadavg` says.
fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .and_then(|l| l.split_whitespace().next().map(str::to_string))
        .unwrap_or_default()
}

/// `desk ls --all` over 3 hosts of `sessions` each, against a local `desk ls` of 3 × that.
fn listing(opts: &Opts, sshd: &Sshd, work: &Path) -> String {
    let hosts: Vec<PathBuf> = (0..3).map(|h| work.join(format!("list-host-{h}"))).collect();
    let big = work.join("list-local-big");
    let _stop: Vec<Sessions> = hosts.iter().chain([&big]).map(|h| Sessions(h)).collect();
    for (h, home) in hosts.iter().enumerate() {
        for i in 0..opts.sessions {
            desk(home, &["new", &format!("h{h}s{i}"), "--", "sleep", "600"]);
            desk(&big, &["new", &format!("h{h}s{i}"), "--", "sleep", "600"]);
        }
    }
    let entries: Vec<String> =
        hosts.iter().enumerate().map(|(h, home)| sshd.host_entry(&format!("host{h}"), &desk_on(home))).collect();
    let local = local_home(&work.join("list-local"), &entries);
    let _masters = Masters(local.clone());
    let time = |exe: &str, home: &Path, args: &[&str]| {
        let start = Instant::now();
        let out = desk_of(exe, home, args);
        (start.elapsed().as_secs_f64() * 1000.0, out)
    };
    // Warm: the ControlMasters are up, as in a session of use.
    let (_, first) = time(DESK, &local, &["ls", "--all"]);
    assert_eq!(first.lines().count(), 1 + 3 * opts.sessions, "{first}");
    let base = opts.baseline.as_ref().map(|exe| {
        let exe = exe.to_str().unwrap().to_string();
        let entries: Vec<String> = hosts
            .iter()
            .enumerate()
            .map(|(h, home)| sshd.host_entry(&format!("host{h}"), &desk_of_on(&exe, home)))
            .collect();
        let home = local_home(&work.join("list-local-base"), &entries);
        time(&exe, &home, &["ls", "--all"]);
        (exe, home)
    });
    let _base_masters = base.as_ref().map(|(_, home)| Masters(home.clone()));
    let (mut all, mut here, mut all_base, mut loads) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..opts.runs {
        loads.push(load());
        all.push(time(DESK, &local, &["ls", "--all"]).0);
        if let Some((exe, home)) = &base {
            all_base.push(time(exe, home, &["ls", "--all"]).0);
        }
        here.push(time(DESK, &big, &["ls"]).0);
    }
    let base_row = if all_base.is_empty() {
        String::new()
    } else {
        let b = median(&mut all_base);
        format!(
            "| baseline desk ls --all (3 hosts) | {} | {b:.0} | {:.0} |\n\nBaseline ratio: {:.2}\n",
            3 * opts.sessions,
            all_base.iter().cloned().fold(0.0, f64::max),
            b / median(&mut here.clone())
        )
    };
    let (a, l) = (median(&mut all), median(&mut here));
    format!("Load (1 min) at each run: {}\n\n{base_row}\n", loads.join(", "))
        + &format!(
            "| listing | sessions | median ms | slowest ms |\n|---|---|---|---|\n\
         | desk ls --all (3 hosts) | {} | {a:.0} | {:.0} |\n| desk ls (local) | {} | {l:.0} | {:.0} |\n\n\
         Ratio of medians, ls --all / local ls: {:.2}\n",
            3 * opts.sessions,
            all.iter().cloned().fold(0.0, f64::max),
            3 * opts.sessions,
            here.iter().cloned().fold(0.0, f64::max),
            a / l
        )
}

/// One file to one client: through a remote attach, and by `ssh HOST cat FILE`.
fn fanout(opts: &Opts, sshd: &Sshd, work: &Path) -> String {
    let data = work.join("flood.txt");
    let line = "0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789abcd\n";
    std::fs::write(&data, line.repeat((opts.mb << 20) / line.len()) + "END-OF-FLOOD\n").unwrap();
    let size = std::fs::metadata(&data).unwrap().len();
    let host_home = work.join("flood-host");
    let _stop = Sessions(&host_home);
    let local = local_home(&work.join("flood-local"), &[sshd.host_entry("f", &desk_on(&host_home))]);
    let _masters = Masters(local.clone());
    let config = sshd.ssh_config();
    let (mut attach, mut plain, mut received, mut here, mut tty) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    let base = opts.baseline.as_ref().map(|exe| {
        let exe = exe.to_str().unwrap().to_string();
        let home = local_home(&work.join("flood-local-base"), &[sshd.host_entry("f", &desk_of_on(&exe, &host_home))]);
        (exe, home)
    });
    let _base_masters = base.as_ref().map(|(_, home)| Masters(home.clone()));
    let (mut attach_base, mut loads) = (Vec::new(), Vec::new());
    // The bare terminal's rates, and each keeper's (its program, its rates).
    let (mut bare, mut kept): (Vec<f64>, Vec<(String, Vec<f64>)>) = (Vec::new(), Vec::new());
    for run in 0..opts.runs {
        loads.push(load());
        // Through the attach: the session waits for the go, then cats; the terminal here reads
        // until the file's last line has come (in the stream, or in a keyframe if the client fell
        // behind and the master redrew it: the bytes received say which).
        let go = work.join(format!("go-{run}"));
        nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let name = format!("flood{run}");
        let script = format!("stty -echo; read x < {}; cat {}; exec sleep 100000", go.display(), data.display());
        desk(&host_home, &["new", &name, "--", "sh", "-c", &script]);
        // Without the status line, as the old relayed attach and the local attach below.
        let term = Term::start(DESK, &["attach", "--no-status", &format!("f:{name}")], &[("DESK_HOME", &local)]);
        term.drain(Duration::from_millis(500));
        let (secs, got) = flood_through(&term, &go, "the attach");
        attach.push(size as f64 / 1e6 / secs);
        received.push(got as f64);
        drop(term);
        // The same through the baseline's remote attach (its own desk at both ends).
        if let Some((exe, home)) = &base {
            let go = work.join(format!("go-base-{run}"));
            nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
            let name = format!("flood-base{run}");
            let script = format!("stty -echo; read x < {}; cat {}; exec sleep 100000", go.display(), data.display());
            desk(&host_home, &["new", &name, "--", "sh", "-c", &script]);
            let term = Term::start(exe, &["attach", &format!("f:{name}")], &[("DESK_HOME", home)]);
            term.drain(Duration::from_millis(500));
            attach_base.push(size as f64 / 1e6 / flood_through(&term, &go, "the baseline attach").0);
            drop(term);
        }
        // The same session type attached on the host itself: what the master and its PTY give
        // one client with no link in the way (the remote attach cannot beat it).
        let go = work.join(format!("go-local-{run}"));
        nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let name = format!("flood-local{run}");
        let script = format!("stty -echo; read x < {}; cat {}; exec sleep 100000", go.display(), data.display());
        desk(&host_home, &["new", &name, "--", "sh", "-c", &script]);
        let term = Term::start(DESK, &["attach", "--no-status", &name], &[("DESK_HOME", &host_home)]);
        term.drain(Duration::from_millis(500));
        here.push(size as f64 / 1e6 / flood_through(&term, &go, "the local attach").0);
        drop(term);
        // The program on a terminal of its own on the host, read here as fast as it comes, no
        // keeper and no link: the most any session on a terminal can give.
        let go = work.join(format!("go-pty-{run}"));
        nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let script = format!("stty -echo; read x < {}; cat {}; exec sleep 100000", go.display(), data.display());
        let term = Term::start("sh", &["-c", &script], &[]);
        bare.push(size as f64 / 1e6 / flood_through(&term, &go, "the bare terminal").0);
        drop(term);
        // Other makers' keepers attached through ssh -t, as the host's attach is.
        let go_of = |program: &str| work.join(format!("go-{program}-{run}"));
        let script = |program: &str| {
            let go = go_of(program);
            nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
            format!("stty -echo; read x < {}; cat {}; exec sleep 100000", go.display(), data.display())
        };
        let keepers = Keepers::start(work, &format!("flood{run}"), &script);
        for (program, line) in &keepers.attach {
            let term = Term::start("ssh", &["-F", config.to_str().unwrap(), "-t", "desk-test", line], &[]);
            term.drain(Duration::from_millis(800));
            let rate = size as f64 / 1e6 / flood_through(&term, &go_of(program), program).0;
            match kept.iter_mut().find(|(p, _)| p == program) {
                Some((_, rates)) => rates.push(rate),
                None => kept.push((program.clone(), vec![rate])),
            }
        }
        drop(keepers);
        // ssh with a terminal, as the attach has: the host's PTY and this one's in the way.
        let go = work.join(format!("go-tty-{run}"));
        nix::unistd::mkfifo(&go, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let script = format!("stty -echo; read x < {}; cat {}; exec sleep 100000", go.display(), data.display());
        let term = Term::start("ssh", &["-F", config.to_str().unwrap(), "-t", "desk-test", &script], &[]);
        term.drain(Duration::from_millis(800));
        tty.push(size as f64 / 1e6 / flood_through(&term, &go, "ssh -t").0);
        drop(term);
        // ssh: the connection up (it says `ready`) and waiting on a line, then go, then the last
        // byte.
        let mut ssh = Command::new("ssh")
            .args(["-F", config.to_str().unwrap(), "desk-test"])
            .arg(format!("echo ready; read x; cat {}", data.display()))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("ssh");
        let (mut stdin, mut stdout) = (ssh.stdin.take().unwrap(), ssh.stdout.take().unwrap());
        let mut ready = [0u8; 6];
        std::io::Read::read_exact(&mut stdout, &mut ready).expect("ssh to say ready");
        let start = Instant::now();
        std::io::Write::write_all(&mut stdin, b"go\n").unwrap();
        let copied = std::io::copy(&mut stdout, &mut std::io::sink()).unwrap();
        plain.push(copied as f64 / 1e6 / start.elapsed().as_secs_f64());
        let _ = ssh.wait();
    }
    let (a, p, bytes, h) = (median(&mut attach), median(&mut plain), median(&mut received), median(&mut here));
    let t = median(&mut tty);
    let b = median(&mut bare);
    let keeper_rows: String = kept
        .iter_mut()
        .map(|(program, rates)| format!("| ssh -t HOST {program} attach | {:.1} | |\n", median(rates)))
        .collect();
    let base_line = if attach_base.is_empty() {
        String::new()
    } else {
        format!(
            "Baseline desk attach HOST:NAME: {:.1} MB/s (median); ratio to ssh: {:.2}\n",
            median(&mut attach_base),
            median(&mut attach_base) / p
        )
    };
    format!("Load (1 min) at each run: {}\n\n{base_line}\n", loads.join(", "))
        + &format!(
            "File: {size} bytes ({} runs).\n\n| way | MB/s (median) | bytes received (median) |\n|---|---|---|\n| desk attach HOST:NAME | {a:.1} | {bytes:.0} |\n| ssh HOST cat FILE | {p:.1} | {size} |\n| ssh -t HOST cat FILE (terminals both ends) | {t:.1} | |\n| desk attach --no-status NAME on the host | {h:.1} | |\n| the program on a bare terminal on the host (no keeper, no link) | {b:.1} | |\n{keeper_rows}\nRatio, desk attach / ssh: {:.2}; / ssh -t: {:.2}; remote / local attach: {:.2}; bare terminal / ssh: {:.2}\n",
            opts.runs,
            a / p,
            a / t,
            a / h,
            b / p
        )
}

fn main() {
    let opts = parse_opts();
    if !Path::new(sshd::SSHD).is_file() {
        eprintln!("remote bench: needs /usr/sbin/sshd (apt-get install openssh-server)");
        return;
    }
    let sshd = Sshd::start();
    let work = tempfile::Builder::new().prefix("dkb").tempdir_in("/tmp").expect("temp dir");
    let wanted = |part: &str| opts.part.as_deref().is_none_or(|p| p == part);
    if wanted("echo") {
        println!("## Keystroke echo\n\n{}", echo_latency(&opts, &sshd, work.path()));
    }
    if wanted("listing") {
        println!("## Listing\n\n{}", listing(&opts, &sshd, work.path()));
    }
    if wanted("fanout") {
        println!("## Fan-out, one client\n\n{}", fanout(&opts, &sshd, work.path()));
    }
}
