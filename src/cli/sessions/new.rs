//! `desk new`: start a session's master and wait until it listens.

use super::ls::{Listing, listing};
#[allow(unused_imports)]
use super::*;

/// What `desk new` was asked to start.
pub(in crate::cli) struct NewSession {
    pub name: SessionName,
    pub cwd: Option<PathBuf>,
    pub size: (u16, u16),
    /// How the size follows the controllers.
    pub size_policy: desk_core::session::SizePolicy,
    pub env: Vec<(OsString, OsString)>,
    pub provider: Option<String>,
    pub command: Vec<OsString>,
    /// Arguments the config file adds to each provider's own agent command.
    pub provider_args: std::collections::BTreeMap<String, Vec<String>>,
    /// Print the started session as JSON.
    pub json: bool,
    /// History lines the master keeps.
    pub history: usize,
    /// Cap of the session log in bytes (0: none).
    pub log_cap: u64,
}

pub(in crate::cli) fn new(req: NewSession) -> Result<i32> {
    let NewSession {
        name,
        cwd,
        size: (cols, rows),
        size_policy,
        env,
        provider,
        command,
        provider_args,
        json,
        history,
        log_cap,
    } = req;
    let default_command = command.is_empty();
    let (provider, mut command) = crate::providers::resolve(provider.as_deref(), command).map_err(|e| failure(2, e))?;
    let program = command.first().cloned().unwrap_or_default();
    if default_command && let Some(args) = provider_args.get(provider.as_str()) {
        // The agent's own command, started for the user: with their configured arguments. A
        // command they typed is used as typed.
        command.extend(args.iter().map(OsString::from));
    }
    let paths = paths()?;
    let cwd = match cwd {
        Some(dir) => std::fs::canonicalize(&dir)
            .with_context(|| format!("working directory {} does not exist", dir.display()))?,
        None => std::env::current_dir().context("cannot read the current directory")?,
    };
    if !cwd.is_dir() {
        return Err(failure(1, format!("{} is not a directory", cwd.display())));
    }
    let inherited = crate::launch::inherited_config(&env);
    crate::launch::start(
        &paths,
        crate::launch::StartRequest {
            name: name.clone(),
            cwd,
            size: (cols, rows),
            size_policy,
            env,
            inherited,
            provider,
            command: command.clone(),
            run: command,
            history,
            log_cap,
            fleet: crate::launch::FleetFacts::default(),
            started_by: desk_common::launch_record::StartedBy::Operator { command: "desk new".into() },
        },
    )
    .map_err(|e| match crate::launch::agent_not_found(&e, default_command.then_some(program.as_os_str())) {
        Some(program) => failure(
            1,
            format!(
                "{e:#}\n`{program}` is not on your PATH: install it, or give its path: \
                     desk new {name} --provider {provider} -- /path/to/{program}"
            ),
        ),
        None => e,
    })?;
    // An agent's prompts are the daemon's to deliver: it is started now, not at the first send.
    let notes: Vec<String> = if crate::launch::needs_daemon(provider) {
        crate::autostart::ensure_daemon(&paths).note().into_iter().collect()
    } else {
        Vec::new()
    };
    let row = if json { Some(started_row(&paths, &name)?) } else { None };
    NewReport { notes, row }.render(json)?;
    Ok(0)
}

/// The started session's row as `desk ls` lists it, with its delivery queue: what `desk new
/// --json` prints (`None`: the session is no longer there to list).
fn started_row(paths: &Paths, name: &SessionName) -> Result<Option<Listing>> {
    let deadline = Instant::now() + session::PROBE_DEADLINE;
    let mut row = listing(paths, name, deadline)?;
    if let Some(row) = &mut row {
        row.delivery =
            crate::cli::delivery::queue_counts(paths).map(|mut c| c.remove(name.as_str()).unwrap_or_default());
    }
    Ok(row)
}

/// What `desk new` reports once its session runs: the notes (the daemon started for an agent),
/// and for `--json` the session's row (reading it asks the master, which the text form, silent
/// on stdout like any started command, does not need).
struct NewReport {
    notes: Vec<String>,
    /// `--json` only.
    row: Option<Option<Listing>>,
}

impl NewReport {
    /// Once as text (the notes on stderr, nothing on stdout) or once as JSON (the row, the
    /// notes riding along).
    fn render(&self, json: bool) -> Result<()> {
        if json {
            return output::print_ok("session", self.row.as_ref().and_then(Option::as_ref), &self.notes);
        }
        for note in &self.notes {
            eprintln!("desk: {note}");
        }
        Ok(())
    }
}
