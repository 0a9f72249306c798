//! Channel replies: the demo agent's side of desk's channels.
//!
//! Owns reading the channel messages out of a submitted prompt (the header line
//! `#NAME · from AUTHOR · message ID[ · in thread T]`, the reason line `… you get this because
//! REASON.`, and the reply line `Reply with: desk channel post NAME --thread T 'your reply'`
//! that desk's prompts end with — one per message, also inside a digest) and deciding which to
//! answer ([`ReplyWhen`]). Invariants: a message is answered only if its prompt carried the
//! exact reply line, and only in the thread that line names; with `root`, replies are never
//! answered, so agents replying to each other cannot loop. Pure: the event loop runs the post.

/// Which channel messages the agent replies to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, clap::ValueEnum)]
pub enum ReplyWhen {
    /// Never (the default: the agent only logs its prompts).
    #[default]
    Off,
    /// Root messages (replying in their thread); replies in threads are read, not answered.
    Root,
    /// Messages that mention this agent.
    Mentioned,
    /// Every message (agents set to this reply to each other without end; for one agent only).
    All,
}

/// One channel message found in a prompt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChannelMessage {
    pub channel: String,
    pub author: String,
    pub message: String,
    /// The thread the reply goes to (from the reply line).
    pub thread: String,
    /// The message is itself a reply in a thread.
    pub in_thread: bool,
    pub mentioned: bool,
}

/// A post to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Reply {
    pub channel: String,
    pub thread: String,
    pub text: String,
}

/// The channel messages of a prompt, in order.
pub fn messages(prompt: &str) -> Vec<ChannelMessage> {
    let mut out = Vec::new();
    let mut current: Option<ChannelMessage> = None;
    for line in prompt.lines() {
        let line = line.trim();
        if let Some(m) = header(line) {
            current = Some(m);
        } else if let Some(reason) = line.split("you get this because ").nth(1) {
            if let Some(m) = &mut current {
                m.mentioned = reason.starts_with("you were mentioned");
            }
        } else if let Some(rest) = line.strip_prefix("Reply with: desk channel post ") {
            let mut words = rest.split(' ');
            let (Some(channel), Some("--thread"), Some(thread)) = (words.next(), words.next(), words.next()) else {
                continue;
            };
            if let Some(mut m) = current.take().filter(|m| m.channel == channel) {
                m.thread = thread.to_string();
                out.push(m);
            }
        }
    }
    out
}

/// `#NAME · from AUTHOR · message ID[ · in thread T]`.
fn header(line: &str) -> Option<ChannelMessage> {
    let mut parts = line.strip_prefix('#')?.split(" · ");
    let channel = parts.next()?.to_string();
    let author = parts.next()?.strip_prefix("from ")?.to_string();
    let message = parts.next()?.strip_prefix("message ")?.to_string();
    let in_thread = parts.next().is_some_and(|p| p.starts_with("in thread "));
    Some(ChannelMessage { channel, author, message, thread: String::new(), in_thread, mentioned: false })
}

/// The replies to make for a prompt: `text` with `{me}`, `{author}`, `{message}` and
/// `{channel}` filled in.
pub fn replies(prompt: &str, when: ReplyWhen, text: &str, me: &str) -> Vec<Reply> {
    messages(prompt)
        .into_iter()
        .filter(|m| match when {
            ReplyWhen::Off => false,
            ReplyWhen::Root => !m.in_thread,
            ReplyWhen::Mentioned => m.mentioned,
            ReplyWhen::All => true,
        })
        .filter(|m| m.author != me)
        .map(|m| Reply {
            text: text
                .replace("{me}", me)
                .replace("{author}", &m.author)
                .replace("{message}", &m.message)
                .replace("{channel}", &m.channel),
            channel: m.channel,
            thread: m.thread,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const ROOT: &str = "#build · from alice · message 01A\n\
        You are bob (worker) in #build; you get this because it is for everyone in the channel.\n\n\
        hello\n\nReply with: desk channel post build --thread 01A 'your reply'\n";
    const REPLY: &str = "#build · from carol · message 01C · in thread 01A\n\
        You are bob (worker) in #build; you get this because you were mentioned.\n\n\
        @bob look\n\nReply with: desk channel post build --thread 01A 'your reply'\n";

    #[test]
    fn messages_are_read_from_single_prompts_and_digests() {
        let digest = format!(
            "You have 2 messages (oldest first):\n\n--- message 1 of 2 ---\n{ROOT}\n--- message 2 of 2 ---\n{REPLY}"
        );
        let found = messages(&digest);
        assert_eq!(found.len(), 2);
        assert_eq!((found[0].message.as_str(), found[0].thread.as_str(), found[0].in_thread), ("01A", "01A", false));
        assert_eq!((found[1].author.as_str(), found[1].in_thread, found[1].mentioned), ("carol", true, true));
        assert!(
            messages("#build · you joined as worker\nYou are bob").is_empty(),
            "onboarding has nothing to reply to"
        );
    }

    #[test]
    fn root_mode_answers_roots_only_in_their_thread() {
        let both = format!("{ROOT}\n{REPLY}");
        let r = replies(&both, ReplyWhen::Root, "ack {message} from {me} to {author}", "bob");
        assert_eq!(
            r,
            vec![Reply { channel: "build".into(), thread: "01A".into(), text: "ack 01A from bob to alice".into() }]
        );
        let m = replies(&both, ReplyWhen::Mentioned, "x", "bob");
        assert_eq!(m.iter().map(|r| r.thread.as_str()).collect::<Vec<_>>(), ["01A"]);
        assert_eq!(replies(&both, ReplyWhen::All, "x", "bob").len(), 2);
        assert!(replies(&both, ReplyWhen::Off, "x", "bob").is_empty());
        assert!(replies(ROOT, ReplyWhen::All, "x", "alice").is_empty(), "never to itself");
    }
}
