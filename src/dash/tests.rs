//! The dashboard's model and views without a terminal: keys drive [`Dash`], and the views are
//! drawn on ratatui's `TestBackend` and compared with reviewed snapshots (`snapshots/`, updated
//! with `INSTA_UPDATE=always` and read before committing).

use ratatui::Terminal;
use ratatui::backend::TestBackend;
use ratatui::style::Color;
use std::collections::HashMap;

use super::key::Key;
use super::look::Look;
use super::model::{Action, Command, Dash, Grouping, ItemLine, ItemRef, QueueCounts, Row, SessionRef, Urgency};
use super::view::{self, Preview};
use desk_common::fleet::FleetEvent;
use desk_common::session::ExitRecord;
use desk_term::screen::HistoryRow;
use desk_term::screen::Screen;
use desk_wire::events::{AxisChange, Event, EventBody};
use desk_wire::state::{Activity, AxisView, Evidence, Health, Lifecycle, StateView};
use desk_wire::{ExitStatus, SessionInfo};

/// A fixed "now" (2026-12-01 10:00:00 UTC), so ages in snapshots never move.
pub(super) const NOW: u64 = 1_796_119_200_000;

fn axis<T>(value: T, ago_s: u64) -> AxisView<T> {
    AxisView {
        value,
        since_ms: NOW - ago_s * 1000,
        evidence: Evidence { source: desk_wire::state::EvidenceSource::Screen, detail: "test".into(), at_ms: NOW },
    }
}

/// Each fixture session's child pid: all different, so that usage shown on the wrong row shows.
fn item_id(id: &str) -> desk_wire::names::ItemId {
    desk_wire::names::ItemId::parse(id).expect("a valid item id")
}

fn pid_of(name: &str) -> u32 {
    const NAMES: [&str; 7] = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf"];
    101 + NAMES.iter().position(|n| *n == name).map_or(50, |i| i as u32)
}

pub(super) fn joined(
    name: &str,
    provider: &str,
    activity: Activity,
    ago_s: u64,
    health: Health,
    title: &str,
) -> FleetEvent {
    let wait = (activity == Activity::Blocked).then(|| "approval".to_string());
    FleetEvent::Joined {
        session: name.into(),
        info: Box::new(SessionInfo {
            name: name.into(),
            generation: 1,
            provider: provider.into(),
            pid: pid_of(name),
            master_pid: 99,
            command: vec!["agent".into()],
            cwd: "/".into(),
            cols: 40,
            rows: 6,
            controllers: 0,
            viewers: 0,
            observers: 1,
            title: title.into(),
            started_at_ms: NOW - 3_600_000,
            state: Some(StateView {
                provider: provider.into(),
                lifecycle: axis(Lifecycle::Running, 3600),
                activity: axis(activity, ago_s),
                wait,
                health: axis(health, 3600),
                ready: true,
                last_output_ms: None,
                last_hook_ms: None,
                rules: "builtin".into(),
            }),
        }),
    }
}

fn state_event(session: &str, seq: u64, to: &str, wait: Option<&str>, ago_s: u64) -> FleetEvent {
    FleetEvent::Event {
        session: session.into(),
        event: Event {
            seq,
            ts_ms: NOW - ago_s * 1000,
            generation: 1,
            body: EventBody::State {
                change: AxisChange::Activity {
                    from: Activity::Idle,
                    to: serde_json::from_value(serde_json::Value::String(to.into())).unwrap(),
                },
                evidence: "hook Notification".into(),
                wait: wait.map(String::from),
            },
        },
    }
}

fn exit(code: i32, ago_s: u64) -> ExitRecord {
    ExitRecord {
        generation: 1,
        status: ExitStatus::Code(code),
        escalated: false,
        exited_at_ms: NOW - ago_s * 1000,
        cols: Some(40),
        rows: Some(6),
        title: Some("done".into()),
        last_screen: Some(vec!["bye".into()]),
        last_history: None,
    }
}

/// A fleet with one session of each kind the table sorts, joined in alphabetical order.
fn fleet() -> Dash {
    let mut dash = Dash::new();
    dash.apply(&joined("alpha", "claude", Activity::Idle, 120, Health::Ok, "✳ alpha idle"), NOW);
    dash.apply(&joined("bravo", "codex", Activity::Working, 5, Health::Ok, "bravo builds"), NOW);
    dash.apply(&joined("charlie", "demo", Activity::Idle, 30, Health::Ok, "charlie"), NOW);
    dash.apply(&joined("delta", "demo", Activity::Idle, 30, Health::Degraded("hook errors".into()), "delta"), NOW);
    dash.insert(Row::exited("echo", "shell", exit(0, 600)));
    dash.insert(Row::exited("foxtrot", "shell", exit(3, 60)));
    dash.apply(&joined("golf", "demo", Activity::Idle, 10, Health::Ok, "golf"), NOW);
    let mut queues = std::collections::HashMap::new();
    let item = |id: &str, state: &str, class: Option<&str>, preview: &str, why: &str| ItemLine {
        id: item_id(id),
        state: state.into(),
        class: class.map(String::from),
        preview: preview.into(),
        why: why.into(),
    };
    let golf_items = vec![
        item(
            "0000000000000000000000000A",
            "stuck",
            Some("submit-stuck"),
            "fix the flaky test",
            "echoed but never submitted after 3 Enters",
        ),
        item(
            "0000000000000000000000000B",
            "stuck",
            Some("merged"),
            "and the docs",
            "submitted together with text someone typed",
        ),
        item("0000000000000000000000000C", "queued", None, "then release", ""),
    ];
    queues.insert("golf".to_string(), QueueCounts { queued: 3, stuck: 2, paused: true, items: golf_items });
    queues.insert("bravo".to_string(), QueueCounts { queued: 3, stuck: 0, paused: false, items: Vec::new() });
    dash.set_queues(Ok(queues));
    dash.set_usage(&usage());
    dash
}

/// CPU (%) and RSS (KiB) by pid: a different figure for each session, and some for the pids of
/// sessions that have exited (a pid the system reused) that must show nowhere.
fn usage() -> std::collections::HashMap<u32, (f32, u64)> {
    std::collections::HashMap::from([
        (pid_of("alpha"), (12.4, 51_200)),
        (pid_of("bravo"), (97.0, 2_097_152)),
        (pid_of("charlie"), (3.2, 310_272)),
        (pid_of("delta"), (0.0, 8_192)),
        (pid_of("echo"), (55.0, 1_024)),
        (pid_of("foxtrot"), (66.0, 2_048)),
        (pid_of("golf"), (45.6, 1_572_864)),
    ])
}

fn names(dash: &Dash) -> Vec<String> {
    dash.visible().map(|r| r.name.clone()).collect()
}

pub(super) fn draw(dash: &Dash, preview: &Preview, cols: u16, rows: u16, look: Look) -> Terminal<TestBackend> {
    let mut term = Terminal::new(TestBackend::new(cols, rows)).expect("test terminal");
    term.draw(|frame| view::render(frame, dash, preview, NOW, look)).expect("draw");
    term
}

fn demo_screen() -> Screen {
    let mut screen = Screen::new(40, 6);
    screen.process(b"\x1b[1mdemo agent\x1b[0m\r\n\x1b[31mred text\x1b[0m\r\n\r\n\x1b[7m> \x1b[0m");
    screen
}

/// A screen taller than the preview pane: an agent drawing inline from the top is seen from its
/// top (it was blank when the pane showed the bottom rows), one whose box sits at the bottom keeps
/// it in view, and the cursor is always inside.
#[test]
fn the_preview_of_a_tall_screen_shows_the_rows_that_end_at_its_content() {
    let mut inline = Screen::new(40, 40);
    inline.process(b"\x1b[3;1HDo you want to proceed?\r\n1. Yes\r\n2. No\r\n");
    assert_eq!(view::first_row(&inline, 10), 0, "rows 3-6 of 40 fit a 10-row pane from the top");
    inline.process(b"\x1b[20;1Hmore text");
    assert_eq!(view::first_row(&inline, 10), 10, "the window ends at row 20's text");
    let mut boxed = Screen::new(40, 40);
    boxed.process(b"\x1b[1;1Hheader\x1b[38;1H> input box\x1b[40;1Hstatus\x1b[38;3H");
    assert_eq!(view::first_row(&boxed, 10), 30, "the bottom rows with the box and status");
    let mut cursor_low = Screen::new(40, 40);
    cursor_low.process(b"top\x1b[35;1H");
    assert_eq!(view::first_row(&cursor_low, 10), 25, "the cursor's row is inside");
    assert_eq!(view::first_row(&cursor_low, 50), 0, "a pane taller than the screen starts at its top");
}

#[test]
fn rows_are_sorted_by_what_needs_a_person_first() {
    let dash = fleet();
    assert_eq!(names(&dash), ["golf", "delta", "foxtrot", "bravo", "alpha", "charlie", "echo"]);
    let urgencies: Vec<Urgency> = dash.visible().map(|r| r.urgency()).collect();
    assert!(urgencies.windows(2).all(|w| w[0] <= w[1]));
}

#[test]
fn a_session_turning_blocked_moves_to_the_top_and_back_when_it_is_answered() {
    let mut dash = fleet();
    dash.apply(&state_event("charlie", 7, "blocked", Some("approval"), 1), NOW);
    assert_eq!(names(&dash)[0], "charlie");
    let row = dash.row("charlie").expect("row");
    assert_eq!((row.activity, row.wait.as_deref()), (Activity::Blocked, Some("approval")));
    dash.apply(&state_event("charlie", 8, "idle", None, 0), NOW);
    assert_eq!(names(&dash).last().map(String::as_str), Some("echo"));
    assert_ne!(names(&dash)[0], "charlie");
}

#[test]
fn the_selection_follows_its_session_when_the_order_changes() {
    let mut dash = fleet();
    dash.on_key(Key::Char('G'));
    dash.on_key(Key::Char('k'));
    assert_eq!(dash.selected(), Some("charlie"));
    dash.apply(&state_event("charlie", 7, "blocked", Some("approval"), 1), NOW);
    assert_eq!(dash.selected(), Some("charlie"));
    assert_eq!(dash.selected_index(), Some(0));
}

#[test]
fn j_k_and_arrows_move_the_selection_and_stop_at_the_ends() {
    let mut dash = fleet();
    assert_eq!(dash.selected(), Some("golf"));
    dash.on_key(Key::Char('k'));
    assert_eq!(dash.selected(), Some("golf"));
    dash.on_key(Key::Char('j'));
    dash.on_key(Key::Down);
    assert_eq!(dash.selected(), Some("foxtrot"));
    dash.on_key(Key::Up);
    assert_eq!(dash.selected(), Some("delta"));
    for _ in 0..20 {
        dash.on_key(Key::Char('j'));
    }
    assert_eq!(dash.selected(), Some("echo"));
}

#[test]
fn n_jumps_to_the_next_session_that_needs_a_person_and_wraps() {
    let mut dash = fleet();
    let mut seen = Vec::new();
    for _ in 0..4 {
        dash.on_key(Key::Char('n'));
        seen.push(dash.selected().unwrap_or("").to_string());
    }
    assert_eq!(seen, ["delta", "foxtrot", "golf", "delta"]);
}

#[test]
fn slash_filters_by_name_provider_or_title_and_esc_clears_it() {
    let mut dash = fleet();
    assert_eq!(dash.on_key(Key::Char('/')), None);
    for c in "demo".chars() {
        assert_eq!(dash.on_key(Key::Char(c)), None, "typing into the filter never quits or moves");
    }
    assert_eq!(names(&dash), ["golf", "delta", "charlie"]);
    assert!(dash.selected().is_some_and(|s| names(&dash).iter().any(|n| n == s)));
    dash.on_key(Key::Enter);
    assert!(!dash.editing_filter);
    assert_eq!(dash.on_key(Key::Char('q')), Some(Command::Quit), "q quits once the filter is kept");
    dash.on_key(Key::Esc);
    assert_eq!(names(&dash).len(), 7);
}

#[test]
fn enter_attaches_to_a_live_session_but_not_to_an_exited_one_nor_while_filtering() {
    let mut dash = fleet();
    assert_eq!(dash.on_key(Key::Enter), Some(Command::Attach("golf".into())));
    dash.on_key(Key::Char('G'));
    assert_eq!(dash.selected(), Some("echo"));
    assert_eq!(dash.on_key(Key::Enter), None, "echo has exited");
    dash.on_key(Key::Char('g'));
    dash.on_key(Key::Char('/'));
    assert_eq!(dash.on_key(Key::Enter), None, "Enter ends the filter");
    assert_eq!(dash.on_key(Key::Enter), Some(Command::Attach("golf".into())));
}

#[test]
fn f_forces_the_first_stuck_item_after_a_confirmation_that_says_what_it_does() {
    let mut dash = fleet();
    assert_eq!(dash.selected(), Some("golf"));
    assert_eq!(dash.on_key(Key::Char('f')), None);
    let question = dash.confirm.as_ref().map(|c| c.question.clone()).unwrap_or_default();
    assert!(
        question.contains("0000000000000000000000000A") && question.contains("press Enter on the text"),
        "{question}"
    );
    assert_eq!(
        dash.on_key(Key::Char('y')),
        Some(Command::Run(Action::Force(ItemRef { host: None, id: item_id("0000000000000000000000000A") })))
    );
    assert!(dash.confirm.is_none());
}

#[test]
fn any_key_but_y_cancels_a_confirmation() {
    let mut dash = fleet();
    dash.on_key(Key::Char('d'));
    assert!(dash.confirm.is_some());
    assert_eq!(dash.on_key(Key::Char('q')), None, "q answers the question, it does not quit");
    assert!(dash.confirm.is_none());
    assert_eq!(dash.status.as_deref(), Some("cancelled"));
}

#[test]
fn force_refuses_a_merged_item_and_anything_not_stuck_like_the_cli() {
    let mut dash = fleet();
    dash.on_key(Key::Char('i'));
    dash.on_key(Key::Char('J'));
    assert_eq!(dash.on_key(Key::Char('f')), None);
    assert!(dash.confirm.is_none());
    assert!(dash.status.as_deref().is_some_and(|s| s.contains("refuses")), "{:?}", dash.status);
    dash.on_key(Key::Char('J'));
    assert_eq!(dash.on_key(Key::Char('f')), None);
    assert!(dash.confirm.is_none());
    assert!(dash.status.as_deref().is_some_and(|s| s.contains("not stuck")), "{:?}", dash.status);
    // Drop works on any of them, confirmed.
    dash.on_key(Key::Char('d'));
    assert_eq!(
        dash.on_key(Key::Char('y')),
        Some(Command::Run(Action::Drop(ItemRef { host: None, id: item_id("0000000000000000000000000C") })))
    );
    // A session with nothing stuck has nothing to force.
    dash.on_key(Key::Esc);
    dash.on_key(Key::Char('G'));
    assert_eq!(dash.on_key(Key::Char('f')), None);
    assert!(dash.confirm.is_none() && dash.status.is_some());
}

#[test]
fn the_item_selection_stays_on_an_item_when_the_list_shrinks() {
    let mut dash = fleet();
    dash.on_key(Key::Char('i'));
    dash.on_key(Key::Char('J'));
    dash.on_key(Key::Char('J'));
    assert_eq!(dash.item_index, 2);
    let mut queues = std::collections::HashMap::new();
    let only = ItemLine {
        id: item_id("0000000000000000000000000A"),
        state: "stuck".into(),
        class: Some("paste-missing".into()),
        preview: String::new(),
        why: String::new(),
    };
    queues.insert("golf".to_string(), QueueCounts { queued: 0, stuck: 1, paused: false, items: vec![only] });
    dash.set_queues(Ok(queues));
    assert_eq!(dash.item_index, 0);
    dash.on_key(Key::Char('f'));
    assert!(dash.confirm.as_ref().is_some_and(|c| c.question.contains("paste it again")), "{:?}", dash.confirm);
}

#[test]
fn a_session_running_again_after_its_exit_is_live_and_says_so() {
    let mut dash = fleet();
    dash.apply(&joined("echo", "shell", Activity::Idle, 0, Health::Ok, "echo again"), NOW);
    let row = dash.row("echo").expect("row");
    assert_eq!(row.lifecycle_word(), "running");
    assert!(dash.log_lines().next().is_some_and(|l| l.session == "echo" && l.text.starts_with("running again")));
}

#[test]
fn cpu_and_memory_show_for_running_sessions_only_each_on_its_own_row() {
    let dash = fleet();
    let usage = usage();
    for name in ["alpha", "bravo", "charlie", "delta", "golf"] {
        assert_eq!(dash.row(name).and_then(|r| r.usage), usage.get(&pid_of(name)).copied(), "{name}");
    }
    for name in ["echo", "foxtrot"] {
        assert_eq!(dash.row(name).and_then(|r| r.usage), None, "{name} has exited: it uses nothing");
    }
    let term = draw(&dash, &Preview::None, 200, 50, Look { color: true });
    let buf = term.backend().buffer();
    for (name, cpu, rss) in [("alpha", "12%", "50M"), ("charlie", "3%", "303M"), ("golf", "46%", "1.5G")] {
        let (_, y) = find(buf, name).expect("the session's row");
        let line: String = (0..200).map(|x| buf[(x, y)].symbol()).collect();
        assert!(line.contains(cpu) && line.contains(rss), "{name}: {line}");
    }
    // From 100 columns up the narrow table has them too; at 80 the title has their place.
    for (cols, shown) in [(100, true), (80, false)] {
        let term = draw(&dash, &Preview::None, cols, 24, Look { color: true });
        let buf = term.backend().buffer();
        let (_, y) = find(buf, "alpha").expect("alpha's row");
        let line: String = (0..cols).map(|x| buf[(x, y)].symbol()).collect();
        assert_eq!(line.contains("12%") && line.contains("50M"), shown, "{cols}: {line}");
    }
}

#[test]
fn p_pauses_a_running_queue_and_resumes_a_paused_one() {
    let mut dash = fleet();
    assert_eq!(
        dash.on_key(Key::Char('p')),
        Some(Command::Run(Action::Resume(SessionRef::of_row("golf").unwrap()))),
        "golf is paused"
    );
    dash.on_key(Key::Char('j'));
    assert_eq!(dash.on_key(Key::Char('p')), Some(Command::Run(Action::Pause(SessionRef::of_row("delta").unwrap()))));
}

#[test]
fn view_items_with_a_confirmation_80x24() {
    let mut dash = fleet();
    dash.on_key(Key::Char('i'));
    dash.on_key(Key::Char('f'));
    let term = draw(&dash, &Preview::None, 80, 24, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_items_200x50() {
    let mut dash = fleet();
    dash.on_key(Key::Char('i'));
    dash.on_key(Key::Char('J'));
    let term = draw(&dash, &Preview::None, 200, 50, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn s_opens_a_multi_line_editor_that_alt_enter_sends_and_esc_discards() {
    let mut dash = fleet();
    dash.on_key(Key::Char('s'));
    assert_eq!(dash.on_key(Key::SendEnter), None, "an empty prompt is not sent");
    for key in "quit j k".chars().map(Key::Char).chain([Key::Enter, Key::Char('x'), Key::Char('y'), Key::Backspace]) {
        assert_eq!(dash.on_key(key), None, "keys in the editor are text: {key:?}");
    }
    assert_eq!(dash.selected(), Some("golf"), "j and k typed into the editor did not move");
    assert_eq!(dash.on_key(Key::SendEnter), Some(Command::Send { session: "golf".into(), text: "quit j k\nx".into() }));
    assert!(dash.editor.is_none());
    dash.on_key(Key::Char('s'));
    dash.on_key(Key::Char('a'));
    assert_eq!(dash.on_key(Key::Esc), None);
    assert!(dash.editor.is_none());
    assert_eq!(dash.on_key(Key::Char('q')), Some(Command::Quit), "the editor is closed");
}

#[test]
fn view_prompt_editor_80x24() {
    let mut dash = fleet();
    dash.on_key(Key::Char('s'));
    for key in "Fix the flaky test."
        .chars()
        .map(Key::Char)
        .chain([Key::Enter])
        .chain("Then run it twice.".chars().map(Key::Char))
    {
        dash.on_key(key);
    }
    let term = draw(&dash, &Preview::None, 80, 24, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn q_and_ctrl_c_quit() {
    let mut dash = fleet();
    assert_eq!(dash.on_key(Key::Char('q')), Some(Command::Quit));
    assert_eq!(dash.on_key(Key::CtrlC), Some(Command::Quit));
}

#[test]
fn an_unresponsive_master_is_shown_as_such_and_needs_a_person() {
    let mut dash = fleet();
    dash.apply(&FleetEvent::Unresponsive { session: "alpha".into() }, NOW);
    let row = dash.row("alpha").expect("row");
    assert_eq!(row.lifecycle_word(), "unresponsive");
    assert!(row.urgency().needs_person());
    assert_eq!(dash.log_lines().next().map(|l| l.session.as_str()), Some("alpha"));
}

#[test]
fn a_session_that_leaves_with_an_error_is_listed_with_its_code() {
    let mut dash = fleet();
    dash.apply(&FleetEvent::Left { session: "bravo".into(), exit: Some(exit(2, 0)) }, NOW);
    let row = dash.row("bravo").expect("row");
    assert_eq!((row.lifecycle_word().as_str(), row.urgency()), ("exited(2)", Urgency::ExitedWithError));
    let line = dash.log_lines().next().expect("a line");
    assert!(line.alert && line.text.contains('2'), "{line:?}");
}

#[test]
fn the_events_pane_keeps_the_newest_lines_first_and_is_bounded() {
    let mut dash = fleet();
    for seq in 0..(super::model::EVENT_LOG_LIMIT as u64 + 50) {
        dash.apply(&state_event("alpha", seq, if seq % 2 == 0 { "working" } else { "idle" }, None, 0), NOW);
    }
    assert_eq!(dash.log_lines().count(), super::model::EVENT_LOG_LIMIT);
    assert!(dash.log_lines().next().is_some_and(|l| l.text.starts_with("activity idle")));
}

#[test]
fn daemon_down_shows_unknown_queue_counts_not_zero() {
    let mut dash = fleet();
    dash.set_queues(Err("desk serve is not running".into()));
    assert!(dash.row("golf").is_some_and(|r| r.queue.is_none()));
    let term = draw(&dash, &Preview::None, 80, 24, Look { color: true });
    let text = format!("{}", term.backend());
    assert!(text.contains("queues unknown: desk serve is not running"), "{text}");
}

/// Everything an operator sees at once: the fleet with events, and a live preview.
pub(super) fn busy_fleet() -> Dash {
    let mut dash = fleet();
    dash.apply(&state_event("charlie", 7, "blocked", Some("approval"), 1), NOW);
    dash.apply(&FleetEvent::Left { session: "bravo".into(), exit: Some(exit(1, 0)) }, NOW);
    dash
}

/// The busy fleet with charlie's demo screen in the preview, in colour, at `cols` x `rows`.
fn busy_view(cols: u16, rows: u16) -> Terminal<TestBackend> {
    let dash = busy_fleet();
    let screen = demo_screen();
    draw(
        &dash,
        &Preview::Screen { session: "charlie", screen: &screen, older: &[], live: true },
        cols,
        rows,
        Look { color: true },
    )
}

#[test]
fn view_80x24() {
    let term = busy_view(80, 24);
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_200x50() {
    let term = busy_view(200, 50);
    insta::assert_snapshot!(term.backend());
}

/// The middle width: the narrow columns with CPU and RSS.
#[test]
fn view_100x30() {
    let term = busy_view(100, 30);
    insta::assert_snapshot!(term.backend());
}

/// The busy fleet with `/dem` typed into the filter.
fn filter_being_typed() -> Dash {
    let mut dash = busy_fleet();
    for key in [Key::Char('/'), Key::Char('d'), Key::Char('e'), Key::Char('m')] {
        dash.on_key(key);
    }
    dash
}

#[test]
fn view_filter_being_typed_80x24() {
    let dash = filter_being_typed();
    let term = draw(&dash, &Preview::Note { session: "charlie", text: "connecting..." }, 80, 24, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_exited_session_shows_its_last_screen_200x50() {
    let mut dash = busy_fleet();
    for _ in 0..10 {
        if dash.selected() == Some("foxtrot") {
            break;
        }
        dash.on_key(Key::Char('j'));
    }
    assert_eq!(dash.selected(), Some("foxtrot"));
    let term = draw(&dash, &Preview::Note { session: "foxtrot", text: "bye" }, 200, 50, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn the_preview_shows_the_screen_models_cells_with_their_colours() {
    let term = busy_view(80, 24);
    let buf = term.backend().buffer();
    let (x, y) = find(buf, "red text").expect("the preview's second row");
    assert_eq!(buf[(x, y)].fg, Color::Indexed(1));
    let (x, y) = find(buf, "demo agent").expect("the preview's first row");
    assert!(buf[(x, y)].modifier.contains(ratatui::style::Modifier::BOLD));
}

#[test]
fn no_color_draws_no_colour_at_all() {
    let dash = busy_fleet();
    let screen = demo_screen();
    for (cols, rows) in [(80, 24), (200, 50)] {
        let term = draw(
            &dash,
            &Preview::Screen { session: "charlie", screen: &screen, older: &[], live: true },
            cols,
            rows,
            Look { color: false },
        );
        let buf = term.backend().buffer();
        for cell in buf.content() {
            assert_eq!((cell.fg, cell.bg), (Color::Reset, Color::Reset), "a coloured cell {cell:?}");
        }
        // The selection and the alerts are still told apart without colour.
        assert!(buf.content().iter().any(|c| c.modifier.contains(ratatui::style::Modifier::REVERSED)));
    }
    let term = draw(&dash, &Preview::None, 80, 24, Look { color: true });
    assert!(term.backend().buffer().content().iter().any(|c| c.fg != Color::Reset), "with colour on, some is used");
}

#[test]
fn every_view_fits_from_80x24_up_without_losing_the_footer() {
    let dash = busy_fleet();
    for (cols, rows) in [(80, 24), (100, 30), (120, 40), (200, 50), (300, 80)] {
        let term = draw(&dash, &Preview::None, cols, rows, Look { color: true });
        let buf = term.backend().buffer();
        let last: String = (0..cols).map(|x| buf[(x, rows - 1)].symbol()).collect();
        assert!(last.contains("quit"), "{cols}x{rows}: {last}");
        let top: String = (0..cols).map(|x| buf[(x, 0)].symbol()).collect();
        assert!(top.contains("desk dash"), "{cols}x{rows}: {top}");
    }
}

/// The operator guide's screenshot of the dashboard is this view, not a picture that drifts.
#[test]
fn the_operator_guide_shows_the_current_80x24_view() {
    let term = busy_view(80, 24);
    let buf = term.backend().buffer();
    let rendered: Vec<String> =
        (0..24).map(|y| (0..80).map(|x| buf[(x, y)].symbol()).collect::<String>().trim_end().to_string()).collect();
    let guide = include_str!("../../docs/operator-guide.md");
    let start = guide.find("<!-- dash-screenshot").expect("the screenshot marker in docs/operator-guide.md");
    let block = guide[start..].split("```text\n").nth(1).and_then(|b| b.split("\n```").next()).expect("its text block");
    let documented: Vec<&str> = block.lines().collect();
    assert_eq!(documented, rendered, "update the screenshot in docs/operator-guide.md to this view");
}

#[test]
fn a_master_listens_only_on_a_socket_that_accepts() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("a.sock");
    assert!(!super::master_listens(&path), "no socket");
    let listener = std::os::unix::net::UnixListener::bind(&path).expect("bind");
    assert!(super::master_listens(&path), "listening");
    drop(listener);
    assert!(path.exists());
    assert!(!super::master_listens(&path), "a stale socket: its master died");
}

/// A 40x6 session that printed `line 1` .. `line 30` (so 25 of them went into its history),
/// with the master's five older lines `old 1` .. `old 5` before them.
fn scrolled_screen() -> (Screen, Vec<HistoryRow>) {
    let mut screen = Screen::with_history(40, 6, 100);
    for n in 1..=30 {
        screen.process(format!("\x1b[32mline {n}\x1b[0m\r\n").as_bytes());
    }
    screen.process(b"> ");
    let older = (1..=5).map(|n| HistoryRow { text: format!("old {n}"), wrapped: false, runs: Vec::new() }).collect();
    (screen, older)
}

fn text(term: &Terminal<TestBackend>) -> String {
    format!("{}", term.backend())
}

#[test]
fn page_up_scrolls_the_preview_into_history_with_a_marker_and_end_or_esc_goes_back_to_live() {
    let mut dash = busy_fleet();
    let (screen, older) = scrolled_screen();
    let shown = Preview::Screen { session: "charlie", screen: &screen, older: &older, live: true };
    // 80x24: the preview pane shows 7 of the screen's lines.
    let height = view::preview_height(ratatui::layout::Rect::new(0, 0, 80, 24), &dash);
    let max = view::preview_back_max(older.len(), &screen, height);
    assert_eq!(max, 5 + 25 + 6 - height);
    dash.set_preview_extent(max, height - 1);
    let live = text(&draw(&dash, &shown, 80, 24, Look { color: true }));
    assert!(live.contains("line 30") && !live.contains("line 20") && !live.contains("SCROLLED"), "{live}");

    dash.on_key(Key::PageUp);
    assert_eq!(dash.preview_scroll, height - 1);
    let back = text(&draw(&dash, &shown, 80, 24, Look { color: true }));
    assert!(back.contains("SCROLLED BACK") && back.contains("End/Esc: live"), "{back}");
    assert!(!back.contains("line 30"), "the newest line is below the window:\n{back}");
    dash.on_key(Key::LineDown);
    assert_eq!(dash.preview_scroll, height - 2);
    dash.on_key(Key::LineUp);
    dash.on_key(Key::Home);
    assert_eq!(dash.preview_scroll, max, "Home: the oldest line, no further");
    let top = text(&draw(&dash, &shown, 80, 24, Look { color: true }));
    assert!(top.contains("old 1") && top.contains("old 5") && top.contains("line 1 "), "{top}");
    // Output arriving while scrolled back does not move the window.
    dash.set_preview_extent(max + 3, height - 1);
    dash.preview_grew(3);
    assert_eq!(dash.preview_scroll, max + 3);

    assert_eq!(dash.on_key(Key::Esc), None);
    assert_eq!(dash.preview_scroll, 0, "Esc goes back to live");
    assert_eq!(dash.selected(), Some("charlie"), "and does nothing else");
    dash.on_key(Key::PageUp);
    dash.on_key(Key::End);
    assert_eq!(dash.preview_scroll, 0, "End goes back to live");
    dash.on_key(Key::PageUp);
    dash.on_key(Key::Char('j'));
    assert_eq!(dash.preview_scroll, 0, "another session's preview starts live");
    // The items pane hides the preview: no scrolling it unseen, and Esc leaves the pane.
    dash.on_key(Key::Char('i'));
    dash.on_key(Key::PageUp);
    assert_eq!(dash.preview_scroll, 0);
    dash.on_key(Key::Esc);
    assert!(!dash.items_focus);
}

#[test]
fn a_preview_without_history_does_not_scroll_and_says_so() {
    let mut dash = busy_fleet();
    dash.set_preview_extent(0, 7);
    dash.on_key(Key::PageUp);
    assert_eq!(dash.preview_scroll, 0);
    assert!(dash.status.as_deref().is_some_and(|s| s.contains("no history")), "{:?}", dash.status);
}

#[test]
fn a_page_up_before_the_history_is_in_lands_when_it_comes() {
    let mut dash = busy_fleet();
    // Only the live screen so far; the master's answer may bring up to 500 lines.
    dash.set_preview_extent_loading(500, 7);
    dash.on_key(Key::PageUp);
    assert_eq!(dash.preview_scroll, 7, "kept while the history loads");
    assert_eq!(dash.status, None, "no claim that there is no history: it is still coming");
    dash.set_preview_extent(40, 7);
    assert_eq!(dash.preview_scroll, 7, "one page back, now into the master's history");
}

#[test]
fn a_page_up_while_loading_says_so_once_the_history_turns_out_empty() {
    let mut dash = busy_fleet();
    dash.set_preview_extent_loading(500, 7);
    dash.on_key(Key::PageUp);
    dash.set_preview_extent(0, 7);
    assert_eq!(dash.preview_scroll, 0);
    assert_eq!(dash.status.as_deref(), Some("no history to scroll into"));
}

#[test]
fn the_empty_preview_says_no_sessions_yet_only_when_there_are_none() {
    let empty = draw(&Dash::new(), &Preview::None, 80, 24, Look { color: false });
    assert!(text(&empty).contains("No sessions yet"));
    let dash = busy_fleet();
    let name = dash.selected().expect("a selection").to_string();
    let shown = text(&draw(&dash, &Preview::None, 80, 24, Look { color: false }));
    assert!(!shown.contains("No sessions yet"), "{shown}");
    assert!(shown.contains(&format!("{name}: no preview to show")), "{shown}");
}

#[test]
fn scrolled_back_history_keeps_its_colours() {
    let mut dash = busy_fleet();
    let (screen, older) = scrolled_screen();
    dash.set_preview_extent(view::preview_back_max(older.len(), &screen, 7), 6);
    dash.on_key(Key::Home);
    let term = draw(
        &dash,
        &Preview::Screen { session: "charlie", screen: &screen, older: &older, live: true },
        80,
        24,
        Look { color: true },
    );
    let buf = term.backend().buffer();
    let (x, y) = find(buf, "line 2 ").expect("a history line of the model's own");
    assert_eq!(buf[(x, y)].fg, Color::Indexed(2));
}

#[test]
fn view_preview_scrolled_back_80x24() {
    let mut dash = busy_fleet();
    let (screen, older) = scrolled_screen();
    dash.set_preview_extent(view::preview_back_max(older.len(), &screen, 7), 6);
    dash.on_key(Key::PageUp);
    dash.on_key(Key::PageUp);
    let term = draw(
        &dash,
        &Preview::Screen { session: "charlie", screen: &screen, older: &older, live: true },
        80,
        24,
        Look { color: true },
    );
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_preview_scrolled_back_200x50() {
    let mut dash = busy_fleet();
    let (screen, older) = scrolled_screen();
    let height = view::preview_height(ratatui::layout::Rect::new(0, 0, 200, 50), &dash);
    dash.set_preview_extent(view::preview_back_max(older.len(), &screen, height), height - 1);
    dash.on_key(Key::Home);
    let term = draw(
        &dash,
        &Preview::Screen { session: "charlie", screen: &screen, older: &older, live: true },
        200,
        50,
        Look { color: true },
    );
    insta::assert_snapshot!(term.backend());
}

#[test]
fn v_groups_the_table_by_provider_most_urgent_group_first_and_back() {
    let mut dash = busy_fleet();
    dash.on_key(Key::Char('v'));
    assert_eq!(dash.grouping, Grouping::Provider);
    // demo holds the blocked charlie; codex (bravo exited 1) and shell (foxtrot exited 3)
    // rank as their worst row, ties by label; claude's alpha is idle.
    assert_eq!(names(&dash), ["charlie", "golf", "delta", "bravo", "foxtrot", "echo", "alpha"]);
    let shown = text(&draw(&dash, &Preview::None, 200, 50, Look { color: true }));
    assert!(shown.contains("── demo (3, 3 need you) ──") && shown.contains("── claude (1) ──"), "{shown}");
    let term = draw(&dash, &Preview::None, 80, 24, Look { color: true });
    // The selection is drawn on its session's row, not on a header.
    let buf = term.backend().buffer();
    let (_, y) = find(buf, "> charlie").expect("the selected row");
    assert!(buf[(4, y)].modifier.contains(ratatui::style::Modifier::REVERSED));
    dash.on_key(Key::Char('v'));
    assert_eq!(dash.grouping, Grouping::Channel, "then by channel (panes_tests)");
    dash.on_key(Key::Char('v'));
    assert_eq!(dash.grouping, Grouping::Host, "then by host");
    dash.on_key(Key::Char('v'));
    assert_eq!(dash.grouping, Grouping::None);
    assert_eq!(names(&dash), ["charlie", "golf", "delta", "bravo", "foxtrot", "alpha", "echo"]);
}

#[test]
fn view_grouped_by_provider_80x24() {
    let mut dash = busy_fleet();
    dash.on_key(Key::Char('v'));
    let term = draw(&dash, &Preview::Note { session: "charlie", text: "connecting..." }, 80, 24, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_grouped_by_provider_200x50() {
    let mut dash = busy_fleet();
    dash.on_key(Key::Char('v'));
    let screen = demo_screen();
    let term = draw(
        &dash,
        &Preview::Screen { session: "charlie", screen: &screen, older: &[], live: true },
        200,
        50,
        Look { color: true },
    );
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_items_80x24() {
    let mut dash = fleet();
    dash.on_key(Key::Char('i'));
    let term = draw(&dash, &Preview::None, 80, 24, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_prompt_editor_200x50() {
    let mut dash = fleet();
    dash.on_key(Key::Char('s'));
    for key in "Fix the flaky test.".chars().map(Key::Char) {
        dash.on_key(key);
    }
    let term = draw(&dash, &Preview::None, 200, 50, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_filter_being_typed_200x50() {
    let dash = filter_being_typed();
    let term = draw(&dash, &Preview::Note { session: "charlie", text: "connecting..." }, 200, 50, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_exited_session_shows_its_last_screen_80x24() {
    let mut dash = busy_fleet();
    while dash.selected() != Some("foxtrot") {
        dash.on_key(Key::Char('j'));
    }
    let term = draw(&dash, &Preview::Note { session: "foxtrot", text: "bye" }, 80, 24, Look { color: true });
    insta::assert_snapshot!(term.backend());
}

#[test]
fn view_unresponsive_master_80x24_and_200x50() {
    let mut dash = busy_fleet();
    dash.apply(&FleetEvent::Unresponsive { session: "alpha".into() }, NOW);
    while dash.selected() != Some("alpha") {
        dash.on_key(Key::Char('j'));
    }
    let note = Preview::Note { session: "alpha", text: "its master does not answer (stopped or wedged?)" };
    insta::assert_snapshot!(
        "view_unresponsive_master_80x24",
        draw(&dash, &note, 80, 24, Look { color: true }).backend()
    );
    insta::assert_snapshot!(
        "view_unresponsive_master_200x50",
        draw(&dash, &note, 200, 50, Look { color: true }).backend()
    );
}

#[test]
fn a_master_answering_again_is_live_again() {
    let mut dash = fleet();
    dash.apply(&FleetEvent::Unresponsive { session: "alpha".into() }, NOW);
    dash.apply(&FleetEvent::Answering { session: "alpha".into() }, NOW);
    let row = dash.row("alpha").expect("row");
    assert_eq!(row.lifecycle_word(), "running");
    assert!(!row.urgency().needs_person());
}

#[test]
fn a_fleet_of_hundreds_draws_the_selected_row_and_its_neighbours_wherever_it_is() {
    let mut dash = Dash::new();
    for n in 0..300 {
        dash.apply(&joined(&format!("s{n:03}"), "demo", Activity::Idle, 10, Health::Ok, "t"), NOW);
    }
    for grouping in [Grouping::None, Grouping::Provider] {
        if dash.grouping != grouping {
            dash.on_key(Key::Char('v'));
        }
        dash.on_key(Key::Char('g'));
        // (j presses, the selected row, a neighbour drawn beside it)
        for (steps, selected, neighbour) in [(0, "s000", "s001"), (150, "s150", "s149"), (149, "s299", "s298")] {
            for _ in 0..steps {
                dash.on_key(Key::Char('j'));
            }
            let shown = text(&draw(&dash, &Preview::None, 80, 24, Look { color: true }));
            assert!(
                shown.contains(&format!("> {selected}")) && shown.contains(&format!("  {neighbour}")),
                "{grouping:?} {selected}:\n{shown}"
            );
        }
    }
}

#[test]
fn an_exited_sessions_last_screen_scrolls_into_the_history_its_exit_record_kept() {
    let mut dash = busy_fleet();
    let mut record = exit(3, 60);
    record.last_screen = Some(vec!["last 1".into(), "last 2".into(), "bye".into()]);
    record.last_history = Some((1..=20).map(|n| format!("kept {n}")).collect());
    let (screen, older) = super::last_screen(
        record.last_screen.as_deref().unwrap_or_default(),
        record.last_history.as_deref().unwrap_or_default(),
        &record,
    );
    assert_eq!(screen.size(), (40, 6));
    assert_eq!(screen.history_len(), 0, "placed by position, nothing scrolled");
    let shown = Preview::Screen { session: "foxtrot", screen: &screen, older: &older, live: false };
    dash.set_preview_extent(view::preview_back_max(older.len(), &screen, 8), 7);
    let at_rest = text(&draw(&dash, &shown, 80, 24, Look { color: true }));
    assert!(at_rest.contains("exited: its last screen; PgUp: history") && at_rest.contains("bye"), "{at_rest}");
    assert!(!at_rest.contains(" live"), "an exit record is not live:\n{at_rest}");
    dash.on_key(Key::Home);
    let top = text(&draw(&dash, &shown, 80, 24, Look { color: true }));
    assert!(top.contains("kept 1") && top.contains("End/Esc: last screen"), "{top}");
}

fn find(buf: &ratatui::buffer::Buffer, needle: &str) -> Option<(u16, u16)> {
    for y in 0..buf.area.height {
        let line: String = (0..buf.area.width).map(|x| buf[(x, y)].symbol()).collect();
        if let Some(i) = line.find(needle) {
            return Some((line[..i].chars().count() as u16, y));
        }
    }
    None
}

#[test]
fn the_header_names_channels_with_unread_messages_and_their_human_mentions() {
    let mut dash = busy_fleet();
    let summary = |name: &str, unread, unread_human| desk_daemon::channel::summary::Summary {
        name: name.into(),
        goal: String::new(),
        members: 3,
        messages: 9,
        threads: 1,
        human_mentions: 2,
        unread,
        unread_human,
        last_ms: Some(NOW),
        stalled: None,
    };
    dash.channels = vec![summary("release", 3, 1), summary("quiet", 0, 0)];
    let term = draw(&dash, &Preview::None, 120, 30, Look { color: true });
    let buf = term.backend().buffer();
    let top: String = (0..120).map(|x| buf[(x, 0)].symbol()).collect();
    assert!(top.contains("#release 3 new @human 1"), "{top}");
    assert!(!top.contains("#quiet"), "a channel with nothing unread is not named: {top}");
    let (x, y) = find(buf, "@human 1").expect("the mention count");
    assert_eq!(buf[(x, y)].fg, Color::Red);
}

#[test]
fn every_session_that_needs_you_is_in_the_table_and_what_does_not_fit_is_counted() {
    for grouped in [false, true] {
        let mut dash = busy_fleet();
        if grouped {
            dash.on_key(Key::Char('v'));
        }
        let needing: Vec<String> =
            dash.visible().filter(|r| r.urgency().needs_person()).map(|r| r.name.clone()).collect();
        assert_eq!(needing.len(), 5, "{needing:?}");
        for (cols, rows) in [(80, 24), (100, 30), (120, 40)] {
            let term = draw(
                &dash,
                &Preview::Note { session: "charlie", text: "connecting..." },
                cols,
                rows,
                Look { color: true },
            );
            let buf = term.backend().buffer();
            // The table's rows: between its top line and the preview's.
            let (_, top) = find(buf, " fleet ").expect("the table");
            let (_, note) = find(buf, "connecting...").expect("the preview");
            let bottom = note - 1;
            let table: Vec<String> =
                (top..bottom).map(|y| (0..cols).map(|x| buf[(x, y)].symbol()).collect::<String>()).collect();
            let shown: Vec<&String> = dash
                .visible()
                .map(|r| &r.name)
                .filter(|n| {
                    table.iter().any(|l| l.starts_with(&format!("  {n} ")) || l.starts_with(&format!("> {n} ")))
                })
                .collect();
            for name in &needing {
                assert!(
                    shown.contains(&name),
                    "{cols}x{rows}, grouped {grouped}: {name} needs you and is not shown:\n{}",
                    table.join("\n")
                );
            }
            let left = dash.visible().count() - shown.len();
            let marker = table.iter().find(|l| l.contains("more below") || l.contains("more above"));
            match left {
                0 => assert!(marker.is_none(), "{cols}x{rows}: {marker:?}"),
                n => assert!(
                    marker.is_some_and(|m| m.contains(&format!("{n} more"))),
                    "{cols}x{rows}, grouped {grouped}: {n} rows left out without saying so:\n{}",
                    table.join("\n")
                ),
            }
        }
    }
}

/// A channel whose messages stopped reaching their members is named in the header, read or
/// not, in red: its posts succeed and nothing else would say so.
#[test]
fn the_header_names_a_stalled_channel() {
    let mut dash = busy_fleet();
    let stalled = desk_daemon::channel::summary::Summary {
        name: "ops".into(),
        goal: String::new(),
        members: 2,
        messages: 4,
        threads: 0,
        human_mentions: 0,
        unread: 0,
        unread_human: 0,
        last_ms: Some(NOW),
        stalled: Some(desk_daemon::channel::stall::Stall { since_ms: NOW, reasons: vec!["root.md is damaged".into()] }),
    };
    dash.channels = vec![stalled];
    let term = draw(&dash, &Preview::None, 120, 30, Look { color: true });
    let buf = term.backend().buffer();
    let top: String = (0..120).map(|x| buf[(x, 0)].symbol()).collect();
    assert!(top.contains("#ops stalled"), "{top}");
    let (x, y) = find(buf, "#ops stalled").expect("the stall");
    assert_eq!(buf[(x, y)].fg, Color::Red);
}

#[test]
fn question_mark_lists_every_key_and_any_key_closes_it_doing_nothing_else() {
    let mut dash = fleet();
    assert_eq!(dash.on_key(Key::Char('?')), None);
    assert!(dash.help);
    let screen = demo_screen();
    let preview = Preview::Screen { session: "alpha", screen: &screen, older: &[], live: true };
    let term = draw(&dash, &preview, 100, 40, Look { color: false });
    let text = format!("{:?}", term.backend());
    for (key, what) in view::HELP.iter().filter(|(k, _)| !k.is_empty()) {
        assert!(text.contains(key) && text.contains(&what[..what.len().min(30)]), "{key}: {what}\n{text}");
    }
    // q closes the help; it does not quit.
    assert_eq!(dash.on_key(Key::Char('q')), None);
    assert!(!dash.help);
    assert_eq!(dash.on_key(Key::Char('q')), Some(Command::Quit));
}

#[test]
fn view_help_80x24() {
    let mut dash = fleet();
    dash.on_key(Key::Char('?'));
    let screen = demo_screen();
    let preview = Preview::Screen { session: "alpha", screen: &screen, older: &[], live: true };
    insta::assert_snapshot!(draw(&dash, &preview, 80, 24, Look { color: true }).backend());
}

#[test]
fn view_empty_dashboard_says_how_to_start_a_session_80x24() {
    let dash = Dash::new();
    insta::assert_snapshot!(draw(&dash, &Preview::None, 80, 24, Look { color: true }).backend());
}

#[test]
fn a_dropped_item_leaves_the_items_list_and_the_counts_at_once() {
    let mut dash = fleet();
    let golf = dash.row("golf").unwrap().queue.clone().unwrap();
    assert_eq!((golf.queued, golf.stuck, golf.items.len()), (3, 2, 3));
    dash.item_dropped(&ItemRef { host: None, id: item_id("0000000000000000000000000A") });
    let golf = dash.row("golf").unwrap().queue.clone().unwrap();
    assert_eq!((golf.queued, golf.stuck), (2, 1));
    assert_eq!(
        golf.items.iter().map(|i| i.id.as_str()).collect::<Vec<_>>(),
        ["0000000000000000000000000B", "0000000000000000000000000C"]
    );
    dash.item_dropped(&ItemRef { host: None, id: item_id("0000000000000000000000000C") });
    assert_eq!(dash.row("golf").unwrap().queue.as_ref().unwrap().queued, 1);
    dash.item_dropped(&ItemRef { host: None, id: item_id("000000000000000000000000FF") });
    assert_eq!(dash.row("golf").unwrap().queue.as_ref().unwrap().queued, 1);
}

fn title_event(session: &str, seq: u64, title: &str, ago_s: u64) -> FleetEvent {
    FleetEvent::Event {
        session: session.into(),
        event: Event { seq, ts_ms: NOW - ago_s * 1000, generation: 1, body: EventBody::Title { title: title.into() } },
    }
}

#[test]
fn spinner_frames_are_not_events_but_a_title_with_new_words_is() {
    let mut dash = fleet();
    let before = dash.log_lines().count();
    // alpha's title is "✳ alpha idle": frames of a spinner over the same words.
    for (seq, frame) in ["⠋", "⠙", "⠹", "✳"].iter().enumerate() {
        dash.apply(&title_event("alpha", 10 + seq as u64, &format!("{frame} alpha idle"), 1), NOW);
    }
    assert_eq!(dash.log_lines().count(), before, "{:?}", dash.log_lines().collect::<Vec<_>>());
    dash.apply(&title_event("alpha", 20, "✳ alpha fixes the parser", 1), NOW);
    assert_eq!(dash.log_lines().next().map(|l| l.text.as_str()), Some("title: ✳ alpha fixes the parser"));
}

#[test]
fn the_events_pane_starts_with_the_fleets_recent_past() {
    let mut dash = Dash::new();
    let event = |seq: u64, ago_s: u64, body: EventBody| Event { seq, ts_ms: NOW - ago_s * 1000, generation: 1, body };
    let started =
        EventBody::Started { pid: 1, command: vec!["claude".into()], cols: 80, rows: 24, provider: "claude".into() };
    let blocked = EventBody::State {
        change: AxisChange::Activity { from: Activity::Working, to: Activity::Blocked },
        evidence: "hook Notification".into(),
        wait: Some("approval".into()),
    };
    let title = |t: &str| EventBody::Title { title: t.into() };
    dash.backlog(vec![
        ("api".into(), event(3, 10, blocked)),
        ("api".into(), event(1, 60, started)),
        ("web".into(), event(1, 50, title("⠋ web builds"))),
        ("web".into(), event(2, 49, title("⠙ web builds"))),
        ("web".into(), event(3, 30, EventBody::Output { active: true })),
    ]);
    let lines: Vec<(String, String)> = dash.log_lines().map(|l| (l.session.clone(), l.text.clone())).collect();
    assert_eq!(
        lines,
        [
            ("api".to_string(), "activity blocked on approval (hook Notification)".to_string()),
            ("web".to_string(), "title: ⠋ web builds".to_string()),
            ("api".to_string(), "started: claude".to_string()),
        ],
        "newest first, spinner frames and output flow left out"
    );
}

#[test]
fn states_are_spelled_as_desk_ls_spells_them() {
    let dash = fleet();
    assert_eq!(dash.row("foxtrot").unwrap().lifecycle_word(), "exited(3)");
    let mut dash = fleet();
    dash.apply(&state_event("alpha", 9, "blocked", Some("approval"), 16), NOW);
    let screen = demo_screen();
    let preview = Preview::Screen { session: "alpha", screen: &screen, older: &[], live: true };
    let text = format!("{:?}", draw(&dash, &preview, 200, 50, Look { color: false }).backend());
    assert!(text.contains("blocked(approval) 16s"), "{text}");
}

#[test]
fn a_force_that_pasted_again_is_not_shown_as_a_refusal() {
    use desk_wire::control::{Envelope, Response};
    // As the loop reads an answer: off the wire.
    let answer = |resp: Response| {
        let env: Envelope<Response> = serde_json::from_slice(&resp.to_line()).unwrap();
        Ok(env.body.into_answer::<()>())
    };
    let typed = "pasted again; still not seen in the input area: the item stays stuck (paste-missing)";
    assert_eq!(
        super::outcome_line(answer(Response::fail(desk_wire::control::ErrorKind::NotDelivered, typed)), None),
        typed
    );
    assert_eq!(
        super::outcome_line(answer(Response::fail(desk_wire::control::ErrorKind::Refused, "no pending item x")), None),
        "refused: no pending item x"
    );
    assert_eq!(
        super::outcome_line(answer(Response::done("pressed Enter; delivered")), None),
        "pressed Enter; delivered"
    );
}

#[test]
fn declared_sessions_that_never_ran_are_rows_down_and_fleet_notes_show_on_each_row() {
    let mut dash = fleet();
    let notes = HashMap::from([
        ("alpha".to_string(), "generation 2 resumed 5a0e2f1c… of generation 1".to_string()),
        ("bravo".to_string(), "failed: restarted 3 times in 5 minutes".to_string()),
    ]);
    dash.set_fleet(&notes, &[("zulu".to_string(), "claude".to_string())]);
    let zulu = dash.row("zulu").expect("a row for the declared session");
    assert_eq!((zulu.lifecycle_word().as_str(), zulu.urgency()), ("down", Urgency::ExitedCleanly));
    assert!(dash.row("alpha").unwrap().lifecycle_word().ends_with("· generation 2 resumed 5a0e2f1c… of generation 1"));
    assert!(dash.row("bravo").unwrap().lifecycle_word().contains("failed: restarted 3 times"));
    // No longer declared anywhere: its row goes; a note that is gone goes too.
    dash.set_fleet(&HashMap::new(), &[]);
    assert!(dash.row("zulu").is_none());
    assert_eq!(dash.row("alpha").unwrap().fleet, None);
}

#[test]
fn a_host_s_listing_becomes_host_name_rows_that_its_silence_marks_unresponsive_and_the_header_names() {
    let mut dash = Dash::new();
    dash.insert(Row::connecting("here", "shell", 1, 80, 24));
    let listing = serde_json::json!([
        { "name": "web", "status": "running", "provider": "claude", "cols": 100, "rows": 30, "title": "on box",
          "state": { "lifecycle": { "value": "running" }, "activity": { "value": "blocked", "since_ms": 5 },
                     "health": { "value": "ok" } },
          "queue": 2, "stuck": 1 },
        { "name": "old", "status": "exited", "exit": { "code": 3, "escalated": false, "exited_at_ms": 9 } },
    ]);
    let rows = listing.as_array().unwrap().iter().filter_map(|v| super::hosts::row_from_listing("box", v)).collect();
    dash.set_host("box", Ok(rows));
    let web = dash.row("box:web").expect("the host's running session");
    assert_eq!(
        (web.link.clone(), web.activity, web.cols, web.pid),
        (super::model::Link::Live, Activity::Blocked, 100, 0)
    );
    assert_eq!(web.queue.as_ref().map(|q| (q.queued, q.stuck)), Some((2, 1)));
    assert!(
        matches!(dash.row("box:old").map(|r| &r.link), Some(super::model::Link::Exited(e)) if e.status == ExitStatus::Code(3))
    );
    // The local daemon's counts are this machine's: the host's rows keep the host's.
    dash.set_queues(Ok(HashMap::new()));
    assert_eq!(dash.row("box:web").and_then(|r| r.queue.as_ref()).map(|q| q.queued), Some(2));
    dash.grouping = Grouping::Host;
    assert_eq!(dash.group_of(dash.row("box:web").unwrap()), "box");
    assert_eq!(dash.group_of(dash.row("here").unwrap()), "this machine");
    // The host stops answering: its rows stay as last seen, unresponsive, and the header says why.
    dash.set_host("box", Err("connection refused".into()));
    assert_eq!(dash.row("box:web").map(|r| r.link.clone()), Some(super::model::Link::Unresponsive));
    let shown = text(&draw(&dash, &Preview::None, 160, 30, Look { color: false }));
    assert!(shown.lines().next().unwrap_or("").contains("box unreachable: connection refused"), "{shown}");
    // Back, without a session it had: that row goes.
    let rows =
        listing.as_array().unwrap()[..1].iter().filter_map(|v| super::hosts::row_from_listing("box", v)).collect();
    dash.set_host("box", Ok(rows));
    assert!(dash.row("box:old").is_none() && dash.row("box:web").is_some() && dash.row("here").is_some());
}

#[test]
fn a_host_s_items_are_forced_dropped_and_paused_by_typed_references_to_the_host() {
    let mut dash = Dash::new();
    let mut row = Row::connecting("box:web", "demo", 0, 80, 24);
    row.link = super::model::Link::Live;
    row.queue = Some(QueueCounts {
        queued: 2,
        stuck: 1,
        paused: false,
        items: vec![
            ItemLine {
                id: item_id("0000000000000000000000000A"),
                state: "stuck".into(),
                class: Some("submit-stuck".into()),
                preview: "on the box".into(),
                why: String::new(),
            },
            ItemLine {
                id: item_id("0000000000000000000000000B"),
                state: "queued".into(),
                class: None,
                preview: "later".into(),
                why: String::new(),
            },
        ],
    });
    dash.set_host("box", Ok(vec![row]));
    // This machine's usage sampling leaves a host's rows the figures their host gave.
    let mut with_usage = dash.row("box:web").unwrap().clone();
    with_usage.usage = Some((12.0, 2048));
    dash.set_host("box", Ok(vec![with_usage]));
    dash.set_usage(&HashMap::new());
    assert_eq!(dash.row("box:web").and_then(|r| r.usage), Some((12.0, 2048)));
    let on_box = |id: &str| ItemRef { host: Some("box".into()), id: item_id(id) };
    dash.on_key(Key::Char('f'));
    let question = dash.confirm.as_ref().map(|c| c.question.clone()).unwrap_or_default();
    assert!(question.starts_with("force box:0000000000000000000000000A (submit-stuck)"), "{question}");
    assert_eq!(dash.on_key(Key::Char('y')), Some(Command::Run(Action::Force(on_box("0000000000000000000000000A")))));
    dash.on_key(Key::Char('i'));
    dash.on_key(Key::Char('J'));
    dash.on_key(Key::Char('d'));
    assert_eq!(dash.on_key(Key::Char('y')), Some(Command::Run(Action::Drop(on_box("0000000000000000000000000B")))));
    dash.on_key(Key::Esc);
    let pause = dash.on_key(Key::Char('p'));
    let expected = SessionRef { host: Some("box".into()), name: desk_wire::names::SessionName::parse("web").unwrap() };
    assert_eq!(pause, Some(Command::Run(Action::Pause(expected.clone()))));
    let Some(Command::Run(action)) = pause else { unreachable!() };
    assert_eq!(action.host(), Some("box"));
    assert_eq!(
        action.request(),
        desk_wire::control::Request::Pause {
            session: expected.name.clone(),
            reason: Some("paused from desk dash".into())
        },
        "the host's daemon is asked by the name it knows"
    );
    // A drop of a host's item takes it off that host's row only.
    dash.item_dropped(&ItemRef { host: None, id: item_id("0000000000000000000000000B") });
    assert_eq!(dash.row("box:web").and_then(|r| r.queue.as_ref()).map(|q| q.items.len()), Some(2));
    dash.item_dropped(&on_box("0000000000000000000000000B"));
    assert_eq!(dash.row("box:web").and_then(|r| r.queue.as_ref()).map(|q| q.items.len()), Some(1));
}

#[test]
fn a_host_s_events_go_in_the_events_pane_by_time_and_a_resize_sizes_its_row() {
    use desk_wire::events::{Event, EventBody};
    let mut dash = Dash::new();
    let mut row = Row::connecting("box:web", "demo", 0, 80, 24);
    row.link = super::model::Link::Live;
    dash.set_host("box", Ok(vec![row]));
    let event = |ts_ms: u64, seq: u64, body: EventBody| Event { seq, ts_ms, generation: 1, body };
    dash.backlog(vec![("here".into(), event(2_000, 1, EventBody::Bell))]);
    dash.host_events(vec![
        ("box:web".into(), event(1_000, 1, EventBody::Notification { title: None, body: "older".into() })),
        ("box:web".into(), event(3_000, 2, EventBody::Resize { cols: 100, rows: 30 })),
    ]);
    let lines: Vec<(u64, String)> = dash.log_lines().map(|l| (l.at_ms, l.session.clone())).collect();
    let times: Vec<u64> = lines.iter().map(|(t, _)| *t).collect();
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| b.cmp(a));
    assert_eq!(times, sorted, "newest first, whatever came first: {lines:?}");
    assert!(lines.iter().any(|(t, s)| *t == 1_000 && s == "box:web"), "{lines:?}");
    let web = dash.row("box:web").unwrap();
    assert_eq!((web.cols, web.rows), (100, 30));
}

#[test]
fn the_approvals_view_holds_every_place_s_dialogs_the_longest_waiting_first() {
    let mut dash = Dash::new();
    dash.on_key(Key::Char('A'));
    let card = |session: &str, since_ms: u64| crate::inbox::Open {
        session: session.into(),
        provider: "demo".into(),
        since_ms,
        dialog: desk_core::dialog::Dialog {
            kind: desk_core::dialog::Kind::Approval,
            title: "t".into(),
            question: "q?".into(),
            tool: None,
            args: None,
            layout: desk_core::dialog::Layout::Numbered,
            options: Vec::new(),
            text: Vec::new(),
            fingerprint: session.into(),
        },
    };
    dash.set_approvals(Some("box"), vec![card("box:api", 5)], Vec::new());
    dash.set_approvals(None, vec![card("here", 9)], vec!["mute".into()]);
    let view = dash.approvals.as_ref().unwrap();
    let sessions: Vec<&str> = view.cards.iter().flatten().map(|c| c.session.as_str()).collect();
    assert_eq!(sessions, ["box:api", "here"]);
    assert_eq!(view.unread, ["mute"]);
    // This machine's next reading keeps the host's cards.
    dash.set_approvals(None, Vec::new(), Vec::new());
    let sessions: Vec<String> =
        dash.approvals.as_ref().unwrap().cards.iter().flatten().map(|c| c.session.clone()).collect();
    assert_eq!(sessions, ["box:api"]);
}
