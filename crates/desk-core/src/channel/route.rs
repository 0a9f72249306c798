//! Routing: who gets a message.
//!
//! Owns the rules, exactly as issue 13 states them:
//! - a root message without mentions, or with `@channel`: every agent member but the author;
//! - a root message with mentions: the mentioned agents, plus the supervisors;
//! - a thread reply: the parent's author, the thread's participants (authors of earlier
//!   replies), the mentioned agents, plus the supervisors (`@channel` in a thread: every agent);
//! - `@human`, or the mention of a person member: a notification for that person, never a
//!   prompt;
//! - a `joined` record: the onboarding prompt, for the member who joined alone;
//! - a `checkin` record (desk's own): every supervisor.
//!
//! Invariants: the author never receives their own message; only agent members (workers and
//! supervisors) get prompts, and only those that had joined when the message was posted
//! (`added_ms <= ts_ms`); each member appears at most once, in roster order. A mention narrows
//! the audience only when it names a member or `@human`: an `@word` that names no one (prose,
//! a decorator) is reported in [`Routing::unknown`] and otherwise ignored. Pure.

use super::mention::mentions;
use super::{EVERYONE, Kind, Member, Message, OPERATOR, Role};

/// Why a member gets a message (the most specific reason when several apply).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Why {
    /// It was mentioned by name.
    Mentioned,
    /// It wrote the message this thread replies to.
    ThreadParent,
    /// It replied in this thread before.
    ThreadParticipant,
    /// Supervisors get every message.
    Supervisor,
    /// A root message for everyone (no mentions, or `@channel`).
    Everyone,
    /// It just joined: the onboarding prompt.
    Joined,
    /// desk checks in with the supervisors.
    Checkin,
}

impl Why {
    /// A short phrase for the prompt: "you were mentioned", ...
    pub fn phrase(self) -> &'static str {
        match self {
            Why::Mentioned => "you were mentioned",
            Why::ThreadParent => "it replies to your message",
            Why::ThreadParticipant => "you take part in this thread",
            Why::Supervisor => "you supervise this channel",
            Why::Everyone => "it is for everyone in the channel",
            Why::Joined => "you joined the channel",
            Why::Checkin => "you supervise this channel and its workers are idle",
        }
    }
}

/// One member that gets a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recipient {
    pub member: String,
    pub role: Role,
    pub why: Why,
}

/// Where a message goes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Routing {
    /// Agent members to prompt, in roster order.
    pub prompts: Vec<Recipient>,
    /// People to notify: [`OPERATOR`] for `@human`, and person members mentioned by name.
    pub notify: Vec<String>,
    /// Mentioned names that are no member of the channel.
    pub unknown: Vec<String>,
}

/// What routing needs to know about a reply's thread.
#[derive(Debug, Clone, Default)]
pub struct ThreadContext<'a> {
    /// The author of the message the thread replies to.
    pub parent_author: Option<&'a str>,
    /// Authors of the replies before this one.
    pub participants: &'a [String],
}

/// Route `msg` among `members` (the roster when it is ingested).
pub fn route(msg: &Message, members: &[Member], thread: &ThreadContext<'_>) -> Routing {
    let current: Vec<&Member> = members.iter().filter(|m| m.added_ms <= msg.ts_ms).collect();
    let mut routing = Routing::default();
    if msg.kind == Kind::Joined {
        if let Some(m) = current.iter().find(|m| m.name == msg.author && m.role.is_agent()) {
            routing.prompts.push(Recipient { member: m.name.clone(), role: m.role, why: Why::Joined });
        }
        return routing;
    }
    if msg.kind == Kind::Checkin {
        for m in current.iter().filter(|m| m.role == Role::Supervisor) {
            routing.prompts.push(Recipient { member: m.name.clone(), role: m.role, why: Why::Checkin });
        }
        return routing;
    }
    let named = mentions(&msg.body);
    let mut everyone = false;
    let mut narrowed = false;
    let mut mentioned: Vec<&str> = Vec::new();
    for name in &named {
        if name == EVERYONE {
            everyone = true;
        } else if name == OPERATOR {
            narrowed = true;
            push_once(&mut routing.notify, OPERATOR);
        } else if let Some(m) = current.iter().find(|m| &m.name == name) {
            narrowed = true;
            if m.role.is_agent() {
                mentioned.push(&m.name);
            } else {
                push_once(&mut routing.notify, &m.name);
            }
        } else if members.iter().any(|m| &m.name == name) {
            // A member who joined after this message was posted: not routed, not unknown.
        } else {
            routing.unknown.push(name.clone());
        }
    }
    let in_thread = msg.thread.is_some();
    for m in current.iter().filter(|m| m.role.is_agent() && m.name != msg.author) {
        let name = m.name.as_str();
        let why = if mentioned.contains(&name) {
            Some(Why::Mentioned)
        } else if in_thread && thread.parent_author == Some(name) {
            Some(Why::ThreadParent)
        } else if in_thread && thread.participants.iter().any(|p| p == name) {
            Some(Why::ThreadParticipant)
        } else if m.role == Role::Supervisor {
            Some(Why::Supervisor)
        } else if everyone || (!in_thread && !narrowed) {
            Some(Why::Everyone)
        } else {
            None
        };
        if let Some(why) = why {
            routing.prompts.push(Recipient { member: m.name.clone(), role: m.role, why });
        }
    }
    routing
}

fn push_once(list: &mut Vec<String>, name: &str) {
    if !list.iter().any(|n| n == name) {
        list.push(name.to_string());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::item::ItemId;

    fn roster() -> Vec<Member> {
        let m = |name: &str, role, added_ms| Member { name: name.into(), role, added_ms };
        vec![
            m("alice", Role::Worker, 0),
            m("bob", Role::Worker, 0),
            m("carol", Role::Worker, 0),
            m("sup", Role::Supervisor, 0),
            m("pat", Role::Human, 0),
            m("late", Role::Worker, 500),
        ]
    }

    fn post(author: &str, body: &str, thread: bool) -> Message {
        Message {
            id: ItemId::sequential(100),
            author: author.into(),
            ts_ms: 100,
            thread: thread.then(|| ItemId::sequential(50)),
            kind: Kind::Post,
            body: body.into(),
        }
    }

    /// (who, body, in a thread, parent author, participants) → (prompted, notified, unknown)
    type Row<'a> =
        (&'a str, &'a str, bool, Option<&'a str>, &'a [&'a str], &'a [&'a str], &'a [&'a str], &'a [&'a str]);

    #[test]
    fn routing_follows_the_issue_rules() {
        let table: &[Row<'_>] = &[
            // Root, no mentions: every agent but the author (not people, not later members).
            ("alice", "hello all", false, None, &[], &["bob", "carol", "sup"], &[], &[]),
            // The operator posting: every agent.
            ("human", "status?", false, None, &[], &["alice", "bob", "carol", "sup"], &[], &[]),
            // @channel: the same, explicitly, even beside a mention.
            ("alice", "@channel and @bob", false, None, &[], &["bob", "carol", "sup"], &[], &[]),
            // Mentions: only those agents, plus supervisors.
            ("alice", "@bob can you", false, None, &[], &["bob", "sup"], &[], &[]),
            ("alice", "@bob and @carol", false, None, &[], &["bob", "carol", "sup"], &[], &[]),
            // Mentioning yourself does not send it to you.
            ("alice", "note to @alice", false, None, &[], &["sup"], &[], &[]),
            // A supervisor's own mention message goes to the mentioned only.
            ("sup", "@carol ping", false, None, &[], &["carol"], &[], &[]),
            // @human: a notification, never a prompt; it narrows like a mention.
            ("alice", "@human need approval", false, None, &[], &["sup"], &["human"], &[]),
            // A person member mentioned: notified, not prompted.
            ("alice", "@pat look", false, None, &[], &["sup"], &["pat"], &[]),
            // Mentions in code do not count.
            ("alice", "run `@bob`\n```\n@carol\n```", false, None, &[], &["bob", "carol", "sup"], &[], &[]),
            // An unknown @word narrows nothing and is reported.
            ("alice", "use @override here", false, None, &[], &["bob", "carol", "sup"], &[], &["override"]),
            // A member who joined after the message: neither routed nor unknown.
            ("alice", "@late hi", false, None, &[], &["bob", "carol", "sup"], &[], &[]),
            // Thread reply: parent's author, participants, mentioned, supervisors.
            ("bob", "done", true, Some("alice"), &[], &["alice", "sup"], &[], &[]),
            ("bob", "done", true, Some("alice"), &["carol", "bob"], &["alice", "carol", "sup"], &[], &[]),
            ("alice", "and @carol?", true, Some("alice"), &["bob"], &["bob", "carol", "sup"], &[], &[]),
            // The parent's author replying in its own thread: not to itself.
            ("alice", "thanks", true, Some("alice"), &["bob"], &["bob", "sup"], &[], &[]),
            // A parent written by the operator: nobody to prompt for it.
            ("bob", "on it", true, Some("human"), &[], &["sup"], &[], &[]),
            // @channel in a thread: every agent.
            ("bob", "@channel fyi", true, Some("alice"), &[], &["alice", "carol", "sup"], &[], &[]),
            // @human in a thread: notification plus the thread's audience.
            ("bob", "@human ok?", true, Some("alice"), &[], &["alice", "sup"], &["human"], &[]),
        ];
        for (author, body, thread, parent, participants, want, notify, unknown) in table {
            let participants: Vec<String> = participants.iter().map(|s| s.to_string()).collect();
            let ctx = ThreadContext { parent_author: *parent, participants: &participants };
            let r = route(&post(author, body, *thread), &roster(), &ctx);
            let got: Vec<&str> = r.prompts.iter().map(|p| p.member.as_str()).collect();
            assert_eq!(&got, want, "{author}: {body:?}");
            assert_eq!(&r.notify, notify, "{author}: {body:?}");
            assert_eq!(&r.unknown, unknown, "{author}: {body:?}");
        }
    }

    #[test]
    fn the_most_specific_reason_is_given() {
        let participants = vec!["carol".to_string()];
        let ctx = ThreadContext { parent_author: Some("alice"), participants: &participants };
        let r = route(&post("bob", "@sup look", true), &roster(), &ctx);
        let whys: Vec<(&str, Why)> = r.prompts.iter().map(|p| (p.member.as_str(), p.why)).collect();
        assert_eq!(
            whys,
            vec![("alice", Why::ThreadParent), ("carol", Why::ThreadParticipant), ("sup", Why::Mentioned)]
        );
        let r = route(&post("alice", "hi", false), &roster(), &ThreadContext::default());
        assert_eq!(r.prompts[0].why, Why::Everyone);
        assert_eq!(r.prompts.last().map(|p| p.why), Some(Why::Supervisor));
    }

    #[test]
    fn a_joined_record_goes_to_the_member_who_joined_alone() {
        let mut m = post("late", "worker", false);
        m.kind = Kind::Joined;
        m.ts_ms = 500;
        let r = route(&m, &roster(), &ThreadContext::default());
        assert_eq!(r.prompts, vec![Recipient { member: "late".into(), role: Role::Worker, why: Why::Joined }]);
        // A person joining gets no prompt.
        m.author = "pat".into();
        assert!(route(&m, &roster(), &ThreadContext::default()).prompts.is_empty());
    }

    /// What is still queued for a member goes only to those that receive the channel now:
    /// its agents. A member removed, or made a person, since a message was routed to it is not
    /// among them (the delivery engine withdraws its items).
    #[test]
    fn only_agent_members_receive_what_is_still_queued() {
        let mut r = crate::channel::Roster::new(crate::channel::ChannelName::parse("ops").unwrap(), String::new(), 0);
        r.members = roster();
        assert_eq!(r.receivers(), ["alice", "bob", "carol", "sup", "late"]);
        r.members.retain(|m| m.name != "bob");
        r.members.iter_mut().filter(|m| m.name == "carol").for_each(|m| m.role = Role::Human);
        assert_eq!(r.receivers(), ["alice", "sup", "late"]);
    }

    #[test]
    fn a_checkin_goes_to_every_supervisor_alone() {
        let mut m = post("desk", "workers idle", false);
        m.kind = Kind::Checkin;
        let r = route(&m, &roster(), &ThreadContext::default());
        assert_eq!(r.prompts, vec![Recipient { member: "sup".into(), role: Role::Supervisor, why: Why::Checkin }]);
    }
}
