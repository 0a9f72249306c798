//! `desk dash` on a real pseudo-terminal against real sessions: what it shows (read through the
//! harness's screen emulator), how it follows the fleet, and that it leaves the terminal as it
//! found it on every way out.

use crate::harness::{PATIENCE, Pty, PtyCommand};
use crate::support::{DESK, Home, eventually, prompts};
use desk_wire::{Frame, Role};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// `desk dash` on a new pseudo-terminal of the given size (starting no daemon: the tests that
/// want one start it, as `Home::serve` does; `first_hour.rs` tests the dashboard's autostart).
fn dash(home: &Home, cols: u16, rows: u16) -> Pty {
    PtyCommand::new(DESK)
        .arg("dash")
        .env("DESK_HOME", home.path())
        .env("DESK_AUTOSTART", "0")
        .size(cols, rows)
        .spawn()
        .expect("spawn desk dash")
}

/// The table's rows on screen, first to last (the rows under the NAME header, up to the
/// preview's title line).
fn table_rows(screen: &crate::harness::Screen) -> Vec<String> {
    let Some(header) = screen.find_row("NAME") else { return Vec::new() };
    screen.rows()[header + 1..]
        .iter()
        .take_while(|r| !r.trim().is_empty() && !r.contains("──"))
        .map(|r| r.trim_end().to_string())
        .collect()
}

/// The terminal the dashboard leaves behind: main screen, cursor shown.
fn assert_restored(pty: &Pty) {
    let screen = pty.screen();
    assert!(!screen.alternate_screen(), "still on the alternate screen:\n{screen}");
    assert!(!pty.with_vt100(|s| s.hide_cursor()), "the cursor is still hidden:\n{screen}");
}

#[test]
fn a_session_turning_blocked_moves_to_the_top_and_its_dialog_shows_in_the_preview() {
    let home = Home::new();
    home.demo("aa", &[]);
    home.demo("zz", &[]);
    home.wait_activity("aa", "idle");
    home.wait_activity("zz", "idle");
    let pty = dash(&home, 120, 40);
    let screen = pty
        .wait_until(PATIENCE, "both sessions listed, idle", |s| {
            let rows = table_rows(s);
            rows.len() == 2 && rows.iter().all(|r| r.contains("idle"))
        })
        .expect("the table");
    // Equal urgency: by name.
    assert!(table_rows(&screen)[0].contains("aa"), "{screen}");

    let mut ctl = home.connect("zz", Role::Controller, 80, 24);
    ctl.send(&Frame::Input(b"\x1b[200~please approve-me\x1b[201~\r".to_vec()));
    let screen = pty
        .wait_until(PATIENCE, "zz blocked on top", |s| {
            table_rows(s).first().is_some_and(|r| r.contains("zz") && r.contains("blocked(approval)"))
        })
        .expect("zz moves to the top");
    assert!(screen.contains("1 need you"), "{screen}");
    // The top row is selected, and the preview draws its screen: the dialog's status row.
    pty.wait_for_text("waiting for approval").expect("the live preview shows the dialog");
    pty.wait_for_text("activity blocked on approval").expect("the events pane tells it");

    // Answered, it goes back below aa.
    ctl.send(&Frame::Input(b"\r".to_vec()));
    pty.wait_until(PATIENCE, "zz back to idle, below aa", |s| {
        let rows = table_rows(s);
        rows.len() == 2 && rows[0].contains("aa") && rows[1].contains("zz") && rows[1].contains("idle")
    })
    .expect("zz back in place");
    // At this width the table has room for each session's CPU and memory (sampled every 2 s).
    pty.wait_until(PATIENCE, "a resident size on every row", |s| {
        let rows = table_rows(s);
        rows.len() == 2
            && rows
                .iter()
                .all(|r| r.split_whitespace().any(|w| w.ends_with('M') && w[..w.len() - 1].parse::<u64>().is_ok()))
    })
    .expect("the RSS column");
}

#[test]
fn q_quits_and_restores_the_terminal() {
    let home = Home::new();
    home.demo("one", &[]);
    let mut pty = dash(&home, 80, 24);
    pty.wait_until(PATIENCE, "the dashboard on the alternate screen", |s| {
        s.alternate_screen() && s.contains("desk dash") && table_rows(s).iter().any(|r| r.contains("one"))
    })
    .expect("the dashboard");
    assert!(pty.with_vt100(|s| s.hide_cursor()), "the cursor is hidden while it draws");
    pty.write("q").expect("write q");
    let status = pty.wait_exit(PATIENCE).expect("desk dash exits on q");
    assert_eq!(status.code(), Some(0));
    assert_restored(&pty);
    // The fleet keeps running.
    assert_eq!(home.session("one").expect("the session")["status"], "running");
}

#[test]
fn sigterm_and_sighup_restore_the_terminal() {
    for signal in [Signal::SIGTERM, Signal::SIGHUP] {
        let home = Home::new();
        let mut pty = dash(&home, 80, 24);
        pty.wait_until(PATIENCE, "the dashboard", |s| s.alternate_screen() && s.contains("desk dash"))
            .expect("the dashboard");
        pty.signal(signal).expect("signal desk dash");
        let status = pty.wait_exit(PATIENCE).expect("desk dash exits on the signal");
        assert_eq!(status.code(), Some(128 + signal as i32), "{signal}");
        assert_restored(&pty);
    }
}

#[test]
fn a_stopped_master_is_shown_unresponsive_and_never_blocks_the_dashboard() {
    let home = Home::new();
    home.demo("ok", &[]);
    home.demo("stopped", &[]);
    home.wait_activity("ok", "idle");
    let master = Pid::from_raw(home.master_pid("stopped"));
    kill(master, Signal::SIGSTOP).expect("stop the master");
    let mut pty = dash(&home, 100, 30);
    let screen = pty
        .wait_until(PATIENCE, "the stopped master shown unresponsive, on top", |s| {
            let rows = table_rows(s);
            rows.len() == 2
                && rows[0].contains("stopped")
                && rows[0].contains("unresponsive")
                && rows[1].contains("idle")
        })
        .expect("unresponsive row");
    assert!(screen.contains("1 need you"), "{screen}");
    // Keys still work: select the live one, filter, quit.
    pty.write("/ok\r").expect("filter");
    pty.wait_until(PATIENCE, "only ok listed", |s| table_rows(s).len() == 1 && table_rows(s)[0].contains("ok"))
        .expect("the filter");
    pty.write("q").expect("write q");
    let status = pty.wait_exit(PATIENCE).expect("desk dash quits with a master stopped");
    kill(master, Signal::SIGCONT).expect("continue the master");
    assert_eq!(status.code(), Some(0));
    assert_restored(&pty);
}

#[test]
fn it_resizes_live() {
    let home = Home::new();
    home.demo("one", &[]);
    let pty = dash(&home, 80, 24);
    pty.wait_until(PATIENCE, "the footer on the last row", |s| s.row(23).contains("quit")).expect("80x24");
    pty.resize(132, 40).expect("resize");
    pty.wait_until(PATIENCE, "the footer on the new last row", |s| s.row(39).contains("q quit")).expect("132x40");
}

#[test]
fn enter_attaches_to_the_selected_session_and_detach_returns_to_the_dashboard() {
    let home = Home::new();
    home.demo("one", &[]);
    home.wait_activity("one", "idle");
    let mut pty = dash(&home, 100, 30);
    pty.wait_until(PATIENCE, "one listed", |s| table_rows(s).iter().any(|r| r.contains("one") && r.contains("idle")))
        .expect("the dashboard");
    pty.write("\r").expect("Enter");
    // The full attach: the agent's own screen fills the terminal, and what we type reaches it.
    pty.wait_until(PATIENCE, "the agent's screen, not the dashboard", |s| {
        !s.contains("desk dash") && s.contains("idle")
    })
    .expect("attached");
    pty.write("typed through the attach").expect("type");
    pty.wait_for_text("typed through the attach").expect("the agent echoes it");
    eventually("one to count a controller", || {
        let s = home.session("one").ok_or("no session")?;
        if s["clients"]["controllers"] == 1 { Ok(()) } else { Err(s["clients"].to_string()) }
    });
    pty.write([0x1c]).expect("the detach key");
    pty.wait_until(PATIENCE, "the dashboard back, on the alternate screen", |s| {
        s.alternate_screen() && s.contains("desk dash") && table_rows(s).iter().any(|r| r.contains("one"))
    })
    .expect("back in the dashboard");
    // Keys reach the dashboard again.
    pty.write("q").expect("q");
    let status = pty.wait_exit(PATIENCE).expect("desk dash quits after the attach");
    assert_eq!(status.code(), Some(0));
    assert_restored(&pty);
}

#[test]
fn forcing_a_stuck_item_from_the_dashboard_delivers_it_and_p_pauses_the_queue() {
    let home = Home::new();
    home.serve();
    // Enters within 6.5 s of a paste are newlines: the delivery runs out of Enters and ends
    // submit-stuck; a forced Enter after the window submits it (as in the delivery tests).
    let log = home.demo("f", &["--paste-burst-ms", "6500"]);
    eventually("f to be ready", || {
        let s = home.session("f").ok_or("no session")?;
        if s["state"]["ready"] == true { Ok(()) } else { Err(s["state"].to_string()) }
    });
    let id = home.send("f", "force me through");
    let item = home.settled(&id);
    assert_eq!(item["stuck"], "submit-stuck", "{item:#}");
    let pty = dash(&home, 120, 40);
    pty.wait_until(PATIENCE, "f listed with its stuck item", |s| {
        s.contains("1 need you") && table_rows(s).first().is_some_and(|r| r.contains(" f "))
    })
    .expect("the stuck count");
    pty.write("i").expect("items");
    pty.wait_for_text(&format!("{id} stuck (submit-stuck)")).expect("the items pane");
    pty.write("f").expect("force");
    pty.wait_for_text(&format!("force {id} (submit-stuck): press Enter on the text in its input box? y/n"))
        .expect("the confirmation");
    assert!(prompts(&log).is_empty(), "nothing happens before y");
    pty.write("y").expect("confirm");
    pty.wait_for(PATIENCE, "the forced item delivered", || Ok((home.item(&id)["state"] == "delivered").then_some(())))
        .expect("delivered");
    assert_eq!(prompts(&log), vec!["force me through"], "Enter only: never pasted twice");
    pty.wait_until(PATIENCE, "nothing needs a person any more", |s| !s.contains("need you")).expect("unstuck");

    pty.write("p").expect("pause");
    eventually("f paused", || {
        let q: serde_json::Value = serde_json::from_str(&home.ok(&["queue", "--json"])).map_err(|e| e.to_string())?;
        let paused = q["data"].as_array().into_iter().flatten().any(|s| s["session"] == "f" && !s["paused"].is_null());
        if paused { Ok(()) } else { Err(q.to_string()) }
    });
    pty.wait_until(PATIENCE, "the paused mark", |s| table_rows(s).first().is_some_and(|r| r.contains(" P ")))
        .expect("P");
}

#[test]
fn a_prompt_written_in_the_dashboard_is_delivered_and_its_item_id_shown() {
    let home = Home::new();
    home.serve();
    let log = home.demo("one", &[]);
    home.wait_activity("one", "idle");
    let pty = dash(&home, 120, 40);
    pty.wait_until(PATIENCE, "one listed", |s| table_rows(s).iter().any(|r| r.contains("one"))).expect("the dashboard");
    pty.write("s").expect("open the editor");
    pty.wait_for_text("prompt for one").expect("the editor");
    pty.write("hello from the dashboard").expect("type");
    pty.wait_for_text("hello from the dashboard_").expect("the text in the editor");
    pty.write("\x1b\r").expect("Alt-Enter");
    let screen = pty.wait_for_text("sent to one: item ").expect("the item id on the footer");
    let row = screen.find_row("sent to one: item ").expect("the footer row");
    let id = screen.row(row).split("item ").nth(1).unwrap_or("").split_whitespace().next().unwrap_or("").to_string();
    assert!(!id.is_empty(), "{screen}");
    pty.wait_for(PATIENCE, "the item delivered", || Ok((home.item(&id)["state"] == "delivered").then_some(())))
        .expect("delivered");
    assert_eq!(prompts(&log), vec!["hello from the dashboard"]);
}

#[test]
fn a_session_whose_master_died_without_an_exit_record_is_shown_lost() {
    let home = Home::new();
    home.demo("gone", &[]);
    home.demo("fine", &[]);
    home.wait_activity("fine", "idle");
    let master = home.master_pid("gone");
    kill(Pid::from_raw(master), Signal::SIGKILL).expect("kill the master");
    eventually("the master to be gone", || {
        if std::path::Path::new(&format!("/proc/{master}")).exists() { Err("still there".to_string()) } else { Ok(()) }
    });
    let pty = dash(&home, 100, 30);
    pty.wait_until(PATIENCE, "gone shown lost, on top", |s| {
        let rows = table_rows(s);
        rows.len() == 2 && rows[0].contains("gone") && rows[0].contains("lost") && rows[1].contains("fine")
    })
    .expect("the lost row");
}

#[test]
fn a_master_stopped_while_watched_turns_unresponsive_and_back_while_the_dashboard_keeps_updating() {
    let home = Home::new();
    home.demo("ok", &[]);
    home.demo("stopped", &[]);
    home.wait_activity("ok", "idle");
    home.wait_activity("stopped", "idle");
    let pty = dash(&home, 100, 30);
    pty.wait_until(PATIENCE, "both live and idle", |s| {
        let rows = table_rows(s);
        rows.len() == 2 && rows.iter().all(|r| r.contains("idle"))
    })
    .expect("the table");
    let master = Pid::from_raw(home.master_pid("stopped"));
    kill(master, Signal::SIGSTOP).expect("stop the master");
    let marked = pty.wait_until(PATIENCE, "the stopped master marked unresponsive, on top", |s| {
        let rows = table_rows(s);
        rows.len() == 2 && rows[0].contains("stopped") && rows[0].contains("unresponsive")
    });
    // While it is stopped the dashboard still follows the other session: ok turns blocked.
    let mut ctl = home.connect("ok", Role::Controller, 80, 24);
    ctl.send(&Frame::Input(b"\x1b[200~please approve-me\x1b[201~\r".to_vec()));
    let updated = pty.wait_until(PATIENCE, "ok blocked on top", |s| {
        table_rows(s).first().is_some_and(|r| r.contains("ok") && r.contains("blocked(approval)"))
    });
    kill(master, Signal::SIGCONT).expect("continue the master");
    let marked = marked.expect("unresponsive row");
    assert!(marked.contains("its master does not answer"), "the events pane says so:\n{marked}");
    updated.expect("the dashboard keeps updating with a master stopped");
    pty.wait_until(PATIENCE, "stopped answers again", |s| {
        table_rows(s).iter().any(|r| r.contains("stopped") && r.contains("running"))
    })
    .expect("live again once continued");
}

#[test]
fn page_up_scrolls_the_preview_into_the_sessions_history_and_end_returns_to_live() {
    let home = Home::new();
    home.ok(&["new", "h", "--size", "60x10", "--", "sh", "-c", "seq 1 300 | sed 's/^/row /'; printf READY; exec cat"]);
    home.wait_screen("h", "READY");
    let mut pty = dash(&home, 100, 30);
    pty.wait_until(PATIENCE, "the live preview", |s| s.contains("READY") && s.contains("row 299")).expect("live");
    // With one session the preview at 100x30 shows 17 lines: a page is 16. Scrolling back past
    // what the preview's own model saw reaches lines only the master's history has (all 291).
    // A PgUp pressed before the master's answer about its history is in is kept and lands
    // when the answer does: one press is enough.
    pty.write("\x1b[5~").expect("PgUp");
    let screen = pty
        .wait_until(PATIENCE, "one page back into the master's history", |s| s.contains("SCROLLED BACK 16 of 284"))
        .expect("scrolled back");
    assert!(screen.contains("SCROLLED BACK 16 of 284 lines"), "one page back:\n{screen}");
    // Above the events pane (which begins with the session's start, its command and all).
    let events = screen.find_row("events (newest first)").expect("the events pane");
    assert!(!screen.rows()[..events].iter().any(|r| r.contains("READY")), "the live bottom is out of view:\n{screen}");
    pty.write("\x1b[H").expect("Home");
    pty.wait_until(PATIENCE, "the oldest history line", |s| {
        s.contains("row 1 ") || s.rows().iter().any(|r| r.trim_end() == "row 1")
    })
    .expect("row 1 from the master's history");
    pty.write("\x1b[F").expect("End");
    pty.wait_until(PATIENCE, "live again", |s| s.contains("READY") && !s.contains("SCROLLED BACK")).expect("live");
    pty.write("\x1b[1;2A").expect("Shift-Up");
    pty.wait_until(PATIENCE, "one line back", |s| s.contains("SCROLLED BACK 1 of")).expect("a line");
    pty.write("\x1b").expect("Esc");
    pty.wait_until(PATIENCE, "live again", |s| s.contains("READY") && !s.contains("SCROLLED BACK")).expect("live");
    pty.write("q").expect("q");
    pty.wait_exit(PATIENCE).expect("quits");
}

/// The preview reads its 2,000 lines of history whole however wide and colourful they are
/// (here twice what one frame holds): Home reaches the oldest of them, in its colours.
#[test]
fn the_preview_history_is_read_whole_even_when_it_needs_more_than_a_frame() {
    let home = Home::new();
    crate::support::wide_session(&home, "w", 10_000);
    let mut pty = dash(&home, 140, 40);
    pty.wait_until(PATIENCE, "the live preview", |s| s.contains("READY")).expect("live");
    // The history above the screen is lines 0..=9980; the preview asks for the newest 2,000.
    let oldest = 10_000 - 19 - 2_000;
    let (text, colours) = crate::support::wide_line(oldest);
    let number = &text[..5];
    let deadline = std::time::Instant::now() + PATIENCE;
    let screen = loop {
        // Home goes to the oldest line the preview has now; the master's pages may still be
        // coming, so go there again until the oldest of them shows.
        pty.write("\x1b[H").expect("Home");
        if let Ok(screen) =
            pty.wait_until(std::time::Duration::from_millis(500), "the oldest line", |s| s.contains(number))
        {
            break screen;
        }
        assert!(std::time::Instant::now() < deadline, "never reached line {number}:\n{}", pty.screen());
    };
    assert!(!screen.contains(&format!("{:05}", oldest - 1)), "nothing older than the 2,000:\n{screen}");
    let row = screen.find_row(number).expect("the row");
    let line = screen.row(row);
    let at = line.find(number).expect("the number");
    // Columns, not bytes: the pane's border is drawn in box characters.
    let col = line[..at].chars().count() as u16 + 6;
    let cell =
        pty.with_vt100(|s| s.cell(row as u16, col).map(|c| (c.contents().to_string(), c.fgcolor(), c.bgcolor())));
    let (fg, bg) = &colours[0];
    let rgb = |hex: &str| u8::from_str_radix(hex, 16).unwrap();
    assert_eq!(
        cell,
        Some((
            "w".to_string(),
            vt100::Color::Idx(*fg as u8),
            vt100::Color::Rgb(rgb(&bg[1..3]), rgb(&bg[3..5]), rgb(&bg[5..7]))
        )),
        "the first word of line {number} in its colours"
    );
    assert!(!screen.contains("left the session's history"), "nothing was cut:\n{screen}");
    pty.write("q").expect("q");
    pty.wait_exit(PATIENCE).expect("quits");
}
