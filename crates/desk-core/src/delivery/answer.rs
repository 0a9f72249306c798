//! What the daemon answers each control request with, typed.
//!
//! Owns the data of each answer of `desk serve`'s control protocol (`desk_wire::control`,
//! which carries them): the daemon builds these values and the CLI and the dashboard read the
//! same types back, so nobody edits or indexes JSON. Per request: `ping` and `stop` answer
//! [`Pid`]; `ingest` [`Ingested`]; `queue` a list of [`ListedQueue`]; `item` an [`ItemAnswer`]
//! (message `item`, or `intake` for a prompt still in the intake); `stuck` a list of
//! [`ListedItem`]; `force`, `drop`, `pause` and `resume` words only. Invariants: a listing's
//! size grows with the number of items, not with their prompts ([`ListedItem::cut`]); the keys
//! are those the answers have always had (docs/delivery.md §5), so older and newer desks read
//! each other's answers. Pure: no I/O.

use serde::{Deserialize, Serialize};

use super::engine::{Hold, QueueView};
use super::item::{Item, ItemId, State};

/// Characters of an item's text in `queue` and `stuck` answers: enough for a listing's preview
/// line; `desk item` carries the whole text. Keeps a listing's size independent of prompt
/// sizes (a few 256 KiB prompts made the answer exceed the line limit).
pub const LISTING_TEXT_CHARS: usize = 200;

/// Evidence notes per item in a listing (the newest, plus the latest `stuck`/`refused` note
/// that `desk stuck` prints): an item keeps up to 64, which `desk item` shows.
pub const LISTING_NOTES: usize = 3;

/// The daemon's process id (`ping`, `stop`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Pid {
    pub pid: u32,
}

/// An ingested item's state (`ingest`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ingested {
    pub id: ItemId,
    pub state: State,
}

/// An item as a listing carries it: its text cut to [`LISTING_TEXT_CHARS`] (with
/// `text_chars`, the whole text's length, when cut) and its last [`LISTING_NOTES`] evidence
/// notes plus the latest `stuck`/`refused` one (with `evidence_total`, when cut).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedItem {
    #[serde(flatten)]
    pub item: Item,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text_chars: Option<usize>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evidence_total: Option<usize>,
}

impl ListedItem {
    /// `item`, cut for a listing.
    pub fn cut(mut item: Item) -> ListedItem {
        let chars = item.text.chars().count();
        let text_chars = (chars > LISTING_TEXT_CHARS).then(|| {
            item.text = item.text.chars().take(LISTING_TEXT_CHARS).collect();
            chars
        });
        let total = item.evidence.len();
        let evidence_total = (total > LISTING_NOTES).then(|| {
            let why = item.evidence.iter().rposition(|n| n.kind == "stuck" || n.kind == "refused");
            let mut i = 0;
            item.evidence.retain(|_| {
                let keep = i + LISTING_NOTES >= total || Some(i) == why;
                i += 1;
                keep
            });
            total
        });
        ListedItem { item, text_chars, evidence_total }
    }
}

/// One session's queue (`queue`): the engine's [`QueueView`] with its items cut for a listing,
/// and why the session's master cannot be delivered into, when it refused the daemon.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ListedQueue {
    pub session: String,
    pub generation: Option<u32>,
    pub paused: Option<String>,
    pub hold: Option<Hold>,
    pub in_flight: Vec<ItemId>,
    pub items: Vec<ListedItem>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<String>,
}

impl ListedQueue {
    pub fn new(view: QueueView, refused: Option<String>) -> ListedQueue {
        ListedQueue {
            session: view.session,
            generation: view.generation,
            paused: view.paused,
            hold: view.hold,
            in_flight: view.in_flight,
            items: view.items.into_iter().map(ListedItem::cut).collect(),
            refused,
        }
    }
}

/// One item, whole (`item`), and, for a queued one, why its session's queue waits.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ItemAnswer {
    #[serde(flatten)]
    pub item: Item,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hold: Option<Hold>,
}

/// The message of an `item` answer for a prompt still in the intake (its data is the item as
/// `desk send` wrote it, with a note saying why it is not queued yet).
pub const IN_INTAKE: &str = "intake";

#[cfg(test)]
mod tests {
    use super::*;
    use crate::delivery::item::When;

    #[test]
    fn a_listing_carries_a_preview_and_the_newest_evidence_not_the_whole_item() {
        let mut item =
            Item::new(ItemId::sequential(1), "s".into(), Some(1), "x".repeat(300_000), When::Now, "t".into(), 1);
        item.note(2, "stuck", "submit-stuck: the Enter did not take");
        for i in 0..10 {
            item.note(3 + i, "hold", format!("held {i}"));
        }
        let listed = ListedItem::cut(item.clone());
        let v = serde_json::to_value(&listed).unwrap();
        assert_eq!(v["text"].as_str().unwrap().len(), LISTING_TEXT_CHARS);
        assert_eq!(v["text_chars"], 300_000);
        let kinds: Vec<&str> = v["evidence"].as_array().unwrap().iter().map(|n| n["kind"].as_str().unwrap()).collect();
        assert_eq!(kinds, ["stuck", "hold", "hold", "hold"]);
        assert_eq!(v["evidence_total"], item.evidence.len());
        assert!(serde_json::to_vec(&v).unwrap().len() < 2048);
        // What the CLI reads back is the listed item, and the item within it.
        let back: ListedItem = serde_json::from_value(v.clone()).unwrap();
        assert_eq!(back, listed);
        let plain: Item = serde_json::from_value(v).unwrap();
        assert_eq!(plain.id, item.id);
        // A short item is left whole, with no keys added.
        let short = Item::new(ItemId::sequential(2), "s".into(), None, "hi".into(), When::Now, "t".into(), 1);
        let v = serde_json::to_value(ListedItem::cut(short.clone())).unwrap();
        assert_eq!(v, serde_json::to_value(&short).unwrap());
    }
}
