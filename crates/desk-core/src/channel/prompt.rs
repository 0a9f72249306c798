//! The text an agent receives for a channel message, and the onboarding text for a new member.
//!
//! Owns the wording. A message prompt names the channel, the author, the message id, who the
//! recipient is in the channel and why it gets the message, the body (or, above
//! [`INLINE_BODY`], the command that shows it), and the exact command to reply with — always a
//! reply in the message's thread (a root message's own id starts its thread). Invariants: the
//! reply command is one line that starts with [`REPLY_PREFIX`], which the demo agent (and any
//! script) can rely on; nothing here depends on the agent's provider. Pure.

use super::route::Recipient;
use super::{ChannelName, Member, Message, OPERATOR, Role, Roster};

/// Bodies up to 4 KiB are pasted in the prompt; longer ones are named with the command that
/// shows them. 4 KiB is a long chat message, and a digest of 20 such messages (80 KiB) is still
/// well inside the 256 KiB prompt limit.
pub const INLINE_BODY: usize = 4 * 1024;

/// Every prompt's reply line starts with this.
pub const REPLY_PREFIX: &str = "Reply with: ";

/// The thread a reply to `msg` goes in: its own thread, or itself for a root message.
pub fn reply_thread(msg: &Message) -> String {
    msg.thread.as_ref().unwrap_or(&msg.id).to_string()
}

/// `desk channel post NAME --thread ID 'your reply'`.
pub fn reply_command(channel: &ChannelName, msg: &Message) -> String {
    format!("desk channel post {channel} --thread {} 'your reply'", reply_thread(msg))
}

/// The delivery item's sender: `alice in #build`.
pub fn sender(channel: &ChannelName, msg: &Message) -> String {
    format!("{} in #{channel}", msg.author)
}

/// The prompt for one recipient of one message.
pub fn message_prompt(channel: &ChannelName, msg: &Message, to: &Recipient) -> String {
    let mut out = format!("#{channel} · from {} · message {}", msg.author, msg.id);
    if let Some(thread) = &msg.thread {
        out.push_str(&format!(" · in thread {thread}"));
    }
    out.push('\n');
    out.push_str(&format!(
        "You are {} ({}) in #{channel}; you get this because {}.\n\n",
        to.member,
        to.role.as_str(),
        to.why.phrase()
    ));
    if msg.body.len() <= INLINE_BODY {
        out.push_str(msg.body.trim_end());
    } else {
        out.push_str(&format!(
            "The message is {} bytes; read it with: desk channel read {channel} --thread {}",
            msg.body.len(),
            reply_thread(msg)
        ));
    }
    out.push_str("\n\n");
    out.push_str(REPLY_PREFIX);
    out.push_str(&reply_command(channel, msg));
    out.push('\n');
    out
}

/// The check-in prompt for a supervisor: what desk saw, and how to read and nudge.
pub fn checkin_prompt(channel: &ChannelName, msg: &Message, to: &Recipient) -> String {
    format!(
        "#{channel} · check-in from desk · message {}
         You are {} ({}) in #{channel}; you get this because {}.

         {}

         Read the channel: desk channel read {channel}
         Nudge a worker: desk channel post {channel} '@name …'
",
        msg.id,
        to.member,
        to.role.as_str(),
        to.why.phrase(),
        msg.body.trim_end()
    )
}

/// The onboarding prompt of a member that joined: the goal, the members, how to read and reply.
pub fn onboarding_prompt(roster: &Roster, member: &Member) -> String {
    let channel = &roster.name;
    let mut out = format!("#{channel} · you joined as {}\n", member.role.as_str());
    out.push_str(&format!("You are {} ({}) in channel #{channel}.\n", member.name, member.role.as_str()));
    if !roster.goal.trim().is_empty() {
        out.push_str(&format!("Goal: {}\n", roster.goal.trim()));
    }
    let members: Vec<String> = roster.members.iter().map(|m| format!("{} ({})", m.name, m.role.as_str())).collect();
    out.push_str(&format!("Members: {}; {OPERATOR} (the operator)\n", members.join(", ")));
    if member.role == Role::Supervisor {
        out.push_str("As a supervisor you receive every message of the channel.\n");
    }
    out.push_str(&format!(
        "Read the channel: desk channel read {channel}\n\
         Post: desk channel post {channel} 'text' (mention with @name; @{OPERATOR} reaches the operator)\n\
         Reply in a thread: desk channel post {channel} --thread ID 'text'\n"
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::Kind;
    use crate::channel::route::Why;
    use crate::delivery::item::ItemId;

    fn msg(body: &str, thread: Option<ItemId>) -> Message {
        Message {
            id: ItemId::sequential(7),
            author: "alice".into(),
            ts_ms: 7,
            thread,
            kind: Kind::Post,
            body: body.into(),
        }
    }

    #[test]
    fn a_prompt_names_channel_author_id_role_and_the_reply_command() {
        let ch = ChannelName::parse("build").unwrap();
        let m = msg("please run the tests", None);
        let to = Recipient { member: "bob".into(), role: Role::Worker, why: Why::Everyone };
        let p = message_prompt(&ch, &m, &to);
        assert_eq!(
            p,
            format!(
                "#build · from alice · message {id}\n\
                 You are bob (worker) in #build; you get this because it is for everyone in the channel.\n\n\
                 please run the tests\n\n\
                 Reply with: desk channel post build --thread {id} 'your reply'\n",
                id = m.id
            )
        );
        // In a thread, the reply goes to the same thread.
        let parent = ItemId::sequential(1);
        let r = msg("done", Some(parent.clone()));
        let p = message_prompt(&ch, &r, &to);
        assert!(p.contains(&format!("· in thread {parent}\n")), "{p}");
        assert!(p.ends_with(&format!("Reply with: desk channel post build --thread {parent} 'your reply'\n")), "{p}");
    }

    #[test]
    fn a_long_body_is_named_not_pasted() {
        let ch = ChannelName::parse("build").unwrap();
        let m = msg(&"x".repeat(INLINE_BODY + 1), None);
        let to = Recipient { member: "bob".into(), role: Role::Worker, why: Why::Mentioned };
        let p = message_prompt(&ch, &m, &to);
        assert!(!p.contains("xxxx"), "{p}");
        assert!(
            p.contains(&format!("The message is 4097 bytes; read it with: desk channel read build --thread {}", m.id))
        );
    }

    #[test]
    fn onboarding_gives_goal_members_and_commands() {
        let mut roster = Roster::new(ChannelName::parse("build").unwrap(), "ship v2".into(), 0);
        roster.members.push(Member { name: "bob".into(), role: Role::Worker, added_ms: 0 });
        roster.members.push(Member { name: "sup".into(), role: Role::Supervisor, added_ms: 0 });
        let p = onboarding_prompt(&roster, &roster.members[1]);
        assert!(p.contains("You are sup (supervisor) in channel #build.\nGoal: ship v2\n"), "{p}");
        assert!(p.contains("Members: bob (worker), sup (supervisor); human (the operator)"), "{p}");
        assert!(p.contains("desk channel read build") && p.contains("desk channel post build --thread ID"), "{p}");
    }
}
