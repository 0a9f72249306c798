//! Terminals of different sizes on one session: the size policy chosen at `desk new`, `desk
//! resize` for a `fixed` session, and the views a terminal of another size is shown.

use crate::harness::{Pty, PtyCommand};
use crate::support::{DESK, Home, eventually};

/// `desk attach NAME [args]` on a new pseudo-terminal of the given size, without the status
/// line (these tests are about the session's size and the master's views of other sizes).
fn attach(home: &Home, name: &str, extra: &[&str], cols: u16, rows: u16) -> Pty {
    PtyCommand::new(DESK)
        .arg("attach")
        .arg(name)
        .arg("--no-status")
        .args(extra)
        .env("DESK_HOME", home.path())
        .size(cols, rows)
        .spawn()
        .expect("spawn desk attach")
}

fn size(home: &Home, name: &str) -> (u64, u64) {
    let s = home.session(name).expect("the session is listed");
    (s["cols"].as_u64().unwrap(), s["rows"].as_u64().unwrap())
}

fn wait_size(home: &Home, name: &str, want: (u64, u64)) {
    eventually(&format!("{name} at {want:?}"), || {
        let now = size(home, name);
        if now == want { Ok(()) } else { Err(format!("{now:?}")) }
    });
}

#[test]
fn a_fixed_session_keeps_its_size_against_controllers_and_changes_only_by_desk_resize() {
    let home = Home::new();
    home.ok(&["new", "fx", "--size", "100x30", "--size-policy", "fixed", "--", "sh", "-c", "exec cat"]);
    assert_eq!(home.session("fx").unwrap()["size_policy"], "fixed");
    let explained = home.ok(&["explain", "fx"]);
    assert!(explained.contains("size: 100x30 (size policy fixed)"), "{explained}");
    let pty = attach(&home, "fx", &[], 80, 24);
    eventually("one controller", || match home.session("fx") {
        Some(s) if s["clients"]["controllers"] == 1 => Ok(()),
        other => Err(format!("{other:?}")),
    });
    pty.write("typed\r").unwrap();
    pty.wait_for_text("typed").unwrap();
    assert_eq!(size(&home, "fx"), (100, 30), "a controller moved a fixed session");
    home.ok(&["resize", "fx", "90x20"]);
    wait_size(&home, "fx", (90, 20));
    drop(pty);
}

#[test]
fn desk_resize_is_refused_for_a_session_whose_size_follows_its_controllers() {
    let home = Home::new();
    home.ok(&["new", "lt", "--size", "100x30", "--", "sh", "-c", "exec cat"]);
    assert_eq!(home.session("lt").unwrap()["size_policy"], "latest");
    let out = home.desk(&["resize", "lt", "90x20"]);
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("size policy latest") && err.contains("--size-policy fixed"), "{err}");
    assert_eq!(size(&home, "lt"), (100, 30));
    let bad = home.desk(&["new", "bad", "--size-policy", "widest", "--", "true"]);
    assert_eq!(bad.status.code(), Some(2));
}

#[test]
fn the_smallest_policy_takes_the_least_of_two_controllers() {
    let home = Home::new();
    home.ok(&["new", "sm", "--size-policy", "smallest", "--", "sh", "-c", "exec cat"]);
    let a = attach(&home, "sm", &[], 100, 30);
    wait_size(&home, "sm", (100, 30));
    let b = attach(&home, "sm", &[], 120, 25);
    wait_size(&home, "sm", (100, 25));
    drop(b);
    wait_size(&home, "sm", (100, 30));
    drop(a);
}

/// What a client of `client`'s size must show of session `name`, checked against the
/// session's screen (`desk peek --json`): the same rows when it has the session's size;
/// otherwise a crop that holds the cursor (at the cursor's place), padded with blanks where
/// the client is larger. Err describes the difference.
fn shows_its_crop(home: &Home, name: &str, client: &Pty) -> Result<(), String> {
    let peek = home.json(&["peek", name, "--json"])["data"].clone();
    let lines: Vec<String> =
        peek["lines"].as_array().unwrap().iter().map(|l| l.as_str().unwrap().trim_end().to_string()).collect();
    let (scols, srows) = (peek["cols"].as_u64().unwrap() as usize, peek["rows"].as_u64().unwrap() as usize);
    let (srow, scol) =
        (peek["cursor"]["row"].as_u64().unwrap() as usize, peek["cursor"]["col"].as_u64().unwrap() as usize);
    let screen = client.screen();
    let (ccols, crows) = (screen.size().0 as usize, screen.size().1 as usize);
    let (crow, ccol) = (screen.cursor().0 as usize, screen.cursor().1 as usize);
    // Where the crop starts: the cursor is at the same place in both.
    let r0 = if srows <= crows { 0 } else { srow.checked_sub(crow).ok_or("cursor above the crop")? };
    let c0 = if scols <= ccols { 0 } else { scol.checked_sub(ccol).ok_or("cursor left of the crop")? };
    if (srow - r0, scol - c0) != (crow, ccol) {
        return Err(format!("cursor at {:?} in the client, {:?} in the session", (crow, ccol), (srow, scol)));
    }
    if r0 + crows.min(srows) > srows || c0 + ccols.min(scols) > scols {
        return Err(format!("crop ({r0}, {c0}) leaves the session's {scols}x{srows}"));
    }
    let mut problems = Vec::new();
    for i in 0..crows {
        let want: String = match lines.get(r0 + i) {
            Some(line) if i < srows => line.chars().skip(c0).take(ccols).collect::<String>().trim_end().to_string(),
            _ => String::new(),
        };
        let got = screen.row(i).trim_end();
        if got != want {
            problems.push(format!("row {i}: {got:?}, want {want:?}"));
        }
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{ccols}x{crows} client on {scols}x{srows} (crop at {r0},{c0}):\n{}\n{screen}",
            problems.join("\n")
        ))
    }
}

fn wait_for_crops(home: &Home, name: &str, clients: &[(&str, &Pty)]) {
    for (who, pty) in clients {
        eventually(&format!("{who} to show its crop of {name}"), || shows_its_crop(home, name, pty));
    }
}

fn wait_clients(home: &Home, name: &str, controllers: u64, viewers: u64) {
    eventually(&format!("{controllers} controllers and {viewers} viewers on {name}"), || match home.session(name) {
        Some(s) if s["clients"]["controllers"] == controllers && s["clients"]["viewers"] == viewers => Ok(()),
        other => Err(format!("{other:?}")),
    });
}

/// Two controllers and a viewer of three different sizes on one shell flood: each ends on its
/// correct view of the session's final screen. Under `latest` the size follows whoever typed
/// last (tmux's rule); the other controller and the viewer see views, never bytes drawn for
/// another size.
#[test]
fn two_controllers_and_a_viewer_of_three_sizes_see_a_shell_flood_correctly() {
    let home = Home::new();
    home.new_sh("fl", "read go; seq 1 30000; echo FLOOD-END; read again; seq 1 5000; echo SECOND-END; exec cat");
    let a = attach(&home, "fl", &[], 120, 40);
    wait_size(&home, "fl", (120, 40));
    let b = attach(&home, "fl", &[], 100, 30);
    wait_size(&home, "fl", (100, 30));
    let v = attach(&home, "fl", &["--read-only"], 79, 24);
    wait_clients(&home, "fl", 2, 1);
    b.write("\r").unwrap();
    home.wait_screen("fl", "FLOOD-END");
    assert_eq!(size(&home, "fl"), (100, 30), "b typed last");
    wait_for_crops(&home, "fl", &[("a (larger)", &a), ("b (the session's size)", &b), ("the viewer", &v)]);
    // a types: the session follows it, and b now sees a view of the larger screen.
    a.write("\r").unwrap();
    wait_size(&home, "fl", (120, 40));
    home.wait_screen("fl", "SECOND-END");
    wait_for_crops(&home, "fl", &[("a (the session's size)", &a), ("b (smaller)", &b), ("the viewer", &v)]);
    assert!(v.screen().contains("SECOND-END"), "the viewer's crop holds the newest rows:\n{}", v.screen());
}

/// The same on vim: a full-screen program redraws for the session's size, and the client of
/// another size sees a crop that follows the cursor as it moves through the file.
#[test]
#[cfg_attr(desk_missing_vim, ignore = "needs vim")]
fn two_controllers_and_a_viewer_of_three_sizes_see_vim_correctly() {
    crate::suite::require(crate::suite::Needs::Program("vim"));
    let home = Home::new();
    let file = home.path().join("numbers.txt");
    let text: String = (1..=200).map(|i| format!("line {i:03} {}\n", "abcdefghij".repeat(11))).collect();
    std::fs::write(&file, text).unwrap();
    let file = file.to_str().unwrap();
    home.ok(&["new", "vi", "--size", "100x30", "--", "vim", "-u", "NONE", "-i", "NONE", "-N", "+set nowrap", file]);
    let a = attach(&home, "vi", &[], 120, 40);
    wait_size(&home, "vi", (120, 40));
    let b = attach(&home, "vi", &[], 100, 30);
    wait_size(&home, "vi", (100, 30));
    let v = attach(&home, "vi", &["--read-only"], 79, 24);
    wait_clients(&home, "vi", 2, 1);
    home.wait_screen("vi", "line 001");
    wait_for_crops(&home, "vi", &[("a", &a), ("b", &b), ("the viewer", &v)]);
    // Down to line 150 and to the end of its text: the viewer's crop pans down and right.
    b.write("150G").unwrap();
    home.wait_screen("vi", "line 150");
    wait_for_crops(&home, "vi", &[("a", &a), ("b", &b), ("the viewer", &v)]);
    // To the last row of vim's window and the end of its line: below the viewer's 24 rows.
    b.write("L$").unwrap();
    eventually("vim's cursor on the window's last row", || {
        let peek = home.json(&["peek", "vi", "--json"])["data"].clone();
        let (row, col) = (peek["cursor"]["row"].as_u64().unwrap(), peek["cursor"]["col"].as_u64().unwrap());
        if row == 28 && col > 0 { Ok(()) } else { Err(format!("cursor at {row},{col}")) }
    });
    wait_for_crops(&home, "vi", &[("a", &a), ("b", &b), ("the viewer", &v)]);
    assert_eq!(v.screen().cursor().0, 23, "the viewer's crop panned down to the cursor:\n{}", v.screen());
    b.write(":q!\r").unwrap();
    home.wait_exit("vi");
}

fn row_is(pty: &Pty, who: &str, row: usize, want: &str) {
    eventually(&format!("{who}'s row {row} to read {want:?}"), || {
        let screen = pty.screen();
        if screen.row(row).trim_end() == want { Ok(()) } else { Err(format!("\n{screen}")) }
    });
}

/// `desk attach --status`: while the terminal's size differs from the session's, its last row
/// names both sizes and the view gets the rows above it; a terminal without the flag keeps
/// every row for the view; when the sizes become equal the status line goes, and it comes back
/// (with the new size) when the session is resized again, even though the child draws nothing.
#[test]
fn attach_status_names_both_sizes_only_while_they_differ() {
    let home = Home::new();
    home.ok(&["new", "st", "--size", "100x30", "--size-policy", "fixed", "--", "sh", "-c", "seq 1 40; exec cat"]);
    home.wait_screen("st", "40");
    let with = attach(&home, "st", &["--read-only", "--status"], 79, 24);
    let without = attach(&home, "st", &["--read-only"], 79, 24);
    wait_clients(&home, "st", 0, 2);
    // The session's cursor is on its last row (29), below "40": a crop of 23 rows starts at
    // session row 7 ("19"), one of 24 rows at row 6 ("18").
    row_is(&with, "the --status viewer", 23, "session 100x30, this terminal 79x24");
    row_is(&with, "the --status viewer", 21, "40");
    row_is(&with, "the --status viewer", 0, "19");
    row_is(&without, "the plain viewer", 22, "40");
    row_is(&without, "the plain viewer", 23, "");
    row_is(&without, "the plain viewer", 0, "18");
    // The session takes the terminal's size: the raw output again, and no status line.
    home.ok(&["resize", "st", "79x24"]);
    wait_size(&home, "st", (79, 24));
    row_is(&with, "the --status viewer", 22, "40");
    row_is(&with, "the --status viewer", 23, "");
    // Another size again: `cat` draws nothing, the status line still follows.
    home.ok(&["resize", "st", "90x20"]);
    wait_size(&home, "st", (90, 20));
    row_is(&with, "the --status viewer", 23, "session 90x20, this terminal 79x24");
    // And again while the view stays a view: its status line follows the session's size.
    home.ok(&["resize", "st", "100x30"]);
    wait_size(&home, "st", (100, 30));
    row_is(&with, "the --status viewer", 23, "session 100x30, this terminal 79x24");
    assert!(!without.screen().contains("this terminal"), "{}", without.screen());
}
