//! The typing part of `benches/sessions.rs` (issue 22): keystroke echo through an attached
//! terminal, desk beside tmux and dtach in one run.
//!
//! Each holder runs a session of `stty raw -echo; exec cat` (the echo is `cat`'s, not a line
//! discipline's); its attach command runs on a pseudo-terminal this process holds (the outer
//! terminal, 120x40). One key is written to that terminal and the time taken until the same
//! byte is read back from it; then the next key, after `--key-gap-ms` (a typist's pause:
//! 0 writes the next key as soon as the echo is in). `--keys` keys per run, `--runs` runs, the
//! holders taking turns within each run so a burst of load from elsewhere hits all alike.
//! The keys are punctuation that no terminal control sequence and no status line contains
//! (`` ` { | } ~ ``, in turn), so the echo is never mistaken for a repaint's bytes.

use std::ffi::OsString;
use std::os::fd::AsFd;
use std::thread;
use std::time::{Duration, Instant};

use desk_common::pty::Child;

use super::{COLS, Holder, Opts, ROWS, median, on_terminal, p95};

/// The keys typed, in turn.
const KEYS: &[u8] = b"`{|}~";

/// The session each holder runs: a raw terminal (`cat` sees each byte at once, the line
/// discipline echoes nothing) and `cat` writing back what it reads.
const ECHO_SCRIPT: &str = "stty raw -echo; exec cat";

/// An attach command on a pseudo-terminal of this process: the outer terminal a user types in.
struct Outer(Child);

impl Outer {
    fn start(argv: &[OsString], env: &[(OsString, OsString)]) -> Outer {
        Outer(on_terminal(argv, env))
    }

    /// Read until a read contains `key`; false if `within` passes first.
    fn read_for(&self, key: u8, within: Duration) -> bool {
        let deadline = Instant::now() + within;
        let mut buf = [0u8; 64 * 1024];
        while let Some(left) = deadline.checked_duration_since(Instant::now()) {
            let mut fds = [nix::poll::PollFd::new(self.0.master.as_fd(), nix::poll::PollFlags::POLLIN)];
            let ms = u16::try_from(left.as_millis()).unwrap_or(u16::MAX);
            if nix::poll::poll(&mut fds, nix::poll::PollTimeout::from(ms)).unwrap_or(0) == 0 {
                continue;
            }
            match nix::unistd::read(self.0.master.as_fd(), &mut buf) {
                Ok(0) | Err(_) => return false,
                Ok(n) if buf[..n].contains(&key) => return true,
                Ok(_) => {}
            }
        }
        false
    }

    fn type_key(&self, key: u8) {
        nix::unistd::write(self.0.master.as_fd(), &[key]).expect("write to the outer terminal");
    }

    /// Type `key` until its echo comes back: the session is attached and raw.
    fn wait_echo(&self, name: &str) {
        let deadline = Instant::now() + Duration::from_secs(30);
        while Instant::now() < deadline {
            self.type_key(KEYS[0]);
            if self.read_for(KEYS[0], Duration::from_millis(500)) {
                // Whatever else the attach draws at first (a keyframe, a status line) is read.
                while self.read_for(0xff, Duration::from_millis(300)) {}
                return;
            }
        }
        panic!("{name}: no echo within 30 s");
    }
}

impl Drop for Outer {
    fn drop(&mut self) {
        let pid = nix::unistd::Pid::from_raw(self.0.pid as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::SIGKILL);
        let _ = nix::sys::wait::waitpid(pid, None);
    }
}

/// One run's keystrokes through `holder`, each echo's time in ms.
fn one_run(holder: &mut dyn Holder, opts: &Opts) -> Vec<f64> {
    holder.start(ECHO_SCRIPT);
    let outer = Outer::start(&holder.attach_argv(), &holder.attach_env());
    outer.wait_echo(holder.name());
    let gap = Duration::from_millis(opts.key_gap_ms);
    let mut samples = Vec::with_capacity(opts.keys);
    for i in 0..opts.keys {
        thread::sleep(gap);
        let key = KEYS[i % KEYS.len()];
        let t0 = Instant::now();
        outer.type_key(key);
        assert!(outer.read_for(key, Duration::from_secs(10)), "{}: key {i} never came back", holder.name());
        samples.push(t0.elapsed().as_secs_f64() * 1000.0);
    }
    drop(outer);
    holder.stop();
    samples
}

/// What a holder's row is called: the plain desk holder attaches with `--no-status`.
fn row_name(holder: &dyn Holder) -> String {
    match holder.name() {
        "desk" => "desk attach --no-status".into(),
        "desk (baseline)" => "desk (baseline) attach --no-status".into(),
        "desk, status line" => "desk attach (status line, the default)".into(),
        other => other.into(),
    }
}

/// The typing part: one row per holder, medians over every key of every run.
pub(super) fn measure(holders: &mut [Box<dyn Holder>], opts: &Opts) -> String {
    let mut all: Vec<Vec<f64>> = vec![Vec::new(); holders.len()];
    let mut run_medians: Vec<Vec<f64>> = vec![Vec::new(); holders.len()];
    let wanted = |h: &dyn Holder| !matches!(h.name(), "raw PTY" | super::DESK_NO_HISTORY);
    for _ in 0..opts.runs {
        for (i, holder) in holders.iter_mut().enumerate().filter(|(_, h)| wanted(h.as_ref())) {
            let mut samples = one_run(holder.as_mut(), opts);
            all[i].extend_from_slice(&samples);
            run_medians[i].push(median(&mut samples));
        }
    }
    let mut table =
        String::from("| holder | keys | median ms | p95 ms | median of each run, ms |\n|---|---:|---:|---:|---|\n");
    for (i, holder) in holders.iter().enumerate().filter(|(_, h)| wanted(h.as_ref())) {
        let each: Vec<String> = run_medians[i].iter().map(|m| format!("{m:.3}")).collect();
        table.push_str(&format!(
            "| {} | {} | {:.3} | {:.3} | {} |\n",
            row_name(holder.as_ref()),
            all[i].len(),
            median(&mut all[i]),
            p95(&mut all[i]),
            each.join(", ")
        ));
    }
    format!(
        "A session of `{ECHO_SCRIPT}` per holder; its attach command on a {COLS}x{ROWS} pseudo-terminal of \
         this process (pinned to CPU 1 with it; holders on CPU 0); one key written to that terminal until \
         its echo is read back, {} keys a run, {} ms between an echo and the next key, {} runs taking \
         turns.\n\n{table}",
        opts.keys, opts.key_gap_ms, opts.runs
    )
}
