//! `desk item`: one item whole, from the daemon or (when it is down) the store; and the item
//! an operator means by the start or end of its id.

use anyhow::Result;

use super::{REQUEST_TIMEOUT, paths};
use crate::cli::output::{self, ErrorCode};
use crate::cli::{fail, failure};
use desk_common::daemon_client;
use desk_core::delivery::answer::{IN_INTAKE, ItemAnswer};
use desk_core::delivery::item::{ItemId, When};
use desk_daemon::store::Store;
use desk_wire::control::{Answer, Request};

/// The item an operator means by `text`: a whole id, or any unique start of one (like a git
/// hash) or end of one (people copy the end of an id). No match, or several, is a usage error
/// that says which (the ids it names written as `ids` says).
pub(in crate::cli) fn resolve_id(text: &str, ids: &output::Ids) -> Result<ItemId> {
    if let Some(id) = ItemId::parse(text) {
        return Ok(id);
    }
    let valid =
        !text.trim().is_empty() && text.trim().bytes().all(|b| b.is_ascii_alphanumeric()) && text.trim().len() < 26;
    if !valid {
        return Err(fail(
            ErrorCode::Usage,
            format!("{text:?} is not an item id (26 characters, or the start or end of one)"),
        ));
    }
    let store = Store::open(&paths()?.state)?;
    let mut found = store.ids_with_prefix_or_suffix(text)?;
    match found.len() {
        0 => Err(fail(ErrorCode::NoSuchItem, format!("no item has an id starting or ending with {text:?}"))),
        1 => Ok(found.remove(0)),
        n => {
            const SHOWN: usize = 10;
            let list: Vec<String> = found.iter().take(SHOWN).map(|i| format!("  {}", ids.show(i))).collect();
            let more = if n > SHOWN { format!("\n  … and {} more", n - SHOWN) } else { String::new() };
            Err(fail(
                ErrorCode::AmbiguousId,
                format!("{text:?} is the start or end of {n} item ids; give more of it:\n{}{more}", list.join("\n")),
            ))
        }
    }
}

pub(in crate::cli) fn item(id: &str, json: bool, ids: output::Ids) -> Result<i32> {
    let paths = paths()?;
    let id = resolve_id(id, &ids)?;
    let shown = ids.show(&id);
    // Finished items are read from disk even when the daemon is down.
    let answer = match daemon_client::request(
        &desk_common::daemon_client::socket_path(&paths),
        &Request::Item { id: id.clone() },
        REQUEST_TIMEOUT,
    ) {
        Ok(resp) => resp.into_answer::<ItemAnswer>().map_err(desk_common::failure::from_control)?,
        Err(_) => {
            let store = Store::open(&paths.state)?;
            let whole = |message: &str, item| Answer { message: message.into(), data: ItemAnswer { item, hold: None } };
            match (store.find(&id)?, store.find_intake(&id)?) {
                (Some(item), _) => whole("item", item),
                (None, Some(item)) => whole(IN_INTAKE, item),
                (None, None) => match store.find_set_aside(&id)? {
                    Some(p) => {
                        return Err(failure(
                            1,
                            format!("item {shown} was set aside as {}: {}", p.path.display(), p.error),
                        ));
                    }
                    None => return Err(fail(ErrorCode::NoSuchItem, format!("no item {shown}"))),
                },
            }
        }
    };
    ItemReport { in_intake: answer.message == IN_INTAKE, answer: answer.data, ids }.render(json)?;
    Ok(0)
}

/// `desk item`: the item whole, and why its queue is held.
struct ItemReport {
    answer: ItemAnswer,
    /// Read from the intake: the daemon has not queued it yet.
    in_intake: bool,
    /// How item ids are written in text.
    ids: output::Ids,
}

/// How `desk item` says an item is in the intake (its state in text, a note in JSON).
const IN_INTAKE_TEXT: &str = "in the intake, not queued yet";

impl ItemReport {
    /// Once as text (a field a line, then the evidence) or once as JSON (the item and hold).
    fn render(&self, json: bool) -> Result<()> {
        if json {
            let notes: Vec<String> = if self.in_intake { vec![IN_INTAKE_TEXT.into()] } else { vec![] };
            // Through a `Value`, whose keys are sorted: the order `desk item --json` has always had.
            return output::print_ok("item", serde_json::to_value(&self.answer)?, &notes);
        }
        let ItemAnswer { item, hold } = &self.answer;
        println!("item {}", self.ids.show(&item.id));
        println!(
            "  session   {} (generation {})",
            item.session,
            item.generation.map_or("any".into(), |g| g.to_string())
        );
        let mut state = item.state.as_str().to_string();
        if let Some(class) = item.stuck {
            state.push_str(&format!(" ({})", class.as_str()));
        }
        if self.in_intake {
            state = IN_INTAKE_TEXT.into();
        }
        println!("  state     {state}, since {}", desk_common::clock::local_datetime(item.state_since_ms));
        if let Some(hold) = hold {
            println!("  held      {}", hold.reason);
        }
        println!("  when      {}", if item.when == When::Idle { "idle" } else { "now" });
        println!("  from      {}", item.from);
        println!("  attempts  {}", item.attempts);
        if !item.digest_with.is_empty() {
            println!(
                "  digest    delivered together with {}",
                item.digest_with.iter().map(|i| self.ids.show(i)).collect::<Vec<_>>().join(", ")
            );
        }
        println!("  text      {}", item.preview(100));
        println!("  evidence:");
        for note in &item.evidence {
            println!("    {}  {:<11} {}", desk_common::clock::local_time(note.at_ms), note.kind, note.detail);
        }
        Ok(())
    }
}
