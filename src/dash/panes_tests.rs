//! The approvals view (`A`) and the channel pane (`c`) without a terminal: keys drive [`Dash`]
//! to the commands the loop runs, the panes are drawn on ratatui's `TestBackend` and compared
//! with reviewed snapshots (`snapshots/`), and the channel pane's reading and posting run
//! against a real channel store in a temporary directory.

use std::collections::HashMap;

use super::channels::{ChannelPane, ChannelView};
use super::key::Key;
use super::look::Look;
use super::model::{Command, Grouping};
use super::tests::{NOW, busy_fleet, draw};
use super::view::Preview;
use crate::inbox::Open;
use desk_core::channel::{Kind, Message};
use desk_core::delivery::item::ItemId;
use desk_core::provider::Provider;
use desk_daemon::channel::summary::Summary;

/// The demo agent's dialog, as its screen shows it, read by its rules for session `name`.
fn demo_dialog(name: &str, command: &str) -> desk_core::dialog::Dialog {
    let rows: Vec<String> = [
        "╭──────────────────────────────────╮".to_string(),
        "│ Bash command                     │".to_string(),
        format!("│   {command:<31}│"),
        "│ Do you want to run this command? │".to_string(),
        "│ ❯ 1. Yes                         │".to_string(),
        "│   2. No                          │".to_string(),
        "╰──────────────────────────────────╯".to_string(),
    ]
    .to_vec();
    Provider::Demo.rules().dialog.unwrap().read(&rows, None, &format!("{name}/1")).expect("a dialog")
}

/// Claude Code's recorded approval dialog (tests/data/agents/), read by its rules.
fn claude_dialog(name: &str) -> desk_core::dialog::Dialog {
    let text = include_str!("../../tests/data/agents/claude/approval.screens.txt");
    let rows: Vec<String> = text.lines().skip(1).take(40).map(String::from).collect();
    Provider::Claude.rules().dialog.unwrap().read(&rows, None, &format!("{name}/1")).expect("a dialog")
}

fn cards() -> Vec<Open> {
    vec![
        Open { session: "api".into(), provider: "claude".into(), since_ms: NOW - 95_000, dialog: claude_dialog("api") },
        Open {
            session: "charlie".into(),
            provider: "demo".into(),
            since_ms: NOW - 1_000,
            dialog: demo_dialog("charlie", "rm -rf build/"),
        },
    ]
}

#[test]
fn the_approvals_view_answers_the_selected_card_with_its_fingerprint() {
    let mut dash = busy_fleet();
    assert_eq!(dash.on_key(Key::Char('A')), None);
    assert_eq!(dash.on_key(Key::Char('1')), None, "no cards read yet: nothing to answer");
    let cards = cards();
    let (api, charlie) = (cards[0].dialog.fingerprint.clone(), cards[1].dialog.fingerprint.clone());
    dash.set_approvals(None, cards.clone(), vec![]);
    assert_eq!(
        dash.on_key(Key::Char('3')),
        Some(Command::Answer { session: "api".into(), option: Some(3), seen: api.clone(), said: "3. No".into() })
    );
    // The provider's approve option (Claude's is its first), and a refusal.
    assert_eq!(
        dash.on_key(Key::Char('y')),
        Some(Command::Answer { session: "api".into(), option: Some(1), seen: api, said: "1. Yes".into() })
    );
    dash.on_key(Key::Char('j'));
    assert_eq!(
        dash.on_key(Key::Char('x')),
        Some(Command::Answer { session: "charlie".into(), option: None, seen: charlie.clone(), said: "deny".into() })
    );
    assert_eq!(dash.on_key(Key::Char('7')), None, "an option the card lacks sends nothing");
    // A refresh that reorders the cards keeps the selection on its session.
    let mut reversed = cards;
    reversed.reverse();
    dash.set_approvals(None, reversed, vec![]);
    assert!(matches!(dash.on_key(Key::Char('2')), Some(Command::Answer { session, .. }) if session == "charlie"));
    dash.answered("charlie", "charlie not answered: the dialog changed".into());
    assert_eq!(dash.status.as_deref(), Some("charlie not answered: the dialog changed"));
    assert_eq!(dash.on_key(Key::Esc), None);
    assert!(dash.approvals.is_none());
}

fn approvals_view(cols: u16, rows: u16) -> String {
    let mut dash = busy_fleet();
    dash.on_key(Key::Char('A'));
    dash.set_approvals(None, cards(), vec!["delta".into()]);
    let term = draw(&dash, &Preview::None, cols, rows, Look { color: true });
    format!("{}", term.backend())
}

#[test]
fn view_approvals_80x24() {
    insta::assert_snapshot!(approvals_view(80, 24));
}

#[test]
fn view_approvals_200x50() {
    insta::assert_snapshot!(approvals_view(200, 50));
}

fn id(n: u64) -> ItemId {
    ItemId::new(NOW - 3_600_000 + n * 60_000, [n as u8; 10])
}

fn message(n: u64, author: &str, body: &str) -> Message {
    Message {
        id: id(n),
        author: author.into(),
        ts_ms: NOW - 3_600_000 + n * 60_000,
        thread: None,
        kind: Kind::Post,
        body: body.into(),
    }
}

fn summaries() -> Vec<Summary> {
    let summary = |name: &str, unread, unread_human| Summary {
        name: name.into(),
        goal: String::new(),
        members: 3,
        messages: 4,
        threads: 1,
        human_mentions: unread_human,
        unread,
        unread_human,
        last_ms: Some(NOW),
        stalled: None,
    };
    vec![summary("docs", 0, 0), summary("release", 2, 1)]
}

/// The release channel as the pane reads it: two messages read, two new, one of them for
/// `@human`, a thread of two replies.
fn release() -> ChannelView {
    let mut replies = HashMap::new();
    replies.insert(id(1), 2);
    ChannelView {
        channel: "release".into(),
        goal: "ship 1.0".into(),
        members: vec!["api (worker)".into(), "web (worker)".into(), "lead (supervisor)".into()],
        thread: None,
        messages: vec![
            message(1, "human", "kickoff: plan the release\nfreeze on friday"),
            message(2, "api", "the parser is done"),
            message(3, "web", "the site builds"),
            message(4, "lead", "@human the changelog needs your sign-off"),
        ],
        replies,
        seen_before: Some(id(2)),
        problems: vec![],
    }
}

fn channel_dash() -> super::model::Dash {
    let mut dash = busy_fleet();
    dash.channels = summaries();
    assert_eq!(
        dash.on_key(Key::Char('c')),
        Some(Command::LoadChannel { channel: "release".into(), thread: None }),
        "the pane opens on the channel that asks for the operator"
    );
    dash.channel_loaded(release());
    dash
}

#[test]
fn the_channel_pane_reads_threads_and_posts_as_the_operator() {
    let mut dash = channel_dash();
    // The newest message is selected; k moves up, Enter opens that message's thread.
    dash.on_key(Key::Char('k'));
    dash.on_key(Key::Char('k'));
    dash.on_key(Key::Char('k'));
    assert_eq!(dash.on_key(Key::Enter), Some(Command::LoadChannel { channel: "release".into(), thread: Some(id(1)) }));
    let mut thread = release();
    thread.thread = Some(id(1));
    thread.messages.truncate(1);
    dash.channel_loaded(thread);
    // p writes a post in the thread shown; Alt-Enter posts it.
    dash.on_key(Key::Char('p'));
    for c in "on it".chars() {
        dash.on_key(Key::Char(c));
    }
    assert_eq!(
        dash.on_key(Key::SendEnter),
        Some(Command::Post { channel: "release".into(), thread: Some(id(1)), text: "on it".into() })
    );
    assert_eq!(dash.on_key(Key::Esc), Some(Command::LoadChannel { channel: "release".into(), thread: None }), "back");
    assert_eq!(dash.on_key(Key::Char(']')), Some(Command::LoadChannel { channel: "docs".into(), thread: None }));
    assert_eq!(dash.on_key(Key::Char('c')), None);
    assert!(dash.channel_pane.is_none());
}

#[test]
fn view_channel_pane_80x24() {
    let dash = channel_dash();
    let term = draw(&dash, &Preview::None, 80, 24, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_channel_pane_200x50() {
    let mut dash = channel_dash();
    if let Some(pane) = dash.channel_pane.as_mut() {
        pane.draft = Some("sign-off given\nship it".into());
    }
    let term = draw(&dash, &Preview::None, 200, 50, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn the_table_groups_by_channel_and_a_mention_of_human_needs_you() {
    let mut dash = busy_fleet();
    let before = format!("{}", draw(&dash, &Preview::None, 80, 24, Look { color: false }).backend());
    dash.channels = summaries();
    let after = format!("{}", draw(&dash, &Preview::None, 80, 24, Look { color: false }).backend());
    let count = |s: &str| {
        s.lines().next().and_then(|l| l.split(" need you").next()?.split_whitespace().last()?.parse::<u32>().ok())
    };
    assert_eq!(count(&after), count(&before).map(|n| n + 1), "the unread @human counts as one more\n{after}");
    let mut rosters = HashMap::new();
    rosters.insert("release".to_string(), vec!["charlie".to_string(), "golf".to_string()]);
    rosters.insert("docs".to_string(), vec!["alpha".to_string(), "golf".to_string()]);
    dash.set_memberships(&rosters);
    dash.on_key(Key::Char('v'));
    dash.on_key(Key::Char('v'));
    assert_eq!(dash.grouping, Grouping::Channel);
    let group = |name: &str| dash.row(name).map(|r| dash.group_of(r).to_string());
    assert_eq!(group("charlie").as_deref(), Some("#release"));
    assert_eq!(group("golf").as_deref(), Some("#docs"), "a session in two channels sits under the first by name");
    assert_eq!(group("bravo").as_deref(), Some("-"));
    insta::assert_snapshot!(format!("{}", draw(&dash, &Preview::None, 80, 24, Look { color: true }).backend()));
}

#[test]
fn the_channel_pane_marks_the_channel_read_and_posts_as_human_to_a_real_store() {
    let tmp = tempfile::tempdir().unwrap();
    let paths = desk_common::paths::Paths {
        runtime: tmp.path().join("r"),
        state: tmp.path().join("s"),
        config: tmp.path().join("c"),
    };
    let store = desk_daemon::channel::store::ChannelStore::open(&paths).unwrap();
    let ch = desk_core::channel::ChannelName::parse("ops").unwrap();
    store.create(&ch, "keep it running", NOW).unwrap();
    store.add_member(&ch, "a", desk_core::channel::Role::Worker, NOW).unwrap();
    let draft = |body: &str| desk_daemon::channel::store::Draft { author: "a".into(), thread: None, body: body.into() };
    store.post(&ch, draft("@human disk is full"), NOW + 1).unwrap();
    let before = desk_daemon::channel::summary::summarize(&store, &ch).unwrap();
    assert_eq!((before.unread, before.unread_human), (1, 1));
    let view = super::channels::load(&paths, "ops", None).unwrap();
    assert_eq!(view.seen_before, None, "nothing was read before");
    assert_eq!(view.messages.iter().filter(|m| m.kind == Kind::Post).count(), 1);
    let after = desk_daemon::channel::summary::summarize(&store, &ch).unwrap();
    assert_eq!((after.unread, after.unread_human), (0, 0), "reading the root view marks it read");
    let id = super::channels::post(&paths, "ops", None, "cleaning up").unwrap();
    let (messages, _) = store.read(&ch, None).unwrap();
    let mine = messages.iter().find(|m| m.id.to_string() == id).expect("the post");
    assert_eq!((mine.author.as_str(), mine.body.as_str()), ("human", "cleaning up"));
    let pane = ChannelPane::open(&[]).0;
    assert_eq!(pane.channel, None, "no channels: nothing to open");
}
