//! The daemon's loop against a real store, socket and inotify in a temporary home: what a turn
//! leaves for the wait that follows it.

use super::*;
use desk_core::delivery::engine::TimerKind;
use desk_core::delivery::item::{Item, When};

fn daemon(home: &std::path::Path) -> Daemon {
    let paths = Paths { runtime: home.join("run"), state: home.join("state"), config: home.join("config") };
    paths.ensure_runtime().expect("runtime directory");
    paths.ensure_state().expect("state directory");
    let store = Store::open(&paths.state).expect("the store");
    Daemon::start(paths, store).expect("the daemon starts")
}

/// The order that made one prompt in twenty to an idle agent wait a second: the master
/// acknowledges the paste, and the engine's answer is the `written` record and, after it, the
/// echo window's timers (its first look 10 ms later). The timers wait for the group commit, at
/// the end of the turn; the wait after the turn must end at the first of them, not at whatever
/// timer was earliest before the commit (here the 5 s check-in of a channel).
#[test]
fn a_timer_armed_after_the_group_commit_ends_the_wait_that_follows() {
    let home = tempfile::tempdir().expect("a temporary home");
    let mut d = daemon(home.path());
    let now = Instant::now();
    d.next_sweep = now + SWEEP_EVERY;
    d.checkin_channels.insert(ChannelName::parse("team").expect("a channel name"));
    d.next_checkin = now + CHECKIN_EVERY;
    assert!(d.end_turn() > Duration::from_secs(1), "nothing is due before the check-in");

    let mut item = Item::new(ItemId::sequential(1), "s".into(), Some(1), "hi".into(), When::Now, "t".into(), 1);
    item.state = State::Sending;
    let timer = |kind, at| Action::Arm { at, key: TimerKey { session: "s".into(), attempt: Some(1), kind, step: 0 } };
    let look_at = Instant::now() + Duration::from_millis(10);
    d.outbox.push(vec![
        Action::Persist { token: 7, item, from: State::Sending },
        timer(TimerKind::Deadline, Instant::now() + Duration::from_secs(4)),
        timer(TimerKind::Poll, look_at),
    ]);
    let wait = d.end_turn();
    assert!(!d.outbox.has_staged(), "the turn committed the record");
    assert!(
        wait <= Duration::from_millis(10),
        "the loop would sleep {wait:?} past the echo window's first look, armed by the commit"
    );
}
