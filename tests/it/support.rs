//! desk-specific test support: a private `DESK_HOME`, the `desk` binary, raw wire clients.
//!
//! Every session a test starts lives under its own temporary `DESK_HOME`; when the [`Home`] is
//! dropped, every master and child recorded there is killed by pid, so nothing leaks even when
//! an assertion fails.

#![allow(dead_code)]

use desk_wire::{Frame, FrameDecoder, PROTOCOL_VERSION, Role};
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

pub(crate) const DESK: &str = env!("CARGO_BIN_EXE_desk");
pub(crate) const DESK_MASTER: &str = env!("CARGO_BIN_EXE_desk-master");

/// Generous bound for conditions that normally hold within milliseconds; only reached when
/// something is broken (or the machine is very loaded).
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// Copies the executable `from` to `to` for a test to run. The copy is written by a `cp`
/// child, not by this process: a file this process held open for writing would be inherited by
/// every child another test thread forks in that moment, and exec'ing the copy while such a
/// child still holds it fails with ETXTBSY ("Text file busy") under load.
pub(crate) fn copy_executable(from: impl AsRef<Path>, to: impl AsRef<Path>) {
    let (from, to) = (from.as_ref(), to.as_ref());
    let status = Command::new("cp").arg("--").arg(from).arg(to).status().unwrap();
    assert!(status.success(), "cp {} {}: {status}", from.display(), to.display());
}

/// Poll `cond` until it returns `Some`, or panic with `what` and the last observation.
pub(crate) fn eventually<T>(what: &str, mut cond: impl FnMut() -> Result<T, String>) -> T {
    let deadline = Instant::now() + PATIENCE;
    loop {
        let last = match cond() {
            Ok(v) => return v,
            Err(e) => e,
        };
        if Instant::now() > deadline {
            panic!("timed out waiting for {what}; last observation:\n{last}");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The stdout of a `desk ARGS` run that must have succeeded (else a panic with both outputs).
pub(crate) fn succeeded(args: &[&str], out: Output) -> String {
    assert!(
        out.status.success(),
        "desk {args:?} failed ({:?}):\nstdout: {}\nstderr: {}",
        out.status.code(),
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

pub(crate) struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    pub(crate) fn new() -> Home {
        Home { dir: tempfile::Builder::new().prefix("dk").tempdir_in("/tmp").expect("temp dir") }
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    pub(crate) fn run_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    pub(crate) fn cmd(&self) -> Command {
        let mut c = Command::new(DESK);
        c.env("DESK_HOME", self.dir.path()).env_remove("DESK_SESSION").env("RUST_BACKTRACE", "0");
        // A test starts `desk serve` itself when it wants one (`Home::serve`), so that what runs
        // while the daemon is down stays testable; the tests of autostart remove this.
        c.env("DESK_AUTOSTART", "0");
        c
    }

    /// Run `desk ARGS...` and return its output.
    pub(crate) fn desk(&self, args: &[&str]) -> Output {
        self.cmd().args(args).output().expect("run desk")
    }

    /// Run `desk ARGS...`, requiring success, and return stdout.
    pub(crate) fn ok(&self, args: &[&str]) -> String {
        succeeded(args, self.desk(args))
    }

    /// Report `payload` (a Claude Code hook's JSON) for session `name`'s current generation as its
    /// agent's hook does (`desk hook --provider claude`), which must succeed and print nothing.
    pub(crate) fn hook(&self, name: &str, payload: &str) {
        let generation = self.session(name).expect("listed")["generation"].as_u64().expect("a generation").to_string();
        let mut child = self
            .cmd()
            .args(["hook", "--provider", "claude"])
            .env("DESK_SESSION", name)
            .env("DESK_GENERATION", &generation)
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("desk hook");
        std::io::Write::write_all(&mut child.stdin.take().expect("stdin"), payload.as_bytes()).expect("the payload");
        let out = child.wait_with_output().expect("desk hook ends");
        assert!(out.status.success(), "desk hook failed");
        assert!(out.stdout.is_empty(), "a hook prints nothing on stdout");
    }

    /// Start a session running `sh -c script`.
    pub(crate) fn new_sh(&self, name: &str, script: &str) {
        self.ok(&["new", name, "--", "sh", "-c", script]);
    }

    pub(crate) fn ls(&self) -> Vec<serde_json::Value> {
        self.json(&["ls", "--json"])["data"].as_array().expect("ls --json's data is an array").clone()
    }

    /// Run a `--json` command, requiring success, and return its envelope (docs/cli.md).
    pub(crate) fn json(&self, args: &[&str]) -> serde_json::Value {
        let out = self.ok(args);
        let v: serde_json::Value =
            serde_json::from_str(&out).unwrap_or_else(|e| panic!("desk {args:?} printed no JSON ({e}): {out}"));
        assert_eq!(v["v"], 1, "desk {args:?}: not a version-1 envelope: {v:#}");
        v
    }

    pub(crate) fn session(&self, name: &str) -> Option<serde_json::Value> {
        self.ls().into_iter().find(|s| s["name"] == name)
    }

    /// The session's screen as `desk peek` prints it.
    pub(crate) fn peek(&self, name: &str) -> String {
        self.ok(&["peek", name])
    }

    /// Wait until `desk peek` shows `text`.
    pub(crate) fn wait_screen(&self, name: &str, text: &str) -> String {
        eventually(&format!("{text:?} on the screen of {name}"), || {
            let out = self.desk(&["peek", name]);
            let screen = String::from_utf8_lossy(&out.stdout).into_owned();
            if screen.contains(text) { Ok(screen) } else { Err(screen) }
        })
    }

    /// Wait until session `name`'s activity is `want` (`idle`, `working`, `blocked`, ...); returns
    /// its `desk ls --json` row.
    pub(crate) fn wait_activity(&self, name: &str, want: &str) -> serde_json::Value {
        eventually(&format!("{name} to be {want}"), || {
            let s = self.session(name).ok_or("no session")?;
            if s["state"]["activity"]["value"] == want { Ok(s) } else { Err(s["state"].to_string()) }
        })
    }

    /// Wait until session `name` has shown its ready signal.
    pub(crate) fn wait_ready(&self, name: &str) {
        eventually(&format!("{name} to be ready"), || {
            let s = self.session(name).ok_or("no session")?;
            if s["state"]["ready"] == true { Ok(()) } else { Err(s["state"].to_string()) }
        });
    }

    /// Wait until `desk ls` reports the session exited and return its exit object.
    pub(crate) fn wait_exit(&self, name: &str) -> serde_json::Value {
        eventually(&format!("{name} to exit"), || match self.session(name) {
            Some(s) if s["status"] == "exited" => Ok(s["exit"].clone()),
            other => Err(format!("{other:?}")),
        })
    }

    /// The pid of this home's delivery daemon, if one ever started.
    pub(crate) fn serve_pid(&self) -> Option<i32> {
        std::fs::read_to_string(self.path().join("state/delivery/serve.lock")).ok()?.trim().parse().ok()
    }

    /// Start `desk serve` (detached) with extra environment; returns its pid.
    pub(crate) fn serve_with(&self, env: &[(&str, &str)]) -> i32 {
        let mut cmd = self.cmd();
        cmd.arg("serve");
        for (k, v) in env {
            cmd.env(k, v);
        }
        let out = cmd.output().expect("run desk serve");
        assert!(out.status.success(), "desk serve failed: {}", String::from_utf8_lossy(&out.stderr));
        self.serve_pid().expect("serve pid")
    }

    pub(crate) fn serve(&self) -> i32 {
        self.serve_with(&[])
    }

    /// Start the demo agent in session `name` with its hooks wired; returns its prompt log.
    pub(crate) fn demo(&self, name: &str, extra: &[&str]) -> PathBuf {
        let log = self.path().join(format!("{name}.prompts"));
        let mut args = vec!["new", name, "--provider", "demo", "--", env!("CARGO_BIN_EXE_desk-demo-agent")];
        args.extend(["--prompt-log", log.to_str().expect("utf-8 path")]);
        args.extend(extra);
        self.ok(&args);
        log
    }

    /// `desk send`, returning the item id.
    pub(crate) fn send(&self, name: &str, text: &str) -> String {
        self.ok(&["send", name, text]).trim().to_string()
    }

    pub(crate) fn item(&self, id: &str) -> serde_json::Value {
        self.json(&["item", id, "--json"])["data"].clone()
    }

    /// Wait until the item reaches a settled state (delivered, stuck or dropped) and return it.
    pub(crate) fn settled(&self, id: &str) -> serde_json::Value {
        eventually(&format!("item {id} to settle"), || {
            let item = self.item(id);
            match item["state"].as_str() {
                Some("delivered" | "stuck" | "dropped") => Ok(item),
                _ => Err(serde_json::to_string_pretty(&item).unwrap_or_default()),
            }
        })
    }

    pub(crate) fn socket(&self, name: &str) -> PathBuf {
        self.run_dir().join(format!("{name}.sock"))
    }

    pub(crate) fn master_pid(&self, name: &str) -> i32 {
        self.session(name).and_then(|s| s["master_pid"].as_i64()).expect("master pid") as i32
    }

    /// Open a raw protocol connection and complete the handshake.
    pub(crate) fn connect(&self, name: &str, role: Role, cols: u16, rows: u16) -> Wire {
        let mut wire = Wire::open(&self.socket(name));
        wire.send(&Frame::Hello { version: PROTOCOL_VERSION, role, cols, rows, status_line: false, view: false });
        match wire.recv() {
            Some(Frame::Welcome { .. }) => wire,
            other => panic!("expected WELCOME, got {other:?}"),
        }
    }
}

impl Drop for Home {
    fn drop(&mut self) {
        // The delivery daemon, by the pid in its lock file.
        if let Some(pid) = self.serve_pid() {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), nix::sys::signal::SIGKILL);
        }
        // Kill every master and child this home ever started, by pid.
        let Ok(entries) = std::fs::read_dir(self.run_dir()) else { return };
        for entry in entries.flatten() {
            if entry.path().extension().is_some_and(|e| e == "json") {
                let Ok(text) = std::fs::read_to_string(entry.path()) else { continue };
                let Ok(meta) = serde_json::from_str::<serde_json::Value>(&text) else { continue };
                for key in ["pid", "master_pid"] {
                    if let Some(pid) = meta[key].as_i64() {
                        let pid = nix::unistd::Pid::from_raw(pid as i32);
                        if key == "master_pid" {
                            // Helpers that left the session were adopted by the master.
                            for p in desk_common::procfs::descendants(pid.as_raw() as u32) {
                                let _ = nix::sys::signal::kill(
                                    nix::unistd::Pid::from_raw(p.pid as i32),
                                    nix::sys::signal::SIGKILL,
                                );
                            }
                        }
                        if key == "pid" {
                            let _ = nix::sys::signal::killpg(pid, nix::sys::signal::SIGKILL);
                            for p in desk_common::procfs::session_members(pid.as_raw() as u32) {
                                let _ = nix::sys::signal::kill(
                                    nix::unistd::Pid::from_raw(p.pid as i32),
                                    nix::sys::signal::SIGKILL,
                                );
                            }
                        }
                        let _ = nix::sys::signal::kill(pid, nix::sys::signal::SIGKILL);
                    }
                }
            }
        }
    }
}

/// A raw wire-protocol client over a blocking socket with a read timeout.
pub(crate) struct Wire {
    pub stream: UnixStream,
    pub decoder: FrameDecoder,
}

impl Wire {
    pub(crate) fn open(path: &Path) -> Wire {
        let stream = UnixStream::connect(path).unwrap_or_else(|e| panic!("connect {}: {e}", path.display()));
        stream.set_read_timeout(Some(PATIENCE)).unwrap();
        Wire { stream, decoder: FrameDecoder::new() }
    }

    pub(crate) fn send(&mut self, frame: &Frame) {
        self.stream.write_all(&frame.to_bytes()).expect("write frame");
    }

    pub(crate) fn send_raw(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)
    }

    /// The next frame, or `None` at end of stream.
    pub(crate) fn recv(&mut self) -> Option<Frame> {
        let mut buf = [0u8; 64 * 1024];
        loop {
            if let Some(frame) = self.decoder.next_frame().expect("master sent a valid frame") {
                return Some(frame);
            }
            match self.stream.read(&mut buf) {
                Ok(0) => return None,
                Ok(n) => self.decoder.push(&buf[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return None,
                Err(e) => panic!("read from master: {e}"),
            }
        }
    }

    /// Skip frames until one matches.
    pub(crate) fn recv_until(&mut self, what: &str, mut pred: impl FnMut(&Frame) -> bool) -> Frame {
        loop {
            match self.recv() {
                Some(f) if pred(&f) => return f,
                Some(_) => continue,
                None => panic!("connection closed while waiting for {what}"),
            }
        }
    }

    /// Read frames until the master closes the connection; returns them.
    pub(crate) fn drain_to_close(&mut self) -> Vec<Frame> {
        let mut frames = Vec::new();
        while let Some(f) = self.recv() {
            frames.push(f);
        }
        frames
    }
}

/// Memory the process uses right now (VmRSS), in KiB.
pub(crate) fn rss_kib(pid: i32) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with("VmRSS"))
        .and_then(|l| l.split_whitespace().nth(1)?.parse().ok())
        .unwrap_or(0)
}

/// The prompts an agent actually submitted, from its prompt log.
pub(crate) fn prompts(log: &Path) -> Vec<String> {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
        .filter_map(|v| v["prompt"].as_str().map(String::from))
        .collect()
}

pub(crate) fn alive(pid: i32) -> bool {
    nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

/// What a fake master (a socket a test serves itself) says about its session in WELCOME.
pub(crate) fn fake_session_info(name: &str, command: &str) -> desk_wire::SessionInfo {
    desk_wire::SessionInfo {
        name: name.into(),
        generation: 1,
        provider: "shell".into(),
        pid: 1,
        master_pid: 1,
        command: vec![command.into()],
        cwd: "/".into(),
        cols: 80,
        rows: 24,
        controllers: 0,
        viewers: 0,
        observers: 0,
        title: String::new(),
        started_at_ms: 0,
        state: None,
    }
}

/// The report: 10,000 coloured lines of 80-118 columns, generated as `gen.py` did
/// (with awk, which every system has): line `i` is its number and 10-14 words, each word in a
/// 256-colour foreground and a direct-colour background of its own, ~780 bytes of JSON a line
/// (7.8 MB in all, two frames' worth for the dashboard's 2,000).
pub(crate) fn wide_coloured(lines: usize) -> String {
    format!(
        "awk 'BEGIN {{ for (i = 0; i < {lines}; i++) {{ printf \"%05d\", i; \
         for (j = 0; j < 10 + i % 5; j++) printf \"\\033[38;5;%dm\\033[48;2;%d;%d;%dm w%06d\\033[0m\", \
         (i + j) % 256, (j * 17) % 256, i % 256, (i * j) % 256, (i * 7 + j) % 1000000; printf \"\\n\" }} }}'; \
         printf READY; exec cat"
    )
}

/// Line `i` of [`wide_coloured`]: its text, and each word's foreground and background.
pub(crate) fn wide_line(i: usize) -> (String, Vec<(usize, String)>) {
    let words = 10 + i % 5;
    let mut text = format!("{i:05}");
    let mut colours = Vec::new();
    for j in 0..words {
        text.push_str(&format!(" w{:06}", (i * 7 + j) % 1_000_000));
        colours.push(((i + j) % 256, format!("#{:02x}{:02x}{:02x}", (j * 17) % 256, i % 256, (i * j) % 256)));
    }
    (text, colours)
}

/// A session that printed [`wide_coloured`] lines into a 120x20 terminal, then `READY`: its
/// history holds the first `lines - 19` (the default keeps 10,000), its screen the rest.
pub(crate) fn wide_session(home: &Home, name: &str, lines: usize) {
    home.ok(&["new", name, "--size", "120x20", "--", "sh", "-c", &wide_coloured(lines)]);
    eventually("the output to end", || {
        let screen = home.peek(name);
        if screen.contains("READY") { Ok(()) } else { Err(screen) }
    });
}
