//! The master's journal sink: numbering session events and appending them to the session's
//! journal, through failures.
//!
//! Owns [`JournalSink`]: the journal itself, whether its last append failed, and the gap (the
//! first and last sequence numbers streamed but not journalled, and the latest error) that a
//! failing journal leaves, to be recorded as a `gap` event once appends work again. Invariants:
//! every event gets the next sequence number whether or not it reaches the disk (observers see
//! one numbering); a journal failure (a full disk) is logged once per failing stretch and never
//! stops the session; a gap is handed out once, after the first append that works again. May
//! not stream to clients: broadcasting is the loop's (`events.rs`).

use desk_common::journal::Journal;
use desk_wire::events::{Event, EventBody};
use tracing::warn;

/// The stretch of events streamed but not journalled: first and last sequence number, and the
/// latest error.
pub(super) type Gap = (u64, u64, String);

pub(super) struct JournalSink {
    journal: Journal,
    failed: bool,
    gap: Option<Gap>,
}

impl JournalSink {
    pub(super) fn new(journal: Journal) -> JournalSink {
        JournalSink { journal, failed: false, gap: None }
    }

    /// Number `body` and append it (durably if the event is evidence); returns the event, and
    /// the gap that just closed if this append is the first to work after failures (the caller
    /// records it as a `gap` event).
    pub(super) fn record(&mut self, ts_ms: u64, generation: u32, body: EventBody) -> (Event, Option<Gap>) {
        let seq = self.journal.allocate_seq();
        let event = Event { seq, ts_ms, generation, body };
        let mut closed = None;
        if let Err(e) = self.journal.append(&event, event.body.is_durable()) {
            if !self.failed {
                warn!("events journal failed; events are still streamed: {e:#}");
                self.failed = true;
            }
            let (from, _, _) = self.gap.take().unwrap_or((seq, seq, String::new()));
            self.gap = Some((from, seq, format!("{e:#}")));
        } else {
            self.failed = false;
            closed = self.gap.take();
        }
        (event, closed)
    }

    /// What a handover carries to the next binary: the next sequence number, whether the
    /// journal was failing, and the open gap.
    pub(super) fn saved(&self) -> (u64, bool, Option<Gap>) {
        (self.journal.next_seq(), self.failed, self.gap.clone())
    }

    /// Take over a handed-over sink's failure state (the journal continues its numbering).
    pub(super) fn resume(&mut self, failed: bool, gap: Option<Gap>) {
        self.failed = failed;
        self.gap = gap;
    }
}
