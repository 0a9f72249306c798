//! The fleet commands: `desk up`, `desk down`, `desk restart`, `desk worktree ls`.
//!
//! Owns turning a manifest (`crate::manifest`) and what runs into what these commands do, and
//! how they say it. `up` converges: it checks the whole manifest and every selected session's
//! directory and worktree first (an invalid manifest changes nothing), then starts what is not
//! running, leaves alone what runs as declared, reports what runs differently and restarts it
//! only with `--recreate`, creates the manifest's channels and adds their members, queues the
//! initial prompts of the sessions it starts afresh, and starts `desk serve` when something
//! needs it (a restart policy to supervise, prompts to deliver, channels). A second `up` with
//! nothing to do says so. `down` stops the declared sessions as `desk kill` does (and removes
//! their worktrees with `--remove-worktree`, only clean ones). `restart` starts a session again
//! with what it was declared or last started with, resuming the agent's conversation unless
//! `--fresh`; the daemon's supervisor restarts through it too (`--supervised`). The decisions are
//! desk-core's (`desk_core::fleet`); every start goes through `crate::launch`.

use anyhow::{Context, Result};
use serde::Serialize;
use std::collections::BTreeMap;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

use super::output::{self, ErrorCode};
use super::{fail, failure};
use crate::launch::{FleetFacts, StartRequest};
use crate::manifest::Loaded;
use desk_common::launch_record::{self, LaunchRecord, StartedBy, WorktreeUse};
use desk_common::master_client::Connection;
use desk_common::paths::{Paths, SessionName};
use desk_common::session::{self, Probe};
use desk_core::fleet::manifest::SessionSpec;
use desk_core::fleet::plan::{self, DownStep, Launch, Observed, UpStep};
use desk_core::fleet::resume::{self, ResumePlan};
use desk_core::provider::Provider;
use desk_wire::Role;

/// The grace period before SIGKILL of `desk down`, `up --recreate` and `restart`, as `desk
/// kill`'s default.
const DOWN_GRACE_SECS: f64 = 5.0;

fn paths() -> Result<Paths> {
    let paths = Paths::from_env()?;
    paths.ensure_runtime()?;
    Ok(paths)
}

/// The declared sessions `names` selects (all when empty), in the manifest's order; a name the
/// manifest does not declare is a usage error.
fn select<'a>(loaded: &'a Loaded, names: &[SessionName]) -> Result<Vec<&'a SessionSpec>> {
    if names.is_empty() {
        return Ok(loaded.manifest.sessions.iter().collect());
    }
    names
        .iter()
        .map(|n| {
            loaded.manifest.session(n.as_str()).ok_or_else(|| {
                let declared: Vec<&str> = loaded.manifest.sessions.iter().map(|s| s.name.as_str()).collect();
                fail(
                    ErrorCode::NoSuchSession,
                    format!("{n} is not declared in {}; it declares: {}", loaded.path.display(), declared.join(", ")),
                )
            })
        })
        .collect()
}

/// What runs under a session's name, and its launch record when that record is of the running
/// generation. Reads the master's info file where it can be believed (no master is woken), and
/// asks the master otherwise.
fn observe(paths: &Paths, name: &SessionName) -> Result<(Observed, Option<LaunchRecord>)> {
    let files = paths.session(name);
    let launch = launch_record::read(paths, name).ok().flatten();
    let running = |info: desk_wire::SessionInfo| {
        let mine = launch.as_ref().filter(|l| l.generation == info.generation);
        let (launch_now, env_known) = match mine {
            Some(l) => (l.launch(), true),
            None => (
                Launch {
                    provider: Provider::or_shell(&info.provider),
                    command: super::sessions::typed_command(Some(&info.provider), &info.command),
                    cwd: info.cwd.clone(),
                    env: BTreeMap::new(),
                },
                false,
            ),
        };
        Observed::Running { generation: info.generation, launch: launch_now, env_known }
    };
    if let Some(rec) = desk_common::info_file::read(&files.info).filter(|r| r.info.name == name.as_str()) {
        match desk_common::info_file::check(&rec) {
            desk_common::info_file::MasterCheck::Running => return Ok((running(rec.info), launch)),
            desk_common::info_file::MasterCheck::Stopped => return Ok((Observed::Unresponsive, launch)),
            desk_common::info_file::MasterCheck::NotTheMaster => {}
        }
    }
    let observed = match session::probe_settled(&files)? {
        Probe::Live(stream) => match Connection::open_within(stream, Role::Query, 0, 0, session::PROBE_DEADLINE) {
            Ok(conn) => running(conn.info),
            Err(_) => Observed::Unresponsive,
        },
        Probe::Absent | Probe::Stale => Observed::Down,
    };
    Ok((observed, launch))
}

/// A declared session, resolved for this machine: what `up` compares and starts.
struct Resolved<'a> {
    spec: &'a SessionSpec,
    name: SessionName,
    launch: Launch,
    command: Vec<OsString>,
    cwd: PathBuf,
    env: Vec<(OsString, OsString)>,
    /// The worktree: its use, and whether it must be created.
    worktree: Option<(WorktreeUse, crate::worktree::Prepared)>,
}

/// Resolve every selected session before anything is done: directories, commands, worktrees
/// (checked, not created). Any error here stops `up` with nothing changed.
fn resolve<'a>(
    paths: &Paths,
    loaded: &Loaded,
    specs: &[&'a SessionSpec],
    config: &super::config::Config,
) -> Result<Vec<Resolved<'a>>> {
    let root = loaded.worktrees_root(paths);
    specs
        .iter()
        .map(|spec| {
            let name = SessionName::parse(&spec.name).map_err(|e| failure(2, e.to_string()))?;
            let declared_cwd = loaded.cwd(spec)?;
            let (cwd, worktree) = match &spec.worktree {
                Some(branch) => {
                    let (used, cwd, prepared) =
                        crate::worktree::prepare(&root, &spec.name, &declared_cwd, branch, true)?;
                    (cwd, Some((used, prepared)))
                }
                None => (declared_cwd, None),
            };
            let command = crate::manifest::command(spec, &config.provider_args)?;
            let env: Vec<(OsString, OsString)> = spec.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
            let launch = Launch {
                provider: spec.provider,
                command: command.iter().map(|w| w.to_string_lossy().into_owned()).collect(),
                cwd: cwd.to_string_lossy().into_owned(),
                env: spec.env.clone(),
            };
            Ok(Resolved { spec, name, launch, command, cwd, env, worktree })
        })
        .collect()
}

/// What happened to one session, for the report.
#[derive(Debug, Serialize)]
struct SessionOutcome {
    name: String,
    /// The host that runs it (`None`: this machine).
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    /// `started`, `recreated`, `running`, `differs`, `unresponsive`, `failed`, or with
    /// `--dry-run` `would-start`, `would-recreate`; a host's: also `unknown` (its desk stopped
    /// before it said).
    outcome: &'static str,
    generation: Option<u32>,
    /// The conversation a start resumed, or why it started afresh.
    conversation: Option<ResumePlan>,
    /// How a running session differs from its declaration.
    differences: Vec<String>,
    /// The worktree it runs in, and whether `up` created it.
    worktree: Option<String>,
    worktree_created: bool,
    /// Prompts queued for it (a fresh start with `prompts`).
    prompts_queued: usize,
    error: Option<String>,
}

impl SessionOutcome {
    fn new(name: &str, outcome: &'static str) -> SessionOutcome {
        SessionOutcome {
            name: name.to_string(),
            host: None,
            outcome,
            generation: None,
            conversation: None,
            differences: Vec::new(),
            worktree: None,
            worktree_created: false,
            prompts_queued: 0,
            error: None,
        }
    }

    /// What a host's `desk up --json` said of session `name` (its row of `sessions`).
    fn from_host(name: &str, row: &serde_json::Value) -> SessionOutcome {
        const OUTCOMES: [&str; 8] =
            ["started", "recreated", "running", "differs", "unresponsive", "failed", "would-start", "would-recreate"];
        let said = row["outcome"].as_str().unwrap_or("failed");
        let mut o = SessionOutcome::new(name, OUTCOMES.into_iter().find(|o| *o == said).unwrap_or("failed"));
        o.generation = row["generation"].as_u64().and_then(|g| u32::try_from(g).ok());
        o.conversation = serde_json::from_value(row["conversation"].clone()).ok();
        o.differences = serde_json::from_value(row["differences"].clone()).unwrap_or_default();
        o.worktree = row["worktree"].as_str().map(String::from);
        o.worktree_created = row["worktree_created"].as_bool().unwrap_or(false);
        o.prompts_queued = row["prompts_queued"].as_u64().map_or(0, |n| n as usize);
        o.error = row["error"].as_str().map(String::from);
        if o.outcome == "failed" && o.error.is_none() {
            o.error = Some(format!("the host said {said:?}"));
        }
        o
    }

    /// The session as it is typed here: `HOST:NAME` for a host's.
    fn shown(&self) -> String {
        match &self.host {
            Some(host) => format!("{host}:{}", self.name),
            None => self.name.clone(),
        }
    }

    fn line(&self) -> String {
        let mut line = format!("{}: ", self.shown());
        match self.outcome {
            "started" | "recreated" => {
                line.push_str(&format!("{} (generation {})", self.outcome, self.generation.unwrap_or(0)));
                match &self.conversation {
                    Some(ResumePlan::Resume { conversation, from_generation }) => {
                        line.push_str(&format!(", resumed conversation {conversation} of generation {from_generation}"))
                    }
                    Some(ResumePlan::Fresh { why }) => line.push_str(&format!(", a fresh conversation: {why}")),
                    None => {}
                }
            }
            "running" => line.push_str(&format!("runs as declared (generation {})", self.generation.unwrap_or(0))),
            "differs" => line.push_str(&format!(
                "runs, but not as declared ({}); left alone (desk up --recreate {} restarts it)",
                self.differences.join("; "),
                self.name
            )),
            "unresponsive" => line.push_str("its master does not answer (stopped?); left alone"),
            "would-start" => line.push_str("would start"),
            "would-recreate" => {
                line.push_str(&format!("would restart it as declared ({})", self.differences.join("; ")))
            }
            "failed" => line.push_str(&format!("failed: {}", self.error.as_deref().unwrap_or("?"))),
            "unknown" => line.push_str(&format!("not known: {}", self.error.as_deref().unwrap_or("?"))),
            other => line.push_str(other),
        }
        if let Some(path) = &self.worktree {
            line.push_str(&format!("; worktree {path}{}", if self.worktree_created { " (created)" } else { "" }));
        }
        if self.prompts_queued > 0 {
            line.push_str(&format!("; {} prompt(s) queued", self.prompts_queued));
        }
        line
    }
}

/// What `desk up` did to a channel.
#[derive(Debug, Serialize)]
struct ChannelOutcome {
    name: String,
    created: bool,
    added: Vec<String>,
}

#[derive(Debug, Serialize)]
struct UpReport {
    manifest: String,
    dry_run: bool,
    sessions: Vec<SessionOutcome>,
    channels: Vec<ChannelOutcome>,
    /// Whether `up` started `desk serve`.
    daemon_started: bool,
}

/// `desk up`.
pub(super) fn up(
    manifest: Option<&Path>,
    names: &[SessionName],
    dry_run: bool,
    recreate: bool,
    json: bool,
) -> Result<i32> {
    let loaded = crate::manifest::load(manifest)?;
    let specs = select(&loaded, names)?;
    let paths = paths()?;
    let config = super::config::load(&paths)?;
    // A host's sessions are its desk's to start: checked to be configured before anything is done.
    let (specs, on_hosts) = super::hosted::split(&loaded, specs, &config, &paths)?;
    let resolved = resolve(&paths, &loaded, &specs, &config)?;
    let mut report = UpReport {
        manifest: loaded.path.display().to_string(),
        dry_run,
        sessions: Vec::new(),
        channels: Vec::new(),
        daemon_started: false,
    };
    let mut failed = false;
    let mut queued_prompts = false;
    let mut notes = Vec::new();
    for r in &resolved {
        let (observed, last) = observe(&paths, &r.name)?;
        let step = plan::plan_up(&r.launch, &observed, recreate);
        let mut outcome = match &step {
            UpStep::Keep { generation } => {
                let mut o = SessionOutcome::new(&r.spec.name, "running");
                o.generation = Some(*generation);
                o
            }
            UpStep::Differs { generation, differences } => {
                let mut o = SessionOutcome::new(&r.spec.name, "differs");
                o.generation = Some(*generation);
                o.differences = differences.iter().map(ToString::to_string).collect();
                o
            }
            UpStep::Unresponsive => SessionOutcome::new(&r.spec.name, "unresponsive"),
            UpStep::Start if dry_run => SessionOutcome::new(&r.spec.name, "would-start"),
            UpStep::Recreate { differences, .. } if dry_run => {
                let mut o = SessionOutcome::new(&r.spec.name, "would-recreate");
                o.differences = differences.iter().map(ToString::to_string).collect();
                o
            }
            UpStep::Start | UpStep::Recreate { .. } => {
                let recreating = matches!(step, UpStep::Recreate { .. });
                let mut o = SessionOutcome::new(&r.spec.name, if recreating { "recreated" } else { "started" });
                if let UpStep::Recreate { differences, .. } = &step {
                    o.differences = differences.iter().map(ToString::to_string).collect();
                }
                match start_declared(&paths, &loaded, r, last.as_ref(), recreating, &config, &mut o) {
                    Ok(()) => queued_prompts |= o.prompts_queued > 0,
                    Err(e) => {
                        failed = true;
                        o.outcome = "failed";
                        // The provider's own agent, not installed: how to name it instead.
                        let program = r.command.first().filter(|_| r.spec.command.is_none());
                        let hint = crate::launch::agent_not_found(&e, program.map(OsString::as_os_str)).map(|p| {
                            format!(
                                "\n`{p}` is not on your PATH: install it, or give its path in the manifest: \
                                 command = [\"/path/to/{p}\"] under [session.{}]",
                                r.spec.name
                            )
                        });
                        o.error = Some(format!("{e:#}{}", hint.unwrap_or_default()));
                    }
                }
                o
            }
        };
        if let Some((used, prepared)) = &r.worktree {
            outcome.worktree = Some(used.path.clone());
            outcome.worktree_created |= *prepared == crate::worktree::Prepared::Created;
        }
        report.sessions.push(outcome);
    }
    let mut args = vec!["up"];
    args.extend(dry_run.then_some("--dry-run"));
    args.extend(recreate.then_some("--recreate"));
    let mut answers = super::hosted::run_all(&on_hosts, &loaded, &args);
    for (host, (_, specs)) in &on_hosts {
        use super::hosted::HostAnswer;
        let answer = answers.remove(host).unwrap_or_else(|| HostAnswer::Unknown("not asked".into()));
        let sessions = match &answer {
            HostAnswer::Data(data) => data["sessions"].as_array(),
            _ => None,
        };
        for spec in specs {
            let mut o = match sessions.and_then(|rows| rows.iter().find(|r| r["name"] == spec.name.as_str())) {
                Some(row) => SessionOutcome::from_host(&spec.name, row),
                None => {
                    // Refused: nothing was done. Otherwise the host may have started it before
                    // it stopped: not said to have failed.
                    let (outcome, why) = match &answer {
                        HostAnswer::Refused(why) => ("failed", why.clone()),
                        HostAnswer::Unknown(why) => ("unknown", why.clone()),
                        HostAnswer::Data(_) => ("unknown", "its answer does not name it".to_string()),
                    };
                    let mut o = SessionOutcome::new(&spec.name, outcome);
                    o.error = Some(format!("host {host}: {why}"));
                    o
                }
            };
            failed |= matches!(o.outcome, "failed" | "unknown");
            o.host = Some(host.clone());
            report.sessions.push(o);
        }
    }
    if !dry_run {
        report.channels = converge_channels(&paths, &loaded)?;
        crate::manifest::register(&paths, &loaded.path)?;
        let supervised = resolved.iter().any(|r| r.spec.restart != desk_core::fleet::supervise::RestartPolicy::Never);
        let agents = resolved.iter().any(|r| crate::launch::needs_daemon(r.spec.provider));
        if supervised || queued_prompts || agents || !loaded.manifest.channels.is_empty() {
            let daemon = crate::autostart::ensure_daemon(&paths);
            report.daemon_started = matches!(daemon, crate::autostart::Daemon::Started(_));
            notes.extend(daemon.say(json));
        }
    }
    if json {
        output::print_ok("up", &report, &notes)?;
    } else {
        print_up(&report);
    }
    Ok(if failed { 1 } else { 0 })
}

fn print_up(report: &UpReport) {
    let acted = report.sessions.iter().any(|s| !matches!(s.outcome, "running"))
        || report.channels.iter().any(|c| c.created || !c.added.is_empty());
    if !acted {
        println!("nothing to do: {} session(s) of {} run as declared", report.sessions.len(), report.manifest);
        return;
    }
    for s in &report.sessions {
        println!("{}", s.line());
    }
    for c in &report.channels {
        match (c.created, c.added.is_empty()) {
            (true, _) => println!("#{}: created; members: {}", c.name, c.added.join(", ")),
            (false, false) => println!("#{}: added {}", c.name, c.added.join(", ")),
            (false, true) => {}
        }
    }
}

/// Start (or, `recreating`, stop and start) a declared session: its worktree, the conversation
/// it resumes, its launch, its initial prompts when it starts afresh.
fn start_declared(
    paths: &Paths,
    loaded: &Loaded,
    r: &Resolved<'_>,
    last: Option<&LaunchRecord>,
    recreating: bool,
    config: &super::config::Config,
    o: &mut SessionOutcome,
) -> Result<()> {
    if recreating {
        stop(paths, &r.name, "desk up --recreate")?;
    }
    let worktree = match (&r.spec.worktree, &r.worktree) {
        (Some(branch), Some((_, crate::worktree::Prepared::WouldCreate))) => {
            let (used, _, prepared) = crate::worktree::prepare(
                &loaded.worktrees_root(paths),
                &r.spec.name,
                &loaded.cwd(r.spec)?,
                branch,
                false,
            )?;
            o.worktree_created = prepared == crate::worktree::Prepared::Created;
            Some(used)
        }
        (_, Some((used, _))) => Some(used.clone()),
        _ => None,
    };
    let next = LaunchRecord {
        generation: 0,
        started_at_ms: desk_common::clock::now_ms(),
        started_by: StartedBy::Operator { command: "desk up".into() },
        provider: r.spec.provider,
        command: r.launch.command.clone(),
        ran: r.launch.command.clone(),
        cwd: r.launch.cwd.clone(),
        env: r.launch.env.clone(),
        inherited: inherited_for(last, &r.env),
        cols: 0,
        rows: 0,
        size_policy: String::new(),
        history: 0,
        log_cap: 0,
        restart: r.spec.restart,
        manifest: Some(loaded.path.clone()),
        worktree: worktree.clone(),
        group: r.spec.group.clone(),
        labels: r.spec.labels.clone(),
        conversation: None,
    };
    let conversation = match last {
        Some(last) => crate::launch::conversation::plan(paths, &r.name, Some(last), &next),
        None => ResumePlan::Fresh { why: "its first start".into() },
    };
    let run = run_command(r.spec.provider, &r.command, &conversation);
    let size = r.spec.size.or(config.size).unwrap_or(super::DEFAULT_SIZE);
    let started = crate::launch::start(
        paths,
        StartRequest {
            name: r.name.clone(),
            cwd: r.cwd.clone(),
            size,
            size_policy: r.spec.size_policy,
            env: r.env.clone(),
            inherited: next.inherited.clone(),
            provider: r.spec.provider,
            command: r.command.clone(),
            run,
            history: r.spec.history.unwrap_or(desk_term::screen::DEFAULT_HISTORY_LINES),
            log_cap: desk_common::screen_log::DEFAULT_LOG_CAP,
            fleet: FleetFacts {
                restart: r.spec.restart,
                manifest: Some(loaded.path.clone()),
                worktree,
                group: r.spec.group.clone(),
                labels: r.spec.labels.clone(),
                conversation: Some(conversation.clone()),
            },
            started_by: next.started_by.clone(),
        },
    )?;
    o.generation = Some(started.generation);
    if matches!(conversation, ResumePlan::Fresh { .. }) {
        o.prompts_queued = queue_prompts(paths, &r.name, started.generation, &r.spec.prompts)?;
    }
    o.conversation = Some(conversation);
    Ok(())
}

/// The config variables a start passes on: the ones the session's last start had (so a
/// restart looks where the agent kept its conversations), else desk's own.
fn inherited_for(last: Option<&LaunchRecord>, env: &[(OsString, OsString)]) -> BTreeMap<String, String> {
    match last {
        Some(l) if !l.inherited.is_empty() => l
            .inherited
            .iter()
            .filter(|(k, _)| !env.iter().any(|(s, _)| s.to_string_lossy() == **k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => crate::launch::inherited_config(env),
    }
}

/// The command to run for `plan`: the conversation flags replaced (desk's own resume words, or
/// none: never "the newest conversation"), every other word as the user gave it.
fn run_command(provider: Provider, command: &[OsString], plan: &ResumePlan) -> Vec<OsString> {
    let words: Vec<String> = command.iter().map(|w| w.to_string_lossy().into_owned()).collect();
    let run = match plan {
        ResumePlan::Resume { conversation, .. } => resume::with_resume(provider, &words, conversation),
        ResumePlan::Fresh { .. } => resume::strip_resume(provider, &words),
    };
    run.into_iter().map(OsString::from).collect()
}

/// Queue a fresh session's initial prompts for its new generation; returns how many.
fn queue_prompts(
    paths: &Paths,
    name: &SessionName,
    generation: u32,
    prompts: &[desk_core::fleet::manifest::InitialPrompt],
) -> Result<usize> {
    if prompts.is_empty() {
        return Ok(0);
    }
    let store = desk_daemon::store::Store::open(&paths.state)?;
    for prompt in prompts {
        let now = desk_common::clock::now_ms();
        let text = desk_core::delivery::text::sanitize(&prompt.text);
        let item = desk_core::delivery::item::Item::new(
            desk_common::ids::fresh_item_id(now),
            name.to_string(),
            Some(generation),
            text,
            prompt.when,
            "desk up".into(),
            now,
        );
        store.write_intake(&item)?;
    }
    Ok(prompts.len())
}

/// Create the manifest's channels that do not exist and add their members (idempotent).
fn converge_channels(paths: &Paths, loaded: &Loaded) -> Result<Vec<ChannelOutcome>> {
    if loaded.manifest.channels.is_empty() {
        return Ok(Vec::new());
    }
    let store = desk_daemon::channel::store::ChannelStore::open(paths)?;
    let mut out = Vec::new();
    for channel in &loaded.manifest.channels {
        let now = desk_common::clock::now_ms();
        let created = store.create_with(&channel.name, &channel.goal, channel.checkin_after, now)?.is_some();
        let mut added = Vec::new();
        for (member, role) in &channel.members {
            let (_, changed) = store
                .add_member(&channel.name, member, *role, desk_common::clock::now_ms())
                .map_err(|e| failure(1, format!("#{}: cannot add {member}: {e:#}", channel.name)))?;
            if changed {
                added.push(member.clone());
            }
        }
        out.push(ChannelOutcome { name: channel.name.to_string(), created, added });
    }
    Ok(out)
}

/// Stop a running session as `desk kill` does (TERM, then KILL after the grace period), its end
/// recorded as the operator's (`by`). Nothing to do for one that is not running.
fn stop(paths: &Paths, name: &SessionName, by: &str) -> Result<()> {
    if !matches!(session::probe_settled(&paths.session(name))?, Probe::Live(_)) {
        return Ok(());
    }
    super::sessions::stop(paths, name, std::time::Duration::from_secs_f64(DOWN_GRACE_SECS), by)?;
    Ok(())
}

/// What `desk down` did to one session.
#[derive(Debug, Serialize)]
struct DownOutcome {
    name: String,
    /// The host that runs it (`None`: this machine).
    #[serde(skip_serializing_if = "Option::is_none")]
    host: Option<String>,
    /// `stopped`, `already-down`, `unresponsive`, `failed`; a host's: also `unknown` (its desk
    /// stopped before it said).
    outcome: &'static str,
    worktree: Option<String>,
    /// `removed`, or why it was kept (`--remove-worktree`).
    worktree_removal: Option<String>,
    error: Option<String>,
}

/// `desk down`.
pub(super) fn down(manifest: Option<&Path>, names: &[SessionName], remove_worktree: bool, json: bool) -> Result<i32> {
    let loaded = crate::manifest::load(manifest)?;
    let specs = select(&loaded, names)?;
    let paths = paths()?;
    // config.toml is read only to reach a host: a broken one never keeps this machine's
    // sessions from being stopped.
    let config = if specs.iter().any(|s| s.host.is_some()) { super::config::load(&paths)? } else { Default::default() };
    let (specs, on_hosts) = super::hosted::split(&loaded, specs, &config, &paths)?;
    let mut outcomes = Vec::new();
    let mut failed = false;
    let mut args = vec!["down"];
    args.extend(remove_worktree.then_some("--remove-worktree"));
    let mut answers = super::hosted::run_all(&on_hosts, &loaded, &args);
    for (host, (_, specs)) in &on_hosts {
        use super::hosted::HostAnswer;
        let answer = answers.remove(host).unwrap_or_else(|| HostAnswer::Unknown("not asked".into()));
        let rows = match &answer {
            HostAnswer::Data(data) => data.as_array(),
            _ => None,
        };
        for spec in specs {
            let row = rows.and_then(|rows| rows.iter().find(|r| r["name"] == spec.name.as_str()));
            let (outcome, error) = match (row, &answer) {
                (Some(row), _) => {
                    let said = row["outcome"].as_str().unwrap_or_default();
                    match ["stopped", "already-down", "unresponsive"].into_iter().find(|o| *o == said) {
                        Some(outcome) => (outcome, None),
                        None => ("failed", Some(row["error"].as_str().unwrap_or("failed there").to_string())),
                    }
                }
                (None, HostAnswer::Refused(why)) => ("failed", Some(format!("host {host}: {why}"))),
                (None, HostAnswer::Unknown(why)) => ("unknown", Some(format!("host {host}: {why}"))),
                (None, HostAnswer::Data(_)) => ("unknown", Some(format!("host {host}: its answer does not name it"))),
            };
            failed |= matches!(outcome, "failed" | "unknown");
            outcomes.push(DownOutcome {
                name: spec.name.clone(),
                host: Some(host.clone()),
                outcome,
                worktree: row.and_then(|r| r["worktree"].as_str()).map(String::from),
                worktree_removal: row.and_then(|r| r["worktree_removal"].as_str()).map(String::from),
                error,
            });
        }
    }
    for spec in specs.iter().rev() {
        let name = SessionName::parse(&spec.name).map_err(|e| failure(2, e.to_string()))?;
        let (observed, last) = observe(&paths, &name)?;
        let mut o = DownOutcome {
            name: spec.name.clone(),
            host: None,
            outcome: "already-down",
            worktree: None,
            worktree_removal: None,
            error: None,
        };
        match plan::plan_down(&observed) {
            DownStep::AlreadyDown => {}
            step => match stop(&paths, &name, "desk down") {
                Ok(()) => o.outcome = if step == DownStep::Unresponsive { "unresponsive" } else { "stopped" },
                Err(e) => {
                    failed = true;
                    o.outcome = "failed";
                    o.error = Some(format!("{e:#}"));
                }
            },
        }
        if let Some(wt) = last.and_then(|l| l.worktree) {
            o.worktree = Some(wt.path.clone());
            if remove_worktree && o.outcome != "failed" {
                o.worktree_removal = Some(match crate::worktree::remove(&wt) {
                    Ok(()) => "removed".into(),
                    Err(why) => why,
                });
            }
        }
        outcomes.push(o);
    }
    if json {
        output::print_ok("down", &outcomes, &[])?;
    } else {
        for o in &outcomes {
            let name = match &o.host {
                Some(host) => format!("{host}:{}", o.name),
                None => o.name.clone(),
            };
            match o.outcome {
                "already-down" => println!("{name}: not running"),
                "stopped" => println!("{name}: stopped"),
                "unresponsive" => println!("{name}: signalled (its master did not answer)"),
                "failed" => println!("{name}: failed: {}", o.error.as_deref().unwrap_or("?")),
                "unknown" => println!("{name}: not known: {}", o.error.as_deref().unwrap_or("?")),
                _ => {}
            }
            if let (Some(path), Some(removal)) = (&o.worktree, &o.worktree_removal) {
                println!("{name}: worktree {path}: {removal}");
            }
        }
    }
    Ok(if failed { 1 } else { 0 })
}

/// `desk restart NAME [--fresh]`; `supervised`: the daemon's supervisor restarting generation
/// `replacing` (the session must be down; a running one means someone started it already).
pub(super) fn restart(
    manifest: Option<&Path>,
    name: &SessionName,
    fresh: bool,
    supervised: Option<u32>,
    json: bool,
) -> Result<i32> {
    let paths = paths()?;
    let config = super::config::load(&paths)?;
    let last = launch_record::read(&paths, name)?;
    // What to start: the manifest that declares it, else its own last launch.
    let declared = declaring_manifest(manifest, last.as_ref(), name)?;
    let running = matches!(session::probe_settled(&paths.session(name))?, Probe::Live(_));
    if let Some(replacing) = supervised
        && running
    {
        return Err(fail(
            ErrorCode::AlreadyExists,
            format!("session {name} already runs again (it was restarted after generation {replacing})"),
        ));
    }
    let (mut next, command, cwd, env, size, size_policy) = match &declared {
        Some((loaded, spec)) => {
            let resolved = resolve(&paths, loaded, &[spec], &config)?.into_iter().next().context("one session")?;
            let size = spec.size.or(config.size).unwrap_or(super::DEFAULT_SIZE);
            let worktree = match (&spec.worktree, &resolved.worktree) {
                (Some(branch), Some((_, crate::worktree::Prepared::WouldCreate))) => Some(
                    crate::worktree::prepare(
                        &loaded.worktrees_root(&paths),
                        &spec.name,
                        &loaded.cwd(spec)?,
                        branch,
                        false,
                    )?
                    .0,
                ),
                (_, Some((used, _))) => Some(used.clone()),
                _ => None,
            };
            let next = LaunchRecord {
                generation: 0,
                started_at_ms: 0,
                started_by: StartedBy::Operator { command: "desk restart".into() },
                provider: spec.provider,
                command: resolved.launch.command.clone(),
                ran: Vec::new(),
                cwd: resolved.launch.cwd.clone(),
                env: spec.env.clone(),
                inherited: inherited_for(last.as_ref(), &resolved.env),
                cols: size.0,
                rows: size.1,
                size_policy: spec.size_policy.name().into(),
                history: spec.history.unwrap_or(desk_term::screen::DEFAULT_HISTORY_LINES),
                log_cap: desk_common::screen_log::DEFAULT_LOG_CAP,
                restart: spec.restart,
                manifest: Some(loaded.path.clone()),
                worktree,
                group: spec.group.clone(),
                labels: spec.labels.clone(),
                conversation: None,
            };
            (next, resolved.command, resolved.cwd, resolved.env, size, spec.size_policy)
        }
        None => {
            let Some(last) = last.clone().or_else(|| from_meta(&paths, name)) else {
                return Err(fail(
                    ErrorCode::NoSuchSession,
                    format!("no session named {name}, and no manifest declares it"),
                ));
            };
            let env: Vec<(OsString, OsString)> = last.env.iter().map(|(k, v)| (k.into(), v.into())).collect();
            let command: Vec<OsString> = last.command.iter().map(OsString::from).collect();
            let size_policy = last.size_policy.parse().unwrap_or_default();
            (last.clone(), command, PathBuf::from(&last.cwd), env, (last.cols, last.rows), size_policy)
        }
    };
    if running {
        stop(&paths, name, "desk restart")?;
    }
    next.started_by = match supervised {
        Some(replacing) => StartedBy::Supervisor { replacing },
        None => StartedBy::Operator { command: "desk restart".into() },
    };
    let conversation = if fresh {
        ResumePlan::Fresh { why: "--fresh".into() }
    } else {
        crate::launch::conversation::plan(&paths, name, last.as_ref(), &next)
    };
    let run = run_command(next.provider, &command, &conversation);
    let started = crate::launch::start(
        &paths,
        StartRequest {
            name: name.clone(),
            cwd,
            size,
            size_policy,
            env,
            inherited: next.inherited.clone(),
            provider: next.provider,
            command,
            run,
            history: next.history,
            log_cap: next.log_cap,
            fleet: FleetFacts {
                restart: next.restart,
                manifest: next.manifest.clone(),
                worktree: next.worktree.clone(),
                group: next.group.clone(),
                labels: next.labels.clone(),
                conversation: Some(conversation.clone()),
            },
            started_by: next.started_by.clone(),
        },
    )?;
    let mut o = SessionOutcome::new(name.as_str(), "started");
    o.generation = Some(started.generation);
    o.conversation = Some(conversation);
    o.worktree = next.worktree.map(|w| w.path);
    if json {
        output::print_ok("restart", &o, &[])?;
    } else {
        println!("{}", o.line().replacen(": started", ": restarted", 1));
    }
    Ok(0)
}

/// The manifest that declares `name`, with its declaration: `--manifest`, else the one its
/// last launch came from, else the one found from the current directory — if it declares it.
fn declaring_manifest(
    given: Option<&Path>,
    last: Option<&LaunchRecord>,
    name: &SessionName,
) -> Result<Option<(Loaded, SessionSpec)>> {
    let candidates: Vec<PathBuf> = match given {
        Some(p) => vec![p.to_path_buf()],
        None => last
            .and_then(|l| l.manifest.clone())
            .into_iter()
            .chain(std::env::current_dir().ok().and_then(|d| crate::manifest::find(&d)))
            .collect(),
    };
    for path in candidates {
        let loaded = match crate::manifest::read(&path) {
            Ok(l) => l,
            // A manifest given by name must be valid; one found by itself is only a candidate.
            Err(e) if given.is_some() => return Err(e),
            Err(_) => continue,
        };
        if let Some(spec) = loaded.manifest.session(name.as_str()).cloned() {
            if let Some(host) = &spec.host {
                return Err(super::hosted::restart_on_host(name.as_str(), host, &loaded));
            }
            return Ok(Some((loaded, spec)));
        }
        if given.is_some() {
            return Err(fail(ErrorCode::NoSuchSession, format!("{name} is not declared in {}", loaded.path.display())));
        }
    }
    Ok(None)
}

/// A launch record made from a session's metadata, for one started before desk kept launch
/// records: its command, directory, provider and size (its environment is not known).
fn from_meta(paths: &Paths, name: &SessionName) -> Option<LaunchRecord> {
    let meta = session::read_meta(&paths.session(name)).ok().flatten()?;
    let command = super::sessions::typed_command(Some(&meta.provider), &meta.command);
    eprintln!(
        "desk: note: session {name} has no launch record (started by an older desk); restarting its command without the environment it had"
    );
    Some(LaunchRecord {
        generation: meta.generation,
        started_at_ms: meta.started_at_ms,
        started_by: StartedBy::Operator { command: "desk new".into() },
        provider: Provider::or_shell(&meta.provider),
        command: command.clone(),
        ran: command,
        cwd: meta.cwd,
        env: BTreeMap::new(),
        inherited: BTreeMap::new(),
        cols: meta.cols,
        rows: meta.rows,
        size_policy: meta.size_policy.unwrap_or_else(|| "latest".into()),
        history: desk_term::screen::DEFAULT_HISTORY_LINES,
        log_cap: desk_common::screen_log::DEFAULT_LOG_CAP,
        restart: Default::default(),
        manifest: None,
        worktree: None,
        group: None,
        labels: Vec::new(),
        conversation: None,
    })
}

/// One row of `desk worktree ls`.
#[derive(Debug, Serialize)]
struct WorktreeRow {
    session: String,
    branch: String,
    path: String,
    repo: String,
    #[serde(flatten)]
    state: crate::worktree::Inspection,
}

/// `desk worktree ls`: each declared session's worktree (from its last launch, else where `up`
/// would put it), its branch, and what it holds that is not saved elsewhere.
pub(super) fn worktree_ls(manifest: Option<&Path>, json: bool) -> Result<i32> {
    let loaded = crate::manifest::load(manifest)?;
    let paths = paths()?;
    let root = loaded.worktrees_root(&paths);
    let mut rows = Vec::new();
    // A host's sessions' worktrees are on the host (`desk worktree ls` there).
    for spec in loaded.manifest.sessions.iter().filter(|s| s.worktree.is_some() && s.host.is_none()) {
        let name = SessionName::parse(&spec.name).map_err(|e| failure(2, e.to_string()))?;
        let launched = launch_record::read(&paths, &name).ok().flatten().and_then(|l| l.worktree);
        let used = match launched {
            Some(wt) => wt,
            None => match crate::worktree::prepare(
                &root,
                &spec.name,
                &loaded.cwd(spec)?,
                spec.worktree.as_deref().unwrap_or(""),
                true,
            ) {
                Ok((wt, _, _)) => wt,
                Err(e) => {
                    eprintln!("desk: {}: {e:#}", spec.name);
                    continue;
                }
            },
        };
        let state = crate::worktree::inspect(&used);
        rows.push(WorktreeRow {
            session: spec.name.clone(),
            branch: used.branch,
            path: used.path,
            repo: used.repo,
            state,
        });
    }
    if json {
        output::print_ok("worktrees", &rows, &[])?;
        return Ok(0);
    }
    if rows.is_empty() {
        println!("no session of {} has a worktree", loaded.path.display());
        return Ok(0);
    }
    let mut table = vec![["SESSION", "BRANCH", "STATE", "PATH"].map(String::from).to_vec()];
    for r in &rows {
        let state = if !r.state.exists {
            "not created".to_string()
        } else {
            match &r.state.keep_because {
                None => "clean".into(),
                Some(why) => why.clone(),
            }
        };
        table.push(vec![r.session.clone(), r.branch.clone(), state, r.path.clone()]);
    }
    for line in super::table::render(&table, 60, super::table::terminal_width()) {
        println!("{line}");
    }
    Ok(0)
}
