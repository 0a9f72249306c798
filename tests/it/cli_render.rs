//! What the commands that read the delivery store and the journal print, byte for byte, in
//! text and in JSON: each command computes a typed report and renders it once, and these
//! recordings hold the rendering to what desk has printed all along.
//!
//! The input is the format recording of `tests/data/formats/v1/` (a queue paused by the
//! operator, channel messages queued as prompts, a prompt still in the intake, delivered items
//! with their evidence, a session that exited), read with the daemon down, so that nothing
//! moves while a command reads it. `tests/data/cli/NAME.txt` holds a command's stdout, its
//! stderr and its exit code, as main printed them when they were recorded; times are printed in
//! UTC, and the only part that depends on when the test runs, an age (`8h`, `2d`), reads `AGE`.
//! `DESK_BLESS=1` writes the recordings anew from this build (then check the diff by eye).

use crate::formats::copy_of_fixtures;
use crate::support::Home;
use std::path::PathBuf;

/// Each recording's name and the command that prints it.
const CASES: &[(&str, &[&str])] = &[
    ("queue", &["queue"]),
    ("queue-json", &["queue", "--json"]),
    ("queue-agent", &["queue", "agent"]),
    ("queue-nosuch-json", &["queue", "nosuch", "--json"]),
    ("stuck", &["stuck"]),
    ("stuck-json", &["stuck", "--json"]),
    ("item-delivered", &["item", "01M8SG8ARAAV6E8XS2Y0VCZAEB"]),
    ("item-delivered-json", &["item", "01M8SG8ARAAV6E8XS2Y0VCZAEB", "--json"]),
    ("item-queued-by-end", &["item", "FSXZMYG"]),
    ("item-intake", &["item", "01M8SG8BAPB3YE5S2A1AXDSJ4B"]),
    ("item-intake-json", &["item", "01M8SG8BAPB3YE5S2A1AXDSJ4B", "--json"]),
    ("item-ambiguous", &["item", "01M8SG8"]),
    ("item-none-json", &["item", "ZZZZ", "--json"]),
    ("explain-done", &["explain", "done"]),
    ("explain-done-json", &["explain", "done", "--json"]),
    ("events-done", &["events", "done"]),
    ("events-done-json", &["events", "done", "--json"]),
    ("channel-ls", &["channel", "ls"]),
    ("channel-ls-json", &["channel", "ls", "--json"]),
    ("serve-stop", &["serve", "--stop"]),
];

fn recording(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/data/cli").join(format!("{name}.txt"))
}

/// An age as `desk_core::time::span` writes it (`0s`, `8h`, `12d`) reads `AGE`, right-aligned
/// in the width it had with the spaces before it (so a column's width is still checked): it
/// depends on when the test runs, nothing else does.
fn without_ages(text: &str) -> String {
    let age = regex_lite::Regex::new(r"(^|[ (])( *\d+[smhd])\b").expect("regex");
    age.replace_all(text, |c: &regex_lite::Captures<'_>| format!("{}{:>w$}", &c[1], "AGE", w = c[2].len().max(3)))
        .into_owned()
}

#[test]
fn store_and_journal_readers_print_what_main_printed_in_text_and_json() {
    let home = Home::new();
    copy_of_fixtures(home.path(), false);
    let bless = std::env::var_os("DESK_BLESS").is_some();
    let mut wrong = Vec::new();
    for (name, args) in CASES {
        let out = home.cmd().env("TZ", "UTC").args(*args).output().expect("run desk");
        let got = format!(
            "$ desk {}\n{}--- stderr\n{}--- exit {}\n",
            args.join(" "),
            without_ages(&String::from_utf8_lossy(&out.stdout)),
            without_ages(&String::from_utf8_lossy(&out.stderr)),
            out.status.code().unwrap_or(-1)
        );
        if bless {
            std::fs::create_dir_all(recording(name).parent().unwrap()).unwrap();
            std::fs::write(recording(name), &got).unwrap();
            continue;
        }
        let want = std::fs::read_to_string(recording(name)).unwrap_or_else(|e| panic!("{name}: {e}"));
        if got != want {
            wrong.push(format!("{name}:\n--- want\n{want}--- got\n{got}"));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}
