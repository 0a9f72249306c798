//! The history in the master's SNAPSHOT answers (docs/protocol.md §5.7 and §5.8).
//!
//! Owns which history lines an answer carries: for the 4-byte request of clients that do not
//! page, the newest lines asked for that fit in one frame (the oldest left out, as before
//! paging); for the 12-byte request, one page of lines from the number asked. Invariants: an
//! answer never passes `MAX_PAYLOAD`; a page carries at most [`HISTORY_PAGE_BYTES`] of rows,
//! and at least one row when one is asked for and held (a row is far smaller than the budget),
//! so the master builds one bounded page per request whatever the history holds, and a reader
//! always gets on; the numbers written beside the rows (`history_start`, `history_first`,
//! `history_end`) are the screen model's at the same instant.

use desk_term::screen::{HistoryLine, HistoryRow};

use desk_term::screen::Screen;
use desk_wire::{HistoryRequest, MAX_PAYLOAD, SnapshotReply};

/// 256 KiB: one page of history. Wide coloured lines (80-120 columns with a colour change
/// every word or two) take 200-700 bytes of JSON each, so a page carries 400-1,300 of them and
/// the default 10,000 lines are read in 8-25 round trips of about a millisecond each. A
/// quarter of `CONTROL_QUEUE_LIMIT`, so a page always fits in a client's reply queue beside
/// the events an observer is sent, and the master's buffer for one answer stays small next to
/// the history it reads from.
pub(super) const HISTORY_PAGE_BYTES: usize = 256 * 1024;

/// Bytes kept free in an answer beyond what its rows and the rest of it take: the
/// `,"history":[]` around the rows, and room to spare.
const OVERHEAD: usize = 64;

/// Puts the history `ask` asks for into `reply`, which holds everything else already.
pub(super) fn fill(screen: &Screen, ask: HistoryRequest, reply: &mut SnapshotReply) {
    let (first, end) = (screen.history_first(), screen.history_end());
    reply.history_first = Some(first);
    reply.history_end = Some(end);
    // The numbers are written whatever the rows; `history_start` is at most 20 digits.
    reply.history_start = Some(end);
    let base = serde_json::to_vec(&*reply).map_or(MAX_PAYLOAD, |v| v.len()) + OVERHEAD;
    let room = MAX_PAYLOAD.saturating_sub(base);
    let (start, rows) = match ask {
        HistoryRequest::Newest(n) => {
            let tail = screen.history_tail(n as usize).rev();
            let mut rows = rows_within(tail, usize::MAX, room, room);
            rows.reverse();
            (end - rows.len() as u64, rows)
        }
        HistoryRequest::Page { lines, from } => {
            let start = from.clamp(first, end);
            let page = screen.history_from(start);
            (start, rows_within(page, lines as usize, room, HISTORY_PAGE_BYTES))
        }
    };
    reply.history_start = Some(start);
    reply.history = Some(rows);
}

/// The rows of `lines` in the order given, at most `count` of them, while their JSON (with a
/// separating comma each) fits in `room` bytes and, past the first row, in `budget`.
fn rows_within<'a>(
    lines: impl Iterator<Item = &'a HistoryLine>,
    count: usize,
    room: usize,
    budget: usize,
) -> Vec<HistoryRow> {
    let mut rows = Vec::new();
    let mut used = 0usize;
    for line in lines.take(count) {
        let row = line.to_json_row();
        let size = serde_json::to_vec(&row).map_or(usize::MAX, |v| v.len() + 1);
        let total = used.saturating_add(size);
        if total > room || (total > budget && !rows.is_empty()) {
            break;
        }
        used = total;
        rows.push(row);
    }
    rows
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A model holding `lines` lines of wide coloured text scrolled into its history: line `n`
    /// starts with its number, and every word has a colour of its own.
    fn coloured(lines: usize) -> Screen {
        let mut screen = Screen::with_history(120, 10, lines);
        let mut out = String::new();
        for n in 0..lines + 10 {
            out.push_str(&format!("{n:05}"));
            for w in 0..12 {
                out.push_str(&format!(" \x1b[38;5;{}m\x1b[48;2;{};0;0mword{w}\x1b[0m", (n + w) % 256, w * 20));
            }
            out.push_str("\r\n");
        }
        screen.process(out.as_bytes());
        screen
    }

    fn reply(screen: &Screen) -> SnapshotReply {
        SnapshotReply::of_screen(screen.snapshot())
    }

    fn size(reply: &SnapshotReply) -> usize {
        desk_wire::Frame::Snapshot(Box::new(reply.clone())).to_bytes().len() - desk_wire::HEADER_LEN
    }

    #[test]
    fn a_page_is_bounded_and_numbered_and_pages_meet() {
        let screen = coloured(10_000);
        let (first, end) = (screen.history_first(), screen.history_end());
        assert_eq!(end - first, 10_000);
        let mut from = first;
        let mut pages = 0;
        while from < end {
            let mut r = reply(&screen);
            fill(&screen, HistoryRequest::Page { lines: u32::MAX, from }, &mut r);
            let rows = r.history.as_ref().expect("rows");
            assert!(!rows.is_empty());
            assert_eq!(r.history_start, Some(from), "pages meet: each starts where the last ended");
            assert_eq!((r.history_first, r.history_end), (Some(first), Some(end)));
            assert!(size(&r) <= HISTORY_PAGE_BYTES + 64 * 1024, "{} bytes", size(&r));
            // Line n of the output went into the history as number n.
            assert_eq!(rows[0].text.split(' ').next(), Some(format!("{from:05}").as_str()));
            from += rows.len() as u64;
            pages += 1;
        }
        assert!(pages > 4, "10,000 coloured lines take several pages, not one: {pages}");
        // A page asked from a number already dropped starts at the oldest line held.
        let mut r = reply(&screen);
        fill(&screen, HistoryRequest::Page { lines: 3, from: 0 }, &mut r);
        assert_eq!((r.history_start, r.history.map(|h| h.len())), (Some(first), Some(3)));
    }

    #[test]
    fn the_four_byte_request_still_gets_the_newest_lines_that_fit_in_one_frame() {
        let screen = coloured(10_000);
        let mut r = reply(&screen);
        fill(&screen, HistoryRequest::Newest(10_000), &mut r);
        let rows = r.history.as_ref().expect("rows");
        assert!(rows.len() < 10_000, "a frame cannot hold them all: {}", rows.len());
        assert!(size(&r) <= MAX_PAYLOAD);
        assert_eq!(rows.last().and_then(|l| l.text.split(' ').next()), Some("10000"));
        assert_eq!(r.history_start, Some(screen.history_end() - rows.len() as u64));
    }
}
