//! The conversations sessions' agents reported, kept per generation, and the choice a restart
//! makes from them.
//!
//! Owns `conversations.json` in a session's state directory: one
//! [`desk_core::fleet::resume::Capture`] per generation (the newest [`KEPT_GENERATIONS`]), fed
//! by `desk hook` with what each hook invocation carries ([`record_hook`]) and by a restart
//! with what is only on disk afterwards (Codex's words at exit, OpenCode's session list), and
//! what the agent's own files say that a hook cannot: the rollout Codex holds open (found
//! through `/proc` of the hook's ancestors, the agent itself), Claude Code's per-process file
//! `sessions/<pid>.json` (versions in [`TESTED_CLAUDE`] only). And [`plan`]: whether a restart
//! resumes, checked against the files (the transcript exists and holds a conversation), the
//! config directory and working directory the new start will have, the other sessions'
//! conversations, and whether the agent refused the same conversation last time.
//! Invariants: every read-modify-write holds the session's `conversations.lock`; the file is
//! replaced atomically; nothing here ever chooses a conversation by recency ("the newest in
//! the directory"): a transcript is looked up by its id only.

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use desk_common::launch_record::LaunchRecord;
use desk_common::paths::{Paths, SessionName};
use desk_core::fleet::resume::{self, Capture, Evidence, ResumeContext, ResumePlan, Transcript};
use desk_core::provider::Provider;

/// Generations whose captures are kept: a conversation reported a few restarts ago is still
/// the one a restart resumes when the generations since reported none.
pub const KEPT_GENERATIONS: usize = 8;

/// Claude Code versions whose per-process file (`sessions/<pid>.json`, undocumented) was
/// checked against its hooks (tests/data/agents/claude/resume, `clear`): it names the current
/// conversation and follows `/clear`. Other versions' files are not used.
pub const TESTED_CLAUDE: &[&str] = &["2.1.197"];

/// 512 KiB of a transcript's start: its first turn is within a few KiB; the rest is not read.
const TRANSCRIPT_HEAD: usize = 512 * 1024;

/// Longest wait for `opencode session list`: it starts OpenCode's runtime (seconds; up to ~30 s
/// on a loaded 2-core machine), and a restart must not hang on it.
const SESSION_LIST_TIMEOUT: Duration = Duration::from_secs(45);

/// Variables of desk's own environment that decide where an agent keeps its conversations: a
/// restart passes the values its session first started with, so that it looks in the same
/// place whoever restarts it (a shell with another `HOME`, the daemon). The demo agent keeps
/// its conversations under `DESK_DEMO_AGENT_HOME`, else under `DESK_HOME` (which is not pinned:
/// an agent always runs under the desk home of the desk that starts it; see [`launch_env`]),
/// else under `HOME`.
pub const CONFIG_VARIABLES: &[&str] =
    &["HOME", "CLAUDE_CONFIG_DIR", "CODEX_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME", "DESK_DEMO_AGENT_HOME"];

/// A session's captures, by generation.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Conversations {
    pub generations: BTreeMap<u32, Capture>,
}

impl Conversations {
    /// The newest capture that names a conversation.
    pub fn latest(&self) -> Option<&Capture> {
        self.generations.values().rev().find(|c| c.conversation.is_some())
    }
}

/// The file's name in the session's state directory.
const FILE_NAME: &str = "conversations.json";

fn file(paths: &Paths, name: &SessionName) -> PathBuf {
    paths.session_state(name).join(FILE_NAME)
}

/// Hold the session's conversations lock for the life of the value.
struct Lock(#[allow(dead_code)] std::fs::File);

fn lock(paths: &Paths, name: &SessionName) -> Result<Lock> {
    let path = paths.session_state(name).join("conversations.lock");
    let file = desk_common::pidlock::open_lock_file(&path)?;
    file.lock().with_context(|| format!("cannot lock {}", path.display()))?;
    Ok(Lock(file))
}

/// `conversations.json`: version 1 (a file without a `version` key is version 1).
pub const FORMAT: desk_common::format::Format = desk_common::format::Format::first("conversations");

/// The session's captures (none if it has no file). A file this desk cannot read is an error
/// naming it: a restart does not resume from a guess.
pub fn read(paths: &Paths, name: &SessionName) -> Result<Conversations> {
    Ok(desk_common::session::read_record(&FORMAT, &file(paths, name))?.unwrap_or_default())
}

/// [`read`], opening the file relative to `dirs` and reading it into `buf` (a listing reads
/// every session's).
pub fn read_in(
    dirs: &desk_common::session_dirs::SessionDirs,
    name: &SessionName,
    buf: &mut Vec<u8>,
) -> Result<Conversations> {
    let what = || format!("the conversations of session {name}");
    let Some(file) = dirs.state_file(name, FILE_NAME).with_context(|| format!("cannot read {}", what()))? else {
        return Ok(Conversations::default());
    };
    desk_common::session::read_open_record(&FORMAT, &file, &what(), buf)
}

/// The captures for a read-modify-write: a file this desk cannot read is set aside (and named)
/// rather than overwritten, and the captures start afresh.
fn read_for_update(paths: &Paths, name: &SessionName) -> Conversations {
    desk_common::session::read_record_or_set_aside(&FORMAT, &file(paths, name)).unwrap_or_default()
}

fn write(paths: &Paths, name: &SessionName, conversations: &Conversations) -> Result<()> {
    desk_common::session::write_record(&FORMAT, &file(paths, name), conversations)
}

/// Apply evidence to generation `generation`'s capture (made with `config_dir` and `cwd` if it
/// is new), under the lock.
fn apply(
    paths: &Paths,
    name: &SessionName,
    generation: u32,
    provider: Provider,
    fresh: impl FnOnce() -> (Option<String>, Option<String>),
    evidence: &[Evidence],
) -> Result<()> {
    if evidence.is_empty() {
        return Ok(());
    }
    let dir = paths.session_state(name);
    if !dir.is_dir() {
        return Ok(());
    }
    let _lock = lock(paths, name)?;
    let mut all = read_for_update(paths, name);
    let now = desk_common::clock::now_ms();
    let before = all.generations.get(&generation).cloned();
    let capture = all.generations.entry(generation).or_insert_with(|| {
        let (config_dir, cwd) = fresh();
        Capture::new(provider, generation, config_dir, cwd)
    });
    for e in evidence {
        capture.apply(e, now);
    }
    if before.as_ref() == Some(capture) {
        // A hook that only confirmed what was known (most of them): nothing to write.
        return Ok(());
    }
    while all.generations.len() > KEPT_GENERATIONS {
        let Some(oldest) = all.generations.keys().next().copied() else { break };
        all.generations.remove(&oldest);
    }
    write(paths, name, &all)
}

/// `desk hook` received `payload` from the agent of `generation`: record what it says about
/// the conversation. Runs in the hook's process, so the environment is the agent's own and its
/// ancestors are the agent.
pub fn record_hook(
    paths: &Paths,
    name: &SessionName,
    generation: u32,
    provider: Provider,
    payload: &serde_json::Value,
) -> Result<()> {
    let Some(mut first) = resume::evidence_from_hook(provider, payload) else { return Ok(()) };
    let mut evidence = Vec::new();
    let ancestors = desk_common::procfs::ancestors_of_self();
    match (&mut first, provider) {
        (Evidence::Notify { thread, rollout, subagent }, _) => {
            // The rollout of this thread, if the agent (an ancestor of this hook) holds it open.
            let held = ancestors.iter().take(4).flat_map(|pid| desk_common::procfs::open_files(*pid));
            if let Some(path) = held.into_iter().find(|p| rollout_of(p, thread)) {
                *subagent = rollout_is_subagent(&path);
                *rollout = Some(path.to_string_lossy().into_owned());
            }
        }
        (Evidence::Hook { event, .. }, Provider::Claude)
            if matches!(event.as_str(), "SessionStart" | "Stop" | "UserPromptSubmit") =>
        {
            if let Some(file) = claude_process_file(&ancestors) {
                evidence.push(file);
            }
        }
        _ => {}
    }
    evidence.insert(0, first);
    let launch = desk_common::launch_record::read(paths, name).ok().flatten().filter(|r| r.generation == generation);
    apply(
        paths,
        name,
        generation,
        provider,
        || {
            let config_dir = resume::config_dir(provider, |k| std::env::var(k).ok());
            let cwd = launch
                .map(|l| l.cwd)
                .or_else(|| std::env::current_dir().ok().map(|d| d.to_string_lossy().into_owned()));
            (config_dir, cwd)
        },
        &evidence,
    )
}

/// Whether `path` is a Codex rollout of `thread` (`rollout-<time>-<thread>.jsonl`).
fn rollout_of(path: &Path, thread: &str) -> bool {
    path.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(|n| n.starts_with("rollout-") && n.ends_with(&format!("-{thread}.jsonl")))
}

/// Whether a Codex rollout belongs to a subagent (its first line, `session_meta`, names its
/// source as one).
fn rollout_is_subagent(path: &Path) -> bool {
    let Ok(file) = std::fs::File::open(path) else { return false };
    let mut first = String::new();
    let _ = std::io::BufRead::read_line(&mut std::io::BufReader::new(std::io::Read::take(file, 64 * 1024)), &mut first);
    let Ok(v) = serde_json::from_str::<serde_json::Value>(&first) else { return false };
    // The main thread's rollout says `source: "cli"`, `thread_source: "user"`
    // (tests/data/agents/codex/resume.results.json); anything else is not the session's own.
    let payload = &v["payload"];
    let source = &payload["source"];
    source.get("subagent").is_some()
        || source.as_str().is_some_and(|s| s.contains("subagent"))
        || payload["thread_source"].as_str().is_some_and(|t| t != "user")
}

/// Claude Code's per-process file of the nearest ancestor that has one: `sessions/<pid>.json`
/// under its config directory.
fn claude_process_file(ancestors: &[u32]) -> Option<Evidence> {
    let config = resume::config_dir(Provider::Claude, |k| std::env::var(k).ok())?;
    for pid in ancestors.iter().take(4) {
        let path = PathBuf::from(&config).join("sessions").join(format!("{pid}.json"));
        let Ok(Some(v)) = desk_common::session::read_json::<serde_json::Value>(&path) else { continue };
        let id = v["sessionId"].as_str()?.to_string();
        let version = v["version"].as_str().map(String::from);
        let tested = version.as_deref().is_some_and(|v| TESTED_CLAUDE.contains(&v));
        return Some(Evidence::ProcessFile { id, version, tested });
    }
    None
}

/// What a generation's end left on disk that names its conversation: Codex's words at exit (in
/// the exit record's last screen), OpenCode's session list. Recorded into that generation's
/// capture before a restart plans.
pub fn record_after_end(paths: &Paths, name: &SessionName, launch: &LaunchRecord, ended_ms: Option<u64>) -> Result<()> {
    let generation = launch.generation;
    let files = paths.session(name);
    let exit = desk_common::session::read_exit(&files).ok().flatten().filter(|e| e.generation == generation);
    let mut evidence = Vec::new();
    if let Some(id) =
        exit.as_ref().and_then(|e| resume::exit_words(launch.provider, e.last_screen.as_deref().unwrap_or(&[])))
    {
        evidence.push(Evidence::ExitWords { id });
    }
    let captured = read(paths, name)?.generations.get(&generation).is_some_and(|c| c.conversation.is_some());
    if launch.provider == Provider::OpenCode && !captured {
        let end = exit.as_ref().map(|e| e.exited_at_ms).or(ended_ms).unwrap_or_else(desk_common::clock::now_ms);
        match opencode_candidates(launch, end) {
            Ok(candidates) => evidence.push(Evidence::SessionList { candidates }),
            Err(e) => eprintln!("desk: warning: session {name}: cannot read OpenCode's session list: {e:#}"),
        }
    }
    let env = launch_env(launch);
    apply(
        paths,
        name,
        generation,
        launch.provider,
        || (resume::config_dir(launch.provider, |k| env.get(k).cloned()), Some(launch.cwd.clone())),
        &evidence,
    )
}

/// The environment a launch gave its agent, as far as desk knows it: what it set, over the
/// config variables it inherited (recorded), over desk's own.
pub fn launch_env(launch: &LaunchRecord) -> BTreeMap<String, String> {
    // `DESK_HOME` as this desk has it: what the agent inherits through its master.
    let mut env: BTreeMap<String, String> = CONFIG_VARIABLES
        .iter()
        .chain(&["DESK_HOME"])
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    env.extend(launch.inherited.clone());
    env.extend(launch.env.clone());
    env
}

/// The OpenCode sessions that fit a generation: in its working directory, no parent (not a
/// subagent's), created while it ran — or the one it resumed, used while it ran.
fn opencode_candidates(launch: &LaunchRecord, end_ms: u64) -> Result<Vec<String>> {
    // The agent's own program, as the launch ran it (or, for a launch about to be made, as
    // declared): its `session list` reads the same store.
    let program = launch.ran.first().or(launch.command.first()).context("the launch has no command")?;
    let mut cmd = std::process::Command::new(program);
    cmd.args(["session", "list", "--format", "json"])
        .current_dir(&launch.cwd)
        .envs(launch_env(launch))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null());
    let out = run_bounded(cmd, SESSION_LIST_TIMEOUT)?;
    let list: Vec<serde_json::Value> = serde_json::from_slice(&out).context("OpenCode's session list is not JSON")?;
    Ok(resume::opencode_fits(&list, &launch.cwd, launch.started_at_ms, end_ms, launch.resumed().map(|(c, _)| c)))
}

/// Run a command to completion within `timeout` (killed past it), returning its stdout.
fn run_bounded(mut cmd: std::process::Command, timeout: Duration) -> Result<Vec<u8>> {
    let mut child = cmd.spawn().context("cannot run it")?;
    let mut stdout = child.stdout.take().context("no stdout")?;
    let reader = std::thread::spawn(move || {
        let mut buf = Vec::new();
        let _ = std::io::Read::read_to_end(&mut stdout, &mut buf);
        buf
    });
    let deadline = Instant::now() + timeout;
    loop {
        if let Some(status) = child.try_wait()? {
            let out = reader.join().unwrap_or_default();
            anyhow::ensure!(status.success(), "it exited with {status}");
            return Ok(out);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            anyhow::bail!("it did not finish within {} s", timeout.as_secs());
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// What became of a capture's transcript, looked up by the conversation's id only.
fn transcript(capture: &Capture, conversation: &str, launch: &LaunchRecord) -> Transcript {
    let provider = capture.provider;
    let named = capture.transcript.as_ref().map(PathBuf::from).filter(|p| p.is_file());
    let found = named.or_else(|| {
        let root = PathBuf::from(capture.config_dir.as_ref()?);
        match provider {
            Provider::Claude => find_file(&root.join("projects"), 2, &format!("{conversation}.jsonl")),
            Provider::Codex => find_file(&root.join("sessions"), 4, &format!("-{conversation}.jsonl")),
            Provider::Demo => find_file(&root.join("transcripts"), 1, &format!("{conversation}.jsonl")),
            _ => None,
        }
    });
    if provider == Provider::OpenCode {
        // OpenCode keeps no transcript file: its session list says whether the session exists.
        return match opencode_candidates(&LaunchRecord { started_at_ms: 0, ..launch.clone() }, u64::MAX / 2) {
            Ok(ids) if ids.iter().any(|i| i == conversation) => Transcript::Holds,
            Ok(_) => Transcript::Missing,
            // Unknown is not proof of absence, but a resume that fails is worse than a fresh
            // start with the reason said: treat as missing.
            Err(_) => Transcript::Missing,
        };
    }
    let Some(path) = found else { return Transcript::Missing };
    let head = std::fs::File::open(&path)
        .ok()
        .and_then(|f| {
            desk_common::fsutil::read_bounded(
                std::io::Read::take(f, TRANSCRIPT_HEAD as u64),
                TRANSCRIPT_HEAD,
                "a transcript",
            )
            .ok()
        })
        .unwrap_or_default();
    if resume::transcript_holds(provider, &String::from_utf8_lossy(&head)) {
        Transcript::Holds
    } else {
        Transcript::Empty
    }
}

/// A file whose name ends with `suffix`, at most `depth` directories below `dir` (an exact id
/// lookup: at most one file can match).
fn find_file(dir: &Path, depth: usize, suffix: &str) -> Option<PathBuf> {
    let entries = std::fs::read_dir(dir).ok()?;
    let mut subdirs = Vec::new();
    for entry in entries.flatten() {
        let path = entry.path();
        if path.file_name().and_then(|n| n.to_str()).is_some_and(|n| n.ends_with(suffix)) && path.is_file() {
            return Some(path);
        }
        if depth > 0 && path.is_dir() {
            subdirs.push(path);
        }
    }
    subdirs.into_iter().find_map(|d| find_file(&d, depth - 1, suffix))
}

/// Another session whose latest capture is `conversation`.
fn held_by(paths: &Paths, name: &SessionName, conversation: &str) -> Option<String> {
    let dir = paths.state.join("sessions");
    let entries = std::fs::read_dir(&dir).ok()?;
    entries.flatten().find_map(|e| {
        let other = SessionName::parse(e.file_name().to_str()?).ok()?;
        if &other == name {
            return None;
        }
        let latest = read(paths, &other).ok()?;
        (latest.latest()?.conversation.as_deref() == Some(conversation)).then(|| other.to_string())
    })
}

/// Whether a restart of the session, as `next` describes it (its provider, directory and
/// environment), resumes the conversation its agent reported last. `last` is the session's
/// last launch; its end is examined first (the agent's words at exit, OpenCode's list, a
/// refusal of the conversation it was given).
pub fn plan(paths: &Paths, name: &SessionName, last: Option<&LaunchRecord>, next: &LaunchRecord) -> ResumePlan {
    if let Some(last) = last {
        if let Err(e) = record_after_end(paths, name, last, None) {
            eprintln!("desk: warning: session {name}: cannot record what the last generation left: {e:#}");
        }
        if let Some((conversation, _)) = last.resumed() {
            let exit = desk_common::session::read_exit(&paths.session(name))
                .ok()
                .flatten()
                .filter(|e| e.generation == last.generation);
            if let Some(exit) = exit {
                let code = match exit.status {
                    desk_wire::ExitStatus::Code(c) => Some(c),
                    desk_wire::ExitStatus::Signal(_) => None,
                };
                if let Some(message) =
                    resume::rejection(last.provider, code, exit.last_screen.as_deref().unwrap_or(&[]))
                {
                    return ResumePlan::Fresh {
                        why: format!(
                            "{} refused conversation {conversation} at the last start: {message}",
                            last.provider
                        ),
                    };
                }
            }
        }
    }
    let conversations = read(paths, name).unwrap_or_default();
    let capture = conversations.latest();
    let env = launch_env(next);
    let config_dir = resume::config_dir(next.provider, |k| env.get(k).cloned());
    let (transcript_state, holder) = match capture.and_then(|c| c.conversation.as_deref().map(|id| (c, id))) {
        Some((c, id)) => (transcript(c, id, next), held_by(paths, name, id)),
        None => (Transcript::Missing, None),
    };
    let ctx = ResumeContext {
        provider: next.provider,
        config_dir: config_dir.as_deref(),
        cwd: &next.cwd,
        transcript: transcript_state,
        held_by: holder.as_deref(),
    };
    resume::plan_resume(capture, &ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_rollout_is_named_after_its_thread_and_only_the_main_threads_is_the_sessions() {
        let id = "01a23285-c0b6-7300-ad16-f8449ba702f6";
        let path = PathBuf::from(format!("/h/.codex/sessions/2026/12/01/rollout-2026-12-01T16-52-36-{id}.jsonl"));
        assert!(rollout_of(&path, id));
        assert!(!rollout_of(&path, "01a23285-c6ea-7121-afb2-e272b17f6f84"));
        let dir = tempfile::tempdir().unwrap();
        let write = |name: &str, meta: serde_json::Value| {
            let p = dir.path().join(name);
            std::fs::write(
                &p,
                format!(
                    "{}\n{{\"type\":\"response_item\"}}\n",
                    serde_json::json!({"type": "session_meta", "payload": meta})
                ),
            )
            .unwrap();
            p
        };
        // As recorded (tests/data/agents/codex/resume.results.json).
        let main = write("main.jsonl", serde_json::json!({"id": id, "source": "cli", "thread_source": "user"}));
        assert!(!rollout_is_subagent(&main));
        let sub = write("sub.jsonl", serde_json::json!({"id": "x", "source": {"subagent": "review"}}));
        assert!(rollout_is_subagent(&sub));
        let other = write("other.jsonl", serde_json::json!({"id": "y", "source": "cli", "thread_source": "subagent"}));
        assert!(rollout_is_subagent(&other));
    }

    #[test]
    fn a_transcript_is_found_by_its_id_only() {
        let dir = tempfile::tempdir().unwrap();
        let deep = dir.path().join("sessions/2026/12/01");
        std::fs::create_dir_all(&deep).unwrap();
        std::fs::write(deep.join("rollout-t-aaaa.jsonl"), "").unwrap();
        std::fs::write(deep.join("rollout-t-bbbb.jsonl"), "").unwrap();
        assert_eq!(find_file(&dir.path().join("sessions"), 4, "-bbbb.jsonl"), Some(deep.join("rollout-t-bbbb.jsonl")));
        assert_eq!(find_file(&dir.path().join("sessions"), 4, "-cccc.jsonl"), None);
        assert_eq!(find_file(&dir.path().join("sessions"), 1, "-aaaa.jsonl"), None, "deeper than allowed");
    }
}
