//! The answer panel (`a`) without a terminal: keys drive [`Dash`] to the `keys` command the
//! loop runs, and the panel is drawn on ratatui's `TestBackend` under a dialog's preview and
//! compared with reviewed snapshots (`snapshots/`).

use ratatui::Terminal;
use ratatui::backend::TestBackend;

use super::key::Key;
use super::look::Look;
use super::model::{Command, Dash, Row};
use super::view::{self, Preview};
use desk_common::fleet::FleetEvent;
use desk_common::session::ExitRecord;
use desk_term::screen::Screen;
use desk_wire::state::{Activity, AxisView, Evidence, EvidenceSource, Health, Lifecycle, StateView};
use desk_wire::{ExitStatus, SessionInfo};

/// A fixed "now" (2026-12-01 10:00:00 UTC), so ages in snapshots never move.
const NOW: u64 = 1_796_119_200_000;

fn axis<T>(value: T) -> AxisView<T> {
    AxisView {
        value,
        since_ms: NOW - 5_000,
        evidence: Evidence { source: EvidenceSource::Hook, detail: "test".into(), at_ms: NOW },
    }
}

fn joined(name: &str, activity: Activity) -> FleetEvent {
    FleetEvent::Joined {
        session: name.into(),
        info: Box::new(SessionInfo {
            name: name.into(),
            generation: 1,
            provider: "demo".into(),
            pid: 100,
            master_pid: 99,
            command: vec!["desk-demo-agent".into()],
            cwd: "/".into(),
            cols: 44,
            rows: 10,
            controllers: 0,
            viewers: 0,
            observers: 1,
            title: if activity == Activity::Blocked { "✋ demo".into() } else { "demo".into() },
            started_at_ms: NOW - 600_000,
            state: Some(StateView {
                provider: "demo".into(),
                lifecycle: axis(Lifecycle::Running),
                activity: axis(activity),
                wait: (activity == Activity::Blocked).then(|| "approval".to_string()),
                health: axis(Health::Ok),
                ready: true,
                last_output_ms: None,
                last_hook_ms: None,
                rules: "builtin".into(),
            }),
        }),
    }
}

fn fleet() -> Dash {
    let mut dash = Dash::new();
    dash.apply(&joined("ask", Activity::Blocked), NOW);
    dash.apply(&joined("calm", Activity::Idle), NOW);
    let exit = ExitRecord {
        generation: 1,
        status: ExitStatus::Code(3),
        escalated: false,
        exited_at_ms: NOW - 60_000,
        cols: Some(44),
        rows: Some(10),
        title: None,
        last_screen: Some(vec!["bye".into()]),
        last_history: None,
    };
    dash.insert(Row::exited("gone", "demo", exit));
    dash
}

/// The demo agent's approval dialog, as its screen shows it.
fn dialog_screen() -> Screen {
    let mut screen = Screen::new(44, 10);
    screen.process(
        "> please approve-me\r\n\
         ╭──────────────────────────────────────╮\r\n\
         │ Bash command                         │\r\n\
         │   demo-tool --prompt 1               │\r\n\
         │ Do you want to run this command?     │\r\n\
         │ ❯ 1. Yes                             │\r\n\
         │   2. No                              │\r\n\
         ╰──────────────────────────────────────╯\r\n\
           waiting for approval · Enter to confirm"
            .as_bytes(),
    );
    screen
}

fn draw(dash: &mut Dash, cols: u16, rows: u16) -> Terminal<TestBackend> {
    let screen = dialog_screen();
    // As the loop does before each frame: the panel reads its dialog off the preview.
    dash.dialog_seen("ask", &screen.text_rows());
    let preview = Preview::Screen { session: "ask", screen: &screen, older: &[], live: true };
    let mut term = Terminal::new(TestBackend::new(cols, rows)).expect("test terminal");
    term.draw(|frame| view::render(frame, dash, &preview, NOW, Look { color: true })).expect("draw");
    term
}

#[test]
fn a_opens_the_panel_and_enter_types_the_highlighted_key_into_the_selected_session() {
    let mut dash = fleet();
    assert_eq!(dash.selected(), Some("ask"), "the blocked session is on top");
    assert_eq!(dash.on_key(Key::Char('a')), None, "opening the panel types nothing");
    let panel = dash.answer.as_ref().expect("the panel is open");
    assert_eq!(panel.wait.as_deref(), Some("approval"));
    assert_eq!(dash.on_key(Key::Enter), Some(Command::Keys { session: "ask".into(), keys: vec!["Enter".into()] }));
    assert!(dash.answer.is_some(), "the panel stays open after a key, until the dialog changes");
}

#[test]
fn the_highlight_moves_with_j_k_and_the_arrows_and_digits_type_at_once() {
    let mut dash = fleet();
    dash.on_key(Key::Char('a'));
    for key in [Key::Char('j'), Key::Down, Key::Char('k'), Key::Char('j')] {
        assert_eq!(dash.on_key(key), None, "{key:?} only moves the highlight");
    }
    assert_eq!(dash.answer.as_ref().map(|a| a.choice), Some(2));
    assert_eq!(dash.selected(), Some("ask"), "the table's selection did not move");
    assert_eq!(dash.on_key(Key::Enter), Some(Command::Keys { session: "ask".into(), keys: vec!["1".into()] }));
    dash.on_key(Key::Char('a'));
    assert_eq!(dash.on_key(Key::Char('n')), Some(Command::Keys { session: "ask".into(), keys: vec!["n".into()] }));
    // Up from the first choice wraps to the last (an arrow key to send).
    dash.on_key(Key::Esc);
    dash.on_key(Key::Char('a'));
    dash.on_key(Key::Up);
    assert_eq!(dash.on_key(Key::Enter), Some(Command::Keys { session: "ask".into(), keys: vec!["Right".into()] }));
}

#[test]
fn esc_closes_the_panel_without_typing_and_an_exited_session_has_nothing_to_answer() {
    let mut dash = fleet();
    dash.on_key(Key::Char('a'));
    assert_eq!(dash.on_key(Key::Esc), None);
    assert!(dash.answer.is_none());
    assert_eq!(dash.on_key(Key::Char('q')), Some(super::model::Command::Quit), "the panel is closed");
    let mut dash = fleet();
    // An error exit sorts above the idle session.
    dash.on_key(Key::Char('j'));
    assert_eq!(dash.selected(), Some("gone"));
    assert_eq!(dash.on_key(Key::Char('a')), None);
    assert!(dash.answer.is_none());
    assert_eq!(dash.status.as_deref(), Some("gone is not running: nothing to answer"));
}

#[test]
fn view_answer_panel_80x24() {
    let mut dash = fleet();
    dash.on_key(Key::Char('a'));
    dash.on_key(Key::Char('j'));
    insta::assert_snapshot!(draw(&mut dash, 80, 24).backend());
}

#[test]
fn view_answer_panel_200x50() {
    let mut dash = fleet();
    dash.on_key(Key::Char('a'));
    insta::assert_snapshot!(draw(&mut dash, 200, 50).backend());
}

#[test]
fn the_daemons_notify_records_and_typed_keys_show_in_the_events_pane_notify_as_an_alert() {
    use desk_wire::events::{Event, EventBody};
    let mut dash = fleet();
    let event =
        |seq, body| FleetEvent::Event { session: "ask".into(), event: Event { seq, ts_ms: NOW, generation: 1, body } };
    dash.apply(
        &event(
            10,
            EventBody::Notify {
                kind: "blocked".into(),
                message: "ask is waiting for you: approval".into(),
                item: None,
                suppressed: 0,
            },
        ),
        NOW,
    );
    dash.apply(
        &event(
            11,
            EventBody::Keys { keys: vec!["Enter".into()], bytes: 1, user: "ana".into(), tty: None, via: "dash".into() },
        ),
        NOW,
    );
    let lines: Vec<(String, bool)> = dash.log_lines().map(|l| (l.text.clone(), l.alert)).collect();
    assert_eq!(
        lines[..2],
        [
            ("keys Enter typed by ana (dash)".to_string(), false),
            ("notified blocked: ask is waiting for you: approval".to_string(), true),
        ]
    );
}

/// Every labelled screen of a recording of a real agent (`tests/data/agents/`).
fn recorded(agent: &str, scenario: &str, label: &str) -> Vec<String> {
    let path = format!("{}/tests/data/agents/{agent}/{scenario}.screens.txt", env!("CARGO_MANIFEST_DIR"));
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
    let mut rows = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        if let Some(head) = line.strip_prefix("===== ") {
            inside = head.split_whitespace().next() == Some(label);
        } else if inside {
            rows.push(line.to_string());
        }
    }
    assert!(!rows.is_empty(), "{agent}/{scenario}: no screen {label}");
    rows
}

fn options(rows: &[String]) -> Vec<(u8, String, bool)> {
    super::answer::dialog_options(rows).into_iter().map(|o| (o.number, o.label, o.highlighted)).collect()
}

#[test]
fn the_real_agents_dialogs_are_read_with_their_options_and_highlight() {
    let claude = options(&recorded("claude", "approval", "dialog-bash"));
    assert_eq!(
        claude,
        [
            (1, "Yes".to_string(), true),
            (2, "Yes, and always allow access to work/ from this project".to_string(), false),
            (3, "No".to_string(), false),
        ]
    );
    let key = options(&recorded("claude", "api-key-dialog", "after-enter"));
    assert_eq!(key, [(1, "Yes".to_string(), false), (2, "No (recommended)".to_string(), true)]);
    let codex = options(&recorded("codex", "approval", "dialog-bash"));
    assert_eq!(codex.len(), 3, "{codex:?}");
    assert_eq!(codex[0], (1, "Yes, proceed (y)".to_string(), true));
    assert_eq!(codex[2], (3, "No, and tell Codex what to do differently (esc)".to_string(), false));
    let demo = options(&dialog_screen().text_rows());
    assert_eq!(demo, [(1, "Yes".to_string(), true), (2, "No".to_string(), false)]);
    // Screens without a dialog: an idle agent, and a numbered list in an answer (no highlight).
    assert!(options(&recorded("claude", "approval", "idle-after-bash")).is_empty());
    let list: Vec<String> = ["Plan:", "1. Fix the parser", "2. Update the docs"].map(String::from).to_vec();
    assert!(options(&list).is_empty());
}

#[test]
fn the_panel_lists_the_dialogs_options_says_what_enter_picks_and_stays_until_the_dialog_changes() {
    let mut dash = fleet();
    dash.on_key(Key::Char('a'));
    let dialog = recorded("claude", "approval", "dialog-bash");
    dash.dialog_seen("ask", &dialog);
    let panel = dash.answer.as_ref().expect("open");
    assert_eq!(panel.enter_picks().map(|o| o.label.as_str()), Some("Yes"));
    let offered: Vec<String> = panel.choices().into_iter().map(|(_, key)| key).collect();
    assert_eq!(offered, ["Enter", "1", "2", "3", "Esc", "Up", "Down"]);
    // A digit of the dialog types at once, and the panel stays for the dialog's next key.
    assert_eq!(dash.on_key(Key::Char('2')), Some(Command::Keys { session: "ask".into(), keys: vec!["2".into()] }));
    assert_eq!(dash.on_key(Key::Char('7')), None, "no option 7: nothing typed");
    // The agent moved its highlight (a Down typed): the same dialog, the panel follows it.
    let moved: Vec<String> = dialog
        .iter()
        .map(|r| r.replace("❯ 1. Yes", "  1. Yes").replace("  2. Yes, and always", "❯ 2. Yes, and always"))
        .collect();
    dash.dialog_seen("ask", &moved);
    let panel = dash.answer.as_ref().expect("still open: the same dialog");
    assert_eq!(panel.enter_picks().map(|o| o.number), Some(2));
    // Answered: the dialog is gone from the screen, and so is the panel.
    dash.dialog_seen("ask", &recorded("claude", "approval", "idle-after-bash"));
    assert!(dash.answer.is_none());
    assert_eq!(dash.status.as_deref(), Some("ask's dialog changed or went away (answered?): the answer panel closed"));
    // Another dialog in its place closes it too.
    dash.on_key(Key::Char('a'));
    dash.dialog_seen("ask", &dialog);
    dash.dialog_seen("ask", &recorded("claude", "approval", "dialog-write"));
    assert!(dash.answer.is_none(), "a new dialog is not the one the panel was answering");
}
