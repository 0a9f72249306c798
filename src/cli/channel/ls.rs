//! `desk channel ls`: every channel, its members, messages, unread and stalls.

#[allow(unused_imports)]
use super::*;

pub(in crate::cli) fn ls(json: bool) -> Result<i32> {
    let (_, store) = store()?;
    let list: Vec<Summary> = store.list()?.iter().map(|n| summarize(&store, n)).collect::<Result<Vec<_>>>()?;
    ChannelList(list).render(json)?;
    Ok(0)
}

/// `desk channel ls`: a summary per channel, oldest name first.
struct ChannelList(Vec<Summary>);

impl ChannelList {
    /// Once as text (a table, a stalled channel's line under it) or once as JSON.
    fn render(&self, json: bool) -> Result<()> {
        if json {
            return output::print_ok("channel-list", &self.0, &[]);
        }
        if self.0.is_empty() {
            println!("no channels; create one with: desk channel new NAME --goal TEXT");
            return Ok(());
        }
        println!(
            "{:<24} {:>7} {:>8} {:>7} {:>6} {:>6}  GOAL",
            "CHANNEL", "MEMBERS", "MESSAGES", "THREADS", "UNREAD", "@HUMAN"
        );
        for c in &self.0 {
            println!(
                "{:<24} {:>7} {:>8} {:>7} {:>6} {:>6}  {}",
                format!("#{}", c.name),
                c.members,
                c.messages,
                c.threads,
                c.unread,
                c.human_mentions,
                c.goal
            );
            if let Some(stall) = &c.stalled {
                println!("  ! {}", stall_line(&c.name, stall));
            }
        }
        Ok(())
    }
}
