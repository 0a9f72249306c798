//! `desk ls`: one row per session, from the masters' info files, their answers and the
//! records on disk; also the listing `desk attach --next`, `desk new --json` and `desk doctor`
//! read.

#[allow(unused_imports)]
use super::*;
use desk_common::session_dirs::SessionDirs;

/// One row of `desk ls`.
#[derive(Debug, Serialize)]
pub(super) struct Listing {
    name: String,
    status: &'static str,
    pid: Option<u32>,
    master_pid: Option<u32>,
    command: Vec<String>,
    cwd: Option<String>,
    cols: Option<u16>,
    rows: Option<u16>,
    /// How the size follows the controllers (absent for sessions of older masters).
    size_policy: Option<String>,
    clients: Option<Clients>,
    title: Option<String>,
    generation: Option<u32>,
    provider: Option<String>,
    /// The agent state (running sessions only), `health` shaped like the other axes.
    #[serde(serialize_with = "output::serialize_state")]
    state: Option<desk_core::state::StateView>,
    started_at_ms: Option<u64>,
    started_at: Option<String>,
    exit: Option<ExitJson>,
    /// Why the status is not simply running or exited.
    note: Option<String>,
    /// Its delivery queue (absent when neither the daemon nor the store could be read).
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    pub(super) delivery: Option<crate::cli::delivery::QueueCounts>,
    /// Its manifest, restart policy, supervision health, conversation and how its generation
    /// started (absent for a session without a launch record).
    #[serde(skip_serializing_if = "Option::is_none")]
    fleet: Option<crate::launch::view::FleetView>,
    /// How its master stands against this desk (running and unresponsive sessions only).
    #[serde(skip_serializing_if = "Option::is_none")]
    master: Option<MasterSkew>,
    /// The CPU time and resident memory of its child's whole session (`--json`, running
    /// sessions only): what another desk's dashboard shows for a host's session.
    #[serde(skip_serializing_if = "Option::is_none")]
    usage: Option<SessionUsage>,
    /// What the master's info file said of its protocol and executable (rows from the file
    /// only): the skew check need not read them again.
    #[serde(skip)]
    identity: Option<desk_common::info_file::MasterIdentity>,
    /// What the master's info file carried of its launch record (rows from the file only): the
    /// fleet view need not read the record again.
    #[serde(skip)]
    launch: Option<desk_common::launch_record::LaunchFacts>,
}

/// A running session's use of the machine, summed over the processes of its child's session.
#[derive(Debug, Serialize)]
struct SessionUsage {
    /// CPU time since each process started, in milliseconds (a rate is two of these apart).
    cpu_ms: u64,
    rss_kib: u64,
}

/// Each running row's [`SessionUsage`], from its own processes only (found below its master:
/// a few reads each, where a pass over `/proc` read every process of the machine, thousands on a
/// busy one, once per host in every `desk ls --all`: docs/benchmarks.md §27).
fn add_usage(rows: &mut [Listing]) {
    use nix::unistd::{SysconfVar, sysconf};
    let running: Vec<(u32, u32)> = rows
        .iter()
        .filter(|r| r.status == "running")
        .filter_map(|r| r.pid.map(|pid| (pid, r.master_pid.unwrap_or(pid))))
        .collect();
    if running.is_empty() {
        return;
    }
    let ticks_per_s = sysconf(SysconfVar::CLK_TCK).ok().flatten().unwrap_or(100).max(1) as u64;
    let page_kib = (sysconf(SysconfVar::PAGE_SIZE).ok().flatten().unwrap_or(4096).max(1024) / 1024) as u64;
    let usage = desk_common::procfs::usage_of_sessions(&running);
    for row in rows.iter_mut().filter(|r| r.status == "running") {
        row.usage = row
            .pid
            .and_then(|pid| usage.get(&pid))
            .map(|u| SessionUsage { cpu_ms: u.cpu_ticks * 1000 / ticks_per_s, rss_kib: u.rss_pages * page_kib });
    }
}

/// Version skew: whether a session's master runs the desk-master this desk would start, and
/// which wire-protocol version it speaks (docs/upgrading.md).
#[derive(Debug, Serialize)]
struct MasterSkew {
    /// The newest protocol version its master speaks (1: a master whose record names none).
    protocol: u16,
    /// `current`: the desk-master this desk starts; `older`: another file — the one it was
    /// started from was replaced since (an upgrade) or is another desk's; `unknown`: it cannot
    /// be told.
    binary: &'static str,
    /// What moving it to this desk takes today (absent when it is current).
    #[serde(skip_serializing_if = "Option::is_none")]
    upgrade: Option<&'static str>,
}

/// What moving a session to this desk's master takes: `desk upgrade`, which a master from
/// before in-place upgrades refuses (docs/upgrading.md).
const UPGRADE_IN_PLACE: &str = "desk upgrade hands it over to this desk's master in place, its agent running on; if its master predates in-place upgrades it refuses, and only restarting the session moves it";

/// What moving a session whose master speaks protocol 1 takes: such a master cannot hand over.
const UPGRADE_BY_RESTART: &str =
    "its master (protocol 1) cannot hand over in place; restart the session to move it to this desk";

/// The skew of the master of a row that has one, against `installed` (the identity of the
/// desk-master this desk starts).
///
/// A row from the master's info file carries what the check needs ([`Listing::identity`]):
/// when it says the master is this desk's, speaking this protocol, nothing is read; anything
/// else is looked up as for a row without one (the session record, `/proc/PID/exe`), so that
/// `older` is never said from a record alone — a master that re-executed itself in a handover
/// keeps its pid and start time, and its previous image's file is believed until the new one
/// rewrites it as it resumes.
fn master_skew(paths: &Paths, row: &Listing, installed: Option<(u64, u64)>) -> Option<MasterSkew> {
    if !matches!(row.status, "running" | "unresponsive") {
        return None;
    }
    let master_pid = row.master_pid?;
    if let Some(id) = row.identity
        && id.protocol >= desk_wire::PROTOCOL_VERSION
        && id.exe.is_some()
        && id.exe == installed
    {
        return Some(MasterSkew { protocol: id.protocol, binary: "current", upgrade: None });
    }
    let name = SessionName::parse(&row.name).ok()?;
    let meta = session::read_meta(&paths.session(&name)).ok().flatten();
    let protocol = meta.map_or(desk_wire::OLDEST_PROTOCOL_VERSION, |m| m.protocol.unwrap_or(1));
    let binary = match (desk_common::procfs::exe_identity(master_pid), installed) {
        (Some(theirs), Some(ours)) if theirs == ours => "current",
        (Some(_), Some(_)) => "older",
        _ => "unknown",
    };
    let stale = binary == "older" || protocol < desk_wire::PROTOCOL_VERSION;
    let upgrade = if protocol < 2 { UPGRADE_BY_RESTART } else { UPGRADE_IN_PLACE };
    Some(MasterSkew { protocol, binary, upgrade: stale.then_some(upgrade) })
}

/// The identity of the desk-master this desk starts ([`crate::launch::master_command`]'s program).
fn installed_master() -> Option<(u64, u64)> {
    use std::os::unix::fs::MetadataExt;
    let exe = std::env::current_exe().ok()?;
    let program = crate::launch::master_command(&exe).get_program().to_owned();
    let meta = std::fs::metadata(program).ok()?;
    Some((meta.dev(), meta.ino()))
}

#[derive(Debug, Serialize)]
struct Clients {
    controllers: u32,
    viewers: u32,
    observers: u32,
}

#[derive(Debug, Serialize)]
struct ExitJson {
    code: Option<i32>,
    signal: Option<i32>,
    escalated: bool,
    exited_at_ms: u64,
    exited_at: String,
}

impl ExitJson {
    fn from(record: &ExitRecord) -> ExitJson {
        let (code, signal) = match record.status {
            ExitStatus::Code(c) => (Some(c), None),
            ExitStatus::Signal(s) => (None, Some(s)),
        };
        ExitJson {
            code,
            signal,
            escalated: record.escalated,
            exited_at_ms: record.exited_at_ms,
            exited_at: iso8601(record.exited_at_ms),
        }
    }
}

/// Every session's row. A running master's row comes from its info file when that can be
/// believed ([`from_info_file`]); the other masters are asked all at once ([`crate::cli::probe::ask_all`]), so that
/// all of them together take at most [`session::PROBE_DEADLINE`]: a stopped or dripping
/// master is shown as `unresponsive` rather than holding up the listing. A session that
/// recorded its exit is listed from its record without asking; a master that answers is
/// listed from its WELCOME alone (its metadata file is read only for a session whose master
/// did not answer).
fn listings(paths: &Paths, skew: Skew) -> Result<Vec<Listing>> {
    let budget = session::PROBE_DEADLINE;
    let supervision = desk_daemon::supervisor::read_state(paths);
    let installed = match skew {
        Skew::Check => Some(installed_master()),
        Skew::Skip => None,
    };
    let dirs = SessionDirs::open(paths);
    // What a row has beyond its master's answer: its fleet facts, and its skew when asked.
    let finish = |name: &SessionName, row: &mut Listing, buf: &mut Vec<u8>| {
        add_fleet_to(paths, &dirs, name, row, &supervision, buf);
        if let Some(installed) = installed {
            row.master = master_skew(paths, row, installed);
        }
    };
    // A session's row from its files; `buf` is the reading thread's, for every record it reads.
    // Boxed where it is made: a row is over a kilobyte, and a fleet's rows pass through slots
    // and vectors as pointers, not copied from one fresh vector's pages to the next.
    let read = |(name, has_exit): (&SessionName, bool), buf: &mut Vec<u8>| -> Option<Box<Listing>> {
        // A record written after the directory was read belongs to a session that was running
        // then; `unexited` looks again for a master that does not answer.
        let exit = if has_exit { session::read_exit(&paths.session(name)).unwrap_or(None) } else { None };
        let mut row = match exit {
            Some(exit) => exited(name, &paths.session(name), &exit),
            None => from_info_file(paths, &dirs, name, buf)?,
        };
        finish(name, &mut row, buf);
        Some(Box::new(row))
    };
    let mut listed_at = Instant::now();
    let list = || {
        let pairs = paths.session_names_and_exits();
        listed_at = Instant::now();
        pairs
    };
    let (pairs, mut rows) = read_all(runtime_looks_large(paths), list, read)?;
    let deadline = listed_at + budget;
    let names: Vec<SessionName> = pairs.into_iter().map(|(name, _)| name).collect();
    let ask: Vec<usize> = (0..rows.len()).filter(|i| rows[*i].is_none()).collect();
    let sockets: Vec<std::path::PathBuf> = ask.iter().map(|i| paths.session(&names[*i]).socket).collect();
    let answers = crate::cli::probe::ask_all(&sockets, deadline, budget)?;
    for (i, answer) in ask.into_iter().zip(answers) {
        rows[i] = unexited(paths, &names[i], answer)?.map(Box::new);
        if let Some(row) = &mut rows[i] {
            finish(&names[i], row, &mut Vec::new());
        }
    }
    let mut rows: Vec<Listing> = rows.into_iter().flatten().map(|row| *row).collect();
    add_declared_down(paths, &mut rows);
    Ok(rows)
}

/// Whether a listing checks each master against this desk's ([`master_skew`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Skew {
    Check,
    Skip,
}

/// The fleet's part of a listing beyond each row's [`crate::launch::view::FleetView`] (added
/// as each row is read: a session a manifest declares that is not running is `down`, with how
/// it ended and what the supervisor says): the sessions a registered manifest declares that
/// never ran here.
fn add_declared_down(paths: &Paths, rows: &mut Vec<Listing>) {
    let known: Vec<String> = rows.iter().map(|r| r.name.clone()).collect();
    for (manifest, spec) in crate::launch::view::declared_down(paths, &known) {
        let Ok(name) = SessionName::parse(&spec.name) else { continue };
        let mut row = from_files(&name, None, "down");
        row.provider = Some(spec.provider.as_str().to_string());
        row.command = spec.command.clone().unwrap_or_default();
        row.note = Some(format!("declared in {manifest}; not started yet (desk up)"));
        rows.push(row);
    }
}

/// 64 sessions: below this a second thread costs more to start than it saves.
const LISTING_SPLIT: usize = 64;

/// 8 sessions (a few tens of microseconds of reading): what a reading thread takes at a time,
/// small enough that when one thread is held up (the other CPU busy elsewhere) the other reads
/// on, and the two finish together, not one half's time after the other.
const LISTING_CHUNK: usize = 8;

/// 8 KiB: a runtime directory this large holds some 70 sessions or more (six entries each: a
/// tmpfs counts 20 bytes an entry, ext4 fills a 4 KiB block with about 30 sessions' entries),
/// enough that [`read_all`] starts its second thread before it lists the directory. Only a
/// hint: a smaller fleet then reads with two threads, a larger one starts the second later.
const LARGE_RUNTIME_DIR: u64 = 8 * 1024;

/// The sessions found, each with whether its exit record was there, and each one's row.
type ReadRows<T> = (Vec<(SessionName, bool)>, Vec<Option<T>>);

/// Whether the runtime directory's size says it holds a large fleet ([`LARGE_RUNTIME_DIR`]).
fn runtime_looks_large(paths: &Paths) -> bool {
    std::fs::metadata(&paths.runtime).is_ok_and(|m| m.len() >= LARGE_RUNTIME_DIR)
}

/// The sessions `list` finds, each with `read` of it, in order: on this thread for a small
/// fleet, else on two threads that take [`LISTING_CHUNK`] sessions at a time. A large fleet's
/// files are most of a listing's time: each session costs a few system calls (its info file,
/// its master's `/proc` entry, its captures). Each thread has its own buffer for the records
/// it reads. With `early`, the second thread is started before `list` runs: on a busy machine
/// a new thread can wait milliseconds for a CPU, and it then waits while the directory is read.
fn read_all<T: Send + Sync>(
    early: bool,
    list: impl FnOnce() -> Result<Vec<(SessionName, bool)>>,
    read: impl Fn((&SessionName, bool), &mut Vec<u8>) -> Option<T> + Sync,
) -> Result<ReadRows<T>> {
    use std::sync::OnceLock;
    use std::sync::atomic::{AtomicUsize, Ordering};
    /// The sessions to read, and a slot for each row, written once by whichever thread read it.
    struct Job<T> {
        pairs: Vec<(SessionName, bool)>,
        slots: Vec<OnceLock<Option<T>>>,
        next: AtomicUsize,
    }
    let work = |job: &Job<T>| {
        let mut buf = Vec::new();
        loop {
            let start = job.next.fetch_add(LISTING_CHUNK, Ordering::Relaxed);
            if start >= job.pairs.len() {
                return;
            }
            for (slot, (name, exited)) in job.slots.iter().zip(&job.pairs).skip(start).take(LISTING_CHUNK) {
                let _ = slot.set(read((name, *exited), &mut buf));
            }
        }
    };
    // `None`: no work for the helper (a small fleet, or the listing failed).
    let job: OnceLock<Option<Job<T>>> = OnceLock::new();
    let small = std::thread::scope(|scope| {
        let helper = || {
            scope.spawn(|| {
                if let Some(job) = job.wait() {
                    work(job);
                }
            })
        };
        let early = early.then(helper);
        let pairs = match list() {
            Ok(pairs) => pairs,
            Err(e) => {
                let _ = job.set(None);
                return Err(e);
            }
        };
        if pairs.len() < LISTING_SPLIT && early.is_none() {
            let _ = job.set(None);
            let mut buf = Vec::new();
            let rows = pairs.iter().map(|(name, exited)| read((name, *exited), &mut buf)).collect();
            return Ok(Some((pairs, rows)));
        }
        let slots = pairs.iter().map(|_| OnceLock::new()).collect();
        let _ = job.set(Some(Job { pairs, slots, next: AtomicUsize::new(0) }));
        let helper = early.unwrap_or_else(helper);
        if let Some(Some(job)) = job.get() {
            work(job);
        }
        // Joined here, a panic of the helper (a bug) does not end the listing: the slots it
        // left empty are read below.
        let _ = helper.join();
        Ok(None)
    })?;
    if let Some(small) = small {
        return Ok(small);
    }
    let Some(Some(job)) = job.into_inner() else {
        return Err(anyhow::anyhow!("the listing lost the sessions it found (a bug in desk ls)"));
    };
    let mut buf = Vec::new();
    let rows = job
        .slots
        .into_iter()
        .zip(&job.pairs)
        .map(|(slot, (name, exited))| slot.into_inner().unwrap_or_else(|| read((name, *exited), &mut buf)))
        .collect();
    Ok((job.pairs, rows))
}

/// A running session's row from the info file its master keeps current
/// ([`desk_common::info_file`]), without waking the master: `running` with what it would answer to
/// HELLO while the process the file names is that master, alive and not stopped;
/// `unresponsive` when it is stopped; `None` when there is no file to believe (none yet, not
/// this session's, or its master is gone), and the master is asked instead.
fn from_info_file(paths: &Paths, dirs: &SessionDirs, name: &SessionName, buf: &mut Vec<u8>) -> Option<Listing> {
    use desk_common::info_file::MasterCheck;
    let record = desk_common::info_file::read_in(dirs, name, buf)?;
    if record.info.name != name.as_str() {
        return None;
    }
    match desk_common::info_file::check_in(dirs, &record) {
        MasterCheck::Running => {
            let mut row = from_files(name, None, "running");
            row.size_policy = record.size_policy;
            row.identity = record.master;
            row.launch = record.launch;
            apply_info(&mut row, record.info);
            Some(row)
        }
        MasterCheck::Stopped => {
            let meta: Option<SessionMeta> = session::read_meta(&paths.session(name)).unwrap_or(None);
            let mut row = from_files(name, meta.as_ref(), "unresponsive");
            row.note = Some("its master is stopped (SIGSTOP or a debugger) and cannot answer".into());
            Some(row)
        }
        MasterCheck::NotTheMaster => None,
    }
}

/// A row's [`crate::launch::view::FleetView`]; a session a manifest declares that is not
/// running is `down`.
fn add_fleet_to(
    paths: &Paths,
    dirs: &SessionDirs,
    name: &SessionName,
    row: &mut Listing,
    supervision: &desk_core::fleet::supervise::Supervisor,
    buf: &mut Vec<u8>,
) {
    let running = matches!(row.status, "running" | "unresponsive");
    let carried = row.launch.take();
    let captures = || crate::launch::conversation::read_in(dirs, name, buf);
    let now = desk_common::clock::now_ms();
    row.fleet = crate::launch::view::of_with_captures(paths, name, running, carried, captures, supervision, now);
    if !running && row.fleet.as_ref().is_some_and(|f| f.manifest.is_some()) {
        row.status = "down";
    }
}

/// One session's row (for `desk new --json`), asked like `desk ls` asks them all.
pub(super) fn listing(paths: &Paths, name: &SessionName, deadline: Instant) -> Result<Option<Listing>> {
    let files = paths.session(name);
    if let Some(exit) = session::read_exit(&files).unwrap_or(None) {
        return Ok(Some(exited(name, &files, &exit)));
    }
    let budget = deadline.saturating_duration_since(Instant::now());
    let answer = crate::cli::probe::ask_all(std::slice::from_ref(&files.socket), deadline, budget)?.pop();
    let mut row = match answer {
        Some(answer) => unexited(paths, name, answer)?,
        None => None,
    };
    if let Some(row) = &mut row {
        let supervision = desk_daemon::supervisor::read_state(paths);
        add_fleet_to(paths, &SessionDirs::open(paths), name, row, &supervision, &mut Vec::new());
    }
    Ok(row)
}

/// The row of a session that recorded its exit.
fn exited(name: &SessionName, files: &desk_common::paths::SessionPaths, exit: &ExitRecord) -> Listing {
    let meta: Option<SessionMeta> = session::read_meta(files).unwrap_or(None);
    let mut row = from_files(name, meta.as_ref(), "exited");
    row.exit = Some(ExitJson::from(exit));
    row.cols = exit.cols.or(row.cols);
    row.rows = exit.rows.or(row.rows);
    row.title = exit.title.clone();
    row
}

/// The row of a session with no exit record when it was listed, from what its master
/// answered; `None` for a name with neither a socket nor a metadata file.
fn unexited(paths: &Paths, name: &SessionName, answer: Answer) -> Result<Option<Listing>> {
    let files = paths.session(name);
    // A master that did not answer may have exited while it was being asked: its record then
    // says how.
    if !matches!(answer, Answer::Welcome(_))
        && let Some(exit) = session::read_exit(&files).unwrap_or(None)
    {
        return Ok(Some(exited(name, &files, &exit)));
    }
    let meta = || -> Option<SessionMeta> { session::read_meta(&files).unwrap_or(None) };
    let row = match answer {
        Answer::Welcome(info) => {
            let mut row = from_files(name, None, "running");
            apply_info(&mut row, *info);
            // WELCOME does not carry it (the C codec's SessionInfo has a fixed set of keys);
            // it never changes in a session's life, so its metadata file has it.
            row.size_policy = meta().and_then(|m| m.size_policy);
            row
        }
        Answer::Unresponsive(why) => {
            let mut row = from_files(name, meta().as_ref(), "unresponsive");
            row.note = Some(why);
            row
        }
        Answer::Stale => {
            if let Some(lock) = NameLock::try_acquire(paths, name)? {
                session::clean_stale(paths, name, &lock)?;
            }
            let mut row = from_files(name, meta().as_ref(), "lost");
            row.note = Some(
                unreadable_records(name, &files)
                    .unwrap_or_else(|| "its master died without recording an exit; the socket was stale".into()),
            );
            row
        }
        Answer::Absent => {
            let Some(meta) = meta() else {
                // Records this desk cannot read (damaged, or a newer desk's) are named, never
                // passed over as no session at all.
                return Ok(unreadable_records(name, &files).map(|note| {
                    let mut row = from_files(name, None, "lost");
                    row.note = Some(note);
                    row
                }));
            };
            if let Some(note) = unreadable_records(name, &files) {
                let mut row = from_files(name, Some(&meta), "lost");
                row.note = Some(note);
                return Ok(Some(row));
            }
            if let Some(why) = session::master_without_socket(paths, name) {
                let mut row = from_files(name, Some(&meta), "unresponsive");
                row.note = Some(why);
                return Ok(Some(row));
            }
            let mut row = from_files(name, Some(&meta), "lost");
            row.note = Some("its master is gone and recorded no exit".into());
            row
        }
    };
    Ok(Some(row))
}

fn apply_info(row: &mut Listing, info: SessionInfo) {
    row.pid = Some(info.pid);
    row.master_pid = Some(info.master_pid);
    row.command = typed_command(Some(&info.provider), &info.command);
    row.cwd = Some(info.cwd);
    row.cols = Some(info.cols);
    row.rows = Some(info.rows);
    row.clients = Some(Clients { controllers: info.controllers, viewers: info.viewers, observers: info.observers });
    row.title = Some(info.title);
    row.generation = Some(info.generation);
    row.provider = Some(info.provider);
    row.state = info.state;
    row.started_at_ms = Some(info.started_at_ms);
    row.started_at = Some(iso8601(info.started_at_ms));
}

/// What is wrong with a session's records when this desk cannot read one of them (damaged, or
/// written by a newer desk), and how to acknowledge it; `None` when every record present reads.
fn unreadable_records(name: &SessionName, files: &desk_common::paths::SessionPaths) -> Option<String> {
    let errors: Vec<String> = [session::read_meta(files).err(), session::read_exit(files).err()]
        .into_iter()
        .flatten()
        .map(|e| format!("{e:#}"))
        .collect();
    if errors.is_empty() {
        return None;
    }
    Some(format!(
        "{}; the records are kept as they are. Look at them, then acknowledge with: desk rm {name}",
        errors.join("; ")
    ))
}

/// A session's row as its record on disk describes it, with `status`; what only its master
/// knows (clients, title, state, exit) left empty.
fn from_files(name: &SessionName, meta: Option<&SessionMeta>, status: &'static str) -> Listing {
    Listing {
        name: name.to_string(),
        status,
        pid: meta.map(|m| m.pid),
        master_pid: meta.map(|m| m.master_pid),
        command: meta.map(|m| typed_command(Some(&m.provider), &m.command)).unwrap_or_default(),
        cwd: meta.map(|m| m.cwd.clone()),
        cols: meta.map(|m| m.cols),
        rows: meta.map(|m| m.rows),
        size_policy: meta.and_then(|m| m.size_policy.clone()),
        clients: None,
        title: None,
        generation: meta.map(|m| m.generation),
        provider: meta.map(|m| m.provider.clone()),
        state: None,
        started_at_ms: meta.map(|m| m.started_at_ms),
        started_at: meta.map(|m| iso8601(m.started_at_ms)),
        exit: None,
        note: None,
        delivery: None,
        fleet: None,
        master: None,
        usage: None,
        identity: None,
        launch: None,
    }
}

/// Every session's row, as `desk ls` shows it (with its delivery counts and master skew).
fn rows(paths: &Paths) -> Result<Vec<Listing>> {
    // The delivery queues are asked for while the masters are probed.
    let queues = {
        let paths = paths.clone();
        std::thread::spawn(move || crate::cli::delivery::queue_counts(&paths))
    };
    let mut rows = listings(paths, Skew::Check)?;
    if let Ok(Some(mut counts)) = queues.join() {
        for row in &mut rows {
            row.delivery = Some(counts.remove(&row.name).unwrap_or_default());
        }
    }
    Ok(rows)
}

/// What `desk ls --json` prints, as bytes, laid out as `layout` says (a host's relay answers it
/// in its own process, on one line).
pub(in crate::cli) fn json_listing(paths: &Paths, layout: output::Layout) -> Result<Vec<u8>> {
    paths.ensure_runtime()?;
    let mut rows = rows(paths)?;
    add_usage(&mut rows);
    LsReport { rows }.json(layout)
}

pub(in crate::cli) fn ls(json: bool) -> Result<i32> {
    use std::io::Write as _;
    let paths = paths()?;
    let bytes = if json {
        json_listing(&paths, output::Layout::Pretty)?
    } else {
        LsReport { rows: rows(&paths)? }.text().into_bytes()
    };
    let mut out = std::io::stdout().lock();
    out.write_all(&bytes).and_then(|()| out.flush()).context("cannot write the listing")?;
    Ok(0)
}

/// What `desk ls` found: one row per session (the running and unresponsive ones with their
/// master's skew), rendered once as a table or once as JSON.
struct LsReport {
    rows: Vec<Listing>,
}

impl LsReport {
    /// The JSON document, as bytes (what a host's relay sends as well, on one line).
    fn json(&self, layout: output::Layout) -> Result<Vec<u8>> {
        let mut out = Vec::new();
        output::write_ok_as(layout, &mut out, "sessions", &self.rows, Vec::new)?;
        Ok(out)
    }

    /// The table, written at once (a line-buffered stdout would make one write per row).
    fn text(&self) -> String {
        let rows = &self.rows;
        if rows.is_empty() {
            return match demo_home_elsewhere() {
                Some(home) => format!(
                    "no sessions here; the demo fleet (make demo) runs under DESK_HOME={0}\n\
                     see it with: export DESK_HOME={0}   (or run: make demo-shell)\n",
                    home.display()
                ),
                None => "no sessions; start one with: desk new NAME -- CMD\n".to_string(),
            };
        }
        let mut text = String::new();
        for line in ls_table(rows, desk_common::clock::now_ms(), crate::cli::table::terminal_width()) {
            text.push_str(&line);
            text.push('\n');
        }
        text.push_str(&skew_footer(rows));
        text
    }
}

/// The line under the table that names the sessions whose master is not this desk's (empty
/// when there are none).
fn skew_footer(rows: &[Listing]) -> String {
    let stale = older_masters_of(rows);
    if stale.is_empty() {
        return String::new();
    }
    let who = if stale.len() == 1 { "1 session runs".to_string() } else { format!("{} sessions run", stale.len()) };
    format!(
        "\n{who} an older master than this desk's: {}. `desk upgrade` hands each over to this desk's master in place; one that predates in-place upgrades refuses, and then only restarting the session moves it (docs/upgrading.md).\n",
        stale.join(", ")
    )
}

/// The sessions whose master is older than this desk's, each as `NAME (why)`: what `desk
/// doctor` reports (`desk ls` says it under its table).
pub(in crate::cli) fn older_masters(paths: &Paths) -> Result<Vec<String>> {
    Ok(older_masters_of(&listings(paths, Skew::Check)?))
}

fn older_masters_of(rows: &[Listing]) -> Vec<String> {
    rows.iter()
        .filter_map(|r| {
            let skew = r.master.as_ref()?;
            skew.upgrade?;
            let why = match (skew.binary, skew.protocol) {
                ("older", p) if p < desk_wire::PROTOCOL_VERSION => format!("an older desk-master, protocol {p}"),
                ("older", _) => "an older desk-master".to_string(),
                (_, p) => format!("protocol {p}"),
            };
            Some(format!("{} ({why})", r.name))
        })
        .collect()
}

/// The home of a demo fleet (`make demo`: `target/demo-home` of a desk checkout) that has
/// sessions, when this listing looked elsewhere (no `DESK_HOME`): beside the `target` directory
/// this `desk` runs from, or in the current directory or one above it (looked at first).
fn demo_home_elsewhere() -> Option<PathBuf> {
    if std::env::var_os("DESK_HOME").is_some_and(|h| !h.is_empty()) {
        return None;
    }
    let beside_exe = std::env::current_exe().ok().and_then(|exe| Some(exe.parent()?.parent()?.join("demo-home")));
    let cwd = std::env::current_dir().ok();
    let above_cwd = cwd.iter().flat_map(|d| d.ancestors()).map(|d| d.join("target").join("demo-home"));
    above_cwd.chain(beside_exe).find(|home| Paths::in_home(home).session_names().is_ok_and(|names| !names.is_empty()))
}

/// Widest a column other than the last gets, in cells: room for an agent's title (they are
/// short: `✳ Fix the parser tests`) without one long title pushing every later column off an
/// 80-column screen.
const LS_COLUMN_CAP: usize = 30;

/// `desk ls`'s table: one row per session, fitted to `fit` cells when given.
/// The running session that most needs a person (blocked on a dialog, then a stuck item, then
/// degraded; the one waiting longest first), with a few words on why: what `desk attach --next`
/// attaches to. The ranking is the dashboard's (`dash::model::rank`).
pub(crate) fn most_needing_person(paths: &Paths) -> Result<Option<(SessionName, String)>> {
    let counts = crate::cli::delivery::queue_counts(paths).unwrap_or_default();
    let rows = listings(paths, Skew::Skip)?;
    let best = rows
        .iter()
        .filter(|row| row.exit.is_none())
        .filter_map(|row| {
            let state = row.state.as_ref()?;
            let stuck = counts.get(&row.name).map_or(0, |c| c.stuck);
            needs_person(
                state.activity.value,
                state.activity.since_ms,
                state.wait.as_deref(),
                &state.health.value,
                stuck,
            )
            .map(|n| (n, row))
        })
        .min_by_key(|(n, _)| n.key);
    match best {
        Some((need, row)) => Ok(Some((SessionName::parse(&row.name)?, need.why))),
        None => Ok(None),
    }
}

/// Why a running session with `state` and `stuck` stuck prompts needs a person, if it does,
/// and how it ranks among those that do (`key`: the lower, the sooner).
pub(crate) struct Need {
    pub key: (crate::dash::model::Urgency, u64),
    pub why: String,
}

/// [`Need`] of one running session: its activity since `since_ms`, what it waits for, its
/// health, its stuck prompts (the fleet's ranking: `desk_core::attention::rank`).
pub(crate) fn needs_person(
    activity: desk_core::state::Activity,
    since_ms: u64,
    wait: Option<&str>,
    health: &desk_wire::state::Health,
    stuck: u32,
) -> Option<Need> {
    use crate::dash::model::{Urgency, rank};
    let urgency = rank(None, true, activity, stuck, health);
    if !urgency.needs_person() {
        return None;
    }
    let why = match urgency {
        Urgency::Blocked => crate::words::activity(desk_core::state::Activity::Blocked, wait),
        Urgency::Stuck => "a prompt is stuck".to_string(),
        _ => health.as_str(),
    };
    Some(Need { key: (urgency, since_ms), why })
}

fn ls_table(rows: &[Listing], now: u64, fit: Option<usize>) -> Vec<String> {
    // The columns a glance needs first; the command (you typed it) last, as it is cut first.
    let header =
        ["NAME", "STATUS", "ACTIVITY", "QUEUE", "STUCK", "TITLE", "PID", "CLIENTS", "STARTED", "SIZE", "COMMAND"];
    let mut table = vec![header.map(String::from).to_vec()];
    for r in rows {
        let ended = r.exit.as_ref().map(|e| {
            let how = match (e.code, e.signal) {
                (Some(code), _) => Some(ExitStatus::Code(code)),
                (_, Some(signal)) => Some(ExitStatus::Signal(signal)),
                _ => None,
            };
            (how, Some(e.exited_at_ms))
        });
        let mut status = crate::words::status(r.status, ended, now);
        // The conversation a running generation resumed (its id's start; `--json` has it all).
        if let Some(desk_core::fleet::resume::ResumePlan::Resume { conversation, .. }) =
            r.fleet.as_ref().filter(|_| r.exit.is_none()).and_then(|f| f.start.as_ref())
        {
            status.push_str(&format!(" ↺ {}", crate::launch::view::short(conversation)));
        }
        let clients =
            r.clients.as_ref().map_or_else(|| "-".into(), |c| crate::words::clients(c.controllers, c.viewers));
        let activity = match (&r.state, r.fleet.as_ref().and_then(|f| f.health.as_ref())) {
            // What the supervisor says of a session that is down.
            (None, Some(health)) => health.clone(),
            (Some(s), _) if s.lifecycle.value == desk_core::state::Lifecycle::Starting => "starting".to_string(),
            (Some(s), _) => format!(
                "{} {}",
                crate::words::activity(s.activity.value, s.wait.as_deref()),
                desk_core::time::span(now.saturating_sub(s.activity.since_ms))
            ),
            (None, None) => "-".into(),
        };
        let (queue, stuck) = match &r.delivery {
            Some(d) => {
                let mut queue = d.queue.to_string();
                if d.paused.is_some() {
                    queue.push_str(" paused");
                }
                (queue, d.stuck.to_string())
            }
            None => ("?".into(), "?".into()),
        };
        table.push(vec![
            r.name.clone(),
            status,
            activity,
            queue,
            stuck,
            r.title.as_deref().filter(|t| !t.is_empty()).map_or("-".into(), crate::cli::table::printable),
            r.pid.map_or("-".into(), |p| p.to_string()),
            clients,
            r.started_at_ms.map_or("-".into(), |t| desk_core::time::ago(now, t)),
            match (r.cols, r.rows) {
                (Some(c), Some(rw)) => format!("{c}x{rw}"),
                _ => "-".into(),
            },
            crate::cli::table::printable(&crate::cli::table::shell_words(&r.command)),
        ]);
    }
    crate::cli::table::render(&table, LS_COLUMN_CAP, fit)
}

/// The command as the user typed it: without the hook wiring `desk new` adds right after an
/// agent's program (`providers::wire_hooks`: Claude Code's `--settings FILE`, Codex's
/// `-c notify=[…]`, the demo agent's `--hook-cmd …`), which is desk's business, not theirs.
pub(crate) fn typed_command(provider: Option<&str>, command: &[String]) -> Vec<String> {
    let wired = match (provider, command.get(1).map(String::as_str), command.get(2)) {
        (Some("claude"), Some("--settings"), Some(v)) => v.ends_with("/claude-settings.json"),
        (Some("codex"), Some("-c"), Some(v)) => {
            v.starts_with("notify=") && v.contains(r#""hook","--provider","codex"]"#)
        }
        (Some("demo"), Some("--hook-cmd"), Some(v)) => v.ends_with(" hook --provider demo"),
        _ => false,
    };
    let mut typed = command.to_vec();
    if wired {
        typed.drain(1..3);
    }
    typed
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| a.to_string()).collect()
    }

    #[test]
    fn every_session_is_read_once_and_in_order_on_one_thread_or_two() {
        use std::sync::atomic::{AtomicUsize, Ordering};
        for (n, early) in
            [(0, false), (0, true), (5, false), (5, true), (LISTING_SPLIT, false), (300, false), (300, true)]
        {
            let found: Vec<(SessionName, bool)> =
                (0..n).map(|i| (SessionName::parse(&format!("s{i:03}")).unwrap(), i % 7 == 0)).collect();
            let reads = AtomicUsize::new(0);
            let (pairs, rows) = read_all(
                early,
                || Ok(found.clone()),
                |(name, exited), _buf| {
                    reads.fetch_add(1, Ordering::Relaxed);
                    // A row that cannot be read from files (its master is then asked).
                    (name.as_str() != "s005").then(|| (name.to_string(), exited))
                },
            )
            .unwrap();
            assert_eq!(pairs, found, "{n} sessions, early {early}");
            assert_eq!(reads.load(Ordering::Relaxed), n, "each read once: {n} sessions, early {early}");
            let expected: Vec<Option<(String, bool)>> = found
                .iter()
                .map(|(name, exited)| (name.as_str() != "s005").then(|| (name.to_string(), *exited)))
                .collect();
            assert_eq!(rows, expected, "{n} sessions, early {early}");
        }
    }

    #[test]
    fn a_directory_that_cannot_be_listed_fails_the_listing_and_ends_the_helper() {
        for early in [false, true] {
            let listed = read_all::<()>(early, || Err(anyhow::anyhow!("cannot list")), |_, _| None);
            assert!(listed.is_err_and(|e| e.to_string() == "cannot list"));
        }
    }

    #[test]
    fn the_command_shown_is_the_one_typed_not_the_hook_wiring() {
        let wired = words(&["claude", "--settings", "/s/sessions/a/claude-settings.json", "--model", "x"]);
        assert_eq!(typed_command(Some("claude"), &wired), words(&["claude", "--model", "x"]));
        let wired = words(&["codex", "-c", r#"notify=["/bin/desk","hook","--provider","codex"]"#, "exec"]);
        assert_eq!(typed_command(Some("codex"), &wired), words(&["codex", "exec"]));
        let wired = words(&["desk-demo-agent", "--hook-cmd", "/bin/desk hook --provider demo", "--quiet"]);
        assert_eq!(typed_command(Some("demo"), &wired), words(&["desk-demo-agent", "--quiet"]));
        // The user's own flags stay.
        let own = words(&["codex", "-c", "notify=[\"my-notifier\"]"]);
        assert_eq!(typed_command(Some("codex"), &own), own);
        let shell = words(&["sh", "-c", "--settings"]);
        assert_eq!(typed_command(Some("shell"), &shell), shell);
    }
}
