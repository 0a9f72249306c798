//! `desk stuck`: every stuck item, why it is stuck and what to do about it.

use anyhow::Result;

use super::{REQUEST_TIMEOUT, ask, paths};
use crate::cli::output;
use crate::queues::DAEMON_DOWN;
use desk_core::delivery::answer::ListedItem;
use desk_core::delivery::item::{Item, State};
use desk_daemon::store::Store;
use desk_wire::control::Request;

pub(in crate::cli) fn stuck(json: bool) -> Result<i32> {
    let paths = paths()?;
    let offline = crate::autostart::daemon_down(&paths);
    let items: Vec<ListedItem> = if offline {
        if !json {
            eprintln!("desk: {DAEMON_DOWN}");
        }
        let (items, _, problems) = Store::open(&paths.state)?.read_only_view()?;
        for p in &problems {
            eprintln!("desk: cannot read {}: {}", p.path.display(), p.error);
        }
        // Whole, as the store holds them: a listing is cut to bound the daemon's answer.
        let whole = |item| ListedItem { item, text_chars: None, evidence_total: None };
        items.into_iter().filter(|i| i.state == State::Stuck).map(whole).collect()
    } else {
        ask(&paths, &Request::Stuck, REQUEST_TIMEOUT)?.data
    };
    StuckReport { items, offline }.render(json)?;
    Ok(0)
}

/// `desk stuck`: every stuck item, as the daemon (or, when it is down, the store) holds it.
struct StuckReport {
    items: Vec<ListedItem>,
    /// Read from the store: the daemon is not running.
    offline: bool,
}

impl StuckReport {
    /// Once as text (each item, why it is stuck and what to do) or once as JSON (the items).
    fn render(&self, json: bool) -> Result<()> {
        if json {
            let notes: Vec<String> = if self.offline { vec![DAEMON_DOWN.to_string()] } else { vec![] };
            // Through a `Value`, whose keys are sorted: the order `desk stuck --json` has always had.
            return output::print_ok("stuck", serde_json::to_value(&self.items)?, &notes);
        }
        if self.items.is_empty() {
            println!("nothing is stuck");
        }
        print_stuck(&self.items, None);
        Ok(())
    }
}

/// `desk stuck`'s text for `items`, each id and session written `HOST:…` when they are a
/// host's (`desk stuck -H HOST`), so the commands it suggests reach them.
pub(in crate::cli) fn print_stuck(items: &[ListedItem], host: Option<&str>) {
    let on_host = |s: &str| host.map_or_else(|| s.to_string(), |h| format!("{h}:{s}"));
    for ListedItem { item, .. } in items {
        let class = item.stuck.map_or("?", |c| c.as_str());
        let why = item
            .evidence
            .iter()
            .rev()
            .find(|n| n.kind == "stuck" || n.kind == "refused")
            .map(|n| n.detail.as_str())
            .unwrap_or_default();
        let (id, session) = (on_host(item.id.as_str()), on_host(&item.session));
        println!("{id}  {session:<12} {class:<14} {}", item.preview(50));
        println!("    {why}");
        println!("    next: {}", next_step(item, &id, &session));
    }
}

/// What an operator can do about a stuck item, by its class (`id` and `session` as the
/// operator names them).
fn next_step(item: &Item, id: &str, session: &str) -> String {
    use desk_core::delivery::item::StuckClass;
    match item.stuck {
        Some(StuckClass::SubmitStuck) => format!(
            "check the agent (desk peek {session}); desk force {id} presses Enter on the text in its box, or desk drop {id}"
        ),
        Some(StuckClass::Merged) => format!(
            "it went, or sits, with someone else's text: check the agent (desk peek {session}), then desk drop {id}; force refuses it"
        ),
        Some(StuckClass::Interrupted) => format!(
            "the agent may have taken it (it was cut off after it was typed, or while it waited in the agent's own queue; its hook, if it comes, settles it delivered): check the agent's transcript (desk peek {session} --history); if it did not get the prompt, desk force {id} pastes it again; otherwise desk drop {id}"
        ),
        _ => format!(
            "check the agent (desk peek {session}): if it did not get the prompt, desk force {id} presses Enter on it when it sits unsent in the input box, or pastes it again; otherwise desk drop {id}"
        ),
    }
}
