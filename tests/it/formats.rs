//! Every on-disk format as desk's format version 1 writes it, read by this build.
//!
//! `tests/data/formats/v1/` is a recording, not a guess: [`write_v1_fixtures`] made it from a
//! real run of desk (a daemon, a demo agent that took a prompt and has another held, a channel
//! with a thread that the daemon ingested, a session that exited, prompts waiting in the intake)
//! and keeps it as the files were. Every later desk must read all of it: one test per format
//! here, and a daemon started on a copy of it must carry on its queue, holds, owed hooks and
//! channel cursors as if it had been restarted into a new build. The recording's
//! `run/*.json` name processes of the run that made them (long gone); they are read from a
//! copy of their own, never put where a test's `Home` would signal the pids they name.

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use crate::support::{DESK, Home, eventually};
use desk_common::format::FormatError;
use desk_common::paths::{Paths, SessionName};
use desk_core::channel::ChannelName;
use desk_core::delivery::item::State;
use desk_daemon::channel::store::ChannelStore;
use desk_daemon::store::Store;

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/formats/v1")
}

/// The recording copied into a fresh directory laid out as a `DESK_HOME` (state, config and,
/// with `run`, the session records), so that readers that rename or rewrite work on the copy.
pub(crate) fn copy_of_fixtures(into: &Path, run: bool) {
    let parts: &[&str] = if run { &["state", "config", "run"] } else { &["state", "config"] };
    for part in parts {
        copy_tree(&fixtures().join(part), &into.join(part));
    }
    // Directories desk insists are private (the recording's modes are git's).
    use std::os::unix::fs::PermissionsExt;
    for dir in walk(into).into_iter().filter(|p| p.is_dir()) {
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o700)).unwrap();
    }
}

fn copy_tree(from: &Path, to: &Path) {
    fs::create_dir_all(to).unwrap();
    for entry in fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())).flatten() {
        let path = entry.path();
        if path.is_dir() {
            copy_tree(&path, &to.join(entry.file_name()));
        } else {
            fs::copy(&path, to.join(entry.file_name())).unwrap();
        }
    }
}

fn walk(dir: &Path) -> Vec<PathBuf> {
    let mut out = vec![dir.to_path_buf()];
    for entry in fs::read_dir(dir).map(|r| r.flatten().collect::<Vec<_>>()).unwrap_or_default() {
        if entry.path().is_dir() {
            out.extend(walk(&entry.path()));
        } else {
            out.push(entry.path());
        }
    }
    out
}

fn paths_at(home: &Path) -> Paths {
    Paths { runtime: home.join("run"), state: home.join("state"), config: home.join("config") }
}

fn channel() -> ChannelName {
    ChannelName::parse("team").unwrap()
}

/// Every item file of the store, by path relative to its root, with its bytes.
fn item_files(state: &Path) -> BTreeMap<String, Vec<u8>> {
    let root = state.join("delivery/queue");
    walk(&root)
        .into_iter()
        .filter(|p| p.is_file())
        .map(|p| (p.strip_prefix(&root).unwrap().display().to_string(), fs::read(&p).unwrap()))
        .collect()
}

#[test]
fn item_records_of_v1_are_read_with_their_owed_hook() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), false);
    let store = Store::open(&tmp.path().join("state")).unwrap();
    let (items, problems) = store.load_all().unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    let delivered: Vec<_> = items.iter().filter(|i| i.state == State::Delivered).collect();
    let queued: Vec<_> = items.iter().filter(|i| i.state == State::Queued).collect();
    assert!(delivered.iter().any(|i| i.hook_owed.is_some()), "an owed hook: {delivered:?}");
    assert!(queued.iter().any(|i| i.text == "a prompt held by the pause"), "{queued:?}");
    assert!(queued.iter().any(|i| i.channel.is_some()), "a channel's prompt: {queued:?}");
    let intake = store.pending_intake().unwrap();
    assert_eq!(intake.len(), 1, "{intake:?}");
    assert_eq!(Store::read_record(&intake[0]).unwrap().text, "written while the daemon was down");
}

#[test]
fn holds_of_v1_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), false);
    let pauses = Store::open(&tmp.path().join("state")).unwrap().load_pauses().unwrap();
    assert_eq!(pauses.sessions["agent"].reason, "held for the fixture");
}

#[test]
fn session_and_exit_records_of_v1_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), true);
    let paths = paths_at(tmp.path());
    let agent =
        desk_common::session::read_meta(&paths.session(&SessionName::parse("agent").unwrap())).unwrap().unwrap();
    assert_eq!((agent.provider.as_str(), agent.generation), ("demo", 1));
    let done = paths.session(&SessionName::parse("done").unwrap());
    let exit = desk_common::session::read_exit(&done).unwrap().unwrap();
    assert_eq!(exit.status, desk_wire::ExitStatus::Code(3));
    assert!(exit.last_screen.unwrap_or_default().iter().any(|row| row.contains("bye")));
}

#[test]
fn generation_counters_and_journals_of_v1_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), true);
    let paths = paths_at(tmp.path());
    let name = SessionName::parse("agent").unwrap();
    let journal = paths.session_state(&name).join(desk_common::journal::FILE_NAME);
    let lines = fs::read_to_string(&journal).unwrap().lines().filter(|l| !l.is_empty()).count();
    let events = desk_common::journal::read_all(&paths.session_state(&name)).unwrap();
    assert!(lines > 0 && events.len() == lines, "every line an event: {} of {lines}", events.len());
    let lock = desk_common::session::NameLock::acquire(&paths, &name).unwrap();
    assert_eq!(desk_common::session::allocate_generation(&paths, &name, &lock).unwrap(), 2, "the next after 1");
}

/// A start writes its counter and its launch record without waiting on the disk (the master
/// syncs both before it serves anyone), so a power loss may keep one without the other: a
/// launch record ahead of the counter is counted on from, never handed its generation again.
#[test]
fn a_launch_record_ahead_of_the_generation_counter_is_counted_on_from() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), true);
    let paths = paths_at(tmp.path());
    let name = SessionName::parse("crew").unwrap();
    let mut launch = desk_common::launch_record::read(&paths, &name).unwrap().expect("the fixture's launch record");
    launch.generation = 7;
    desk_common::launch_record::write(&paths, &name, &launch).unwrap();
    fs::write(desk_common::session::generation_file(&paths, &name), b"3\n").unwrap();
    let lock = desk_common::session::NameLock::acquire(&paths, &name).unwrap();
    assert_eq!(desk_common::launch_record::allocate_generation(&paths, &name, &lock).unwrap(), 8, "never 4..=7 again");
    assert_eq!(fs::read_to_string(desk_common::session::generation_file(&paths, &name)).unwrap(), "8\n");
}

#[test]
fn a_damaged_generation_counter_is_set_aside_and_counting_goes_on_from_the_records() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), true);
    let paths = paths_at(tmp.path());
    let name = SessionName::parse("agent").unwrap();
    let counter = paths.session_state(&name).join("generation");
    fs::write(&counter, b"\x00garbage").unwrap();
    let lock = desk_common::session::NameLock::acquire(&paths, &name).unwrap();
    assert_eq!(desk_common::session::allocate_generation(&paths, &name, &lock).unwrap(), 2, "never 1 again");
    assert_eq!(fs::read(paths.session_state(&name).join("generation.bad")).unwrap(), b"\x00garbage");
}

#[test]
fn channel_files_cursors_and_ledgers_of_v1_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), false);
    let channels = ChannelStore::at(&paths_at(tmp.path()));
    let roster = channels.roster(&channel()).unwrap().unwrap();
    assert!(roster.members.iter().any(|m| m.name == "agent"), "{roster:?}");
    let (root, problems) = channels.read(&channel(), None).unwrap();
    assert!(problems.is_empty(), "{problems:?}");
    assert!(root.iter().any(|m| m.body.contains("hello @agent")), "{root:?}");
    let threads = channels.thread_counts(&channel()).unwrap();
    assert_eq!(threads.len(), 1, "{threads:?}");
    let cursor = desk_daemon::channel::ingest::read_cursor(&channels, &channel()).unwrap().unwrap();
    assert_eq!(cursor.version, 2);
    assert_eq!(cursor.files.len(), 2, "root and thread: {cursor:?}");
    let ledger = desk_daemon::channel::ledger::read(&channels.dir(&channel())).unwrap().unwrap();
    assert!(ledger.len() >= 3, "joined, the root message and the reply: {ledger:?}");
    assert!(desk_daemon::channel::summary::seen_by_operator(&channels, &channel()).unwrap().is_some());
}

#[test]
fn the_config_file_of_v1_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), false);
    let config = desk_common::config::load(&paths_at(tmp.path())).unwrap();
    assert_eq!(config.size, Some((100, 30)));
    assert_eq!(config.detach_key, Some(Some(0x1d)));
    assert!(config.notify_command.is_some() && config.provider_args.contains_key("claude"), "{config:?}");
}

/// The daemon restarted into this build on the recorded state: the held prompt stays held, the
/// delivered prompt that still owed its hook is judged by it, the prompt from the intake is
/// queued once, and the
/// channel's cursor goes on where it was — the old messages are not ingested again, a new one is
/// ingested once.
#[test]
fn a_daemon_restarted_into_this_build_keeps_its_queue_holds_owed_hooks_and_cursors() {
    let home = Home::new();
    copy_of_fixtures(home.path(), false);
    let state = home.path().join("state");
    let before = item_files(&state);
    let ledger = fs::read(state.join("channels/team/ingested.log")).unwrap();
    home.serve();
    let queues = eventually("the intake to be queued", || {
        let v = home.json(&["queue", "agent", "--json"]);
        let items = v["data"][0]["items"].as_array().cloned().unwrap_or_default();
        if items.iter().any(|i| i["text"] == "written while the daemon was down") { Ok(v) } else { Err(v.to_string()) }
    });
    let queue = &queues["data"][0];
    assert_eq!(queue["paused"], "held for the fixture", "{queue:#}");
    let texts: Vec<&str> = queue["items"].as_array().unwrap().iter().filter_map(|i| i["text"].as_str()).collect();
    assert!(texts.contains(&"a prompt held by the pause"), "{texts:?}");
    assert_eq!(texts.iter().filter(|t| **t == "written while the daemon was down").count(), 1, "{texts:?}");
    // The owed hook: the prompt was delivered into the agent's own queue, its hook still owed,
    // and the session it waited in is gone (its master was the recording's). Restored from the
    // record, it is not forgotten as delivered: it is stuck, interrupted, saying why.
    let owed: Vec<&String> =
        before.iter().filter(|(_, b)| String::from_utf8_lossy(b).contains("\"hook_owed\"")).map(|(p, _)| p).collect();
    assert_eq!(owed.len(), 1, "{owed:?}");
    let id = Path::new(owed[0]).file_stem().unwrap().to_str().unwrap().to_string();
    let item = home.settled(&id);
    assert_eq!((item["state"].as_str(), item["stuck"].as_str()), (Some("stuck"), Some("interrupted")), "{item:#}");
    assert!(item["evidence"].to_string().contains("agent's own queue"), "{item:#}");
    // Nothing ingested twice: the items are the recorded ones and the intake's, and a new post
    // becomes exactly one more prompt.
    let new: Vec<String> = new_items(&before, &item_files(&state));
    assert_eq!(new.len(), 1, "only the intake's item is new: {new:?}");
    assert_eq!(fs::read(state.join("channels/team/ingested.log")).unwrap(), ledger, "the ledger is as it was");
    home.ok(&["channel", "post", "team", "after the upgrade @agent"]);
    let added = eventually("the new post to become one prompt", || {
        let new = new_items(&before, &item_files(&state));
        if new.len() == 2 { Ok(new) } else { Err(format!("{new:?}")) }
    });
    let texts: Vec<String> =
        added.iter().map(|k| String::from_utf8_lossy(&after_bytes(&state, k)).into_owned()).collect();
    assert!(texts.iter().any(|t| t.contains("after the upgrade")), "{texts:?}");
}

/// The files of items (known by id, whatever their state) that `before` did not have.
fn new_items(before: &BTreeMap<String, Vec<u8>>, after: &BTreeMap<String, Vec<u8>>) -> Vec<String> {
    let id = |rel: &str| rel.split('.').next().unwrap_or_default().to_string();
    let known: std::collections::HashSet<String> = before.keys().map(|k| id(k)).collect();
    after.keys().filter(|k| !known.contains(&id(k))).cloned().collect()
}

fn after_bytes(state: &Path, rel: &str) -> Vec<u8> {
    fs::read(state.join("delivery/queue").join(rel)).unwrap()
}

/// What this desk cannot read — a damaged holds file, an item record a newer desk wrote — is
/// kept aside and named, and the daemon starts anyway: every queue the holds file may have held
/// is held, and the item is listed as set aside with the way back.
#[test]
fn records_this_desk_cannot_read_are_set_aside_and_named_and_the_daemon_starts() {
    let home = Home::new();
    copy_of_fixtures(home.path(), false);
    let state = home.path().join("state");
    fs::write(state.join("delivery/paused.json"), b"{\"version\": 1, \"sessions\": ").unwrap();
    let (rel, bytes) = item_files(&state).into_iter().find(|(p, _)| p.ends_with(".queued")).unwrap();
    let newer = String::from_utf8(bytes).unwrap().replacen("\"version\": 1", "\"version\": 7", 1);
    fs::write(state.join("delivery/queue").join(&rel), &newer).unwrap();
    home.serve();
    let queue = eventually("the daemon to answer", || {
        let out = home.desk(&["queue", "--json"]);
        if out.status.success() {
            Ok(String::from_utf8_lossy(&out.stdout).into_owned())
        } else {
            Err(format!("{out:?}"))
        }
    });
    let aside = state.join("delivery/paused.json.bad");
    assert!(aside.exists(), "the holds file is kept");
    assert!(queue.contains(&format!("{}", aside.display())), "every queue is held naming it: {queue}");
    let v: serde_json::Value = serde_json::from_str(&queue).unwrap();
    assert!(v["data"].as_array().unwrap().iter().any(|q| q["session"] == "agent" && q["paused"].is_string()), "{v:#}");
    let text = home.ok(&["queue"]);
    assert!(text.contains(".queued.bad") && text.contains("written by a newer desk"), "named with why: {text}");
    assert_eq!(fs::read_to_string(state.join("delivery/queue").join(format!("{rel}.bad"))).unwrap(), newer);
    let e = desk_common::format::decode::<serde_json::Value>(&desk_daemon::store::ITEM_FORMAT, newer.as_bytes());
    assert!(matches!(e, Err(FormatError::Newer { found: 7, .. })), "{e:?}");
    // desk doctor names both, with how to acknowledge them.
    let doctor = home.json(&["doctor", "--json"]);
    let check =
        doctor["data"]["checks"].as_array().unwrap().iter().find(|c| c["check"] == "set-aside").unwrap().clone();
    assert_eq!(check["status"], "warning", "{check:#}");
    let detail = check["detail"].as_str().unwrap();
    assert!(detail.contains("paused.json.bad") && detail.contains(&format!("{rel}.bad")), "{check:#}");
    assert!(check["fix"].as_str().unwrap().contains("remove it to acknowledge it"), "{check:#}");
}

/// Regenerates `tests/data/formats/v1/` from a real run of this build. Run it only when a format
/// of version 1 is recorded anew (never to paper over a change of a format: a change needs a
/// new version and its own directory):
///
/// `DESK_WRITE_FORMAT_FIXTURES=1 cargo test --test it formats::write_v1_fixtures -- --ignored`
/// Run by hand, and then [`write_v1_fleet_fixtures`]: this one starts the directory afresh.
#[test]
#[ignore = "writes tests/data/formats/v1; run by hand"]
fn write_v1_fixtures() {
    assert!(std::env::var_os("DESK_WRITE_FORMAT_FIXTURES").is_some(), "set DESK_WRITE_FORMAT_FIXTURES=1");
    let home = Home::new();
    fs::create_dir_all(home.path().join("config")).unwrap();
    fs::write(home.path().join("config/config.toml"), CONFIG).unwrap();
    home.serve();
    // By name on PATH and from `/`, so that the records name no directory of this machine.
    let bin = Path::new(env!("CARGO_BIN_EXE_desk-demo-agent")).parent().unwrap().display().to_string();
    let path = format!("{bin}:{}", std::env::var("PATH").unwrap_or_default());
    let started = |args: &[&str]| {
        let out = home.cmd().env("PATH", &path).args(args).output().unwrap();
        assert!(out.status.success(), "desk {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    };
    // A turn that outlasts the recording: the second prompt, sent mid-turn, is delivered into
    // the agent's own queue, its prompt hook owed until the agent takes it.
    started(&["new", "agent", "--provider", "demo", "--cwd", "/", "--", "desk-demo-agent", "--work-ms", "600000"]);
    home.wait_ready("agent");
    let first = home.send("agent", "a first prompt");
    assert_eq!(home.settled(&first)["state"], "delivered");
    let second = home.send("agent", "a prompt sent mid-turn");
    let delivered = home.settled(&second);
    assert_eq!(delivered["state"], "delivered", "{delivered:#}");
    assert!(delivered["hook_owed"].is_string(), "{delivered:#}");
    home.ok(&["pause", "agent", "--reason", "held for the fixture"]);
    home.send("agent", "a prompt held by the pause");
    home.ok(&["channel", "new", "team", "--goal", "record every format"]);
    home.ok(&["channel", "add", "team", "agent"]);
    home.ok(&["channel", "add", "team", "alice", "--human"]);
    let root = home.ok(&["channel", "post", "team", "hello @agent"]).trim().to_string();
    home.ok(&["channel", "post", "team", "--thread", &root, "a reply in the thread"]);
    home.ok(&["channel", "read", "team"]);
    let state = home.path().join("state");
    eventually("the channel's messages to be ingested", || {
        let ledger = fs::read(state.join("channels/team/ingested.log")).unwrap_or_default();
        let cursor = fs::read_to_string(state.join("channels/team/ingest.json")).unwrap_or_default();
        if ledger.len() >= 3 * 27 && cursor.contains("thread-") { Ok(()) } else { Err(cursor) }
    });
    started(&["new", "done", "--cwd", "/", "--", "sh", "-c", "echo bye; exit 3"]);
    home.wait_exit("done");
    home.ok(&["serve", "--stop"]);
    home.send("agent", "written while the daemon was down");
    let out = fixtures();
    let _ = fs::remove_dir_all(&out);
    for part in ["state", "config"] {
        copy_tree(&home.path().join(part), &out.join(part));
    }
    fs::create_dir_all(out.join("run")).unwrap();
    for entry in fs::read_dir(home.run_dir()).unwrap().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") || name.ends_with(".exit") {
            fs::copy(entry.path(), out.join("run").join(&name)).unwrap();
        }
    }
    // Not formats: locks, logs and what a process keeps only while it runs. And no directory of
    // this machine: the demo provider's hook command names the `desk` that started it, which
    // becomes `/usr/local/bin/desk` (the one edit made to the recording).
    let build = Path::new(DESK).parent().unwrap().display().to_string();
    for path in walk(&out) {
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if !path.is_file() {
            continue;
        }
        if name.ends_with(".lock") || name.ends_with(".log") && name != "ingested.log" {
            fs::remove_file(&path).unwrap();
            continue;
        }
        let text = fs::read_to_string(&path).unwrap();
        if text.contains(&build) {
            fs::write(&path, text.replace(&build, "/usr/local/bin")).unwrap();
        }
    }
}

/// The config file of the recording: every key of config version 1 (docs/cli.md, "Config file").
const CONFIG: &str = r#"[attach]
detach_key = "^]"

[new]
size = "100x30"

[provider.claude]
args = ["--model", "opus"]

[notify]
command = 'true'
"#;

/// The fleet's records (docs/fleet.md) in the recording: a session `desk up` started under a
/// restart policy, whose agent reported its conversation, then stopped by the operator.
const FLEET_SESSION: &str = "crew";

#[test]
fn launch_records_and_stop_marks_of_v1_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), false);
    let paths = paths_at(tmp.path());
    let name = SessionName::parse(FLEET_SESSION).unwrap();
    let launch = desk_common::launch_record::read(&paths, &name).unwrap().expect("a launch record");
    assert_eq!((launch.generation, launch.provider.as_str()), (1, "demo"), "{launch:?}");
    assert!(launch.command[0].ends_with("desk-demo-agent"), "{launch:?}");
    assert_eq!(desk_common::launch_record::stopped_by(&paths, &name, 1).as_deref(), Some("desk kill"));
}

#[test]
fn conversations_of_v1_are_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), false);
    let paths = paths_at(tmp.path());
    let conversations = desk::launch::conversation::read(&paths, &SessionName::parse(FLEET_SESSION).unwrap()).unwrap();
    let capture = conversations.latest().expect("a capture naming a conversation");
    assert_eq!(capture.generation, 1, "{capture:?}");
}

#[test]
fn the_supervisor_state_of_v1_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), false);
    let state = desk_daemon::supervisor::read_state(&paths_at(tmp.path()));
    let crew = &state.sessions[FLEET_SESSION];
    let text = serde_json::to_string(crew).unwrap();
    assert!(text.contains("stopped"), "held as the operator's stop: {text}");
}

#[test]
fn the_manifest_registry_of_v1_and_v2_is_read() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), false);
    let paths = paths_at(tmp.path());
    assert_eq!(desk::manifest::registered(&paths), [PathBuf::from("/srv/fleet/desk.toml")]);
    // Version 1 was a bare array; it is read, and `desk up` writes version 2.
    let file = tmp.path().join("state/fleet/manifests.json");
    fs::write(&file, r#"["/a/desk.toml", "/b/desk.toml"]"#).unwrap();
    assert_eq!(desk::manifest::registered(&paths), [PathBuf::from("/a/desk.toml"), PathBuf::from("/b/desk.toml")]);
    desk::manifest::register(&paths, Path::new("/c/desk.toml")).unwrap();
    let written: serde_json::Value = serde_json::from_slice(&fs::read(&file).unwrap()).unwrap();
    assert_eq!(written["version"], 2, "{written:#}");
    assert_eq!(desk::manifest::registered(&paths).len(), 3);
}

#[test]
fn fleet_records_this_desk_cannot_read_are_set_aside_by_their_owner_and_named() {
    let tmp = tempfile::tempdir().unwrap();
    copy_of_fixtures(tmp.path(), false);
    let paths = paths_at(tmp.path());
    let state = tmp.path().join("state");
    let newer = r#"{"version": 99, "anything": true}"#;
    // The registry: `desk up` registering a manifest sets the unreadable file aside first.
    fs::write(state.join("fleet/manifests.json"), newer).unwrap();
    desk::manifest::register(&paths, Path::new("/c/desk.toml")).unwrap();
    assert_eq!(fs::read_to_string(state.join("fleet/manifests.json.bad")).unwrap(), newer);
    assert_eq!(desk::manifest::registered(&paths), [PathBuf::from("/c/desk.toml")]);
    // A stop mark: read as unknown, kept aside.
    let name = SessionName::parse(FLEET_SESSION).unwrap();
    let stop = state.join("sessions").join(FLEET_SESSION).join("stopped.json");
    fs::write(&stop, newer).unwrap();
    assert_eq!(desk_common::launch_record::stopped_by(&paths, &name, 1), None);
    assert_eq!(fs::read_to_string(stop.with_extension("json.bad")).unwrap(), newer);
    // A launch record of a newer desk is refused in words, never misread.
    fs::write(state.join("sessions").join(FLEET_SESSION).join("launch.json"), newer).unwrap();
    let err = format!("{:#}", desk_common::launch_record::read(&paths, &name).unwrap_err());
    assert!(err.contains("format version 99, written by a newer desk"), "{err}");
}

/// Adds the fleet's records to the recording (after [`write_v1_fixtures`], which starts the
/// directory afresh): `desk up` of a demo agent under `restart = "always"`, a prompt it took
/// (so its hook reported its conversation), `desk kill` (the operator's stop, which the
/// supervisor holds).
#[test]
#[ignore = "writes the fleet's records into tests/data/formats/v1; run by hand"]
fn write_v1_fleet_fixtures() {
    assert!(std::env::var_os("DESK_WRITE_FORMAT_FIXTURES").is_some(), "set DESK_WRITE_FORMAT_FIXTURES=1");
    let fleet = crate::up::Fleet::new("");
    fleet.write(&crate::up::demo_session(fleet.path(), FLEET_SESSION, "restart = \"always\""));
    fleet.home.serve();
    fleet.ok(&["up"]);
    fleet.home.wait_ready(FLEET_SESSION);
    let id = fleet.home.send(FLEET_SESSION, "a prompt for the fleet's fixture");
    assert_eq!(fleet.home.settled(&id)["state"], "delivered");
    let state = fleet.home.path().join("state");
    let session = state.join("sessions").join(FLEET_SESSION);
    eventually("the agent's conversation to be recorded", || {
        let text = fs::read_to_string(session.join("conversations.json")).unwrap_or_default();
        if text.contains("\"conversation\": \"") { Ok(()) } else { Err(text) }
    });
    fleet.home.ok(&["kill", FLEET_SESSION]);
    eventually("the supervisor to hold the operator's stop", || {
        let text = fs::read_to_string(state.join("fleet/supervisor.json")).unwrap_or_default();
        if text.contains("\"stopped\"") { Ok(()) } else { Err(text) }
    });
    fleet.home.ok(&["serve", "--stop"]);
    // No directory of this machine: the fleet's directory becomes /srv/fleet, the demo agent's
    // /usr/local/bin, the inherited HOME /home/desk (the edits made to this recording).
    let fleet_dir = fleet.path().canonicalize().unwrap().display().to_string();
    let bin = Path::new(crate::up::DEMO).parent().unwrap().display().to_string();
    let out = fixtures().join("state");
    let files = [
        ("fleet/supervisor.json", state.join("fleet/supervisor.json")),
        ("fleet/manifests.json", state.join("fleet/manifests.json")),
        ("sessions/crew/launch.json", session.join("launch.json")),
        ("sessions/crew/stopped.json", session.join("stopped.json")),
        ("sessions/crew/conversations.json", session.join("conversations.json")),
    ];
    for (rel, from) in files {
        let text = fs::read_to_string(&from).unwrap_or_else(|e| panic!("{}: {e}", from.display()));
        let text = text
            .replace(&fleet_dir, "/srv/fleet")
            .replace(&fleet.path().display().to_string(), "/srv/fleet")
            .replace(&bin, "/usr/local/bin")
            .replace(
                &format!("\"HOME\": \"{}\"", std::env::var("HOME").unwrap_or_default()),
                "\"HOME\": \"/home/desk\"",
            );
        let to = out.join(rel);
        fs::create_dir_all(to.parent().unwrap()).unwrap();
        fs::write(&to, text).unwrap();
    }
}
