//! The command line's remote hosts: `HOST:NAME`, `desk ls --all`/`-H HOST`, `desk events --all`
//! over hosts, `desk hosts` and `desk relay` (docs/remote.md).
//!
//! Owns finding a `HOST:NAME` (or `HOST:ITEMID`) among a command's arguments ([`take_host`]),
//! running a command on its host through a link ([`run_on_host`]: the host's desk does the work,
//! with its own files, as the authority for its sessions; its output and exit code come back
//! unchanged — the host's desk itself writes the item ids it prints as text `HOST:ITEMID`, told
//! so by the hidden `--ids-of-host HOST` added to the command), the listings across hosts (`ls`, `stuck`), the events of every host (followed
//! again after a drop), and the hosts report. Invariants: a host is only ever one named in
//! config.toml's `[hosts.NAME]`; every host is asked in parallel and within
//! `link::HANDSHAKE_TIMEOUT` plus [`LISTING_TIMEOUT`], so one slow or lost host is one row
//! saying so, never a hang; typed input is never sent anywhere but to the session named. May
//! depend on the attach client; no command module depends on it but the dispatcher.

use anyhow::{Context, Result, bail};
use serde::Serialize;
use serde::de::DeserializeOwned;
use std::ffi::OsString;
use std::io::Write as _;
use std::time::{Duration, Instant};

use desk_common::config::{self, Host};
use desk_common::paths::{Paths, SessionName};
use desk_common::remote::link::{ExecEvent, HANDSHAKE_TIMEOUT, Link};

use super::output::{self, ErrorCode, Layout};
use super::{fail, table};

/// The subcommands that take a session name as their first positional argument and accept
/// `HOST:NAME` for it.
const TAKES_HOST: &[&str] = &[
    "new", "attach", "peek", "log", "explain", "events", "keys", "send", "queue", "kill", "rm", "resize", "approve",
    "deny", "pause", "resume", "restart",
];

/// The subcommands that act on several sessions (or a manifest's) and run whole on the host
/// named by `-H HOST` (`--host HOST`): the names they take, and the manifest `desk up` and
/// `desk down` read, are the host's.
const RUNS_ON_HOST: &[&str] = &["up", "down", "upgrade"];

/// The subcommands that take an item id as their first positional argument and accept
/// `HOST:ITEMID` for it (an item id has no `:`, so the spelling is unambiguous).
const TAKES_HOST_ITEM: &[&str] = &["item", "force", "drop"];

/// 10 s past the handshake: a host's `desk ls` reads its sessions in well under a second; a
/// host whose listing takes longer is shown as not answering rather than holding the table.
const LISTING_TIMEOUT: Duration = Duration::from_secs(10);

/// A column is cut at this many cells (the last one is not): `desk ls`'s.
const COLUMN_CAP: usize = 40;

/// A configured host: its name and its `[hosts.NAME]` entry.
pub(super) type NamedHost = (String, Host);

/// `args` (the whole command line) with a `HOST:NAME` in its session-name place turned into
/// `NAME`, and the host it named. `HOST` must be a host of the config; a `:` in that place
/// naming none is an error (no session name has one).
///
/// For the subcommands of [`RUNS_ON_HOST`], the host is the one `-H HOST` names, and the option
/// is taken out of `args`.
pub(super) fn take_host(mut args: Vec<OsString>) -> Result<(Vec<OsString>, Option<NamedHost>)> {
    if let Some(host) = take_host_option(&mut args)? {
        let paths = Paths::from_env()?;
        let config = config::load(&paths)?;
        let Some(entry) = config.hosts.get(&host) else {
            return Err(fail(ErrorCode::Usage, format!("-H {host}: {}", unknown_host(&host, &config, &paths))));
        };
        return Ok((args, Some((host, entry.clone()))));
    }
    let Some(at) = name_position(&args) else { return Ok((args, None)) };
    let Some(token) = args[at].to_str().map(str::to_string) else { return Ok((args, None)) };
    let Some((host, name)) = token.split_once(':') else { return Ok((args, None)) };
    let paths = Paths::from_env()?;
    let config = config::load(&paths)?;
    let Some(entry) = config.hosts.get(host) else {
        let item = args.get(1).and_then(|a| a.to_str()).is_some_and(|sub| TAKES_HOST_ITEM.contains(&sub));
        let code = if item { ErrorCode::NoSuchItem } else { ErrorCode::NoSuchSession };
        return Err(fail(code, format!("{token}: {}", unknown_host(host, &config, &paths))));
    };
    args[at] = OsString::from(name);
    Ok((args, Some((host.to_string(), entry.clone()))))
}

/// `no host "HOST" in config.toml (…)`, with the hosts there are or how to add one.
fn unknown_host(host: &str, config: &config::Config, paths: &Paths) -> String {
    let known: Vec<&str> = config.hosts.keys().map(String::as_str).collect();
    let known = if known.is_empty() {
        format!("none is configured: add [hosts.{host}] with ssh = \"user@host\" to {}", config::path(paths).display())
    } else {
        format!("configured: {}", known.join(", "))
    };
    format!("no host {host:?} in config.toml ({known})")
}

/// For a subcommand of [`RUNS_ON_HOST`]: the host its `-H HOST` (`-HHOST`, `--host HOST`,
/// `--host=HOST`) names, taken out of `args`; only before a `--`. Named twice is a usage error.
fn take_host_option(args: &mut Vec<OsString>) -> Result<Option<String>> {
    if !args.get(1).and_then(|a| a.to_str()).is_some_and(|sub| RUNS_ON_HOST.contains(&sub)) {
        return Ok(None);
    }
    let mut found: Option<String> = None;
    let mut i = 2;
    while i < args.len() {
        let Some(token) = args[i].to_str().map(str::to_string) else {
            i += 1;
            continue;
        };
        if token == "--" {
            break;
        }
        let (value, taken) = match token.as_str() {
            "-H" | "--host" => match args.get(i + 1).and_then(|v| v.to_str()) {
                Some(v) => (v.to_string(), 2),
                None => return Err(fail(ErrorCode::Usage, format!("{token} needs a host's name"))),
            },
            t if t.starts_with("--host=") => (t["--host=".len()..].to_string(), 1),
            t if t.starts_with("-H") => (t[2..].to_string(), 1),
            _ => {
                i += 1;
                continue;
            }
        };
        if found.replace(value).is_some() {
            return Err(fail(ErrorCode::Usage, "-H names one host; run the command once per host"));
        }
        args.drain(i..i + taken);
    }
    Ok(found)
}

/// Where the session name (or item id) is among `args`: the subcommand's first positional
/// argument, for the subcommands of [`TAKES_HOST`] and [`TAKES_HOST_ITEM`]. Options that take a
/// value are skipped with it, by what clap says of each (the subcommand's own, and the global
/// ones such as the hidden `--via` the dashboard gives).
fn name_position(args: &[OsString]) -> Option<usize> {
    use clap::CommandFactory;
    let sub = args.get(1)?.to_str()?;
    if !TAKES_HOST.contains(&sub) && !TAKES_HOST_ITEM.contains(&sub) {
        return None;
    }
    let cli = super::Cli::command();
    let command = cli.find_subcommand(sub)?;
    let options = || command.get_arguments().chain(cli.get_arguments().filter(|a| a.is_global_set()));
    let takes_value = |arg: Option<&clap::Arg>| arg.is_some_and(|a| a.get_action().takes_values());
    let mut i = 2;
    while i < args.len() {
        let token = args[i].to_str()?;
        if token == "--" {
            return None;
        }
        if let Some(long) = token.strip_prefix("--") {
            if !long.contains('=') && takes_value(options().find(|a| a.get_long() == Some(long))) {
                i += 1;
            }
        } else if let Some(short) = token.strip_prefix('-').filter(|s| !s.is_empty()) {
            let first = short.chars().next()?;
            if short.len() == 1 && takes_value(options().find(|a| a.get_short() == Some(first))) {
                i += 1;
            }
        } else {
            return Some(i);
        }
        i += 1;
    }
    None
}

/// Reach `host` through its shared link (started if none runs), saying so as an error naming it.
pub(super) fn connect(name: &str, host: &Host) -> Result<Link> {
    let paths = Paths::from_env()?;
    desk_common::remote::linkd::connect(name, host, &paths, HANDSHAKE_TIMEOUT)
}

/// Run `args` (the subcommand and its arguments, the session's name already without its host)
/// with the host's desk: its output here as it comes, its exit code ours. The host's desk is
/// told (`--ids-of-host HOST`, after the subcommand) to write the item ids it prints as text
/// `HOST:ITEMID`, the spelling [`TAKES_HOST_ITEM`] takes back; its `--json` is the host's as it
/// answered.
pub(super) fn run_on_host(name: &str, host: &Host, args: &[OsString]) -> Result<i32> {
    // The session it names, for the commands the host's messages suggest.
    let mut whole = vec![OsString::from("desk")];
    whole.extend(args.iter().cloned());
    let session = name_position(&whole).and_then(|at| whole[at].to_str()).map(str::to_string);
    let whole = args.first().and_then(|a| a.to_str()).is_some_and(|sub| RUNS_ON_HOST.contains(&sub));
    let mut hints = match session {
        Some(s) => Some(Hints::new(name, &s)),
        None if whole => Some(Hints::whole_command(name)),
        None => None,
    };
    let args = host_command(name, args);
    let link = connect(name, host)?;
    // What is piped in goes to the host's desk (`desk send HOST:NAME < prompt.md`); a terminal
    // stays here.
    let input: Option<Box<dyn std::io::Read + Send>> =
        if nix::unistd::isatty(std::io::stdin()).unwrap_or(false) { None } else { Some(Box::new(std::io::stdin())) };
    let events = link.exec(&args, input)?;
    let mut code = None;
    for event in events {
        match event {
            ExecEvent::Stdout(bytes) => {
                let mut out = std::io::stdout().lock();
                out.write_all(&bytes).and_then(|()| out.flush()).context("cannot write the output")?;
            }
            ExecEvent::Stderr(bytes) => {
                let bytes = match hints.as_mut() {
                    Some(hints) => hints.lines(&bytes),
                    None => bytes,
                };
                let mut err = std::io::stderr().lock();
                let _ = err.write_all(&bytes).and_then(|()| err.flush());
            }
            ExecEvent::Exit(c) => code = Some(c),
            ExecEvent::Closed(why) => {
                if code.is_none() {
                    bail!("{}", why.unwrap_or_else(|| format!("host {name} ended the command without an exit code")));
                }
                break;
            }
        }
    }
    if let Some(rest) = hints.as_mut().map(Hints::finish).filter(|r| !r.is_empty()) {
        let mut err = std::io::stderr().lock();
        let _ = err.write_all(&rest).and_then(|()| err.flush());
    }
    Ok(code.unwrap_or(1))
}

/// A host's messages (its standard error: desk's own words, never a prompt's or a screen's),
/// a line at a time, with each command they suggest for the session (`desk SUB NAME`: `desk
/// resume api lets it go on`, `attach with: desk attach api`) written `desk SUB HOST:NAME`,
/// so that it can be typed here as it is shown, and the session they name (`session api`,
/// `queue api`, `a session named api`) written `HOST:NAME` too.
struct Hints {
    host: String,
    /// The session the command names (empty: none).
    session: String,
    /// The whole command runs on the host (`-H HOST`): each of its `desk: …` lines is about
    /// the host, and says so (`desk: host gpu: no desk.toml in /home/me …`).
    whole: bool,
    partial: Vec<u8>,
}

impl Hints {
    fn new(host: &str, session: &str) -> Hints {
        Hints { host: host.to_string(), session: session.to_string(), whole: false, partial: Vec::new() }
    }

    /// For a command of [`RUNS_ON_HOST`], which names no session.
    fn whole_command(host: &str) -> Hints {
        Hints { host: host.to_string(), session: String::new(), whole: true, partial: Vec::new() }
    }

    /// The whole lines `bytes` completes, rewritten; the rest is kept for the next call.
    fn lines(&mut self, bytes: &[u8]) -> Vec<u8> {
        self.partial.extend_from_slice(bytes);
        let Some(end) = self.partial.iter().rposition(|b| *b == b'\n') else { return Vec::new() };
        let whole: Vec<u8> = self.partial.drain(..=end).collect();
        self.rewrite(&String::from_utf8_lossy(&whole)).into_bytes()
    }

    /// What is left at the end (a last line without its newline), rewritten.
    fn finish(&mut self) -> Vec<u8> {
        let rest = std::mem::take(&mut self.partial);
        self.rewrite(&String::from_utf8_lossy(&rest)).into_bytes()
    }

    /// `text` with `HOST:` before the session's name wherever it follows `desk SUB ` (SUB a
    /// subcommand's word), `session `, `queue ` or `named `, as a whole word (then a space, a
    /// closing mark, a `:` or `.` that ends a clause, the end of the text).
    fn rewrite(&self, text: &str) -> String {
        let text = self.rewrite_names(text);
        if !self.whole {
            return text;
        }
        let said = format!("desk: host {}: ", self.host);
        text.split_inclusive('\n')
            .map(|line| match line.strip_prefix("desk: ") {
                Some(rest) => format!("{said}{rest}"),
                None => line.to_string(),
            })
            .collect()
    }

    /// [`Hints::rewrite`]'s part for the session's name.
    fn rewrite_names(&self, text: &str) -> String {
        if self.session.is_empty() {
            return text.to_string();
        }
        // Whether `before` (the text up to a mention of the name) ends with a lead-in and a
        // space: `desk SUB`, `session`, `queue` or `named`, each a whole word.
        let lead_in = |before: &str| -> bool {
            let Some(head) = before.strip_suffix(' ') else { return false };
            // The last word of `head` (what follows its last character that is not one of a
            // word's, which may be several bytes long).
            let word_start = head
                .char_indices()
                .rfind(|(_, c)| !(c.is_ascii_lowercase() || *c == '-'))
                .map_or(0, |(i, c)| i + c.len_utf8());
            let word = &head[word_start..];
            let whole =
                |w: &str| head.len() == w.len() || head[..head.len() - w.len()].ends_with([' ', '(', '`', '\n']);
            match word {
                "session" | "queue" | "named" => whole(word),
                "" => false,
                _ => head[..word_start].strip_suffix(' ').is_some_and(|h| {
                    h.ends_with("desk") && {
                        let h = &h[..h.len() - "desk".len()];
                        h.is_empty() || h.ends_with([' ', '(', '`', '\n', ':'])
                    }
                }),
            }
        };
        // Whether the name ends where `tail` (the text after it) starts.
        let ends = |tail: &str| {
            let mut chars = tail.chars();
            match chars.next() {
                None => true,
                Some(c) if " )`'\",;\n".contains(c) => true,
                Some(':' | '.') => chars.next().is_none_or(|n| !(n.is_ascii_alphanumeric() || "._-".contains(n))),
                _ => false,
            }
        };
        let mut out = String::with_capacity(text.len());
        let mut from = 0;
        let mut at = 0;
        while let Some(found) = text[at..].find(self.session.as_str()).map(|i| i + at) {
            let end = found + self.session.len();
            if lead_in(&text[..found]) && ends(&text[end..]) {
                out.push_str(&text[from..found]);
                out.push_str(&self.host);
                out.push(':');
                from = found;
            }
            at = end;
        }
        out.push_str(&text[from..]);
        out
    }
}

/// The command line host `name`'s desk runs for `args` (the subcommand first): `args` with
/// `--ids-of-host NAME` after the subcommand (before any `--`, past which the rest is a
/// session's command or keys).
fn host_command(name: &str, args: &[OsString]) -> Vec<String> {
    let mut args: Vec<String> = args.iter().map(|a| a.to_string_lossy().into_owned()).collect();
    let at = args.len().min(1);
    args.splice(at..at, ["--ids-of-host".to_string(), name.to_string()]);
    args
}

/// The hosts `desk ls --all` (every configured one) or `-H HOST` (those) asks.
fn chosen_hosts(all: bool, named: &[String]) -> Result<Vec<(String, Host)>> {
    let paths = Paths::from_env()?;
    let config = config::load(&paths)?;
    if all {
        return Ok(config.hosts.iter().map(|(n, h)| (n.clone(), h.clone())).collect());
    }
    named
        .iter()
        .map(|n| match config.hosts.get(n) {
            Some(h) => Ok((n.clone(), h.clone())),
            None => Err(fail(ErrorCode::NoSuchSession, format!("-H {n}: {}", unknown_host(n, &config, &paths)))),
        })
        .collect()
}

/// `rows` of a place's `--json` answer, each object given `host` (`null` for this machine's).
fn with_host(rows: Vec<serde_json::Value>, host: &Option<String>) -> impl Iterator<Item = serde_json::Value> + '_ {
    rows.into_iter().map(move |mut row| {
        if let Some(object) = row.as_object_mut() {
            object.insert("host".into(), host.clone().into());
        }
        row
    })
}

/// Why a place (`None`: this machine) could not be asked, as a note names it.
fn unreachable_note(host: &Option<String>, why: &str) -> String {
    match host {
        Some(host) => format!("host {host}: {why}"),
        None => format!("this machine: {why}"),
    }
}

/// What one place (this machine or a host) answered for the listing: its rows, read as `T`.
enum Answer<T> {
    /// Its rows, and the notes of its answer.
    Rows(Vec<T>, Vec<String>),
    Unreachable(String),
}

/// A `desk SUB --json` answer, its `data` read as rows of `T` (what `T` does not name is
/// skipped as it is read, never built).
#[derive(serde::Deserialize)]
struct Reply<T> {
    data: Vec<T>,
    #[serde(default)]
    notes: Vec<String>,
}

/// `args` (a `--json` command whose answer's `data` is an array) asked of this machine (with
/// `local`) and of each of `hosts`, all in parallel, each within `link::HANDSHAKE_TIMEOUT` plus
/// [`LISTING_TIMEOUT`]: each place's rows read as `T` (in that place's thread, while the others
/// are still answering), or why they could not be had, this machine's first (named `-`).
fn gather<T: DeserializeOwned + Send + 'static>(
    hosts: &[NamedHost],
    local: bool,
    args: &'static [&'static str],
) -> Vec<(String, Answer<T>)> {
    let local = local.then(|| std::thread::spawn(move || local_listing(args)));
    let (tx, rx) = std::sync::mpsc::channel();
    for (i, (name, host)) in hosts.iter().cloned().enumerate() {
        let tx = tx.clone();
        std::thread::spawn(move || {
            let _ = tx.send((i, host_listing(&name, &host, args)));
        });
    }
    drop(tx);
    let mut answers: Vec<Option<Answer<T>>> = (0..hosts.len()).map(|_| None).collect();
    let deadline = Instant::now() + HANDSHAKE_TIMEOUT + LISTING_TIMEOUT;
    while answers.iter().any(Option::is_none) {
        let left = deadline.saturating_duration_since(Instant::now());
        match rx.recv_timeout(left) {
            Ok((i, answer)) => answers[i] = Some(answer),
            Err(_) => break,
        }
    }
    let mut places: Vec<(String, Answer<T>)> = Vec::new();
    if let Some(local) = local {
        let answer = local.join().unwrap_or_else(|_| Answer::Unreachable(format!("desk {} failed", args[0])));
        places.push(("-".into(), answer));
    }
    for ((name, _), answer) in hosts.iter().zip(answers) {
        let answer = answer.unwrap_or_else(|| {
            Answer::Unreachable(format!("did not answer within {} s", (HANDSHAKE_TIMEOUT + LISTING_TIMEOUT).as_secs()))
        });
        places.push((name.clone(), answer));
    }
    places
}

/// `desk ls --all` / `desk ls -H HOST`: this machine's sessions (with `--all`), then each host's,
/// with a HOST column; a host that cannot be reached is one row saying why.
pub(super) fn ls(json: bool, all: bool, named: &[String]) -> Result<i32> {
    let hosts = chosen_hosts(all, named)?;
    if json {
        let places = gather::<serde_json::Value>(&hosts, all, &["ls", "--json"]);
        let mut rows = Vec::new();
        for (host, answer) in places {
            let host = (host != "-").then_some(host);
            match answer {
                Answer::Rows(list, _) => rows.extend(with_host(list, &host)),
                Answer::Unreachable(why) => {
                    rows.push(serde_json::json!({ "host": host, "name": null, "status": "unreachable", "note": why }))
                }
            }
        }
        output::print_ok("sessions", &rows, &[])?;
        return Ok(0);
    }
    let places = gather::<TableRow>(&hosts, all, &["ls", "--json"]);
    let now = desk_common::clock::now_ms();
    let mut table_rows = vec![
        ["HOST", "NAME", "STATUS", "ACTIVITY", "QUEUE", "TITLE", "CLIENTS", "STARTED", "COMMAND"]
            .map(String::from)
            .to_vec(),
    ];
    for (host, answer) in &places {
        match answer {
            Answer::Rows(list, _) => table_rows.extend(list.iter().map(|row| listing_row(host, row, now))),
            // The reason in the last column, which is never cut to a column's cap.
            Answer::Unreachable(why) => table_rows.push(
                [host.as_str(), "-", "unreachable", "-", "-", "-", "-", "-"]
                    .map(String::from)
                    .into_iter()
                    .chain([table::printable(why)])
                    .collect(),
            ),
        }
    }
    let mut text = String::new();
    for line in table::render(&table_rows, COLUMN_CAP, table::terminal_width()) {
        text.push_str(&line);
        text.push('\n');
    }
    let mut out = std::io::stdout().lock();
    out.write_all(text.as_bytes()).and_then(|()| out.flush()).context("cannot write the listing")?;
    Ok(0)
}

/// This machine's answer to `args`: `desk ls --json` in this process (the same code as a host's
/// relay answers it with, [`answer_in_relay`]), anything else by this desk run again (the same
/// code path as a host's).
fn local_listing<T: DeserializeOwned>(args: &[&str]) -> Answer<T> {
    if args == ["ls", "--json"] {
        return match Paths::from_env().and_then(|paths| super::sessions::json_listing(&paths, Layout::Compact)) {
            Ok(stdout) => parse_listing(args[0], 0, &stdout, &[]),
            Err(e) => Answer::Unreachable(format!("cannot list this machine's sessions: {e:#}")),
        };
    }
    let listing = std::env::current_exe()
        .and_then(|exe| std::process::Command::new(exe).args(args).stdin(std::process::Stdio::null()).output());
    match listing {
        Ok(out) => parse_listing(args[0], out.status.code().unwrap_or(1), &out.stdout, &out.stderr),
        Err(e) => Answer::Unreachable(format!("cannot run desk {} on this machine: {e}", args[0])),
    }
}

/// A host's answer to `args`, through its shared link.
fn host_listing<T: DeserializeOwned>(name: &str, host: &Host, args: &[&str]) -> Answer<T> {
    let link = match connect(name, host) {
        Ok(link) => link,
        Err(e) => return Answer::Unreachable(format!("{e:#}")),
    };
    let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
    match link.exec_output(&args) {
        Ok((code, out, err)) => parse_listing(&args[0], code, &out, &err),
        Err(e) => Answer::Unreachable(format!("{e:#}")),
    }
}

/// The `data` array of a `desk SUB --json` answer, its rows read as `T`, or what its error
/// output said.
fn parse_listing<T: DeserializeOwned>(sub: &str, code: i32, stdout: &[u8], stderr: &[u8]) -> Answer<T> {
    match serde_json::from_slice::<Reply<T>>(stdout) {
        Ok(reply) if code == 0 => Answer::Rows(reply.data, reply.notes),
        read => {
            let said = String::from_utf8_lossy(stderr);
            let said = match (said.trim(), read.err()) {
                ("", Some(e)) => format!("its answer is not a listing ({e})"),
                (said, _) => said.to_string(),
            };
            Answer::Unreachable(format!("desk {sub} failed (exit {code}): {said}"))
        }
    }
}

/// `desk stuck --all` / `desk stuck -H HOST`: this machine's stuck items (with `--all`), then
/// each host's, a host's ids and sessions written `HOST:…` (in JSON, each item has `host`,
/// `null` for this machine's). A host that cannot be asked is said (on stderr, and in the JSON
/// notes) and makes the exit code 1; the others are listed.
pub(super) fn stuck(json: bool, all: bool, named: &[String]) -> Result<i32> {
    let hosts = chosen_hosts(all, named)?;
    let places = gather::<serde_json::Value>(&hosts, all, &["stuck", "--json"]);
    let mut notes = Vec::new();
    let mut found: Vec<(Option<String>, Vec<serde_json::Value>)> = Vec::new();
    for (place, answer) in places {
        let host = (place != "-").then_some(place);
        match answer {
            Answer::Rows(rows, _) => found.push((host, rows)),
            Answer::Unreachable(why) => notes.push(unreachable_note(&host, &why)),
        }
    }
    if json {
        let rows: Vec<serde_json::Value> =
            found.into_iter().flat_map(|(host, rows)| with_host(rows, &host).collect::<Vec<_>>()).collect();
        output::print_ok("stuck", &rows, &notes)?;
    } else {
        let mut any = false;
        for (host, rows) in &found {
            let items: Vec<desk_core::delivery::answer::ListedItem> =
                rows.iter().filter_map(|r| serde_json::from_value(r.clone()).ok()).collect();
            any |= !items.is_empty();
            super::delivery::print_stuck(&items, host.as_deref());
        }
        if !any {
            println!("nothing is stuck");
        }
        for note in &notes {
            eprintln!("desk: {note}");
        }
    }
    Ok(if notes.is_empty() { 0 } else { 1 })
}

/// `desk queue --all` / `desk queue -H HOST`: this machine's queues (with `--all`), then each
/// host's, a host's sessions and ids written `HOST:…` (in JSON, each queue has `host`, `null`
/// for this machine's). A host that cannot be asked is said (on stderr, and in the JSON notes)
/// and makes the exit code 1; the others are listed.
pub(super) fn queue(json: bool, all: bool, named: &[String]) -> Result<i32> {
    let hosts = chosen_hosts(all, named)?;
    // Text: this machine's as `desk queue` prints it (its intake and stalled channels too), in
    // this process, while the hosts are asked.
    let local_text = (all && !json).then(|| std::thread::spawn(super::delivery::print_local_queues));
    let places = gather::<serde_json::Value>(&hosts, all && json, &["queue", "--json"]);
    let mut notes = Vec::new();
    let mut any = match local_text.map(|t| t.join()) {
        Some(Ok(printed)) => printed?,
        Some(Err(_)) => bail!("cannot list this machine's queues"),
        None => false,
    };
    let mut rows = Vec::new();
    for (place, answer) in places {
        let host = (place != "-").then_some(place);
        match (answer, json) {
            (Answer::Rows(queues, _), true) => rows.extend(with_host(queues, &host)),
            (Answer::Rows(queues, _), false) => {
                any |= super::delivery::print_host_queues(host.as_deref().unwrap_or("-"), queues)
            }
            (Answer::Unreachable(why), _) => notes.push(unreachable_note(&host, &why)),
        }
    }
    if json {
        output::print_ok("queues", &rows, &notes)?;
    } else {
        if !any {
            println!("no pending items");
        }
        for note in &notes {
            eprintln!("desk: {note}");
        }
    }
    Ok(if notes.is_empty() { 0 } else { 1 })
}

/// `desk inbox --all` / `desk inbox -H HOST`: this machine's open dialogs (with `--all`) and each
/// host's, the one waiting longest first, a host's sessions written `HOST:NAME` (so that the
/// `desk approve HOST:NAME --seen …` each shows is one to type here; in JSON, each dialog has
/// `host`, `null` for this machine's, and `session` as its host names it). A host that cannot be
/// asked is said (on stderr, and in the JSON notes) and makes the exit code 1; the others are
/// listed.
pub(super) fn inbox(json: bool, all: bool, named: &[String]) -> Result<i32> {
    let hosts = chosen_hosts(all, named)?;
    let places = gather::<serde_json::Value>(&hosts, all, &["inbox", "--json"]);
    let (mut open, mut unread, mut rows, mut notes) = (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for (place, answer) in places {
        let host = (place != "-").then_some(place);
        match answer {
            Answer::Rows(data, said) => {
                let prefix = host.as_ref().map_or_else(String::new, |h| format!("{h}:"));
                let (o, u) = crate::inbox::from_answer(&prefix, &data, &said);
                open.extend(o);
                unread.extend(u);
                rows.extend(with_host(data, &host));
            }
            Answer::Unreachable(why) => notes.push(unreachable_note(&host, &why)),
        }
    }
    crate::inbox::sort(&mut open);
    let since = |row: &serde_json::Value| row["since_ms"].as_u64().filter(|s| *s > 0).unwrap_or(u64::MAX);
    rows.sort_by_key(|row| (since(row), row["host"].as_str().map(str::to_string), row["session"].to_string()));
    let code = if notes.is_empty() { 0 } else { 1 };
    super::inbox::print_all(open, unread, rows, notes, json)?;
    Ok(code)
}

/// `desk attach --next --all`: of this machine's running sessions and every host's, the one
/// that most needs a person (the fleet's ranking, as `desk attach --next` ranks this machine's),
/// with its host (`None`: this machine) and why. A host that cannot be asked is said on stderr
/// and left out.
pub(super) fn most_needing_person_everywhere() -> Result<Option<(Option<NamedHost>, SessionName, String)>> {
    let hosts = chosen_hosts(true, &[])?;
    let places = gather::<serde_json::Value>(&hosts, true, &["ls", "--json"]);
    let mut best: Option<(super::sessions::Need, Option<NamedHost>, String)> = None;
    for (place, answer) in places {
        let host = hosts.iter().find(|(n, _)| *n == place).cloned();
        match answer {
            Answer::Rows(rows, _) => {
                for row in rows.iter().filter(|r| r["exit"].is_null() && r["status"] == "running") {
                    // The row's state as `desk ls --json` writes it (docs/cli.md).
                    let state = &row["state"];
                    let Ok(activity) = serde_json::from_value(state["activity"]["value"].clone()) else { continue };
                    let health = match state["health"]["value"].as_str() {
                        Some("degraded") => desk_wire::state::Health::Degraded(
                            state["health"]["reason"].as_str().unwrap_or_default().to_string(),
                        ),
                        _ => desk_wire::state::Health::Ok,
                    };
                    let since = state["activity"]["since_ms"].as_u64().unwrap_or(u64::MAX);
                    let stuck = row["stuck"].as_u64().map_or(0, |n| n as u32);
                    let need = super::sessions::needs_person(activity, since, state["wait"].as_str(), &health, stuck);
                    let (Some(need), Some(name)) = (need, row["name"].as_str()) else { continue };
                    if best.as_ref().is_none_or(|(b, _, _)| need.key < b.key) {
                        best = Some((need, host.clone(), name.to_string()));
                    }
                }
            }
            Answer::Unreachable(why) => match &host {
                Some((name, _)) => eprintln!("desk: host {name}: {why}"),
                None => eprintln!("desk: this machine: {why}"),
            },
        }
    }
    match best {
        Some((need, host, name)) => Ok(Some((host, SessionName::parse(&name)?, need.why))),
        None => Ok(None),
    }
}

/// What the table shows of a row of `desk ls --json` (docs/cli.md, `desk ls`): the rest of the
/// row (its state's evidence, its fleet, its master, its usage: most of its bytes) is skipped
/// while it is read. Every field may be missing or `null` (a host's desk of another version),
/// and is then shown as `-`.
#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct TableRow {
    name: Option<String>,
    status: Option<String>,
    exit: Option<TableExit>,
    state: Option<TableState>,
    queue: Option<u64>,
    title: Option<String>,
    clients: Option<TableClients>,
    started_at_ms: Option<u64>,
    command: Option<Vec<String>>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct TableExit {
    code: Option<i64>,
    signal: Option<i64>,
    exited_at_ms: Option<u64>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct TableState {
    lifecycle: Option<TableActivity>,
    activity: Option<TableActivity>,
    wait: Option<String>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct TableActivity {
    value: Option<String>,
    since_ms: Option<u64>,
}

#[derive(serde::Deserialize, Default)]
#[serde(default)]
struct TableClients {
    controllers: Option<u32>,
    viewers: Option<u32>,
}

/// One row of the table from a row of `desk ls --json`.
fn listing_row(host: &str, row: &TableRow, now: u64) -> Vec<String> {
    let text = |value: &Option<String>| value.clone().unwrap_or_else(|| "-".into());
    // In the words and the form of `desk ls` (crate::words).
    let ended = row.exit.as_ref().map(|exit| {
        let how = match (exit.code.and_then(|c| i32::try_from(c).ok()), exit.signal.and_then(|s| i32::try_from(s).ok()))
        {
            (Some(code), _) => Some(desk_wire::ExitStatus::Code(code)),
            (_, Some(signal)) => Some(desk_wire::ExitStatus::Signal(signal)),
            _ => None,
        };
        (how, exit.exited_at_ms)
    });
    let status = crate::words::status(&text(&row.status), ended, now);
    let activity = row
        .state
        .as_ref()
        .and_then(|s| {
            if s.lifecycle.as_ref().and_then(|l| l.value.as_deref()) == Some("starting") {
                return Some("starting".to_string());
            }
            let a = s.activity.as_ref()?;
            let value = crate::words::activity_named(a.value.as_deref()?, s.wait.as_deref());
            let since = a.since_ms.unwrap_or(now);
            Some(format!("{value} {}", desk_core::time::span(now.saturating_sub(since))))
        })
        .unwrap_or_else(|| "-".into());
    let queue = row.queue.map_or("?".into(), |q| q.to_string());
    let clients = row
        .clients
        .as_ref()
        .map_or_else(|| "-".into(), |c| crate::words::clients(c.controllers.unwrap_or(0), c.viewers.unwrap_or(0)));
    let started = row.started_at_ms.map_or("-".into(), |t| desk_core::time::ago(now, t));
    let command = row.command.as_deref().unwrap_or_default();
    vec![
        host.to_string(),
        text(&row.name),
        status,
        activity,
        queue,
        table::printable(&text(&row.title)),
        clients,
        started,
        table::printable(&table::shell_words(command)),
    ]
}

/// One host in `desk hosts`.
#[derive(Debug, Serialize)]
struct HostReport {
    name: String,
    ssh: String,
    reachable: bool,
    /// Milliseconds for one round trip over the link (after it is up).
    rtt_ms: Option<f64>,
    /// Milliseconds to bring the link up (ssh, the host's shell, desk relay's handshake).
    connect_ms: Option<f64>,
    desk_version: Option<String>,
    /// Whether the host's `desk serve` answers a ping over its control socket.
    serve_running: Option<bool>,
    /// The pid of the host's `desk serve`, as it answered.
    serve_pid: Option<u32>,
    facts: Option<desk_common::remote::HostFacts>,
    /// Why it is not reachable.
    error: Option<String>,
}

/// `desk hosts`: each configured host, whether it answers, how fast, which desk, and whether its
/// sessions survive a logout.
pub(super) fn hosts(json: bool) -> Result<i32> {
    let paths = Paths::from_env()?;
    let config = config::load(&paths)?;
    let handles: Vec<_> = config
        .hosts
        .iter()
        .map(|(name, host)| {
            let (name, host) = (name.clone(), host.clone());
            std::thread::spawn(move || report(&name, &host))
        })
        .collect();
    let reports: Vec<HostReport> = handles.into_iter().filter_map(|h| h.join().ok()).collect();
    if json {
        output::print_ok("hosts", &reports, &[])?;
        return Ok(0);
    }
    if reports.is_empty() {
        println!("no hosts; add one to {}:\n\n[hosts.NAME]\nssh = \"user@host\"", config::path(&paths).display());
        return Ok(0);
    }
    let mut rows =
        vec![["HOST", "SSH", "STATUS", "RTT", "DESK", "SERVE", "SESSIONS", "LINGER"].map(String::from).to_vec()];
    for r in &reports {
        let facts = r.facts.as_ref();
        rows.push(vec![
            r.name.clone(),
            r.ssh.clone(),
            // The reason, with what to do, goes whole below the table: a column would cut it.
            if r.error.is_some() { "unreachable".into() } else { "ok".into() },
            r.rtt_ms.map_or("-".into(), |ms| format!("{ms:.1} ms")),
            r.desk_version.clone().unwrap_or_else(|| "-".into()),
            r.serve_running.map_or("-".into(), |on| if on { "running".into() } else { "stopped".into() }),
            facts.map_or("-".into(), |f| f.sessions.to_string()),
            facts.map_or("-".into(), |f| match f.linger {
                Some(true) => "on".into(),
                Some(false) => "OFF: sessions may stop at logout (loginctl enable-linger)".into(),
                None => "n/a (no systemd)".into(),
            }),
        ]);
    }
    for line in table::render(&rows, 60, table::terminal_width()) {
        println!("{line}");
    }
    for r in &reports {
        if let Some(e) = &r.error {
            println!("\n{}: {}", r.name, table::printable(e));
        }
    }
    Ok(0)
}

fn report(name: &str, host: &Host) -> HostReport {
    let start = Instant::now();
    let mut report = HostReport {
        name: name.to_string(),
        ssh: host.ssh.clone(),
        reachable: false,
        rtt_ms: None,
        connect_ms: None,
        desk_version: None,
        serve_running: None,
        serve_pid: None,
        facts: None,
        error: None,
    };
    let link = match connect(name, host) {
        Ok(link) => link,
        Err(e) => {
            report.error = Some(format!("{e:#}"));
            return report;
        }
    };
    report.reachable = true;
    report.connect_ms = Some(start.elapsed().as_secs_f64() * 1000.0);
    report.desk_version = Some(link.handshake.desk_version.clone());
    match link.round_trip(Duration::from_secs(5)) {
        Ok(rtt) => report.rtt_ms = Some(rtt.as_secs_f64() * 1000.0),
        Err(e) => report.error = Some(format!("{e:#}")),
    }
    // The control socket over the link: the host's daemon answers a ping with its pid, or it is
    // not running (whatever else answers there — an error, another program — is not it).
    let ping = link.open(desk_wire::relay::Target::Control).and_then(|stream| {
        desk_common::daemon_client::request_on(stream, &desk_wire::control::Request::Ping, Duration::from_secs(5))
    });
    let answer = ping.ok().and_then(|r| r.into_answer::<desk_core::delivery::answer::Pid>().ok());
    report.serve_running = Some(answer.is_some());
    report.serve_pid = answer.map(|a| a.data.pid);
    match link.facts() {
        Ok(facts) => report.facts = Some(facts),
        Err(e) => report.error = Some(format!("{e:#}")),
    }
    report
}

/// Whether the config names any host.
pub(super) fn any_hosts() -> Result<bool> {
    Ok(!config::load(&Paths::from_env()?)?.hosts.is_empty())
}

/// An event from one place (as a line of `desk events --all --local --json` has it), or the end
/// of that place's stream.
enum EventLine {
    Line { host: Option<String>, event: serde_json::Map<String, serde_json::Value> },
    Ended { host: Option<String>, why: Option<String> },
}

/// `desk events --all` with hosts: this machine's events and every host's, each place's as
/// `desk events --all --local --json` gives them (read in this process for this machine, on a
/// thread, so nothing of this command outlives it; run by each host's desk), tagged with their
/// host. Without `follow`, all merged by time; with it, the histories and
/// then the new events as they come. A host that cannot be reached, or whose link drops, is said
/// on stderr; the others go on (with `follow`, that host is tried again: [`host_events`]).
pub(super) fn events_all(follow: bool, json: bool, types: &[String]) -> Result<i32> {
    let paths = Paths::from_env()?;
    let config = config::load(&paths)?;
    let mut args: Vec<String> = ["events", "--all", "--local", "--json"].map(String::from).to_vec();
    if follow {
        args.push("--follow".into());
    }
    for t in types {
        args.extend(["--type".to_string(), t.clone()]);
    }
    let (tx, rx) = std::sync::mpsc::channel();
    {
        let (tx, types) = (tx.clone(), types.to_vec());
        std::thread::spawn(move || local_events(follow, !json, &types, &tx));
    }
    for (name, host) in config.hosts.clone() {
        let (tx, args) = (tx.clone(), args.clone());
        std::thread::spawn(move || host_events(&name, &host, &args, &tx));
    }
    drop(tx);
    let mut held = Vec::new();
    for line in rx {
        match line {
            EventLine::Line { host, event: map } => {
                if follow {
                    print_event(host.as_deref(), map, json)?;
                } else {
                    held.push((map.get("ts_ms").and_then(|t| t.as_u64()).unwrap_or(0), host, map));
                }
            }
            EventLine::Ended { host, why: Some(why) } => {
                eprintln!(
                    "desk: {}: {why}",
                    host.as_deref().map_or("this machine".to_string(), |h| format!("host {h}"))
                );
            }
            EventLine::Ended { .. } => {}
        }
    }
    held.sort_by_key(|(ts, _, _)| *ts);
    for (_, host, map) in held {
        print_event(host.as_deref(), map, json)?;
    }
    Ok(0)
}

/// One event line: JSON gains `host` (`null` for this machine); text names the session
/// `HOST:NAME`.
fn print_event(host: Option<&str>, mut map: serde_json::Map<String, serde_json::Value>, json: bool) -> Result<()> {
    if json {
        map.insert("host".into(), host.into());
        let mut out = std::io::stdout().lock();
        serde_json::to_writer(&mut out, &map)?;
        return out.write_all(b"\n").and_then(|()| out.flush()).context("cannot write the events");
    }
    let session = map.remove("session").and_then(|s| s.as_str().map(str::to_string)).unwrap_or_default();
    let tagged = match host {
        Some(host) => format!("{host}:{session}"),
        None => session,
    };
    if let Ok(event) = desk_wire::events::Event::from_json_map(map) {
        super::events::print_tagged(&tagged, &event, false);
    }
    Ok(())
}

/// This machine's events, read in this process as `desk events --all --local` reads them (a
/// thread of this command, never a process of its own that could outlive it); with `notices`,
/// a session that stops or starts answering again is said on stderr, as that command says it.
fn local_events(follow: bool, notices: bool, types: &[String], tx: &std::sync::mpsc::Sender<EventLine>) {
    use super::events::Seen;
    let read = Paths::from_env().and_then(|paths| {
        super::events::each_event(&paths, follow, types, &mut |seen| match seen {
            Seen::Event { session, event } => {
                let mut map = event.to_json_map();
                map.insert("session".into(), session.into());
                tx.send(EventLine::Line { host: None, event: map }).is_ok()
            }
            Seen::Unresponsive { session } => {
                if notices {
                    eprintln!("desk: session {session} does not answer; its events will follow if it wakes");
                }
                true
            }
            Seen::Answering { session } => {
                if notices {
                    eprintln!("desk: session {session} answers again");
                }
                true
            }
        })
    });
    let why = read.err().map(|e| format!("cannot read this machine's events: {e:#}"));
    let _ = tx.send(EventLine::Ended { host: None, why });
}

/// The pauses between attempts to reach again a host whose events stream dropped, under
/// `desk events --all --follow`: the first at once-ish (a link replaced in the meantime is
/// back within a round trip), then doubling to 8 s, the pace attach reconnects at
/// (docs/remote.md), so a host that stays down costs one ssh attempt per 8 s.
const EVENTS_BACKOFF: [Duration; 5] = [
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

/// A host's events, through its shared link. With `--follow` in `args`, a stream that drops (or
/// a host that cannot be reached) is tried again after [`EVENTS_BACKOFF`], saying so on stderr,
/// until this command ends; the events the host's history gives again on reconnecting are
/// those already printed, and are left out (each session's `(generation, seq)` only grows).
fn host_events(name: &str, host: &Host, args: &[String], tx: &std::sync::mpsc::Sender<EventLine>) {
    let follow = args.iter().any(|a| a == "--follow");
    let mut seen: std::collections::HashMap<String, (u64, u64)> = std::collections::HashMap::new();
    let mut failures = 0usize;
    loop {
        let why = match follow_host_once(name, host, args, tx, &mut seen, failures > 0) {
            Stream::Receiver => return,
            Stream::Ended { why, .. } if !follow => {
                let _ = tx.send(EventLine::Ended { host: Some(name.to_string()), why });
                return;
            }
            Stream::Ended { connected, why } => {
                if connected {
                    failures = 0;
                }
                why.unwrap_or_else(|| "its events stream ended".into())
            }
        };
        let pause = EVENTS_BACKOFF[failures.min(EVENTS_BACKOFF.len() - 1)];
        failures += 1;
        eprintln!("desk: host {name}: {why}; reconnecting in {} s", pause.as_secs_f32());
        std::thread::sleep(pause);
    }
}

/// How one attempt at a host's events stream ended.
enum Stream {
    /// The events stream ended (after it had begun, or before), and why (`None`: it simply
    /// ended).
    Ended { connected: bool, why: Option<String> },
    /// Nobody reads the events any more: this command is ending.
    Receiver,
}

/// One link to the host, and its events until the stream ends; `seen`: the newest
/// `(generation, seq)` printed for each of the host's sessions; `again`: an earlier attempt
/// failed (a success is then said on stderr).
fn follow_host_once(
    name: &str,
    host: &Host,
    args: &[String],
    tx: &std::sync::mpsc::Sender<EventLine>,
    seen: &mut std::collections::HashMap<String, (u64, u64)>,
    again: bool,
) -> Stream {
    let failed = |e: anyhow::Error| Stream::Ended { connected: false, why: Some(format!("{e:#}")) };
    let link = match connect(name, host) {
        Ok(link) => link,
        Err(e) => return failed(e),
    };
    let events = match link.exec(args, None) {
        Ok(events) => events,
        Err(e) => return failed(e),
    };
    if again {
        eprintln!("desk: host {name}: reconnected; following its events again");
    }
    let mut partial = Vec::new();
    for event in events {
        match event {
            ExecEvent::Stdout(bytes) => {
                partial.extend_from_slice(&bytes);
                while let Some(end) = partial.iter().position(|b| *b == b'\n') {
                    let line: Vec<u8> = partial.drain(..=end).collect();
                    // A line that is no event (no JSON object) is left out.
                    let Ok(serde_json::Value::Object(event)) = serde_json::from_slice(&line[..line.len() - 1]) else {
                        continue;
                    };
                    if !first_time(&event, seen) {
                        continue;
                    }
                    if tx.send(EventLine::Line { host: Some(name.to_string()), event }).is_err() {
                        return Stream::Receiver;
                    }
                }
            }
            ExecEvent::Stderr(bytes) => {
                let text = String::from_utf8_lossy(&bytes);
                for line in text.lines() {
                    eprintln!("desk: host {name}: {line}");
                }
            }
            ExecEvent::Exit(_) => {}
            ExecEvent::Closed(why) => return Stream::Ended { connected: true, why },
        }
    }
    Stream::Ended { connected: true, why: Some(format!("connection to host {name} lost")) }
}

/// Whether `value` (an event of a host's) comes after every event of its session already
/// printed (and records it); one without a session or number is passed on as it is.
fn first_time(
    value: &serde_json::Map<String, serde_json::Value>,
    seen: &mut std::collections::HashMap<String, (u64, u64)>,
) -> bool {
    let (Some(session), Some(seq)) =
        (value.get("session").and_then(|s| s.as_str()), value.get("seq").and_then(|s| s.as_u64()))
    else {
        return true;
    };
    let at = (value.get("generation").and_then(|g| g.as_u64()).unwrap_or(0), seq);
    match seen.get(session) {
        Some(last) if *last >= at => false,
        _ => {
            seen.insert(session.to_string(), at);
            true
        }
    }
}

/// `desk relay`: the host's end of a link (run by ssh, not by a person).
pub(super) fn relay() -> Result<i32> {
    desk_common::remote::relay::enter_user_scope();
    let paths = Paths::from_env()?;
    desk_common::remote::relay::serve(&paths, answer_in_relay)?;
    Ok(0)
}

/// The runs of this desk a relay answers in its own process: `desk ls --json` (each `desk ls
/// --all` and each of the dashboard's refreshes asks it of every host), which then costs no
/// process start on the host.
fn answer_in_relay(args: &[String]) -> Option<fn(&Paths) -> desk_common::remote::relay::Ran> {
    use desk_common::remote::relay::Ran;
    (args == ["ls", "--json"]).then_some(|paths| match super::sessions::json_listing(paths, Layout::Compact) {
        Ok(stdout) => Ran { code: 0, stdout, stderr: Vec::new() },
        Err(e) => Ran { code: 1, stdout: Vec::new(), stderr: format!("desk: {e:#}\n").into_bytes() },
    })
}

/// `desk link NAME ENTRY`: the shared link of a host (started by [`connect`], not by a person),
/// reporting on the descriptor its starter gave it.
pub(super) fn link(name: &str, entry: &str) -> Result<i32> {
    use std::os::fd::FromRawFd as _;
    let host: Host = serde_json::from_str(entry).context("the host entry given to desk link is not JSON of one")?;
    let paths = Paths::from_env()?;
    // SAFETY: detach::spawn gave this process READY_FD, open and ours alone.
    let ready = unsafe { std::os::fd::OwnedFd::from_raw_fd(desk_common::detach::READY_FD) };
    // Not for ssh (started before the report), nor the ControlMaster it may leave running: the
    // starter reads the report to its end.
    nix::fcntl::fcntl(&ready, nix::fcntl::FcntlArg::F_SETFD(nix::fcntl::FdFlag::FD_CLOEXEC))
        .context("cannot keep the report pipe from ssh")?;
    desk_common::remote::linkd::serve(name, &host, &paths, ready)?;
    Ok(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn h_is_taken_out_of_the_commands_that_run_whole_on_a_host_in_each_spelling() {
        let take = |line: &str| {
            let mut a: Vec<OsString> = line.split(' ').map(OsString::from).collect();
            let host = take_host_option(&mut a).map_err(|e| e.to_string());
            (host, a.iter().map(|a| a.to_string_lossy().into_owned()).collect::<Vec<_>>().join(" "))
        };
        for line in
            ["desk up -H gpu --json", "desk up -Hgpu --json", "desk up --host gpu --json", "desk up --json --host=gpu"]
        {
            assert_eq!(take(line), (Ok(Some("gpu".to_string())), "desk up --json".to_string()), "{line}");
        }
        assert_eq!(take("desk upgrade a -H gpu b").1, "desk upgrade a b");
        // Past `--`, and for the other subcommands, nothing is taken.
        assert_eq!(take("desk up -- -H gpu"), (Ok(None), "desk up -- -H gpu".to_string()));
        assert_eq!(take("desk ls -H gpu"), (Ok(None), "desk ls -H gpu".to_string()));
        assert!(take("desk down -H a -H b").0.is_err());
        assert!(take("desk down -H").0.is_err());
    }

    #[test]
    fn a_host_s_rows_are_written_in_the_words_of_desk_ls() {
        let now = 1_000_000_000;
        let row = |json: serde_json::Value| listing_row("box", &serde_json::from_value(json).unwrap(), now);
        let exited = row(serde_json::json!({
            "name": "api", "status": "exited",
            "exit": {"code": 3, "signal": null, "exited_at_ms": now - 5_000},
        }));
        assert_eq!(exited[2], "exited(3) 5s ago");
        let killed = row(serde_json::json!({"status": "down", "exit": {"signal": 9, "exited_at_ms": now - 5_000}}));
        assert_eq!(killed[2], "down: killed(SIGKILL) 5s ago");
        let blocked = row(serde_json::json!({
            "status": "running",
            "state": {"activity": {"value": "blocked", "since_ms": now - 2_000}, "wait": "approval"},
        }));
        assert_eq!((blocked[2].as_str(), blocked[3].as_str()), ("running", "blocked(approval) 2s"));
        let starting = row(serde_json::json!({"status": "running", "state": {"lifecycle": {"value": "starting"}}}));
        assert_eq!(starting[3], "starting");
        let when_unknown = row(serde_json::json!({"status": "exited", "exit": {"code": 3}}));
        assert_eq!(when_unknown[2], "exited(3)", "no age it does not know");
        // A host's desk of another version may leave anything out.
        assert_eq!(row(serde_json::json!({}))[2..4], ["-", "-"]);
    }

    #[test]
    fn the_commands_a_host_suggests_for_its_session_are_written_host_colon_name() {
        let hints = Hints::new("box", "api");
        let cases = [
            (
                "desk: queue api is held: paused by the operator (desk resume api lets it go on)\n",
                "desk: queue box:api is held: paused by the operator (desk resume box:api lets it go on)\n",
            ),
            (
                "desk: session api already exists and is running; attach with: desk attach api\n",
                "desk: session box:api already exists and is running; attach with: desk attach box:api\n",
            ),
            (
                "desk: cannot resize session api: the session's size follows its controllers\n",
                "desk: cannot resize session box:api: the session's size follows its controllers\n",
            ),
            (
                "held until a session named api runs again; no session named api.\n",
                "held until a session named box:api runs again; no session named box:api.\n",
            ),
            // Written HOST:NAME already by the host (its confirmations): left as it is, even
            // where the host's name is the session's.
            ("sent SIGTERM to session box:api", "sent SIGTERM to session box:api"),
            // Text that is not ASCII before the name, or in the word before it.
            ("café api; — api; session é api; desk é api", "café api; — api; session é api; desk é api"),
            ("desk: queue api → held", "desk: queue box:api → held"),
            // Not a lead-in: a longer word, or the name inside another.
            ("the subsession api; session apiary; session api-2", "the subsession api; session apiary; session api-2"),
            ("stop it first with: desk kill api.", "stop it first with: desk kill box:api."),
            // Another session, a longer name, a word that is no subcommand, one already written.
            (
                "desk kill apiary; desk channel post api; desk item box:api",
                "desk kill apiary; desk channel post api; desk item box:api",
            ),
            ("desk new api -- CMD starts one", "desk new box:api -- CMD starts one"),
        ];
        for (said, shown) in cases {
            assert_eq!(hints.rewrite(said), shown);
        }
        let same = Hints::new("api", "api");
        assert_eq!(
            same.rewrite("sent SIGTERM to session api:api; desk kill api"),
            "sent SIGTERM to session api:api; desk kill api:api"
        );
        // Across reads: a line is rewritten once it is whole.
        // A command run whole on the host: its messages are the host's.
        let whole = Hints::whole_command("gpu");
        assert_eq!(
            whole.rewrite("desk: no desk.toml in /root\nw1: started\ndesk: started desk serve"),
            "desk: host gpu: no desk.toml in /root\nw1: started\ndesk: host gpu: started desk serve"
        );
        let mut hints = Hints::new("box", "api");
        assert!(hints.lines(b"try desk peek a").is_empty());
        assert_eq!(hints.lines(b"pi\nand desk pee"), b"try desk peek box:api\n");
        assert_eq!(hints.finish(), b"and desk pee");
    }

    fn position(line: &str) -> Option<usize> {
        let args: Vec<OsString> = line.split(' ').map(OsString::from).collect();
        name_position(&args)
    }

    #[test]
    fn the_session_name_is_found_past_options_and_their_values() {
        assert_eq!(position("desk peek gpu:api"), Some(2));
        assert_eq!(position("desk send --from me gpu:api hello"), Some(4));
        assert_eq!(position("desk send --from=me gpu:api hello"), Some(3));
        assert_eq!(position("desk new --cwd /srv --env A=1 gpu:web -- sh -c x:y"), Some(6));
        assert_eq!(position("desk attach --read-only gpu:api"), Some(3));
        assert_eq!(position("desk events -f gpu:api"), Some(3));
        assert_eq!(position("desk kill --signal KILL gpu:api"), Some(4));
        // The global options the dashboard gives, with their values.
        assert_eq!(position("desk keys --via dash gpu:api -- Enter"), Some(4));
        assert_eq!(position("desk approve --via=dash gpu:api 1 --seen ab"), Some(3));
        // Not a command that takes a session, or no name before `--`.
        assert_eq!(position("desk channel post gpu:x"), None);
        assert_eq!(position("desk new -- sh"), None);
        assert_eq!(position("desk ls"), None);
        // Item ids: the first positional of item, force and drop.
        assert_eq!(position("desk force --over-draft gpu:01J0000000000000000000000A"), Some(3));
        assert_eq!(position("desk item gpu:01J0"), Some(2));
        assert_eq!(position("desk drop --json gpu:01J0"), Some(3));
    }

    #[test]
    fn every_command_that_runs_on_a_host_takes_the_host_s_name_for_its_ids() {
        use clap::CommandFactory;
        let mut cli = crate::cli::Cli::command();
        cli.build();
        for sub in TAKES_HOST.iter().chain(TAKES_HOST_ITEM).chain(RUNS_ON_HOST) {
            let command = cli.find_subcommand(sub).unwrap_or_else(|| panic!("no subcommand {sub}"));
            assert!(
                command.get_arguments().any(|a| a.get_long() == Some("ids-of-host") && a.is_hide_set()),
                "desk {sub} does not take --ids-of-host"
            );
        }
        // Each that runs whole on a host says so in its help, as -H HOST.
        for sub in RUNS_ON_HOST {
            let command = cli.find_subcommand(sub).unwrap_or_else(|| panic!("no subcommand {sub}"));
            assert!(
                command.get_arguments().any(|a| a.get_short() == Some('H') && a.get_long() == Some("host")),
                "desk {sub} has no -H/--host"
            );
        }
    }

    #[test]
    fn a_host_s_desk_is_told_its_host_s_name_after_the_subcommand_before_any_double_dash() {
        let args = |line: &str| -> Vec<OsString> { line.split(' ').map(OsString::from).collect() };
        assert_eq!(host_command("gpu", &args("queue f")), ["queue", "--ids-of-host", "gpu", "f"]);
        assert_eq!(
            host_command("gpu", &args("new web -- sh -c x")),
            ["new", "--ids-of-host", "gpu", "web", "--", "sh", "-c", "x"]
        );
        assert_eq!(host_command("gpu", &args("keys api -- --x")), ["keys", "--ids-of-host", "gpu", "api", "--", "--x"]);
    }
}
