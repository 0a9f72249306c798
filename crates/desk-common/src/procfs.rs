//! Reading process facts from `/proc`.
//!
//! Owns the lookups desk needs about processes it did not start itself: which processes belong
//! to a session (by session id), which descend from a process (by parent links, which find
//! helpers that called `setsid` or double-forked once a subreaper adopted them) and what they
//! are. Invariant: read-only; a process that disappears while being read is simply skipped, and
//! zombies are never reported (they are already dead).

use std::fs;

/// One process found in `/proc`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProcessInfo {
    pub pid: u32,
    pub command: String,
}

/// The fields of `/proc/PID/stat` desk uses.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Stat {
    comm: String,
    zombie: bool,
    ppid: u32,
    pgrp: u32,
    session: u32,
}

/// Parse `/proc/PID/stat`: the command name sits in parentheses (and may contain both spaces and
/// parentheses, hence the last `)`); after it come state (field 3), ppid (4), pgrp (5) and
/// session (6).
fn parse_stat(stat: &str) -> Option<Stat> {
    let open = stat.find('(')?;
    let close = stat.rfind(')')?;
    let comm = stat.get(open + 1..close)?.to_string();
    let rest: Vec<&str> = stat.get(close + 2..)?.split_whitespace().collect();
    // rest[0] = state, rest[1] = ppid, rest[2] = pgrp, rest[3] = session
    let zombie = matches!(rest.first(), Some(&"Z") | Some(&"X"));
    let ppid = rest.get(1)?.parse().ok()?;
    let pgrp = rest.get(2)?.parse().ok()?;
    let session = rest.get(3)?.parse().ok()?;
    Some(Stat { comm, zombie, ppid, pgrp, session })
}

/// Every process in `/proc` with its parsed stat line.
fn all_processes() -> Vec<(u32, Stat)> {
    let Ok(entries) = fs::read_dir("/proc") else { return Vec::new() };
    let mut found = Vec::new();
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else {
            continue;
        };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        if let Some(stat) = parse_stat(&stat) {
            found.push((pid, stat));
        }
    }
    found
}

fn info(pid: u32, comm: String) -> ProcessInfo {
    let command = fs::read(format!("/proc/{pid}/cmdline"))
        .ok()
        .map(|raw| {
            raw.split(|b| *b == 0)
                .filter(|part| !part.is_empty())
                .map(|part| String::from_utf8_lossy(part).into_owned())
                .collect::<Vec<_>>()
                .join(" ")
        })
        .filter(|cmd| !cmd.is_empty())
        .unwrap_or(comm);
    ProcessInfo { pid, command }
}

/// What a group of processes uses: CPU time so far (clock ticks, user + system) and resident
/// memory now (pages).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Usage {
    pub cpu_ticks: u64,
    pub rss_pages: u64,
}

/// The session id and usage in a `/proc/PID/stat` line: utime (field 14), stime (15) and rss
/// (24), counted after the command name like [`parse_stat`]. `None` for a zombie.
fn parse_usage(stat: &str) -> Option<(u32, Usage)> {
    let close = stat.rfind(')')?;
    let rest: Vec<&str> = stat.get(close + 2..)?.split_whitespace().collect();
    if matches!(rest.first(), Some(&"Z") | Some(&"X")) {
        return None;
    }
    let field = |n: usize| rest.get(n - 3).and_then(|v| v.parse::<u64>().ok());
    let session = u32::try_from(field(6)?).ok()?;
    Some((session, Usage { cpu_ticks: field(14)? + field(15)?, rss_pages: field(24)? }))
}

/// CPU time and resident memory of every live process, summed by session id, in one pass over
/// `/proc` (a session's child leads its own session, so its id is the child's pid).
pub fn usage_by_session() -> std::collections::HashMap<u32, Usage> {
    let mut sums: std::collections::HashMap<u32, Usage> = std::collections::HashMap::new();
    let Ok(entries) = fs::read_dir("/proc") else { return sums };
    for entry in entries.flatten() {
        let Some(pid) = entry.file_name().to_str().and_then(|s| s.parse::<u32>().ok()) else { continue };
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        if let Some((session, usage)) = parse_usage(&stat) {
            let sum = sums.entry(session).or_default();
            sum.cpu_ticks += usage.cpu_ticks;
            sum.rss_pages += usage.rss_pages;
        }
    }
    sums
}

/// Each of `sessions`' usage (`(sid, master)`: a session's id, which is its child's pid, since
/// the child leads its own session; and its master, a child subreaper that adopts every orphan
/// of the session, or the child itself when the master is not known), summed over the
/// session's live processes below the master. A walk down the parent links
/// (`/proc/PID/task/TID/children`): two or three reads per process of the sessions asked about,
/// where [`usage_by_session`] reads every process of the machine — thousands on a busy one, and
/// `desk ls --all` has each host's relay list its usage (docs/benchmarks.md §27). A kernel
/// without those lists (built without `CONFIG_PROC_CHILDREN`) gets the whole scan instead.
pub fn usage_of_sessions(sessions: &[(u32, u32)]) -> std::collections::HashMap<u32, Usage> {
    if !children_listed() {
        let all = usage_by_session();
        return sessions.iter().filter_map(|(sid, _)| all.get(sid).map(|u| (*sid, *u))).collect();
    }
    sessions.iter().map(|&(sid, master)| (sid, session_usage_below(sid, master))).collect()
}

/// The usage of the live processes of session `sid` found below `master` (or at and below the
/// session's leader when `master` is `sid`). A process in another session is passed over with
/// everything below it: a process only ever leaves a session for one of its own, and its
/// children are born in that one. The master itself is in a session of its own (it is the
/// leader's parent) and is not read, only its children.
fn session_usage_below(sid: u32, master: u32) -> Usage {
    let mut sum = Usage::default();
    let mut seen = std::collections::HashSet::new();
    let mut pending: Vec<u32> = if master == sid { vec![sid] } else { main_thread_children(master) };
    while let Some(pid) = pending.pop() {
        // A pid met twice is one reused while the lists were read: counted once.
        if seen.len() >= MAX_SESSION_WALK || !seen.insert(pid) {
            continue;
        }
        let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { continue };
        // Gone, a zombie, or another session's: nothing of it or below it.
        let Some((session, usage)) = parse_usage(&stat) else { continue };
        if session != sid {
            continue;
        }
        sum.cpu_ticks += usage.cpu_ticks;
        sum.rss_pages += usage.rss_pages;
        pending.extend(children(pid, threads(&stat)));
    }
    sum
}

/// 65 536 processes: far more than any session runs; a walk past it is reading a pid reused
/// in a loop, and stops.
const MAX_SESSION_WALK: usize = 1 << 16;

/// The children of a master: those of its main thread, which forks the session's child and to
/// which the kernel gives the orphans it adopts as a subreaper (the first live thread of its
/// group); none when it is gone.
fn main_thread_children(pid: u32) -> Vec<u32> {
    read_children(&format!("/proc/{pid}/task/{pid}/children"))
}

/// The children of `pid`, which has `threads` threads: a child is listed under the thread that
/// forked it, so every thread's list is read when there is more than one (an agent's runtime
/// starts its tools from any thread); none when it is gone.
fn children(pid: u32, threads: u32) -> Vec<u32> {
    if threads <= 1 {
        return main_thread_children(pid);
    }
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else { return Vec::new() };
    tasks.flatten().flat_map(|task| read_children(&task.path().join("children").to_string_lossy())).collect()
}

fn read_children(path: &str) -> Vec<u32> {
    fs::read_to_string(path)
        .map(|list| list.split_whitespace().filter_map(|c| c.parse().ok()).collect())
        .unwrap_or_default()
}

/// The number of threads in a `/proc/PID/stat` line (field 20), 0 when it cannot be read (then
/// every thread's children are read).
fn threads(stat: &str) -> u32 {
    let Some(close) = stat.rfind(')') else { return 0 };
    stat.get(close + 2..).and_then(|rest| rest.split_whitespace().nth(20 - 3)).and_then(|n| n.parse().ok()).unwrap_or(0)
}

/// Whether this kernel lists a thread's children in `/proc` (`CONFIG_PROC_CHILDREN`): this
/// process's main thread's list is there.
fn children_listed() -> bool {
    static LISTED: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LISTED.get_or_init(|| {
        let me = std::process::id();
        std::path::Path::new(&format!("/proc/{me}/task/{me}/children")).exists()
    })
}

/// Live (non-zombie) processes whose session id is `sid`.
pub fn session_members(sid: u32) -> Vec<ProcessInfo> {
    let mut found: Vec<ProcessInfo> = all_processes()
        .into_iter()
        .filter(|(_, stat)| stat.session == sid && !stat.zombie)
        .map(|(pid, stat)| info(pid, stat.comm))
        .collect();
    found.sort_by_key(|p| p.pid);
    found
}

/// The process holding a `flock` on the file with device `dev` and inode `ino`, from
/// `/proc/locks` (`ID: FLOCK ADVISORY WRITE PID MAJ:MIN:INODE START END`, major and minor in
/// hex). `None` when nobody holds one or `/proc/locks` cannot be read.
pub fn flock_holder(dev: u64, ino: u64) -> Option<u32> {
    let want = format!("{:02x}:{:02x}:{ino}", libc::major(dev), libc::minor(dev));
    let locks = fs::read_to_string("/proc/locks").ok()?;
    locks.lines().find_map(|line| {
        let fields: Vec<&str> = line.split_whitespace().collect();
        // A blocked waiter's line starts with "ID: ->" and shifts the fields; it holds nothing.
        if fields.get(1) != Some(&"FLOCK") || fields.get(5).is_none_or(|f| *f != want.as_str()) {
            return None;
        }
        fields.get(4)?.parse().ok()
    })
}

/// `PF_EXITING` in the flags of `/proc/PID/stat`: the process is tearing itself down (its
/// files, and so its locks, are about to be released).
const PF_EXITING: u64 = 0x4;

/// SIGKILL's bit in the pending-signal masks of `/proc/PID/status`.
const SIGKILL_BIT: u64 = 1 << (libc::SIGKILL - 1);

/// Whether `pid` is gone or on its way out: a zombie, a dead task, one the kernel is tearing
/// down, or one with a SIGKILL pending that has not yet run to act on it (right after `kill -9`).
pub fn is_exiting(pid: u32) -> bool {
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else { return true };
    if mask_has(&status, &["SigPnd", "ShdPnd"], SIGKILL_BIT) {
        return true;
    }
    let Ok(stat) = fs::read_to_string(format!("/proc/{pid}/stat")) else { return true };
    let Some(close) = stat.rfind(')') else { return false };
    let rest: Vec<&str> = stat.get(close + 2..).unwrap_or("").split_whitespace().collect();
    // rest[0] = state, rest[6] = flags
    let state = rest.first().copied().unwrap_or("");
    let flags: u64 = rest.get(6).and_then(|f| f.parse().ok()).unwrap_or(0);
    matches!(state, "Z" | "X" | "x") || flags & PF_EXITING != 0
}

/// Whether `pid` runs a handler for `signal` (its bit in `SigCgt` of `/proc/PID/status`): one
/// it does not catch does what it does by default, which for most signals is to end it. `false`
/// when there is no such process.
pub fn catches(pid: u32, signal: i32) -> bool {
    let Some(bit) = u32::try_from(signal - 1).ok().and_then(|shift| 1u64.checked_shl(shift)) else { return false };
    let Ok(status) = fs::read_to_string(format!("/proc/{pid}/status")) else { return false };
    mask_has(&status, &["SigCgt"], bit)
}

/// Whether any of the signal masks `keys` of a `/proc/PID/status` text has `bit` set.
fn mask_has(status: &str, keys: &[&str], bit: u64) -> bool {
    status.lines().any(|line| {
        let Some((key, mask)) = line.split_once(':') else { return false };
        keys.contains(&key) && u64::from_str_radix(mask.trim(), 16).is_ok_and(|mask| mask & bit != 0)
    })
}

/// This process's parent, grandparent, ... up to (not including) init, nearest first (walking
/// `/proc/PID/stat`). A subreaper on the way (a session's master is one) keeps what it
/// adopted among its descendants, so a helper that double-forked is still found below it.
pub fn ancestors_of_self() -> Vec<u32> {
    let mut found = Vec::new();
    let mut current = std::process::id();
    // A chain deeper than this is a loop in what /proc said (a pid reused mid-walk).
    for _ in 0..MAX_ANCESTRY {
        let Ok(stat) = fs::read_to_string(format!("/proc/{current}/stat")) else { break };
        let Some(close) = stat.rfind(')') else { break };
        // After the name: state, then the parent's pid.
        let Some(parent) = stat.get(close + 2..).and_then(|rest| rest.split_whitespace().nth(1)?.parse::<u32>().ok())
        else {
            break;
        };
        if parent <= 1 {
            break;
        }
        found.push(parent);
        current = parent;
    }
    found
}

/// The files process `pid` holds open (the targets of `/proc/PID/fd/*`; none if it cannot be
/// read: another user's process, or gone).
pub fn open_files(pid: u32) -> Vec<std::path::PathBuf> {
    let Ok(entries) = fs::read_dir(format!("/proc/{pid}/fd")) else { return Vec::new() };
    entries.flatten().filter_map(|e| fs::read_link(e.path()).ok()).collect()
}

/// 4096 generations: far deeper than any real process tree.
const MAX_ANCESTRY: usize = 4096;

/// Live (non-zombie) descendants of `root` (children, their children, ...), `root` excluded.
/// A process that left its parent's session or process group is still found through its
/// parent link; one whose parent died is found only if `root` adopted it (a child subreaper).
pub fn descendants(root: u32) -> Vec<ProcessInfo> {
    let all = all_processes();
    let mut wanted = std::collections::HashSet::from([root]);
    // Parents may have larger pids than their children (pid wrap-around), so repeat until no
    // new descendant turns up instead of relying on one pass in pid order.
    loop {
        let before = wanted.len();
        for (pid, stat) in &all {
            if wanted.contains(&stat.ppid) {
                wanted.insert(*pid);
            }
        }
        if wanted.len() == before {
            break;
        }
    }
    let mut found: Vec<ProcessInfo> = all
        .into_iter()
        .filter(|(pid, stat)| *pid != root && wanted.contains(pid) && !stat.zombie)
        .map(|(pid, stat)| info(pid, stat.comm))
        .collect();
    found.sort_by_key(|p| p.pid);
    found
}

/// The state letter (`R`, `S`, `T`, `Z`, ...; field 3) and start time (clock ticks after
/// boot; field 22) of `pid`, from one read of `/proc/PID/stat`; `None` when there is no such
/// process.
pub fn state_and_start(pid: u32) -> Option<(char, u64)> {
    state_and_start_of(fs::File::open(format!("/proc/{pid}/stat")).ok()?)
}

/// [`state_and_start`], opening `/proc/PID/stat` relative to `dirs`' open `/proc` (a listing
/// asks it of every master).
pub fn state_and_start_in(dirs: &crate::session_dirs::SessionDirs, pid: u32) -> Option<(char, u64)> {
    state_and_start_of(dirs.proc_file(pid, "stat").ok()??)
}

fn state_and_start_of(mut file: fs::File) -> Option<(char, u64)> {
    use std::io::Read as _;
    // One read: a stat line is a few hundred bytes (a command name of at most 16).
    let mut buf = [0u8; 1024];
    let mut len = 0;
    loop {
        match file.read(&mut buf[len..]) {
            Ok(0) => break,
            Ok(n) => len += n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(_) => return None,
        }
        if len == buf.len() {
            return None;
        }
        // The kernel writes the line whole, newline last: no second read to see the end.
        if buf[len - 1] == b'\n' {
            break;
        }
    }
    let stat = std::str::from_utf8(&buf[..len]).ok()?;
    let close = stat.rfind(')')?;
    let mut rest = stat.get(close + 2..)?.split_whitespace();
    let state = rest.next()?.chars().next()?;
    // After the state (field 3), field 22 is the 19th.
    let start = rest.nth(18)?.parse().ok()?;
    Some((state, start))
}

/// The program `pid` runs, as the kernel names it (`/proc/PID/comm`: at most 15 bytes of the
/// executable's file name), if it runs.
pub fn comm(pid: u32) -> Option<String> {
    let comm = fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
    Some(comm.trim_end_matches('\n').to_string())
}

/// The system calls that read a file descriptor, as `/proc/PID/syscall` numbers them.
const READ_SYSCALLS: [libc::c_long; 4] = [libc::SYS_read, libc::SYS_readv, libc::SYS_pread64, libc::SYS_preadv];

/// Whether a thread of `pid` waits in a read of the terminal named `tty` (`/dev/pts/N`): its
/// `/proc/PID/task/TID/syscall` names a read system call whose descriptor (the first argument)
/// is that terminal. `None` when the kernel does not say (the files cannot be read: another
/// user's process, or a kernel without them).
fn reads_terminal(pid: u32, tty: &str) -> Option<bool> {
    let tasks = fs::read_dir(format!("/proc/{pid}/task")).ok()?;
    let mut known = false;
    for task in tasks.flatten() {
        let Ok(line) = fs::read_to_string(task.path().join("syscall")) else { continue };
        known = true;
        let mut fields = line.split_whitespace();
        let number = fields.next().and_then(|n| n.parse::<libc::c_long>().ok());
        if !number.is_some_and(|n| READ_SYSCALLS.contains(&n)) {
            continue;
        }
        let Some(fd) = fields.next().and_then(|a| u64::from_str_radix(a.trim_start_matches("0x"), 16).ok()) else {
            continue;
        };
        if fs::read_link(format!("/proc/{pid}/fd/{fd}")).is_ok_and(|target| target.as_os_str() == tty) {
            return Some(true);
        }
    }
    known.then_some(false)
}

/// Whether a process of process group `pgid` waits in a read of the terminal `tty`: its leader
/// first (a program reading a line usually is one), then the rest of the group (a shell script
/// whose `cat` reads). `None` when the kernel says nothing about the leader.
pub fn group_reads_terminal(pgid: u32, tty: &str) -> Option<bool> {
    match reads_terminal(pgid, tty) {
        Some(true) => return Some(true),
        None if alive(pgid) => return None,
        _ => {}
    }
    let others = all_processes().into_iter().filter(|(pid, stat)| stat.pgrp == pgid && *pid != pgid && !stat.zombie);
    let mut known = alive(pgid);
    for (pid, _) in others {
        match reads_terminal(pid, tty) {
            Some(true) => return Some(true),
            Some(false) => known = true,
            None => {}
        }
    }
    known.then_some(false)
}

/// Whether `pid` names a live process (not a zombie).
/// The file a process runs (`/proc/PID/exe`, followed even when that file was since replaced or
/// removed), by device and inode: two processes run the same binary when these are equal, and
/// a process runs the file at a path only when the path's are. `None` when it cannot be read
/// (a process of another user, one that is gone).
pub fn exe_identity(pid: u32) -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let meta = fs::metadata(format!("/proc/{pid}/exe")).ok()?;
    Some((meta.dev(), meta.ino()))
}

pub fn alive(pid: u32) -> bool {
    fs::read_to_string(format!("/proc/{pid}/stat")).ok().and_then(|stat| parse_stat(&stat)).is_some_and(|s| !s.zombie)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ancestry_starts_with_the_parent() {
        let ancestors = ancestors_of_self();
        assert_eq!(ancestors.first().copied(), Some(std::os::unix::process::parent_id()).filter(|p| *p > 1));
        assert!(!ancestors.contains(&std::process::id()));
    }

    #[test]
    fn usage_is_read_after_the_command_name_and_summed_by_session() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 1 0 100 1000000 321 rest";
        assert_eq!(parse_usage(stat), Some((42, Usage { cpu_ticks: 12, rss_pages: 321 })));
        assert_eq!(parse_usage("43 (z) Z 1 43 43 0 -1 0 0 0 0 0 7 5 0 0 20 0 1 0 100 0 0"), None);
        let ours = nix::unistd::getsid(None).expect("our session").as_raw() as u32;
        let sums = usage_by_session();
        assert!(sums.get(&ours).is_some_and(|u| u.rss_pages > 0), "our own session uses memory: {sums:?}");
    }

    #[test]
    fn a_session_s_usage_walked_from_its_master_is_the_whole_scan_s_and_leaves_out_who_left() {
        // A "master" (a shell) whose child leads a session of its own, with a process in it and
        // another that left it (setsid), as a master's child and its helpers.
        let mut master = std::process::Command::new("sh")
            .args(["-c", "setsid sh -c 'sleep 30 & setsid sleep 31 & echo started; wait' & wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(master.stdout.as_mut().unwrap()), &mut line).unwrap();
        // Until both have become `sleep` (a copy of `sh` until then, with another's memory).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let found = loop {
            let found = descendants(master.id());
            if found.iter().filter(|p| p.command.starts_with("sleep 3")).count() == 2
                || std::time::Instant::now() > deadline
            {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let leader = found.iter().map(|p| p.pid).find(|pid| {
            fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|s| parse_stat(&s))
                .is_some_and(|s| s.session == *pid)
        });
        let walked = leader.map(|sid| usage_of_sessions(&[(sid, master.id())]));
        let from_leader = leader.map(|sid| usage_of_sessions(&[(sid, sid)]));
        let scanned = usage_by_session();
        for p in &found {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(p.pid as i32), nix::sys::signal::SIGKILL);
        }
        let _ = master.kill();
        let _ = master.wait();
        let sid = leader.expect("the master's child leads a session");
        let walked = walked.and_then(|w| w.get(&sid).copied()).unwrap_or_default();
        assert!(walked.rss_pages > 0, "the session's processes use memory");
        let scanned = scanned.get(&sid).map(|u| u.rss_pages);
        assert_eq!(Some(walked.rss_pages), scanned, "the same processes as the whole scan's");
        let from_leader = from_leader.and_then(|w| w.get(&sid).copied()).unwrap_or_default();
        assert_eq!(from_leader.rss_pages, walked.rss_pages, "the same from the leader down");
    }

    #[test]
    fn the_thread_count_is_field_twenty() {
        let stat = "42 (a (b) c) S 1 42 42 0 -1 4194304 100 0 0 0 7 5 0 0 20 0 3 0 100 1000000 321 rest";
        assert_eq!(threads(stat), 3);
        assert_eq!(threads("garbage"), 0);
        let me = fs::read_to_string("/proc/self/stat").unwrap();
        assert!(threads(&me) >= 1);
    }

    #[test]
    fn stat_with_spaces_and_parens_in_the_name_parses() {
        let stat = "1234 (my (odd) name) S 1 1234 1234 34817 1234 4194560 0 0";
        let parsed = parse_stat(stat).unwrap();
        assert_eq!(
            (parsed.comm.as_str(), parsed.ppid, parsed.pgrp, parsed.session, parsed.zombie),
            ("my (odd) name", 1, 1234, 1234, false)
        );
        assert!(parse_stat("1 (x) Z 0 1 1 0").unwrap().zombie);
    }

    #[test]
    fn our_own_session_contains_us() {
        let sid = nix::unistd::getsid(None).unwrap().as_raw() as u32;
        let me = std::process::id();
        assert!(session_members(sid).iter().any(|p| p.pid == me));
    }

    #[test]
    fn the_holder_of_a_flock_is_found_and_a_live_one_is_not_exiting() {
        use std::os::unix::fs::MetadataExt;
        let dir = tempfile::tempdir().unwrap();
        let file = std::fs::File::create(dir.path().join("lock")).unwrap();
        let meta = file.metadata().unwrap();
        assert_eq!(flock_holder(meta.dev(), meta.ino()), None);
        file.lock().unwrap();
        assert_eq!(flock_holder(meta.dev(), meta.ino()), Some(std::process::id()));
        assert!(!is_exiting(std::process::id()));
        file.unlock().unwrap();
        assert_eq!(flock_holder(meta.dev(), meta.ino()), None);
    }

    #[test]
    fn descendants_include_grandchildren_and_not_the_root() {
        let mut child = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo started; wait"])
            .stdout(std::process::Stdio::piped())
            .spawn()
            .unwrap();
        let mut line = String::new();
        std::io::BufRead::read_line(&mut std::io::BufReader::new(child.stdout.as_mut().unwrap()), &mut line).unwrap();
        // The backgrounded subshell may still be a copy of `sh` when the parent echoes: poll
        // until it has become `sleep` (or the deadline passes and the asserts say what is there).
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let found = loop {
            let found = descendants(std::process::id());
            if found.iter().any(|p| p.command == "sleep 30") || std::time::Instant::now() > deadline {
                break found;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        };
        let sh = found.iter().any(|p| p.pid == child.id());
        let sleep = found.iter().find(|p| p.command == "sleep 30").map(|p| p.pid);
        assert!(found.iter().all(|p| p.pid != std::process::id()));
        if let Some(pid) = sleep {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid as i32), nix::sys::signal::SIGKILL);
        }
        let _ = child.kill();
        let _ = child.wait();
        assert!(sh, "the child is a descendant: {found:?}");
        assert!(sleep.is_some(), "the grandchild is a descendant: {found:?}");
    }
}
