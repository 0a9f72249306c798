//! The demo agent on real PTYs: readiness, submission, pastes, the paste-burst window, the
//! mid-turn queue, the approval dialog, crashes, hooks, resize and exit. Every test runs its own
//! agent (tests run in parallel) and synchronises only on what the screen, the prompt log or
//! the hook log show.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, ensure};
use desk_demo_agent::{PromptRecord, read_prompt_log};
use nix::sys::signal::Signal;
use serde_json::Value;

use crate::harness::{PATIENCE, Pty, PtyCommand, Screen, TempHome};

const BIN: &str = env!("CARGO_BIN_EXE_desk-demo-agent");
const IDLE_TITLE: &str = "✳ demo";

struct Demo {
    pty: Pty,
    _home: TempHome,
    log: PathBuf,
}

fn start(args: &[&str]) -> anyhow::Result<Demo> {
    start_with(args, |c| c)
}

fn start_with(args: &[&str], customize: impl FnOnce(PtyCommand) -> PtyCommand) -> anyhow::Result<Demo> {
    let home = TempHome::new()?;
    let log = home.join("prompts.jsonl");
    let cmd = PtyCommand::new(BIN).home(&home).cwd(home.path()).arg("--prompt-log").arg(&log).args(args);
    let pty = customize(cmd).spawn()?;
    Ok(Demo { pty, _home: home, log })
}

/// The text in the input box's first row (between `│ > ` and the right border).
fn input_box(screen: &Screen) -> Option<String> {
    let row = screen.rows().iter().find(|r| r.starts_with("│ > "))?;
    let inner = row.strip_prefix("│ > ")?.trim_end();
    Some(inner.strip_suffix('│').unwrap_or(inner).trim_end().to_string())
}

/// The status row under the input box, trimmed.
fn status_row(screen: &Screen) -> Option<&str> {
    let bottom = screen.rows().iter().rposition(|r| r.starts_with('╰'))?;
    Some(screen.row(bottom + 1).trim())
}

fn is_spinner_title(title: &str) -> bool {
    title.chars().next().is_some_and(|c| ('\u{2800}'..='\u{28FF}').contains(&c))
}

impl Demo {
    /// Wait until the UI is up: idle title, input box, bracketed paste on.
    fn ready(&self) -> anyhow::Result<Screen> {
        self.pty.wait_until(PATIENCE, "the agent to be ready", |s| {
            s.title() == IDLE_TITLE && input_box(s).is_some() && s.bracketed_paste()
        })
    }

    fn prompts(&self) -> anyhow::Result<Vec<PromptRecord>> {
        read_prompt_log(&self.log)
    }

    fn wait_prompts(&self, n: usize) -> anyhow::Result<Vec<PromptRecord>> {
        self.pty.wait_for(PATIENCE, &format!("{n} prompts in the log"), || {
            let records = self.prompts()?;
            Ok((records.len() >= n).then_some(records))
        })
    }

    /// Type `text` and wait until the input box shows it.
    fn type_text(&self, text: &str) -> anyhow::Result<()> {
        self.pty.write(text)?;
        self.pty
            .wait_until(PATIENCE, &format!("input box shows {text:?}"), |s| input_box(s).as_deref() == Some(text))?;
        Ok(())
    }

    /// Wait until no turn runs and nothing is queued.
    fn idle(&self) -> anyhow::Result<Screen> {
        self.pty
            .wait_until(PATIENCE, "the agent to be idle", |s| s.title() == IDLE_TITLE && status_row(s) == Some("idle"))
    }
}

fn prompt_texts(records: &[PromptRecord]) -> Vec<&str> {
    records.iter().map(|r| r.prompt.as_str()).collect()
}

#[test]
fn starts_idle_with_an_input_box_and_bracketed_paste() -> anyhow::Result<()> {
    let demo = start(&[])?;
    let screen = demo.ready()?;
    ensure!(screen.contains("╭"), "no box top:\n{screen}");
    ensure!(screen.contains("╰"), "no box bottom:\n{screen}");
    ensure!(screen.contains("  idle"), "no status row:\n{screen}");
    ensure!(!screen.contains("no cursor report"), "{screen}");
    ensure!(screen.cursor_queries() == 1, "{screen}");
    ensure!(input_box(&screen).as_deref() == Some(""), "{screen}");
    ensure!(demo.pty.with_vt100(|s| s.hide_cursor()), "the box draws its own cursor; the terminal's must be hidden");
    Ok(())
}

#[test]
fn typed_prompt_is_submitted_once_and_the_title_spins_then_idles() -> anyhow::Result<()> {
    let demo = start(&[])?;
    demo.ready()?;
    demo.type_text("hello world")?;
    demo.pty.write("\r")?;
    let records = demo.wait_prompts(1)?;
    ensure!(records[0].seq == 1);
    let screen = demo.pty.wait_until(PATIENCE, "the reply and the idle title", |s| {
        s.contains("● Done: hello world") && s.title() == IDLE_TITLE
    })?;
    ensure!(screen.contains("> hello world"), "no echo:\n{screen}");
    ensure!(
        screen.titles_seen().iter().any(|t| is_spinner_title(t) && t.ends_with(" demo")),
        "no spinner title:\n{screen}"
    );
    ensure!(input_box(&screen).as_deref() == Some(""), "{screen}");
    ensure!(prompt_texts(&demo.prompts()?) == ["hello world"]);
    Ok(())
}

fn ten_lines() -> String {
    (1..=10).map(|i| format!("line {i} of the pasted text")).collect::<Vec<_>>().join("\n")
}

#[test]
fn ten_line_paste_shows_a_placeholder_and_submits_the_full_text() -> anyhow::Result<()> {
    let demo = start(&[])?;
    demo.ready()?;
    let text = ten_lines();
    // Terminals send pasted line ends as CR; the agent must still keep the lines.
    demo.pty.paste(&text.replace('\n', "\r"))?;
    let screen = demo.pty.wait_for_text("[Pasted text #1 +10 lines]")?;
    ensure!(!screen.contains("line 7"), "paste not collapsed:\n{screen}");
    ensure!(demo.prompts()?.is_empty(), "a paste alone must not submit");
    demo.pty.write("\r")?;
    let records = demo.wait_prompts(1)?;
    ensure!(records[0].prompt == text, "submitted {:?}", records[0].prompt);
    Ok(())
}

#[test]
fn enter_in_the_same_write_as_a_paste_submits_when_burst_detection_is_off() -> anyhow::Result<()> {
    let demo = start(&[])?;
    demo.ready()?;
    demo.pty.write(format!("\x1b[200~{}\x1b[201~\r", ten_lines()))?;
    let records = demo.wait_prompts(1)?;
    ensure!(records[0].prompt == ten_lines());
    Ok(())
}

#[test]
fn enter_right_after_a_paste_is_a_newline_within_the_burst_window() -> anyhow::Result<()> {
    let demo = start(&["--paste-burst-ms", "200"])?;
    demo.ready()?;
    // Paste and Enter in one write, as a naive sender does: the Enter lands in the window.
    demo.pty.write(format!("\x1b[200~{}\x1b[201~\r", ten_lines()))?;
    let screen = demo.pty.wait_until(PATIENCE, "the paste in the box and the burst window closed", |s| {
        s.contains("[Pasted text #1 +10 lines]") && status_row(s) == Some("idle")
    })?;
    ensure!(demo.prompts()?.is_empty(), "Enter inside the window submitted:\n{screen}");
    ensure!(
        screen.contains("│   ") && screen.title() == IDLE_TITLE,
        "expected the swallowed Enter as a second input row:\n{screen}"
    );
    demo.pty.write("\r")?;
    let records = demo.wait_prompts(1)?;
    ensure!(records[0].prompt == ten_lines(), "submitted {:?}", records[0].prompt);
    Ok(())
}

#[test]
fn enter_right_after_a_fast_typed_burst_is_a_newline() -> anyhow::Result<()> {
    let demo = start(&["--paste-burst-ms", "200"])?;
    demo.ready()?;
    demo.pty.write("fast typed\r")?;
    demo.pty.wait_until(PATIENCE, "the burst window to close", |s| {
        input_box(s).as_deref() == Some("fast typed") && status_row(s) == Some("idle")
    })?;
    ensure!(demo.prompts()?.is_empty());
    demo.pty.write("\r")?;
    ensure!(prompt_texts(&demo.wait_prompts(1)?) == ["fast typed"]);
    Ok(())
}

#[test]
fn enter_mid_turn_queues_and_queued_prompts_run_in_order() -> anyhow::Result<()> {
    let work_ms = 2500;
    let demo = start(&["--work-ms", &work_ms.to_string()])?;
    demo.ready()?;
    demo.type_text("first")?;
    demo.pty.write("\r")?;
    demo.pty.wait_until(PATIENCE, "the first turn to work", |s| s.contains("working"))?;
    demo.type_text("second")?;
    demo.pty.write("\r")?;
    demo.pty.wait_for_text("queued: 1")?;
    demo.type_text("third")?;
    demo.pty.write("\r")?;
    demo.pty.wait_for_text("queued: 2")?;
    let records = demo.wait_prompts(3)?;
    ensure!(prompt_texts(&records) == ["first", "second", "third"]);
    ensure!(records.iter().map(|r| r.seq).collect::<Vec<_>>() == [1, 2, 3]);
    // Queued prompts are logged when submitted (after the previous turn), not when queued.
    for pair in records.windows(2) {
        let gap = pair[1].ts_ms.saturating_sub(pair[0].ts_ms);
        ensure!(gap + 50 >= work_ms, "submitted only {gap} ms after the previous prompt");
    }
    let screen = demo.idle()?;
    ensure!(screen.contains("● Done: third"), "{screen}");
    Ok(())
}

#[test]
fn approval_dialog_discards_a_paste_and_enter_answers_it() -> anyhow::Result<()> {
    let demo = start(&[])?;
    demo.ready()?;
    demo.type_text("please approve-me")?;
    demo.pty.write("\r")?;
    demo.pty.wait_until(PATIENCE, "the approval dialog", |s| {
        s.contains("Do you want to run this command?") && s.title() == "✋ demo"
    })?;
    // A delivery that pastes and presses Enter here answers the dialog and loses the text.
    demo.pty.write("\x1b[200~sneaky pasted text\x1b[201~\r")?;
    let screen = demo.pty.wait_until(PATIENCE, "the answer and the end of the turn", |s| {
        s.contains("Approved (1. Yes)") && s.contains("● Done: please approve-me") && s.title() == IDLE_TITLE
    })?;
    ensure!(!screen.contains("sneaky"), "the paste leaked:\n{screen}");
    ensure!(input_box(&screen).as_deref() == Some(""), "{screen}");
    ensure!(prompt_texts(&demo.prompts()?) == ["please approve-me"]);
    Ok(())
}

#[test]
fn approval_dialog_selects_with_digits_and_esc_answers_no() -> anyhow::Result<()> {
    let demo = start(&["--work-ms", "100"])?;
    demo.ready()?;
    demo.pty.write("approve-me one")?;
    demo.pty.write("\r")?;
    demo.pty.wait_for_text("❯ 1. Yes")?;
    demo.pty.write("2")?;
    demo.pty.wait_for_text("❯ 2. No")?;
    demo.pty.write("\r")?;
    demo.pty.wait_for_text("Denied (2. No)")?;
    demo.idle()?;
    demo.pty.write("approve-me two\r")?;
    demo.pty.wait_for_text("❯ 1. Yes")?;
    demo.pty.write("\x1b")?;
    let screen =
        demo.pty.wait_until(PATIENCE, "the second denial", |s| s.contents().matches("Denied (2. No)").count() == 2)?;
    ensure!(!screen.contains("Approved"), "{screen}");
    Ok(())
}

#[test]
fn crash_word_exits_with_the_configured_code() -> anyhow::Result<()> {
    let mut demo = start(&["--crash-code", "7"])?;
    demo.ready()?;
    demo.type_text("please crash-now")?;
    demo.pty.write("\r")?;
    let status = demo.pty.wait_exit(PATIENCE)?;
    ensure!(status.code() == Some(7), "exit status {status:?}");
    ensure!(prompt_texts(&demo.prompts()?) == ["please crash-now"]);
    ensure!(!demo.pty.screen().bracketed_paste(), "terminal not restored");
    Ok(())
}

#[test]
fn crash_word_can_kill_the_agent_with_a_signal() -> anyhow::Result<()> {
    use std::os::unix::process::ExitStatusExt;
    let mut demo = start(&["--crash-signal", "SEGV"])?;
    demo.ready()?;
    demo.pty.write("crash-now")?;
    demo.pty.write("\r")?;
    let status = demo.pty.wait_exit(PATIENCE)?;
    ensure!(status.signal() == Some(libc::SIGSEGV), "exit status {status:?}");
    Ok(())
}

#[test]
fn startup_without_a_cursor_report_becomes_ready_after_the_timeout() -> anyhow::Result<()> {
    let started = Instant::now();
    let demo = start_with(&[], |c| c.answer_queries(false))?;
    let screen = demo.ready()?;
    ensure!(started.elapsed() >= Duration::from_millis(1900), "ready before the 2 s cursor-report timeout");
    ensure!(screen.cursor_queries() == 1);
    ensure!(screen.contains("no cursor report"), "{screen}");
    Ok(())
}

#[test]
fn input_before_ready_is_swallowed() -> anyhow::Result<()> {
    let demo = start(&["--startup-delay-ms", "1500"])?;
    // The query is sent after raw mode is on, so what follows reaches the agent as keys.
    demo.pty.wait_until(PATIENCE, "the cursor query", |s| s.cursor_queries() == 1)?;
    demo.pty.write("early\r")?;
    demo.pty.paste("early paste")?;
    let screen = demo.ready()?;
    ensure!(input_box(&screen).as_deref() == Some(""), "{screen}");
    demo.type_text("late")?;
    demo.pty.write("\r")?;
    demo.wait_prompts(1)?;
    let screen = demo.idle()?;
    ensure!(!screen.contains("early"), "{screen}");
    ensure!(prompt_texts(&demo.prompts()?) == ["late"]);
    Ok(())
}

#[test]
fn keep_early_input_applies_it_once_ready() -> anyhow::Result<()> {
    let demo = start(&["--startup-delay-ms", "800", "--keep-early-input"])?;
    demo.pty.wait_until(PATIENCE, "the cursor query", |s| s.cursor_queries() == 1)?;
    demo.pty.write("early")?;
    demo.ready()?;
    demo.pty.wait_until(PATIENCE, "the early text in the box", |s| input_box(s).as_deref() == Some("early"))?;
    Ok(())
}

fn hook_docs(path: &std::path::Path) -> anyhow::Result<Vec<Value>> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(e.into()),
    };
    serde_json::Deserializer::from_str(&text)
        .into_iter::<Value>()
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| format!("hook log is not a sequence of JSON documents:\n{text}"))
}

fn event_names(docs: &[Value]) -> Vec<String> {
    docs.iter().map(|d| d["hook_event_name"].as_str().unwrap_or("?").to_string()).collect()
}

#[test]
fn hooks_receive_claude_code_style_events() -> anyhow::Result<()> {
    let home = TempHome::new()?;
    let hook_log = home.join("hooks.jsonl");
    let hook_cmd = format!("cat >> '{}'", hook_log.display());
    let mut demo = start(&["--hook-cmd", &hook_cmd, "--session-id", "sess-42", "--work-ms", "200"])?;
    demo.ready()?;
    let wait_events = |demo: &Demo, n: usize| {
        demo.pty.wait_for(PATIENCE, &format!("{n} hook events"), || {
            let docs = hook_docs(&hook_log)?;
            Ok((docs.len() >= n).then_some(docs))
        })
    };
    wait_events(&demo, 1)?;
    demo.type_text("hello hooks")?;
    demo.pty.write("\r")?;
    wait_events(&demo, 3)?;
    demo.idle()?;
    demo.type_text("approve-me now")?;
    demo.pty.write("\r")?;
    demo.pty.wait_for_text("Do you want to run this command?")?;
    wait_events(&demo, 7)?;
    demo.pty.write("\r")?;
    wait_events(&demo, 9)?;
    demo.idle()?;
    demo.pty.write("\x04")?;
    let status = demo.pty.wait_exit(PATIENCE)?;
    ensure!(status.code() == Some(0), "{status:?}");

    let docs = hook_docs(&hook_log)?;
    let text = std::fs::read_to_string(&hook_log)?;
    ensure!(text.lines().count() == docs.len(), "one line per invocation:\n{text}");
    ensure!(
        event_names(&docs)
            == [
                "SessionStart",
                "UserPromptSubmit",
                "Stop",
                "UserPromptSubmit",
                "PreToolUse",
                "PermissionRequest",
                "Notification",
                "PostToolUse",
                "Stop",
                "SessionEnd"
            ],
        "events: {:?}",
        event_names(&docs)
    );
    for doc in &docs {
        ensure!(doc["session_id"] == "sess-42", "{doc}");
        ensure!(doc["cwd"].as_str().is_some_and(|c| !c.is_empty()), "{doc}");
    }
    ensure!(docs[0]["source"] == "startup");
    ensure!(docs[1]["prompt"] == "hello hooks");
    ensure!(docs[4]["tool_name"] == "Bash" && docs[4]["tool_input"]["command"].is_string());
    ensure!(docs[4]["tool_use_id"] == docs[7]["tool_use_id"]);
    ensure!(docs[6]["notification_type"] == "permission_prompt");
    ensure!(docs[9]["reason"] == "prompt_input_exit");
    Ok(())
}

#[test]
fn failing_hook_never_breaks_the_agent() -> anyhow::Result<()> {
    let demo = start(&["--hook-cmd", "exit 1", "--work-ms", "100"])?;
    demo.ready()?;
    demo.type_text("still works")?;
    demo.pty.write("\r")?;
    demo.pty.wait_for_text("● Done: still works")?;
    demo.pty.wait_for_text("hook failures:")?;
    ensure!(prompt_texts(&demo.prompts()?) == ["still works"]);
    Ok(())
}

#[test]
fn resize_redraws_the_box_at_the_new_width() -> anyhow::Result<()> {
    let demo = start(&[])?;
    demo.ready()?;
    demo.type_text("resize me")?;
    demo.pty.resize(50, 20)?;
    let top = format!("╭{}╮", "─".repeat(48));
    let screen = demo.pty.wait_until(PATIENCE, "a 50-column box", |s| s.find_row(&top).is_some())?;
    ensure!(input_box(&screen).as_deref() == Some("resize me"), "{screen}");
    ensure!(screen.contents().matches('╭').count() == 1, "stale box left:\n{screen}");
    Ok(())
}

#[test]
fn editing_keys_change_the_input_box() -> anyhow::Result<()> {
    let demo = start(&[])?;
    demo.ready()?;
    demo.pty.write("helo")?;
    demo.pty.write("\x7flo")?;
    demo.pty.wait_until(PATIENCE, "edited text", |s| input_box(s).as_deref() == Some("hello"))?;
    demo.pty.write("\x15")?;
    demo.pty.wait_until(PATIENCE, "cleared box", |s| input_box(s).as_deref() == Some(""))?;
    Ok(())
}

#[test]
fn ctrl_d_on_empty_input_exits_and_restores_the_terminal() -> anyhow::Result<()> {
    let mut demo = start(&[])?;
    demo.ready()?;
    demo.pty.write("\x04")?;
    let status = demo.pty.wait_exit(PATIENCE)?;
    ensure!(status.code() == Some(0), "{status:?}");
    ensure!(!demo.pty.screen().bracketed_paste());
    Ok(())
}

#[test]
fn sigterm_restores_the_terminal_and_exits() -> anyhow::Result<()> {
    let mut demo = start(&[])?;
    demo.ready()?;
    demo.pty.signal(Signal::SIGTERM)?;
    let status = demo.pty.wait_exit(PATIENCE)?;
    ensure!(status.code() == Some(128 + libc::SIGTERM), "{status:?}");
    ensure!(!demo.pty.screen().bracketed_paste());
    Ok(())
}

#[test]
fn alt_screen_flag_draws_on_the_alternate_screen() -> anyhow::Result<()> {
    let mut demo = start(&["--alt-screen"])?;
    let screen = demo.ready()?;
    ensure!(screen.alternate_screen(), "{screen}");
    demo.pty.write("\x04")?;
    demo.pty.wait_exit(PATIENCE)?;
    ensure!(!demo.pty.screen().alternate_screen());
    Ok(())
}

#[test]
fn stdin_at_end_of_file_exits() -> anyhow::Result<()> {
    let home = TempHome::new()?;
    let mut child = std::process::Command::new(BIN)
        .args(["--cpr-timeout-ms", "0", "--startup-delay-ms", "0"])
        .current_dir(home.path())
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(status) = child.try_wait()? {
            ensure!(status.code() == Some(0), "{status:?}");
            return Ok(());
        }
        if Instant::now() >= deadline {
            let _ = child.kill();
            anyhow::bail!("the agent did not exit at end of input");
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn reply_lines_add_output_volume() -> anyhow::Result<()> {
    let demo = start(&["--reply-lines", "500", "--work-ms", "50"])?;
    let before = demo.ready()?.bytes();
    demo.type_text("volume")?;
    demo.pty.write("\r")?;
    let screen = demo.pty.wait_for_text("  500 │ the quick brown fox")?;
    ensure!(screen.bytes() - before > 500 * 60, "only {} bytes", screen.bytes() - before);
    Ok(())
}
