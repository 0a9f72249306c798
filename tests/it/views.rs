//! Terminals of different sizes on one session: the size policy chosen at `desk new`, `desk
//! resize` for a `fixed` session, and the views a terminal of another size is shown.

use crate::harness::{Pty, PtyCommand};
use crate::support::{DESK, Home, eventually};

/// `desk attach NAME [args]` on a new pseudo-terminal of the given size.
fn attach(home: &Home, name: &str, extra: &[&str], cols: u16, rows: u16) -> Pty {
    PtyCommand::new(DESK)
        .arg("attach")
        .arg(name)
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
