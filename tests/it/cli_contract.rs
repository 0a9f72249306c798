//! docs/cli.md is the command line's contract, and these tests hold the code to it: every
//! subcommand clap knows (and each of its flags) is documented there, and every command's
//! `--json` answer, produced against real sessions and a real daemon, has exactly the fields the
//! document lists — no undocumented field, and no documented field that never appears (unless
//! the document marks it "(optional)").

use crate::support::{Home, eventually};
use std::collections::{BTreeMap, BTreeSet};

/// docs/cli.md, read at test time so that an edit to the document is checked without a rebuild
/// of the binary.
fn doc() -> String {
    std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/docs/cli.md")).expect("docs/cli.md")
}

/// One command's section of docs/cli.md: its text and the JSON fields it lists.
#[derive(Debug, Default)]
struct Section {
    text: String,
    /// Field path → whether it must appear in some answer (not marked "(optional)").
    fields: BTreeMap<String, bool>,
}

/// The sections of docs/cli.md by command name: each starts at a `### desk NAME` heading.
/// A field is a list item whose first code span starts with `data`: "- `data[].name` — …". A
/// shape shared by several answers (`### Shape: NAME`) lists fields relative to where it is used
/// ("- `.provider` — …"); a field line that links to it (`](#shape-NAME)`) stands for all of
/// them under its path.
fn sections() -> BTreeMap<String, Section> {
    let mut out: BTreeMap<String, Section> = BTreeMap::new();
    // (section, path, shape, required) for each field line that stands for a shape.
    let mut uses: Vec<(String, String, String, bool)> = Vec::new();
    let mut current: Option<String> = None;
    for line in doc().lines() {
        if let Some(rest) = line.strip_prefix("### `desk ") {
            current = Some(rest.split(['`', ' ']).next().unwrap_or_default().to_string());
        } else if let Some(rest) = line.strip_prefix("### Shape: ") {
            current = Some(format!("shape-{}", rest.trim()));
        } else if line.starts_with("## ") || line.starts_with("### ") {
            current = None;
        }
        let Some(name) = &current else { continue };
        let section = out.entry(name.clone()).or_default();
        section.text.push_str(line);
        section.text.push('\n');
        let Some(path) = line.strip_prefix("- `").and_then(|rest| rest.split('`').next()) else { continue };
        if !(path.starts_with("data") || path.starts_with('.')) {
            continue;
        }
        let required = !line.contains("(optional");
        section.fields.insert(path.to_string(), required);
        if let Some(at) = line.find("](#shape-") {
            let shape: String = line[at + 3..].chars().take_while(|c| *c != ')').collect();
            uses.push((name.clone(), path.to_string(), shape, required));
        }
    }
    // A shape may use another (a session has a state): expand until nothing changes.
    loop {
        let mut changed = false;
        for (name, prefix, shape, required) in &uses {
            let fields = out
                .get(shape)
                .unwrap_or_else(|| panic!("{name} refers to #{shape}, not in docs/cli.md"))
                .fields
                .clone();
            let section = out.get_mut(name).unwrap();
            for (rel, rel_required) in fields {
                if let std::collections::btree_map::Entry::Vacant(e) = section.fields.entry(format!("{prefix}{rel}")) {
                    e.insert(*required && rel_required);
                    changed = true;
                }
            }
        }
        if !changed {
            return out;
        }
    }
}

/// Every field path of `value` below `prefix`: `.key` into objects, `[]` into arrays.
fn paths(value: &serde_json::Value, prefix: &str, out: &mut BTreeSet<String>) {
    match value {
        serde_json::Value::Object(map) => {
            for (key, v) in map {
                let path = format!("{prefix}.{key}");
                out.insert(path.clone());
                paths(v, &path, out);
            }
        }
        serde_json::Value::Array(items) => {
            let path = format!("{prefix}[]");
            if !items.is_empty() {
                out.insert(path.clone());
            }
            for v in items {
                paths(v, &path, out);
            }
        }
        _ => {}
    }
}

/// What one command printed across the scenario: every field path seen, and its kinds.
#[derive(Default)]
struct Seen {
    paths: BTreeMap<String, BTreeSet<String>>,
    kinds: BTreeMap<String, BTreeSet<String>>,
}

impl Seen {
    /// Run `desk ARGS` (a `--json` command that must succeed) and record its answer.
    fn run(&mut self, home: &Home, args: &[&str]) -> serde_json::Value {
        let v = home.json(args);
        let command = args[0].to_string();
        let keys: BTreeSet<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
        assert!(keys.is_subset(&BTreeSet::from(["v", "kind", "data", "notes"])), "desk {args:?}: {v:#}");
        self.kinds.entry(command.clone()).or_default().insert(v["kind"].as_str().unwrap().to_string());
        let mut found = BTreeSet::new();
        found.insert("data".to_string());
        paths(&v["data"], "data", &mut found);
        self.paths.entry(command).or_default().extend(found);
        v
    }
}

#[test]
fn every_subcommand_and_flag_clap_knows_is_in_docs_cli_md() {
    use clap::CommandFactory;
    let sections = sections();
    let cli = desk::cli::Cli::command();
    let mut missing = Vec::new();
    for sub in cli.get_subcommands().filter(|s| !s.is_hide_set()) {
        let name = sub.get_name();
        let Some(section) = sections.get(name) else {
            missing.push(format!("desk {name}: no `### \\`desk {name}\\`` section"));
            continue;
        };
        // A command with subcommands (`desk channel new`, …) documents theirs in its section.
        let nested = sub.get_subcommands().filter(|s| !s.is_hide_set());
        for arg in sub.get_arguments().chain(nested.flat_map(|s| s.get_arguments())) {
            if let Some(long) = arg.get_long()
                && !section.text.contains(&format!("`--{long}"))
                && !section.text.contains(&format!(" --{long}"))
            {
                missing.push(format!("desk {name}: flag --{long} not documented"));
            }
        }
    }
    assert!(missing.is_empty(), "docs/cli.md is missing:\n{}", missing.join("\n"));
}

#[test]
fn every_json_answer_has_exactly_the_documented_fields() {
    let home = Home::new();
    let mut seen = Seen::default();
    let demo = env!("CARGO_BIN_EXE_desk-demo-agent");
    // Enters within 6.5 s of a paste are newlines to this agent: a prompt ends submit-stuck.
    seen.run(&home, &["new", "agent", "--json", "--provider", "demo", "--", demo, "--paste-burst-ms", "6500"]);
    seen.run(&home, &["new", "done", "--json", "--", "sh", "-c", "exit 3"]);
    seen.run(&home, &["new", "asker", "--json", "--provider", "demo", "--", demo]);
    home.wait_exit("done");

    // The daemon is down: send leaves the prompt in the intake, queue and stuck read the store.
    // (For a session that never runs, so it does not stand before the agent's items.)
    seen.run(&home, &["send", "ghost", "waits for the daemon", "--queue-for-later", "--json"]);
    seen.run(&home, &["queue", "--json"]);
    seen.run(&home, &["stuck", "--json"]);
    // Channels, with the daemon down too (their prompts wait in the channel files).
    seen.run(&home, &["channel", "new", "team", "--goal", "ship", "--json"]);
    seen.run(&home, &["channel", "add", "team", "ghost", "--queue-for-later", "--json"]);
    seen.run(&home, &["channel", "add", "team", "pat", "--human", "--json"]);
    let root = seen.run(&home, &["channel", "post", "team", "hello @pat", "--json"]);
    let root = root["data"]["id"].as_str().unwrap().to_string();
    seen.run(&home, &["channel", "post", "team", "a reply", "--thread", &root, "--json"]);
    seen.run(&home, &["channel", "read", "team", "--json"]);
    seen.run(&home, &["channel", "read", "team", "--thread", &root, "--json"]);
    seen.run(&home, &["channel", "ls", "--json"]);
    seen.run(&home, &["channel", "remove", "team", "pat", "--json"]);

    home.serve();
    eventually("agent ready", || {
        let s = home.session("agent").ok_or("no session")?;
        if s["state"]["ready"] == true { Ok(()) } else { Err(s["state"].to_string()) }
    });
    seen.run(&home, &["pause", "agent", "--reason", "review", "--json"]);
    let held = seen.run(&home, &["send", "agent", "held by the pause", "--json"]);
    let held = held["data"]["id"].as_str().unwrap().to_string();
    seen.run(&home, &["queue", "--json"]);
    seen.run(&home, &["item", &held, "--json"]);
    seen.run(&home, &["drop", &held, "--json"]);
    seen.run(&home, &["resume", "agent", "--json"]);
    let stuck = seen.run(&home, &["send", "agent", "force me through", "--json"]);
    let stuck = stuck["data"]["id"].as_str().unwrap().to_string();
    assert_eq!(home.settled(&stuck)["state"], "stuck");
    seen.run(&home, &["stuck", "--json"]);
    seen.run(&home, &["item", &stuck, "--json"]);
    seen.run(&home, &["force", &stuck, "--json"]);
    seen.run(&home, &["keys", "agent", "text:x", "--json"]);
    // A dialog, listed, denied; another, approved.
    home.wait_activity("asker", "idle");
    for answer in ["deny", "approve"] {
        home.ok(&["keys", "asker", "text:please approve-me", "Enter"]);
        home.wait_activity("asker", "blocked");
        // The state may say blocked a moment before the whole dialog is on the screen the
        // inbox reads; wait for it to be listed, then record the answer's shape.
        eventually("the dialog in the inbox", || {
            let out = home.desk(&["inbox", "--json"]);
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).map_err(|e| e.to_string())?;
            v["data"][0]["fingerprint"].as_str().map(|_| ()).ok_or_else(|| v.to_string())
        });
        let open = seen.run(&home, &["inbox", "--json"]);
        let fp = open["data"][0]["fingerprint"].as_str().expect("a dialog listed").to_string();
        seen.run(&home, &[answer, "asker", "--seen", &fp, "--json"]);
        home.wait_activity("asker", "idle");
    }

    seen.run(&home, &["ls", "--json"]);
    seen.run(&home, &["doctor", "--json"]);
    seen.run(&home, &["peek", "agent", "--json"]);
    seen.run(&home, &["explain", "agent", "--json"]);
    seen.run(&home, &["explain", "done", "--json"]);
    seen.run(&home, &["peek", "done", "--json"]);
    seen.run(&home, &["kill", "agent", "--json"]);
    seen.run(&home, &["send", "done", "held for a later done", "--json"]);
    seen.run(&home, &["rm", "done", "--json"]);

    // The fleet commands, on a manifest with a worktree of a scratch git repository, a channel
    // and an initial prompt.
    let dir = tempfile::tempdir().unwrap();
    let repo = dir.path().join("repo");
    std::fs::create_dir_all(&repo).unwrap();
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["-c", "user.name=t", "-c", "user.email=t@t.invalid", "commit", "-q", "--allow-empty", "-m", "one"],
    ] {
        let ok = std::process::Command::new("git").arg("-C").arg(&repo).args(args).status().unwrap().success();
        assert!(ok, "git {args:?}");
    }
    let manifest = dir.path().join("desk.toml");
    std::fs::write(
        &manifest,
        format!(
            "[session.crew-a]\nprovider = \"demo\"\ncommand = [\"{demo}\"]\ncwd = \"repo\"\nworktree = \"wt-a\"\nprompts = [{{ text = \"hello\" }}]\n\n[channel.crew]\nmembers = [\"crew-a\"]\n"
        ),
    )
    .unwrap();
    let manifest = manifest.to_str().unwrap();
    seen.run(&home, &["up", "--manifest", manifest, "--dry-run", "--json"]);
    seen.run(&home, &["up", "--manifest", manifest, "--json"]);
    seen.run(&home, &["up", "--manifest", manifest, "--json"]);
    seen.run(&home, &["restart", "crew-a", "--manifest", manifest, "--json"]);
    seen.run(&home, &["worktree", "ls", "--manifest", manifest, "--json"]);
    seen.run(&home, &["down", "--manifest", manifest, "--remove-worktree", "--json"]);
    seen.run(&home, &["ls", "--json"]);

    let sections = sections();
    let mut problems = Vec::new();
    for (command, found) in &seen.paths {
        let Some(section) = sections.get(command) else {
            problems.push(format!("desk {command}: no section in docs/cli.md"));
            continue;
        };
        for kind in &seen.kinds[command] {
            if !section.text.contains(&format!("`kind`: `{kind}`")) {
                problems.push(format!("desk {command}: kind {kind:?} is not documented as `kind`: `{kind}`"));
            }
        }
        for path in found.iter().filter(|p| *p != "data") {
            // An array's elements are documented with the array (`data.lines`), unless they are
            // objects with fields of their own.
            let element_of_documented =
                path.strip_suffix("[]").is_some_and(|a| a == "data" || section.fields.contains_key(a));
            if !section.fields.contains_key(path) && !element_of_documented {
                problems.push(format!("desk {command}: field `{path}` is printed but not documented"));
            }
        }
        for (path, required) in &section.fields {
            if *required && !found.contains(path) {
                problems.push(format!(
                    "desk {command}: documented field `{path}` never appeared (mark it \"(optional)\" if it may not)"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "docs/cli.md and the JSON answers disagree:\n{}", problems.join("\n"));
}

#[test]
fn every_error_code_is_documented_with_its_exit_code() {
    let doc = doc();
    for code in desk::cli::output::ErrorCode::ALL {
        let row = format!("| `{}` | {} |", code.as_str(), code.exit_code());
        assert!(doc.contains(&row), "docs/cli.md lacks the row {row:?}");
    }
}

/// The subcommands a user sees (hidden ones, `hook` and `man`, aside).
fn visible_subcommands() -> Vec<String> {
    use clap::CommandFactory;
    desk::cli::Cli::command().get_subcommands().filter(|s| !s.is_hide_set()).map(|s| s.get_name().to_string()).collect()
}

/// A home with two sessions, a channel and a queued item, and a shell's `PATH` that finds this
/// build's `desk` (what the completion scripts run while completing); returns the item's id.
fn completion_fleet(home: &Home) -> (String, String) {
    home.new_sh("demo-alpha", "exec sleep 1000");
    home.new_sh("demo-beta", "exec sleep 1000");
    home.ok(&["channel", "new", "release"]);
    let id = home.ok(&["send", "later", "a prompt", "--queue-for-later"]).trim().to_string();
    let bin = std::path::Path::new(crate::support::DESK).parent().unwrap().display().to_string();
    (id, format!("{bin}:{}", std::env::var("PATH").unwrap_or_default()))
}

#[test]
fn bash_completes_commands_and_the_live_fleets_sessions_channels_and_item_ids() {
    let home = Home::new();
    let (id, path) = completion_fleet(&home);
    let script = home.path().join("desk.bash");
    std::fs::write(&script, home.ok(&["completions", "bash"])).unwrap();
    // What bash offers after the words typed so far (the last one being completed).
    let complete = |words: &[&str]| -> Vec<String> {
        let quoted: Vec<String> = words.iter().map(|w| format!("'{w}'")).collect();
        let last = words.last().unwrap();
        let prev = words[words.len() - 2];
        let program = format!(
            "source '{}'; COMP_WORDS=({}); COMP_CWORD={}; _clap_complete_desk desk '{last}' '{prev}'; printf '%s\\n' \"${{COMPREPLY[@]}}\"",
            script.display(),
            quoted.join(" "),
            words.len() - 1
        );
        let out = std::process::Command::new("bash")
            .args(["--norc", "-c", &program])
            .env("PATH", &path)
            .env("DESK_HOME", home.path())
            .output()
            .expect("run bash");
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).lines().filter(|l| !l.is_empty()).map(String::from).collect()
    };
    let commands = complete(&["desk", ""]);
    for name in visible_subcommands() {
        assert!(commands.contains(&name), "desk <Tab> offers {name}: {commands:?}");
    }
    assert!(!commands.contains(&"hook".to_string()), "a hidden command is not completed: {commands:?}");
    assert_eq!(complete(&["desk", "at"]), vec!["attach"]);
    assert_eq!(complete(&["desk", "attach", "demo-"]), vec!["demo-alpha", "demo-beta"]);
    assert_eq!(complete(&["desk", "send", "demo-b"]), vec!["demo-beta"]);
    assert_eq!(complete(&["desk", "channel", "post", "r"]), vec!["release"]);
    // An item id from its start, or from its end (people copy the end of an id).
    assert_eq!(complete(&["desk", "item", &id[..6]]), vec![id.clone()]);
    assert_eq!(complete(&["desk", "drop", &id[id.len() - 5..].to_lowercase()]), vec![id.clone()]);
    assert!(complete(&["desk", "peek", "--h"]).contains(&"--history".to_string()));
    let out = home.desk(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2), "an unknown shell is a usage error");
}

#[test]
#[cfg_attr(desk_missing_fish, ignore = "needs fish")]
fn fish_completes_the_live_fleet_too() {
    crate::suite::require(crate::suite::Needs::Program("fish"));
    let home = Home::new();
    let (_, path) = completion_fleet(&home);
    let out = std::process::Command::new("fish")
        .args(["--no-config", "-c", "desk completions fish | source; complete -C 'desk attach demo-'"])
        .env("PATH", &path)
        .env("DESK_HOME", home.path())
        .env("HOME", home.path())
        .output()
        .expect("run fish");
    let text = String::from_utf8_lossy(&out.stdout);
    let offered: Vec<&str> = text.lines().map(|l| l.split('\t').next().unwrap_or("")).collect();
    assert_eq!(offered, vec!["demo-alpha", "demo-beta"], "{text}\n{}", String::from_utf8_lossy(&out.stderr));
}

#[test]
#[cfg_attr(desk_missing_zsh, ignore = "needs zsh")]
fn zsh_completes_the_live_fleet_too() {
    crate::suite::require(crate::suite::Needs::Program("zsh"));
    let home = Home::new();
    let (_, path) = completion_fleet(&home);
    // zsh completes on a terminal only: one driven through its own zpty, the script autoloaded
    // from fpath as the package and `--install` place it.
    let fpath = home.path().join("zfunc");
    std::fs::create_dir(&fpath).unwrap();
    std::fs::write(fpath.join("_desk"), home.ok(&["completions", "zsh"])).unwrap();
    let driver = format!(
        r#"zmodload zsh/zpty
zpty z zsh -f -i
zpty -w z "PS1='> '; fpath=({} \$fpath); autoload -Uz compinit; compinit -u -D"
zpty -w z $'desk attach demo-\t\t'
out=''
for i in {{1..200}}; do
  zpty -r -t z line && out+="$line"
  [[ $out == *demo-alpha* && $out == *demo-beta* ]] && break
  sleep 0.05
done
zpty -d z
print -r -- "$out"
"#,
        fpath.display()
    );
    let out = std::process::Command::new("zsh")
        .args(["-f", "-c", &driver])
        .env("PATH", &path)
        .env("DESK_HOME", home.path())
        .output()
        .expect("run zsh");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("demo-alpha") && text.contains("demo-beta"), "zsh offered:\n{text}");
}

#[test]
fn completions_install_writes_where_each_shell_looks_on_a_fresh_account() {
    let home = Home::new();
    let account = home.path().join("fresh");
    std::fs::create_dir(&account).unwrap();
    for (shell, file) in [
        ("bash", ".local/share/bash-completion/completions/desk"),
        ("fish", ".config/fish/completions/desk.fish"),
        ("zsh", ".local/share/zsh/site-functions/_desk"),
    ] {
        let out = home
            .cmd()
            .args(["completions", "--install"])
            .env("HOME", &account)
            .env("SHELL", format!("/usr/bin/{shell}"))
            .env_remove("XDG_DATA_HOME")
            .env_remove("XDG_CONFIG_HOME")
            .output()
            .unwrap();
        assert!(out.status.success(), "{shell}: {}", String::from_utf8_lossy(&out.stderr));
        let installed = std::fs::read_to_string(account.join(file)).unwrap_or_else(|e| panic!("{shell}: {file}: {e}"));
        assert_eq!(installed, home.ok(&["completions", shell]), "{shell}");
        assert!(String::from_utf8_lossy(&out.stdout).contains(&account.join(file).display().to_string()));
    }
}

#[test]
fn the_man_pages_name_every_command_and_render() {
    let home = Home::new();
    let dir = home.path().join("man");
    home.ok(&["man", "--out-dir", dir.to_str().unwrap()]);
    let page = std::fs::read_to_string(dir.join("desk.1")).expect("desk.1 written");
    assert!(page.starts_with(".ie") || page.contains(".TH desk 1"), "roff: {}", &page[..page.len().min(200)]);
    for name in visible_subcommands() {
        assert!(page.contains(&format!("desk\\-{name}(1)")), "desk.1 names {name}");
        assert!(dir.join(format!("desk-{name}.1")).exists(), "desk-{name}.1 written");
    }
    let new = std::fs::read_to_string(dir.join("desk-new.1")).unwrap();
    assert!(new.contains("\\-\\-provider"), "a command's page lists its flags");
    // Every page has what a manual page is read for, from docs/cli.md.
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let page = std::fs::read_to_string(&path).unwrap();
        for section in ["EXIT STATUS", "ENVIRONMENT", "FILES", "EXAMPLES", "SEE ALSO"] {
            assert!(
                page.contains(&format!(".SH \"{section}\"")) || page.contains(&format!(".SH {section}")),
                "{}: {section}",
                path.display()
            );
        }
    }
    let send = std::fs::read_to_string(dir.join("desk-send.1")).unwrap();
    assert!(send.contains("0 queued (or waiting in the intake for the daemon)"), "its own exit codes");
    assert!(send.contains("git diff | desk send reviewer \\-"), "its own examples");
    assert!(send.contains("\\fBdesk(1)\\fR") && send.contains("desk\\-serve(1)"), "see also");
    assert!(page.contains("DESK_HOME") && page.contains("_serve.sock") && page.contains("XDG_RUNTIME_DIR"));
    // Rendered by man(1) where it is installed: the page parses.
    if let Ok(out) = std::process::Command::new("man").arg("-l").arg(dir.join("desk.1")).env("MANWIDTH", "80").output()
        && out.status.success()
    {
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("SUBCOMMANDS") && text.contains("desk-attach(1)"), "{text}");
        assert!(text.contains("EXIT STATUS") && text.contains("FILES") && text.contains("ENVIRONMENT"), "{text}");
    }
}

#[test]
fn every_argument_and_flag_of_every_command_has_help_text() {
    use clap::CommandFactory;
    let cli = desk::cli::Cli::command();
    let mut missing = Vec::new();
    let nested = cli.get_subcommands().flat_map(|s| s.get_subcommands().map(move |n| (s, n)));
    let subs =
        cli.get_subcommands().map(|s| (s, s)).chain(nested).filter(|(s, n)| !s.is_hide_set() && !n.is_hide_set());
    for (_, sub) in subs {
        for arg in sub.get_arguments() {
            let builtin = matches!(arg.get_id().as_str(), "help" | "version");
            if !builtin && !arg.is_hide_set() && arg.get_help().is_none() {
                missing.push(format!("desk {} {}", sub.get_name(), arg.get_id()));
            }
        }
    }
    assert!(missing.is_empty(), "arguments without help text: {missing:?}");
}
