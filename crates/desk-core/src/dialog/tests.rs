//! Dialogs read off the real agents' recorded screens (`tests/data/agents/`), and the keys that
//! answer them against what `scripts/e2e-keys.sh` saw answer them.

use super::*;
use crate::provider::Provider;
use crate::state::RuleSet;

fn spec(provider: Provider) -> DialogSpec {
    RuleSet::builtin(provider).dialog.unwrap_or_else(|| panic!("{provider} has dialog rules"))
}

fn recording(agent: &str, scenario: &str, kind: &str) -> String {
    let path = format!("{}/../../tests/data/agents/{agent}/{scenario}.{kind}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The rows of screenshot `label` in `<agent>/<scenario>.screens.txt`.
fn screen(agent: &str, scenario: &str, label: &str) -> Vec<String> {
    let text = recording(agent, scenario, "screens.txt");
    let mut rows = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("===== ") {
            if inside {
                break;
            }
            inside = head.split_whitespace().next() == Some(label);
            continue;
        }
        if inside {
            rows.push(line.to_string());
        }
    }
    assert!(!rows.is_empty(), "no screenshot {label} in {agent}/{scenario}");
    rows
}

/// desk's own screen model fed the recording's output up to screenshot `label`.
fn model_at(agent: &str, scenario: &str, label: &str) -> desk_term::screen::Screen {
    let shots = recording(agent, scenario, "screens.txt");
    let at: f64 = shots
        .lines()
        .filter_map(|l| l.strip_prefix("===== "))
        .find(|l| l.split_whitespace().next() == Some(label))
        .and_then(|l| l.split_whitespace().find_map(|w| w.strip_prefix("t=")?.parse().ok()))
        .expect("the screenshot's time");
    let mut screen = desk_term::screen::Screen::new(120, 40);
    for line in recording(agent, scenario, "cast").lines().skip(1) {
        let Ok(event) = serde_json::from_str::<serde_json::Value>(line) else { continue };
        if event[0].as_f64().is_some_and(|t| t > at) {
            break;
        }
        if event[1] == "o" {
            screen.process(event[2].as_str().unwrap_or("").as_bytes());
        }
    }
    screen
}

fn labels(d: &Dialog) -> Vec<&str> {
    d.options.iter().map(|o| o.label.as_str()).collect()
}

#[test]
fn claude_codes_tool_approval_reads_as_the_command_it_asks_to_run() {
    let claude = spec(Provider::Claude);
    let d = claude.read(&screen("claude", "approval", "dialog-bash"), None, "s/1").expect("a dialog");
    assert_eq!(d.kind, Kind::Approval);
    assert_eq!((d.tool.as_deref(), d.args.as_deref()), (Some("Bash"), Some("touch desk-approved.txt")));
    assert_eq!(d.asks(), "Bash(touch desk-approved.txt)");
    assert_eq!(d.question, "Do you want to proceed?");
    assert_eq!(labels(&d), ["Yes", "Yes, and always allow access to work/ from this project", "No"]);
    assert_eq!(d.highlighted(), Some(1));
    assert_eq!(d.layout, Layout::Numbered);
    assert!(d.text.contains(&"Create a marker file".to_string()), "{:?}", d.text);
    // A digit answers at once (docs/agents-observed.md §8.1); "No" is option 3.
    assert_eq!(claude.keys(&d, &Choice::Option(1)).unwrap(), ["1"]);
    assert_eq!(claude.keys(&d, &Choice::Deny).unwrap(), ["3"]);
    assert_eq!(claude.keys(&d, &Choice::Option(4)), Err(KeysError::NoSuchOption(4)));
    let w = claude.read(&screen("claude", "approval", "dialog-write"), None, "s/1").expect("a dialog");
    assert_eq!(w.asks(), "Write(desk-note.txt)");
    assert_eq!(w.question, "Do you want to create desk-note.txt?");
    assert!(w.text.iter().any(|r| r.contains("written by the fake model")), "the file's text is part of it");
    assert_ne!(w.fingerprint, d.fingerprint);
    for gone in ["after-approve-bash", "idle-after-bash", "end"] {
        assert_eq!(claude.read(&screen("claude", "approval", gone), None, "s/1"), None, "{gone}");
    }
}

#[test]
fn claude_codes_question_and_trust_dialogs_read_with_all_their_options() {
    let claude = spec(Provider::Claude);
    let q = claude.read(&screen("claude", "question", "question"), None, "s/1").expect("a question");
    assert_eq!(q.kind, Kind::Question);
    assert_eq!(q.question, "Which colour should the button be?");
    assert_eq!(labels(&q), ["Blue", "Green", "Type something.", "Chat about this"]);
    assert_eq!((q.tool.as_deref(), q.asks()), (None, "Which colour should the button be?".to_string()));
    assert_eq!(claude.keys(&q, &Choice::Deny).unwrap(), ["Esc"], "no No option: cancel");
    let t = claude.read(&screen("claude", "trust-dialog", "dialog"), None, "s/1").expect("the trust dialog");
    assert_eq!(labels(&t), ["Yes, I trust this folder", "No, exit"]);
    assert_eq!(t.title, "Accessing workspace:");
}

#[test]
fn a_moved_highlight_is_the_same_dialog_and_the_same_fingerprint() {
    for (agent, provider) in
        [("claude", Provider::Claude), ("codex", Provider::Codex), ("opencode", Provider::OpenCode)]
    {
        let rules = spec(provider);
        let before = rules.read(&screen(agent, "dismiss-no", "dialog"), None, "s/1").expect("a dialog");
        let moved = rules.read(&screen(agent, "dismiss-no", "no-selected"), None, "s/1").expect("still a dialog");
        assert_eq!(before.fingerprint, moved.fingerprint, "{agent}");
        // The same command asked in another recording is the same dialog.
        let again = rules.read(&screen(agent, "approval", "dialog-bash"), None, "s/1").expect("a dialog");
        assert_eq!(again.asks(), before.asks(), "{agent}");
        if agent != "opencode" {
            assert_eq!(moved.highlighted(), Some(3), "{agent}: the highlight is on No");
        }
    }
}

#[test]
fn codexs_command_approval_reads_and_is_answered_with_arrows() {
    let codex = spec(Provider::Codex);
    let d = codex.read(&screen("codex", "approval", "dialog-bash"), None, "s/1").expect("a dialog");
    assert_eq!(d.asks(), "shell(touch desk-approved.txt)");
    assert_eq!(d.question, "Would you like to run the following command?");
    assert_eq!(d.options.len(), 3);
    assert_eq!(d.options[0].label, "Yes, proceed (y)");
    assert_eq!(d.options[2].label, "No, and tell Codex what to do differently (esc)");
    assert!(d.text.iter().any(|r| r == "Reason: May I create a marker file for the test?"));
    assert_eq!(codex.keys(&d, &Choice::Option(1)).unwrap(), ["Enter"]);
    // What e2e-keys saw refuse (docs/agents-observed.md §8.1).
    assert_eq!(codex.keys(&d, &Choice::Deny).unwrap(), ["Down", "Down", "Enter"]);
    let moved = codex.read(&screen("codex", "dismiss-no", "no-selected"), None, "s/1").expect("a dialog");
    assert_eq!(codex.keys(&moved, &Choice::Option(1)).unwrap(), ["Up", "Up", "Enter"], "from where the highlight is");
    assert_eq!(codex.read(&screen("codex", "approval", "idle-after-bash"), None, "s/1"), None);
}

#[test]
fn opencodes_permission_row_is_read_and_its_highlight_told_by_colour() {
    let opencode = spec(Provider::OpenCode);
    let rows = screen("opencode", "approval", "dialog-bash");
    let d = opencode.read(&rows, None, "s/1").expect("a dialog");
    assert_eq!(d.asks(), "Shell($ touch desk-approved.txt)".replace("$ ", ""));
    assert_eq!(d.layout, Layout::Row);
    assert_eq!(labels(&d), ["Allow once", "Allow always", "Reject"]);
    assert_eq!(d.highlighted(), None, "text alone does not show it");
    assert_eq!(opencode.keys(&d, &Choice::Deny), Err(KeysError::HighlightUnknown(3)));
    let model = model_at("opencode", "approval", "dialog-bash");
    let seen = opencode.read(&model.text_rows(), Some(&model), "s/1").expect("a dialog");
    assert_eq!(seen.fingerprint, d.fingerprint, "the screen model and the screenshot read alike");
    assert_eq!(seen.highlighted(), Some(1));
    // What e2e-keys saw refuse (docs/agents-observed.md §8.1).
    assert_eq!(opencode.keys(&seen, &Choice::Deny).unwrap(), ["Right", "Right", "Enter"]);
    assert_eq!(opencode.keys(&seen, &Choice::Option(1)).unwrap(), ["Enter"]);
    let moved = model_at("opencode", "dismiss-no", "no-selected");
    let moved = opencode.read(&moved.text_rows(), Some(&moved), "s/1").expect("a dialog");
    assert_eq!(moved.highlighted(), Some(3));
    let edit = opencode.read(&screen("opencode", "approval", "dialog-write"), None, "s/1").expect("a dialog");
    assert_eq!(edit.asks(), "Edit(desk-note.txt)");
    let q = opencode.read(&screen("opencode", "question", "question"), None, "s/1").expect("a question");
    assert_eq!(q.kind, Kind::Question);
    assert_eq!(labels(&q), ["Blue", "Green", "Type your own answer"]);
    assert_eq!(opencode.read(&screen("opencode", "approval", "idle-after-bash"), None, "s/1"), None);
}

#[test]
fn the_demo_agents_dialog_reads_from_its_box() {
    let demo = spec(Provider::Demo);
    let rows: Vec<String> = [
        "> approve-me please",
        "╭────────────────────────────────────────╮",
        "│ Bash command                           │",
        "│   demo-tool --prompt 3                 │",
        "│ Do you want to run this command?       │",
        "│ ❯ 1. Yes                               │",
        "│   2. No                                │",
        "╰────────────────────────────────────────╯",
        "  waiting for approval · Enter to confirm · Esc to cancel",
    ]
    .map(String::from)
    .to_vec();
    let d = demo.read(&rows, None, "s/1").expect("a dialog");
    assert_eq!(d.asks(), "Bash(demo-tool --prompt 3)");
    assert_eq!(labels(&d), ["Yes", "No"]);
    assert_eq!(demo.keys(&d, &Choice::Deny).unwrap(), ["Down", "Enter"]);
    assert_eq!(demo.keys(&d, &Choice::Option(1)).unwrap(), ["Enter"]);
    let input_box: Vec<String> = ["╭──────╮", "│ > hi │", "╰──────╯"].map(String::from).to_vec();
    assert_eq!(demo.read(&input_box, None, "s/1"), None, "an input box is no dialog");
}

#[test]
fn the_fingerprint_is_the_text_not_its_wrapping_nor_the_highlight() {
    let marks = vec!["❯".to_string()];
    let wide = ["Bash command", "rm -rf build dist", "❯ 1. Yes", "2. No"].map(String::from);
    let narrow = ["Bash command", "rm -rf build", "dist", "1. Yes", "❯ 2. No"].map(String::from);
    assert_eq!(fingerprint("s/1", &wide, &marks), fingerprint("s/1", &narrow, &marks));
    let other = ["Bash command", "rm -rf build dist /", "1. Yes", "2. No"].map(String::from);
    assert_ne!(fingerprint("s/1", &wide, &marks), fingerprint("s/1", &other, &marks));
    assert_eq!(fingerprint("s/1", &wide, &marks).len(), 32);
    assert_ne!(fingerprint("s/1", &wide, &marks), fingerprint("t/1", &wide, &marks), "another session's");
    assert_ne!(fingerprint("s/1", &wide, &marks), fingerprint("s/2", &wide, &marks), "a later run's");
}

#[test]
fn options_are_found_by_number_or_by_the_start_of_their_label() {
    let d = spec(Provider::Codex).read(&screen("codex", "approval", "dialog-bash"), None, "s/1").unwrap();
    assert_eq!(d.find_option("2").unwrap().number, 2);
    assert_eq!(d.find_option("no").unwrap().number, 3);
    assert!(d.find_option("yes").unwrap_err().contains("more than one"));
    assert!(d.find_option("7").unwrap_err().contains("no option 7"));
    assert!(d.find_option("maybe").unwrap_err().contains("1. Yes, proceed (y)"));
}

#[test]
fn a_changed_dialog_says_what_changed() {
    let claude = spec(Provider::Claude);
    let bash = claude.read(&screen("claude", "approval", "dialog-bash"), None, "s/1").unwrap();
    let write = claude.read(&screen("claude", "approval", "dialog-write"), None, "s/1").unwrap();
    assert_eq!(bash.changes_to(&write), "it asked Bash(touch desk-approved.txt), and now asks Write(desk-note.txt)");
    assert_eq!(bash.changes_to(&bash), "nothing");
}

#[test]
fn a_bad_dialog_table_is_refused_naming_what_is_wrong() {
    let both = "provider = \"x\"\n[dialog]\nend = \"a\"\ntop = \"b\"\nframe = \"c\"\n";
    let err = format!("{:#}", RuleSet::parse(both, "x.toml").unwrap_err());
    assert!(err.contains("exactly one of `top` and `frame`"), "{err}");
    let key = "provider = \"x\"\n[dialog]\nend = \"a\"\ntop = \"b\"\n[dialog.keys]\nconfirm = \"Entr\"\n";
    let err = format!("{:#}", RuleSet::parse(key, "x.toml").unwrap_err());
    assert!(err.contains("\"Entr\""), "{err}");
    // A table of the operator's without [dialog] keeps the built-in one's.
    let plain = "provider = \"claude\"\n";
    assert!(RuleSet::parse(plain, "mine.toml").unwrap().dialog.is_some());
    assert!(RuleSet::builtin(Provider::Shell).dialog.is_none());
}

#[test]
fn a_prompt_that_quotes_a_dialog_is_no_dialog() {
    for (agent, provider) in
        [("claude", Provider::Claude), ("codex", Provider::Codex), ("opencode", Provider::OpenCode)]
    {
        let rules = spec(provider);
        let shots = recording(agent, "quoted-dialog", "screens.txt");
        let labels: Vec<&str> = shots
            .lines()
            .filter_map(|l| l.strip_prefix("===== "))
            .filter_map(|l| l.split_whitespace().next())
            .collect();
        assert!(labels.len() > 5, "{agent}: {labels:?}");
        for label in labels {
            let rows = screen(agent, "quoted-dialog", label);
            assert_eq!(rules.read(&rows, None, "s/1"), None, "{agent} {label}: {}", rows.join("\n"));
        }
    }
}
