//! A client reading a session's history whole, a page at a time.
//!
//! Owns the exchange of SNAPSHOT_REQUESTs that reads the newest N history lines of a session
//! (docs/protocol.md §5.7), so that `desk peek`, `desk attach --history` and the dashboard read
//! it the same way: [`HistoryPager`] decides what to ask and which lines of the answers to keep,
//! and is fed the answers (pure, so the dashboard drives it from a viewer connection that also
//! carries output); `desk_common::history::HistoryRead` drives it over a blocking connection.
//!
//! The exchange: first the 4-byte form asking for no line, which every master answers with its
//! screen, and a master that pages also with the numbers of the lines it holds
//! (`history_first`, `history_end`). That answer fixes the range: the newest N lines numbered
//! below its `history_end`, the lines above its screen at that instant, however much output
//! follows while they are read. Then pages of the 12-byte form until the range is read. A
//! master that predates paging is asked for all N lines in the 4-byte form instead, and
//! answers with the newest that fit in one frame.
//!
//! Invariants: rows are handed out oldest first, each once, and only rows of the range; every
//! line of the range that is not handed out (it left the session's history before it was read,
//! the connection ended, an older master may have cut it) is told in a note, never dropped
//! silently; a client holds at most one answer at a time (a page is at most a frame).

use desk_term::screen::HistoryRow;

use crate::{Frame, HistoryRequest, MAX_PAYLOAD, SnapshotReply};

/// An answer of an older master this close to the frame limit may have had its oldest lines
/// left out: the next line would have needed more room than is left, and one row of a
/// 1000-column screen with a colour change in every cell takes about 40 KiB of JSON.
const CUT_MARGIN: usize = 64 * 1024;

/// Where the reading stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// The first request is out; its answer fixes the range.
    Probe,
    /// A master that predates paging was asked for every line at once.
    Whole,
    /// Reading pages: the number of the next line wanted, and one past the range's last.
    Paging {
        next: u64,
        end: u64,
    },
    Done,
}

/// What one answer gave.
#[derive(Debug, Default)]
pub struct Page {
    /// Rows of the range, oldest first, after those of earlier answers.
    pub rows: Vec<HistoryRow>,
    /// What to send next; `None` once the history is read (or cannot be).
    pub next: Option<Frame>,
    /// This answer was taken when the range ends: the range holds the lines that were above
    /// its screen. A client whose own screen model kept lines from output it received before
    /// this answer has those lines at the end of the range too.
    pub sets_end: bool,
}

/// Reads the newest N history lines of a session: see the module doc.
#[derive(Debug)]
pub struct HistoryPager {
    wanted: u32,
    phase: Phase,
    /// Lines in the range (known once the first answer came).
    total: u64,
    /// Lines of the range handed out.
    read: u64,
    /// Lines of the range that had left the session's history when their page was asked.
    gone: u64,
    notes: Vec<String>,
}

impl HistoryPager {
    /// A pager for the newest `lines` lines (`u32::MAX`: all of them), and the request to send
    /// first.
    pub fn new(lines: u32) -> (HistoryPager, Frame) {
        let pager = HistoryPager { wanted: lines, phase: Phase::Probe, total: 0, read: 0, gone: 0, notes: Vec::new() };
        (pager, Frame::SnapshotRequest { history: Some(HistoryRequest::Newest(0)) })
    }

    /// True once nothing more will be asked.
    pub fn done(&self) -> bool {
        self.phase == Phase::Done
    }

    /// Takes in the answer to the last request sent (its `history` is taken out of it).
    pub fn on_reply(&mut self, reply: &mut SnapshotReply) -> Page {
        match self.phase {
            Phase::Probe => self.on_probe(reply),
            Phase::Whole => {
                let rows = reply.history.take().unwrap_or_default();
                let size = serde_json::to_vec(&*reply).map_or(0, |v| v.len())
                    + serde_json::to_vec(&rows).map_or(0, |v| v.len());
                self.read = rows.len() as u64;
                self.total = self.read;
                if (rows.len() as u64) < u64::from(self.wanted) && size + CUT_MARGIN > MAX_PAYLOAD {
                    self.notes.push(format!(
                        "this session's master is older than this desk and sends its history in one frame \
                         of at most {} MiB: lines older than the {} shown may be missing (a session started \
                         by this desk sends all of them)",
                        MAX_PAYLOAD >> 20,
                        rows.len()
                    ));
                }
                self.phase = Phase::Done;
                Page { rows, next: None, sets_end: true }
            }
            Phase::Paging { next, end } => self.on_page(reply, next, end),
            Phase::Done => Page::default(),
        }
    }

    fn on_probe(&mut self, reply: &SnapshotReply) -> Page {
        if self.wanted == 0 {
            self.phase = Phase::Done;
            return Page { sets_end: true, ..Page::default() };
        }
        let Some(end) = reply.history_end else {
            // A master that predates paging: it does not say what it holds.
            self.phase = Phase::Whole;
            return Page { next: Some(newest(self.wanted)), ..Page::default() };
        };
        let first = reply.history_first.unwrap_or(end).min(end);
        let start = end.saturating_sub(u64::from(self.wanted)).max(first);
        self.total = end - start;
        if start >= end {
            self.phase = Phase::Done;
            return Page { sets_end: true, ..Page::default() };
        }
        self.phase = Phase::Paging { next: start, end };
        Page { next: Some(page(start, end)), sets_end: true, ..Page::default() }
    }

    fn on_page(&mut self, reply: &mut SnapshotReply, next: u64, end: u64) -> Page {
        let mut rows = reply.history.take().unwrap_or_default();
        let start = reply.history_start.unwrap_or(next);
        if start > next {
            // Those lines left the history (pushed out by new output, or the session was
            // resized or cleared its scrollback) before this page was asked.
            self.gone += start.min(end) - next;
        }
        // A gap can shift the page past the range's end: keep only the range.
        let room = usize::try_from(end.saturating_sub(start.max(next))).unwrap_or(usize::MAX);
        if start < next {
            // Not asked for (a master answers from `from` on); never handed out twice.
            let skip = usize::try_from(next - start).unwrap_or(usize::MAX).min(rows.len());
            rows.drain(..skip);
        }
        rows.truncate(room);
        self.read += rows.len() as u64;
        let after = start.max(next) + rows.len() as u64;
        if after >= end {
            self.finish();
            return Page { rows, next: None, sets_end: false };
        }
        if rows.is_empty() {
            // The master has nothing of what is left of the range.
            self.gone += end - after;
            self.finish();
            return Page { rows, next: None, sets_end: false };
        }
        self.phase = Phase::Paging { next: after, end };
        Page { rows, next: Some(page(after, end)), sets_end: false }
    }

    /// The reading cannot go on (`why`: the connection ended, say): what was not read is told
    /// in a note.
    pub fn interrupted(&mut self, why: &str) {
        if let Phase::Paging { next, end } = self.phase {
            self.notes.push(format!(
                "{why}: {} of the {} history lines asked for are not shown",
                end - next,
                self.total
            ));
        } else if self.phase != Phase::Done {
            self.notes.push(format!("{why}: the history is not shown"));
        }
        self.phase = Phase::Done;
    }

    fn finish(&mut self) {
        if self.gone > 0 {
            self.notes.push(format!(
                "{} of the {} history lines asked for left the session's history before desk could read them \
                 (new output pushed them out, or the session was resized or cleared its scrollback)",
                self.gone, self.total
            ));
        }
        self.phase = Phase::Done;
    }

    /// What the reader should be told: lines of the range that are not shown, and why.
    pub fn notes(&self) -> &[String] {
        &self.notes
    }
}

fn newest(lines: u32) -> Frame {
    Frame::SnapshotRequest { history: Some(HistoryRequest::Newest(lines)) }
}

fn page(from: u64, end: u64) -> Frame {
    let lines = u32::try_from(end - from).unwrap_or(u32::MAX);
    Frame::SnapshotRequest { history: Some(HistoryRequest::Page { lines, from }) }
}

#[cfg(test)]
mod tests {
    //! The pager fed answers written by hand, as masters old and new give them.

    use super::*;

    fn row(n: u64) -> HistoryRow {
        HistoryRow { text: format!("line {n}"), wrapped: false, runs: Vec::new() }
    }

    fn reply(history: Option<Vec<HistoryRow>>, numbers: Option<(u64, u64, u64)>) -> SnapshotReply {
        SnapshotReply {
            history,
            history_start: numbers.map(|n| n.0),
            history_first: numbers.map(|n| n.1),
            history_end: numbers.map(|n| n.2),
            ..SnapshotReply::of_screen(desk_term::screen::Screen::new(80, 24).snapshot())
        }
    }

    /// A paging master holding lines `first..end`, answering `request` with pages of `per`.
    fn answer(request: &Frame, first: u64, end: u64, per: u64) -> SnapshotReply {
        let Frame::SnapshotRequest { history: Some(ask) } = request else { panic!("{request:?}") };
        let (from, lines) = match *ask {
            HistoryRequest::Newest(n) => (end.saturating_sub(u64::from(n)), u64::from(n)),
            HistoryRequest::Page { lines, from } => (from, u64::from(lines).min(per)),
        };
        let start = from.max(first).min(end);
        let rows = (start..end).take(lines as usize).map(row).collect();
        reply(Some(rows), Some((start, first, end)))
    }

    fn texts(rows: &[HistoryRow]) -> Vec<String> {
        rows.iter().map(|r| r.text.clone()).collect()
    }

    #[test]
    fn the_newest_lines_come_in_pages_oldest_first_each_once() {
        let (mut pager, mut request) = HistoryPager::new(250);
        let mut got = Vec::new();
        let mut answers = 0;
        while !pager.done() {
            let mut r = answer(&request, 100, 1000, 100);
            let page = pager.on_reply(&mut r);
            assert_eq!(page.sets_end, answers == 0);
            got.extend(page.rows);
            answers += 1;
            match page.next {
                Some(next) => request = next,
                None => break,
            }
        }
        assert_eq!(texts(&got), (750..1000).map(|n| format!("line {n}")).collect::<Vec<_>>());
        assert_eq!(answers, 4, "the probe, then three pages");
        assert!(pager.notes().is_empty(), "{:?}", pager.notes());
    }

    #[test]
    fn asking_for_more_than_is_held_reads_what_is_held_without_a_note() {
        let (mut pager, first) = HistoryPager::new(u32::MAX);
        let page = pager.on_reply(&mut answer(&first, 40, 50, 100));
        let next = page.next.expect("a page");
        let page = pager.on_reply(&mut answer(&next, 40, 50, 100));
        assert_eq!(page.rows.len(), 10);
        assert!(pager.done() && pager.notes().is_empty());
    }

    #[test]
    fn lines_that_left_before_their_page_are_told_and_nothing_past_the_range_is_kept() {
        let (mut pager, first) = HistoryPager::new(300);
        let page = pager.on_reply(&mut answer(&first, 0, 1000, 100));
        // 700..1000 is the range; the first page is answered while new output has already
        // pushed lines up to 750 out (the session keeps 1000: it now holds 750..1750).
        let page = pager.on_reply(&mut answer(&page.next.expect("page"), 750, 1750, 100));
        assert_eq!(page.rows.first().map(|r| r.text.as_str()), Some("line 750"));
        let mut rows = page.rows;
        let mut next = page.next;
        while let Some(request) = next {
            let page = pager.on_reply(&mut answer(&request, 750, 1750, 100));
            rows.extend(page.rows);
            next = page.next;
        }
        assert_eq!(texts(&rows), (750..1000).map(|n| format!("line {n}")).collect::<Vec<_>>());
        assert_eq!(pager.notes().len(), 1);
        assert!(pager.notes()[0].starts_with("50 of the 300 history lines"), "{:?}", pager.notes());

        // Everything left: a resize renumbered the lines past the range's end.
        let (mut pager, first) = HistoryPager::new(300);
        let page = pager.on_reply(&mut answer(&first, 0, 1000, 100));
        let page = pager.on_reply(&mut answer(&page.next.expect("page"), 2000, 2500, 100));
        assert!(page.rows.is_empty() && page.next.is_none());
        assert!(pager.notes()[0].starts_with("300 of the 300"), "{:?}", pager.notes());
    }

    #[test]
    fn an_older_master_is_asked_for_everything_at_once_and_a_full_answer_is_told() {
        let (mut pager, _) = HistoryPager::new(5000);
        let page = pager.on_reply(&mut reply(Some(Vec::new()), None));
        assert!(!page.sets_end, "the answer to the whole request fixes the end");
        let next = page.next.expect("the whole request");
        assert_eq!(next, newest(5000));
        let small: Vec<HistoryRow> = (0..10).map(row).collect();
        let page = pager.on_reply(&mut reply(Some(small), None));
        assert!(page.sets_end && page.rows.len() == 10 && page.next.is_none());
        assert!(pager.notes().is_empty(), "a small answer held all there was");

        let (mut pager, _) = HistoryPager::new(5000);
        pager.on_reply(&mut reply(Some(Vec::new()), None));
        let wide = HistoryRow { text: "x".repeat(1000), wrapped: false, runs: Vec::new() };
        let full = vec![wide; (MAX_PAYLOAD - CUT_MARGIN / 2) / 1010];
        let page = pager.on_reply(&mut reply(Some(full), None));
        assert!(page.next.is_none());
        assert!(pager.notes()[0].contains("older than this desk"), "{:?}", pager.notes());
    }

    #[test]
    fn an_interrupted_read_says_how_much_is_missing() {
        let (mut pager, first) = HistoryPager::new(300);
        let page = pager.on_reply(&mut answer(&first, 0, 1000, 100));
        let page = pager.on_reply(&mut answer(&page.next.expect("page"), 0, 1000, 100));
        assert_eq!(page.rows.len(), 100);
        pager.interrupted("the session exited");
        assert_eq!(pager.notes(), ["the session exited: 200 of the 300 history lines asked for are not shown"]);
        assert!(pager.done());
    }
}
