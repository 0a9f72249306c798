//! The delivery daemon's robustness: what it does with files, disks and clients that misbehave
//! (interrupted writes, full disks, unparsable records, greedy or idle control clients).

use crate::support::{Home, eventually, prompts, rss_kib};
use std::io::Write;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

fn private_dir(dir: &Path) {
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir).expect("mkdir");
}

/// A small tmpfs mounted over a directory for one test, unmounted (lazily) when dropped.
struct SmallDisk {
    at: PathBuf,
    filler: PathBuf,
}

impl SmallDisk {
    /// Mount a 256 KiB tmpfs at `at` (the test needs root: see [`crate::suite::require`]).
    fn mount(at: &Path) -> SmallDisk {
        crate::suite::require(crate::suite::Needs::Root);
        private_dir(at);
        let ok = std::process::Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=256k,mode=0700", "tmpfs"])
            .arg(at)
            .stderr(std::process::Stdio::null())
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "cannot mount a tmpfs at {}", at.display());
        SmallDisk { at: at.to_path_buf(), filler: at.join("filler") }
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
#[cfg_attr(desk_missing_root, ignore = "needs root")]
fn a_prompt_that_meets_a_full_disk_at_ingest_stays_in_the_intake_and_is_delivered_once_space_is_freed() {
    let home = Home::new();
    let disk = SmallDisk::mount(&home.path().join("state/delivery/queue"));
    prompt_meets_a_full_disk_at_ingest(&home, &[], || disk.fill(), || disk.free());
}

/// The same full disk without privileges: the `failpoints` build fails every write under the
/// queue with ENOSPC while `DESK_FULL_DISK`'s file exists (src/fsutil.rs), so CI covers the
/// path on any machine.
#[test]
fn a_prompt_that_meets_an_injected_full_disk_at_ingest_is_delivered_once_space_is_freed() {
    let home = Home::new();
    let queue = home.path().join("state/delivery/queue");
    private_dir(&queue);
    let full = queue.join("FULL");
    let env = [("DESK_FULL_DISK", full.to_str().expect("a utf-8 path"))];
    let fill = || std::fs::write(&full, b"").expect("the full-disk marker");
    let free = || std::fs::remove_file(&full).expect("remove the full-disk marker");
    prompt_meets_a_full_disk_at_ingest(&home, &env, fill, free);
}

/// `desk send` while the queue's disk is full: `send` says the prompt is not queued (exit 1)
/// and the prompt stays in the intake, shown by `desk item` and `desk queue` with the error;
/// once there is space, it is queued and delivered, once.
fn prompt_meets_a_full_disk_at_ingest(home: &Home, env: &[(&str, &str)], fill: impl Fn(), free: impl Fn()) {
    let log = home.demo("d", &[]);
    home.wait_ready("d");
    home.serve_with(env);
    fill();
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
    free();
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

/// A session whose queue is paused, holding `n` prompts of 200 KB each; returns their ids.
fn paused_queue_with_big_prompts(home: &Home, n: usize) -> (Vec<String>, String) {
    home.new_sh("p", "exec sleep 600");
    home.ok(&["pause", "p"]);
    let text: String = (0..2000).map(|i| format!("{i:05} {}\n", "y".repeat(94))).collect();
    let file = home.path().join("big.txt");
    std::fs::write(&file, &text).expect("write prompt");
    let ids = (0..n).map(|_| home.ok(&["send", "p", "--file", file.to_str().unwrap()]).trim().to_string()).collect();
    (ids, text)
}

#[test]
fn queue_answers_carry_previews_so_megabytes_of_pending_text_still_list() {
    let home = Home::new();
    home.serve();
    let (ids, text) = paused_queue_with_big_prompts(&home, 6);
    let listing = home.ok(&["queue"]);
    for id in &ids {
        assert!(listing.contains(id.as_str()), "{id} listed:\n{listing}");
    }
    let json = home.ok(&["queue", "--json"]);
    assert!(json.len() < 64 * 1024, "a listing of 1.2 MB of prompts is {} bytes", json.len());
    assert!(json.contains("\"text_chars\":"), "the full length is named: {}", &json[..json.len().min(1500)]);
    let whole = home.item(&ids[0])["text"].as_str().unwrap_or_default().to_string();
    assert_eq!(whole.trim_end(), text.trim_end(), "desk item carries the whole text");
    home.ok(&["stuck"]);
}

#[test]
fn a_client_pipelining_requests_without_reading_is_paused_not_buffered_without_bound() {
    let home = Home::new();
    let pid = home.serve();
    let before = rss_kib(pid);
    let socket = home.run_dir().join("_serve.sock");
    let mut greedy = std::os::unix::net::UnixStream::connect(&socket).expect("connect");
    greedy.set_write_timeout(Some(std::time::Duration::from_secs(2))).expect("timeout");
    let request = b"{\"v\":1,\"cmd\":\"ping\"}\n";
    let burst: Vec<u8> = request.iter().copied().cycle().take(request.len() * 3000).collect();
    let total = 4 << 20;
    let mut written = 0;
    // Without a bound the daemon reads (and answers into memory) all 4 MB; with it, it stops
    // reading once 1 MiB of answers waits, and the socket buffers fill long before 4 MB.
    while written < total {
        match greedy.write(&burst[written % burst.len()..]) {
            Ok(n) => written += n,
            Err(_) => break,
        }
    }
    assert!(written < total, "the daemon kept reading a client that never reads ({written} bytes)");
    let grown = rss_kib(pid).saturating_sub(before);
    assert!(grown < 32 * 1024, "the daemon grew by {grown} KiB");
    // Others are still served, and the greedy client gets every answer once it reads.
    home.ok(&["queue"]);
    let requests = written / request.len();
    greedy.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
    let mut reader = std::io::BufReader::new(greedy);
    let mut line = String::new();
    for i in 0..requests {
        line.clear();
        std::io::BufRead::read_line(&mut reader, &mut line).expect("read an answer");
        assert!(line.contains("\"ok\":true"), "answer {i} of {requests}: {line}");
    }
}

#[test]
fn idle_control_clients_do_not_lock_out_commands_and_stop_means_stopped() {
    let home = Home::new();
    let pid = home.serve();
    let socket = home.run_dir().join("_serve.sock");
    let idle: Vec<_> = (0..64).map(|_| std::os::unix::net::UnixStream::connect(&socket).expect("connect")).collect();
    // Each has been accepted once the daemon answers a command after them.
    home.ok(&["queue"]);
    home.ok(&["queue"]);
    // Room was made by closing the longest-idle clients, first of all the first one.
    let mut first = &idle[0];
    first.set_read_timeout(Some(std::time::Duration::from_secs(20))).expect("timeout");
    assert_eq!(std::io::Read::read(&mut first, &mut [0u8; 64]).expect("closed, not timed out"), 0);
    let out = home.ok(&["serve", "--stop"]);
    assert!(out.contains("stopped"), "{out}");
    assert!(!crate::support::alive(pid), "serve --stop returned while the daemon still runs");
}

/// A raw control connection: one request line written, answers read line by line.
struct ControlClient {
    reader: std::io::BufReader<std::os::unix::net::UnixStream>,
}

impl ControlClient {
    fn connect(home: &Home) -> ControlClient {
        let stream = std::os::unix::net::UnixStream::connect(home.run_dir().join("_serve.sock")).expect("connect");
        stream.set_read_timeout(Some(crate::support::PATIENCE)).expect("timeout");
        ControlClient { reader: std::io::BufReader::new(stream) }
    }

    fn send(&mut self, bytes: &[u8]) {
        std::io::Write::write_all(self.reader.get_mut(), bytes).expect("write a request");
    }

    fn answer(&mut self) -> String {
        let mut line = String::new();
        std::io::BufRead::read_line(&mut self.reader, &mut line).expect("read an answer");
        line
    }
}

#[test]
fn with_64_control_clients_owed_answers_the_next_is_refused_and_served_once_they_are_answered() {
    let home = Home::new();
    // A prompt waiting in the intake while the queue's disk is full: an `ingest` of it is
    // answered only once it is queued, so each client asking for it is owed an answer.
    let queue = home.path().join("state/delivery/queue");
    private_dir(&queue);
    let full = queue.join("FULL");
    std::fs::write(&full, b"").expect("the full-disk marker");
    let id = home.ok(&["send", "later", "--queue-for-later", "waits for space"]).trim().to_string();
    home.serve_with(&[("DESK_FULL_DISK", full.to_str().expect("a utf-8 path"))]);
    let ingest = format!("{{\"v\":1,\"cmd\":\"ping\"}}\n{{\"v\":1,\"cmd\":\"ingest\",\"id\":\"{id}\"}}\n");
    let mut owed: Vec<ControlClient> = (0..64)
        .map(|_| {
            let mut client = ControlClient::connect(&home);
            client.send(ingest.as_bytes());
            // The ping's answer: the daemon has read this client's lines (it reads a client's
            // requests in one go, so its ingest is taken before it looks at anyone else).
            assert!(client.answer().contains("\"ok\":true"));
            client
        })
        .collect();
    // The 65th: nobody idle to close, so it is refused, and told why.
    let mut extra = ControlClient::connect(&home);
    let refused = extra.answer();
    assert!(refused.contains("refused: 64 clients are waiting for answers"), "{refused}");
    let out = home.desk(&["queue"]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    // Space again: the prompt is queued, every client gets its answer, and the daemon serves.
    std::fs::remove_file(&full).expect("free the disk");
    for client in &mut owed {
        let answer = client.answer();
        assert!(answer.contains("\"ok\":true") && answer.contains("queued"), "{answer}");
    }
    drop(owed);
    home.ok(&["queue"]);
}

#[test]
fn a_control_request_line_over_1_mib_is_refused_and_its_connection_closed() {
    let home = Home::new();
    home.serve();
    let mut client = ControlClient::connect(&home);
    // No newline in 1 MiB and a byte: the daemon stops reading, answers and closes.
    let line = vec![b'x'; desk_wire::control::MAX_LINE + 1];
    let _ = std::io::Write::write_all(client.reader.get_mut(), &line);
    let answer = client.answer();
    assert!(answer.contains("\"ok\":false") && answer.contains("request line too long"), "{answer}");
    assert_eq!(client.answer(), "", "closed after the answer");
    // A line of just under the limit is read whole (and answered as the bad request it is).
    let mut client = ControlClient::connect(&home);
    let mut line = vec![b'x'; desk_wire::control::MAX_LINE - 1];
    line.push(b'\n');
    client.send(&line);
    let answer = client.answer();
    assert!(answer.contains("\"ok\":false") && !answer.contains("too long"), "{answer}");
    home.ok(&["queue"]);
}

#[test]
fn an_idle_control_client_is_closed_after_the_idle_timeout() {
    // The daemon's idle timeout (CONTROL_IDLE_TIMEOUT in crates/desk-daemon/src/serve.rs).
    const IDLE: std::time::Duration = std::time::Duration::from_secs(10);
    let home = Home::new();
    let pid = home.serve();
    // The clock starts before the connection exists: the daemon accepts it (and starts its idle
    // clock) only after `connect` began, so the close cannot come sooner than IDLE after this,
    // however long this thread is descheduled between the calls.
    let started = std::time::Instant::now();
    let mut idle = std::os::unix::net::UnixStream::connect(home.run_dir().join("_serve.sock")).expect("connect");
    idle.set_read_timeout(Some(IDLE + crate::support::PATIENCE)).expect("timeout");
    assert_eq!(std::io::Read::read(&mut idle, &mut [0u8; 64]).expect("closed by the daemon, not timed out"), 0);
    let elapsed = started.elapsed();
    assert!(crate::support::alive(pid), "the connection ended because the daemon (pid {pid}) died, after {elapsed:?}");
    assert!(elapsed >= IDLE, "closed after {elapsed:?}, before it was idle for {IDLE:?}");
}

/// A fake session master that speaks another protocol version: it answers an observer's HELLO
/// with WELCOME version 2, or refuses it with UNSUPPORTED_VERSION, and records what observers
/// send after their HELLO.
struct FakeMaster {
    /// When each observer's HELLO arrived: how often, and when, the daemon tried.
    hellos: std::sync::Arc<std::sync::Mutex<Vec<std::time::Instant>>>,
    frames_after_hello: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl FakeMaster {
    fn start(socket: &Path, welcome_v2: bool) -> FakeMaster {
        use desk_wire::{ErrorCode, Frame, FrameDecoder, Role};
        use std::io::Read;
        use std::sync::atomic::Ordering;
        let listener = std::os::unix::net::UnixListener::bind(socket).expect("bind fake master");
        listener.set_nonblocking(true).expect("nonblocking");
        let fake =
            FakeMaster { hellos: Default::default(), frames_after_hello: Default::default(), stop: Default::default() };
        let (hellos, frames, stop) = (fake.hellos.clone(), fake.frames_after_hello.clone(), fake.stop.clone());
        std::thread::spawn(move || {
            while !stop.load(Ordering::Relaxed) {
                let Ok((mut stream, _)) = listener.accept() else {
                    std::thread::sleep(std::time::Duration::from_millis(10));
                    continue;
                };
                let (hellos, frames) = (hellos.clone(), frames.clone());
                std::thread::spawn(move || {
                    let _ = stream.set_nonblocking(false);
                    let _ = stream.set_read_timeout(Some(crate::support::PATIENCE));
                    let mut decoder = FrameDecoder::new();
                    let mut buf = [0u8; 4096];
                    let mut observer = false;
                    loop {
                        match decoder.next_frame() {
                            Ok(Some(Frame::Hello { role, .. })) if !observer => {
                                observer = role == Role::Observer;
                                if observer {
                                    hellos.lock().unwrap().push(std::time::Instant::now());
                                }
                                // A master of a version this desk does not speak (one after it),
                                // which welcomes in its own version or refuses ours.
                                let theirs = desk_wire::PROTOCOL_VERSION + 1;
                                let reply = if welcome_v2 {
                                    let info = crate::support::fake_session_info("fake", "sh");
                                    Frame::Welcome { version: theirs, info: Box::new(info) }
                                } else {
                                    Frame::error(
                                        ErrorCode::UnsupportedVersion,
                                        format!(
                                            "protocol version {} is not supported (this master speaks {theirs})",
                                            theirs - 1
                                        ),
                                    )
                                };
                                if std::io::Write::write_all(&mut stream, &reply.to_bytes()).is_err() || !welcome_v2 {
                                    return;
                                }
                            }
                            Ok(Some(frame)) => {
                                if observer {
                                    frames.lock().unwrap().push(format!("{:?}", frame.kind()));
                                }
                            }
                            Ok(None) => match stream.read(&mut buf) {
                                Ok(0) | Err(_) => return,
                                Ok(n) => decoder.push(&buf[..n]),
                            },
                            Err(_) => return,
                        }
                    }
                });
            }
        });
        fake
    }
}

impl Drop for FakeMaster {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
    }
}

fn a_master_of_another_version_is_refused(welcome_v2: bool, shown: &str) -> (Home, FakeMaster) {
    let home = Home::new();
    private_dir(&home.run_dir());
    let fake = FakeMaster::start(&home.socket("fake"), welcome_v2);
    home.serve();
    let _ = home.desk(&["send", "fake", "never typed into a stranger"]);
    let listing = eventually("the refusal to show in desk queue", || {
        let out = home.ok(&["queue"]);
        if out.contains(shown) { Ok(out) } else { Err(out) }
    });
    let observers = fake.hellos.lock().unwrap().len();
    assert!(observers <= 2, "the daemon retried at once, {observers} times");
    let sent = fake.frames_after_hello.lock().unwrap().clone();
    assert!(sent.is_empty(), "the daemon sent {sent:?} to a master of another version");
    let id = listing.lines().find(|l| l.contains("never typed")).and_then(|l| l.split_whitespace().next());
    assert_eq!(id.map(|id| home.item(id)["state"].clone()), Some(serde_json::json!("queued")), "{listing}");
    (home, fake)
}

#[test]
fn a_master_that_welcomes_with_another_protocol_version_is_never_typed_into() {
    let v = desk_wire::PROTOCOL_VERSION;
    let shown =
        format!("its master answered in protocol version {} to a HELLO in {v}; this daemon speaks 1 to {v}", v + 1);
    a_master_of_another_version_is_refused(true, &shown);
}

#[test]
fn a_master_that_refuses_the_daemons_version_is_shown_and_retried_with_backoff() {
    // The daemon's backoff for such a master (REFUSED_RETRY_FIRST in crates/desk-daemon/src/serve.rs), then
    // doubling.
    const FIRST: std::time::Duration = std::time::Duration::from_secs(5);
    let shown = format!("refused this daemon's protocol version {}", desk_wire::PROTOCOL_VERSION);
    let (home, fake) = a_master_of_another_version_is_refused(false, &shown);
    let log = home.path().join("state/delivery/serve.log");
    let said = |what: &str| std::fs::read_to_string(&log).unwrap_or_default().contains(what);
    assert!(said("next try in 5 s"), "{}", std::fs::read_to_string(&log).unwrap_or_default());
    // Tried again, not before its backoff: the refusal came after the first HELLO and the next
    // connection only once that refusal's backoff had run out, so this is a lower bound that
    // load can only lengthen.
    let hellos = eventually("the daemon to try the master again", || {
        let hellos = fake.hellos.lock().unwrap().clone();
        if hellos.len() >= 2 { Ok(hellos) } else { Err(format!("{} tries", hellos.len())) }
    });
    let waited = hellos[1].duration_since(hellos[0]);
    assert!(waited >= FIRST, "tried again after {waited:?}, before its {FIRST:?} backoff");
    // Refused again: the next wait is twice as long.
    eventually(
        "the doubled backoff",
        || if said("next try in 10 s") { Ok(()) } else { Err(log.display().to_string()) },
    );
    assert_eq!(fake.hellos.lock().unwrap().len(), 2, "no third try within the doubled backoff");
}

#[test]
fn a_child_ringing_and_flipping_modes_in_a_loop_is_coalesced_into_a_few_events() {
    let home = Home::new();
    home.new_sh(
        "noisy",
        r#"i=0; while [ $i -lt 1500 ]; do printf '\a\033[?2004h\033[?2004l'; i=$((i+1)); done; echo loop-done; exec sleep 600"#,
    );
    home.wait_screen("noisy", "loop-done");
    let journal = home.path().join("state/sessions/noisy/events.jsonl");
    let count = |kind: &str| {
        std::fs::read_to_string(&journal)
            .unwrap_or_default()
            .lines()
            .filter_map(|l| serde_json::from_str::<serde_json::Value>(l).ok())
            .filter(|e| e["type"] == kind)
            .count()
    };
    let (bells, modes) = (count("bell"), count("mode"));
    // 1500 bells and 3000 mode changes; one of each per 500 ms is a handful.
    assert!((1..60).contains(&bells), "{bells} bell events");
    assert!(modes < 60, "{modes} mode events");
}

#[test]
#[cfg_attr(desk_missing_root, ignore = "needs root")]
fn a_full_disk_tears_no_journal_line_and_the_gap_is_recorded() {
    let home = Home::new();
    let disk = SmallDisk::mount(&home.path().join("state/sessions/full"));
    private_dir(&home.path().join("state/sessions"));
    // A new 900-byte title every 100 ms: a steady stream of events to journal (two a second
    // pass the title limit), filling what is left of a page within seconds.
    home.new_sh(
        "full",
        r#"t=$(printf '%0900d' 0); i=0; while :; do printf '\033]0;%s %s\007' $i $t; i=$((i+1)); sleep 0.1; done"#,
    );
    let journal = home.path().join("state/sessions/full/events.jsonl");
    eventually("the first events", || if journal.exists() { Ok(()) } else { Err("no journal".to_string()) });
    disk.fill();
    let log = home.run_dir().join("full.log");
    eventually("the master to notice the full disk", || {
        let text = std::fs::read_to_string(&log).unwrap_or_default();
        if text.contains("events journal failed") { Ok(()) } else { Err(text) }
    });
    disk.free();
    let events = eventually("a gap event once there is space again", || {
        let text = std::fs::read_to_string(&journal).unwrap_or_default();
        if text.contains("\"type\":\"gap\"") { Ok(text) } else { Err(text.lines().rev().take(3).collect()) }
    });
    let mut last = 0;
    for line in events.lines() {
        let event: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("a torn or merged line {line:?}: {e}"));
        let seq = event["seq"].as_u64().expect("seq");
        assert!(seq > last, "sequence numbers grow: {last} then {seq}");
        last = seq;
    }
    let gap: serde_json::Value = events
        .lines()
        .filter_map(|l| serde_json::from_str(l).ok())
        .find(|e: &serde_json::Value| e["type"] == "gap")
        .unwrap();
    assert!(
        gap["from_seq"].as_u64() <= gap["to_seq"].as_u64() && gap["reason"].as_str().unwrap_or("").contains("No space"),
        "{gap}"
    );
}

#[test]
#[cfg_attr(desk_missing_root, ignore = "needs root")]
fn a_clean_exit_on_a_full_disk_is_still_recorded_as_a_clean_exit() {
    let home = Home::new();
    let disk = SmallDisk::mount(&home.run_dir());
    let go = home.path().join("go");
    home.new_sh("clean", &format!("while [ ! -e {} ]; do sleep 0.05; done; exit 0", go.display()));
    let master = home.master_pid("clean");
    disk.fill();
    std::fs::write(&go, b"").expect("trigger");
    let exit = home.wait_exit("clean");
    // The disk goes away with this test: stop the master now rather than rely on its pid file.
    let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(master), nix::sys::signal::SIGKILL);
    assert_eq!(exit["code"], 0, "{exit}");
    assert_eq!(exit["signal"], serde_json::Value::Null, "{exit}");
}
