//! Supervisor check-ins: when one is due.
//!
//! Owns the rule. A channel with `checkin_after_s` set (off by default) is due a check-in when
//! it has at least one worker and one supervisor, every worker has been idle for at least that
//! long, and there are **unanswered** messages — posts after the last post by a worker, the
//! newest of them at least that old — and no check-in has been made since the newest of them.
//! So one stall gives one check-in; the next comes only after a new message. Invariants: a
//! worker whose idleness is not known (its session is not running, or it is working or
//! blocked) is not idle, so a dead fleet never looks like a quiet one; no clock is read (`now`
//! and each worker's idle-since are passed in). Pure.

use std::collections::HashMap;

use super::{Kind, Message, Role, Roster};

/// What a due check-in says (the body of the `checkin` record desk appends).
pub fn due(roster: &Roster, idle_since_ms: &HashMap<String, u64>, messages: &[Message], now_ms: u64) -> Option<String> {
    let after_ms = roster.checkin_after_s.filter(|s| *s > 0)? * 1000;
    let workers: Vec<&str> =
        roster.members.iter().filter(|m| m.role == Role::Worker).map(|m| m.name.as_str()).collect();
    if workers.is_empty() || !roster.members.iter().any(|m| m.role == Role::Supervisor) {
        return None;
    }
    if !workers.iter().all(|w| idle_since_ms.get(*w).is_some_and(|since| now_ms.saturating_sub(*since) >= after_ms)) {
        return None;
    }
    let mut ordered: Vec<&Message> = messages.iter().filter(|m| m.kind != Kind::Joined).collect();
    ordered.sort_by(|a, b| a.id.cmp(&b.id));
    let is_worker = |m: &Message| m.kind == Kind::Post && workers.contains(&m.author.as_str());
    let start = ordered.iter().rposition(|m| is_worker(m)).map_or(0, |i| i + 1);
    let tail = &ordered[start..];
    let unanswered: Vec<&&Message> = tail.iter().filter(|m| m.kind == Kind::Post).collect();
    let newest = unanswered.last()?;
    // A check-in after the newest unanswered message: this stall was reported already.
    if tail.iter().any(|m| m.kind == Kind::Checkin && m.id > newest.id) {
        return None;
    }
    if now_ms.saturating_sub(newest.ts_ms) < after_ms {
        return None;
    }
    let n = unanswered.len();
    Some(format!(
        "Every worker ({}) has been idle for at least {} s, and {n} message{} {} no answer from a worker; the newest is {} by {}.",
        workers.join(", "),
        after_ms / 1000,
        if n == 1 { "" } else { "s" },
        if n == 1 { "has" } else { "have" },
        newest.id,
        newest.author
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::{ChannelName, Member};
    use crate::delivery::item::ItemId;

    fn roster(after: Option<u64>) -> Roster {
        let mut r = Roster::new(ChannelName::parse("c").unwrap(), String::new(), 0);
        r.checkin_after_s = after;
        let m = |name: &str, role| Member { name: name.into(), role, added_ms: 0 };
        r.members = vec![m("w1", Role::Worker), m("w2", Role::Worker), m("sup", Role::Supervisor)];
        r
    }

    fn msg(at: u64, author: &str, kind: Kind) -> Message {
        Message { id: ItemId::sequential(at), author: author.into(), ts_ms: at, thread: None, kind, body: "x".into() }
    }

    fn idle(w1: u64, w2: u64) -> HashMap<String, u64> {
        HashMap::from([("w1".to_string(), w1), ("w2".to_string(), w2)])
    }

    #[test]
    fn a_checkin_is_due_only_when_every_worker_idles_long_with_unanswered_messages() {
        let msgs = vec![msg(1_000, "w1", Kind::Post), msg(2_000, "human", Kind::Post)];
        let r = roster(Some(60));
        let now = 70_000;
        let body = due(&r, &idle(5_000, 9_000), &msgs, now).expect("due");
        assert!(
            body.contains("Every worker (w1, w2) has been idle for at least 60 s, and 1 message has no answer"),
            "{body}"
        );
        // Off by default.
        assert_eq!(due(&roster(None), &idle(0, 0), &msgs, now), None);
        // One worker idle too briefly, or not known to be idle.
        assert_eq!(due(&r, &idle(5_000, 20_000), &msgs, now), None);
        assert_eq!(due(&r, &HashMap::from([("w1".to_string(), 0)]), &msgs, now), None);
        // The last word is a worker's: nothing unanswered.
        let answered = vec![msg(1_000, "human", Kind::Post), msg(2_000, "w2", Kind::Post)];
        assert_eq!(due(&r, &idle(0, 0), &answered, now), None);
        // The newest unanswered message is too recent.
        let fresh = vec![msg(1_000, "w1", Kind::Post), msg(65_000, "human", Kind::Post)];
        assert_eq!(due(&r, &idle(0, 0), &fresh, now), None);
    }

    #[test]
    fn one_stall_gives_one_checkin_and_a_new_message_another() {
        let r = roster(Some(1));
        let mut msgs = vec![msg(1_000, "human", Kind::Post)];
        assert!(due(&r, &idle(0, 0), &msgs, 10_000).is_some());
        msgs.push(msg(10_000, "desk", Kind::Checkin));
        assert_eq!(due(&r, &idle(0, 0), &msgs, 20_000), None, "already checked in");
        msgs.push(msg(21_000, "sup", Kind::Post));
        assert!(due(&r, &idle(0, 0), &msgs, 30_000).is_some(), "a supervisor's nudge no worker answered");
        msgs.push(msg(31_000, "w1", Kind::Post));
        assert_eq!(due(&r, &idle(0, 0), &msgs, 40_000), None);
    }
}
