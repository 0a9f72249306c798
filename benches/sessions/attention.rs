//! The attach status line's cost and the time a switch takes (issue 21).
//!
//! - Status line CPU: a fleet of sessions each changing its title ten times a second (a working
//!   agent's spinner: every change is an info-file rewrite the status line is told of) and one
//!   quiet session attached, by `desk attach` with its status line and with `--no-status`, side
//!   by side in one run; the attach client's CPU time over the period, as % of one core. Then
//!   the same with a quiet fleet.
//! - Switch: two sessions with different screens, one terminal attached with its status line;
//!   the prefix key and `l` written to the terminal, and the time until the other session's
//!   screen (its marker) has arrived on it.

use std::ffi::OsString;
use std::path::Path;
use std::process::Command;
use std::thread;
use std::time::{Duration, Instant};

use super::{Consumer, Opts, cpu_ticks, median, p95, run, wait_for};

/// Sessions in the busy fleet: a fleet of agents of which this many work at once.
const FLEET: usize = 20;

/// Where `needle` starts in `hay`, each place.
fn at<'a>(hay: &'a [u8], needle: &'a [u8]) -> impl Iterator<Item = usize> + 'a {
    hay.windows(needle.len()).enumerate().filter(move |(_, w)| *w == needle).map(|(i, _)| i)
}

fn desk(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_desk"));
    c.env("DESK_HOME", home);
    c
}

fn new_session(home: &Path, name: &str, script: &str) {
    let mut c = Command::new("taskset");
    c.env("DESK_HOME", home).arg("-c").arg("0").arg(env!("CARGO_BIN_EXE_desk"));
    c.args(["new", name, "--size", "120x40", "--", "sh", "-c", script]);
    run(&mut c);
}

fn attach(home: &Path, name: &str, status: bool) -> Consumer {
    let mut argv: Vec<OsString> = vec![env!("CARGO_BIN_EXE_desk").into(), "attach".into(), name.into()];
    if !status {
        argv.push("--no-status".into());
    }
    Consumer::start(&argv, &[("DESK_HOME".into(), home.as_os_str().to_owned())], true)
}

/// The attach clients' CPU, % of one core, over `secs` seconds: (with the status line, without).
fn client_cpu(home: &Path, secs: u64) -> (f64, f64) {
    let with = attach(home, "here", true);
    let without = attach(home, "here", false);
    // Both drawn and settled (the status line's first reads done).
    thread::sleep(Duration::from_secs(3));
    let (a0, b0) = (cpu_ticks(with.pid), cpu_ticks(without.pid));
    thread::sleep(Duration::from_secs(secs));
    let (a1, b1) = (cpu_ticks(with.pid), cpu_ticks(without.pid));
    let pct = |ticks: u64| ticks as f64 / 100.0 / secs as f64 * 100.0;
    (pct(a1 - a0), pct(b1 - b0))
}

/// One row of the status line's table: `runs` measures of [`client_cpu`], their medians.
fn cpu_row(home: &Path, fleet: &str, runs: usize, secs: u64) -> String {
    let (mut with, mut without) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (a, b) = client_cpu(home, secs);
        with.push(a);
        without.push(b);
    }
    let (a, b) = (median(&mut with), median(&mut without));
    format!("| {fleet} | {runs} × {secs} s | {a:.2} | {b:.2} | {:.2} |\n", a - b)
}

pub(super) fn measure(opts: &Opts, work: &Path) -> String {
    let home = work.join("home-attention");
    let secs = opts.idle_secs.max(10);
    new_session(&home, "here", "printf 'HERE'; exec sleep 100000");
    // The busy fleet: spinner titles, 10 a second each.
    let spin =
        r#"i=0; while :; do i=$((i+1)); printf '\033]0;%s work %d\007' "$(printf '\342\240\213')" $i; sleep 0.1; done"#;
    for n in 0..FLEET {
        new_session(&home, &format!("w{n:02}"), spin);
    }
    let mut rows = String::from(
        "| fleet | runs | attach client CPU % of a core, status line (median) | with --no-status (median) | difference |\n|---|---|---|---|---|\n",
    );
    let runs = opts.runs.clamp(1, 5);
    rows.push_str(&cpu_row(&home, &format!("{FLEET} sessions changing their title 10/s"), runs, secs));
    for n in 0..FLEET {
        let _ = desk(&home).args(["kill", &format!("w{n:02}"), "--signal", "KILL"]).output();
    }
    rows.push_str(&cpu_row(&home, "quiet (one session)", runs, secs));

    let _ = desk(&home).args(["kill", "here", "--signal", "KILL"]).output();
    // On stderr at once: the switch below cannot lose them.
    eprintln!("{rows}");

    // Switching, in a home of its own (the killed fleet would fill the session list): `here`
    // and `there`, each a screen of its own.
    let home = work.join("home-switch");
    new_session(&home, "here", "printf 'HERE'; exec sleep 100000");
    new_session(&home, "there", "clear; printf 'THERE'; exec sleep 100000");
    let c = attach(&home, "here", true);
    wait_for("here drawn", Duration::from_secs(10), || at(&c.kept.lock().unwrap(), b"HERE").next().is_some());
    // The list, then `there`'s number, so that `l` has a last session.
    let from = c.kept.lock().unwrap().len();
    c.write(b"\x1ds");
    let mut digit = 0u8;
    wait_for("the session list", Duration::from_secs(10), || {
        let kept = c.kept.lock().unwrap();
        let list = String::from_utf8_lossy(&kept[from..]).into_owned();
        // A picker row: ` 2 there ...` (the mark, the number, the name).
        digit = list
            .match_indices(" there ")
            .filter_map(|(i, _)| list[..i].chars().last().filter(char::is_ascii_digit))
            .next()
            .map_or(0, |d| d as u8);
        digit != 0
    });
    c.write(&[digit]);
    wait_for("there drawn", Duration::from_secs(10), || at(&c.kept.lock().unwrap(), b"THERE").next().is_some());
    let switches = (opts.runs * 10).max(40);
    let mut times = Vec::new();
    let mut on_there = true;
    for _ in 0..switches {
        thread::sleep(Duration::from_millis(150));
        let from = c.kept.lock().unwrap().len();
        let want: &[u8] = if on_there { b"HERE" } else { b"THERE" };
        let t0 = Instant::now();
        c.write(b"\x1dl");
        wait_for("the other session's screen", Duration::from_secs(10), || {
            let kept = c.kept.lock().unwrap();
            // HERE is in THERE: look for the marker as a whole word after the switch.
            let new = &kept[from..];
            if on_there { at(new, want).any(|i| i == 0 || new[i - 1] != b'T') } else { at(new, want).next().is_some() }
        });
        times.push(t0.elapsed().as_secs_f64() * 1000.0);
        on_there = !on_there;
    }
    drop(c);
    for name in ["here", "there"] {
        let _ = desk(&home).args(["kill", name, "--signal", "KILL"]).output();
    }
    let mut t2 = times.clone();
    format!(
        "Status line: one quiet session attached twice, with the status line and with `--no-status`, \
         while the other sessions run; the attach client's CPU time, % of one core.\n\n{rows}\n\
         Switch: the prefix key and `l` written to a {}x{} terminal attached with its status line, \
         until the other session's screen (its keyframe) has arrived; {switches} switches.\n\n\
         | switches | median ms | p95 ms |\n|---|---|---|\n| {switches} | {:.2} | {:.2} |\n",
        super::COLS,
        super::ROWS,
        median(&mut times),
        p95(&mut t2)
    )
}
