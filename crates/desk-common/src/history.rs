//! Reading a session's history whole, a page at a time, over a blocking connection to its
//! master: `desk peek` and `desk attach --history`.
//!
//! Owns [`HistoryRead`], which sends the SNAPSHOT_REQUESTs a [`HistoryPager`] (desk-wire's,
//! pure: what to ask and which rows of the answers to keep, docs/protocol.md §5.7) decides on
//! and hands out its pages. Invariant: each request waits at most [`REQUEST_TIMEOUT`] for its
//! answer; a failed request ends the reading with a note, never silently.

use anyhow::{Result, bail};
use desk_term::screen::HistoryRow;
use desk_wire::history::HistoryPager;
use desk_wire::{Frame, SnapshotReply};

use crate::master_client::{Connection, REQUEST_TIMEOUT};

/// A [`HistoryPager`] over a blocking [`Connection`] (a query connection: nothing arrives on it
/// but the answers, EXIT and errors).
pub struct HistoryRead<'c> {
    conn: &'c mut Connection,
    pager: HistoryPager,
    next: Option<Frame>,
}

impl<'c> HistoryRead<'c> {
    /// Asks for the screen and the numbers of the history (an error when that fails: there is
    /// nothing to show). Returns the screen the history ends above (its `history` taken out),
    /// and the reading of the newest `lines` lines, a page at a time with
    /// [`HistoryRead::next_page`].
    pub fn start(conn: &'c mut Connection, lines: u32) -> Result<(SnapshotReply, HistoryRead<'c>)> {
        let (mut pager, first) = HistoryPager::new(lines);
        let mut snapshot = ask(conn, &first)?;
        let page = pager.on_reply(&mut snapshot);
        Ok((snapshot, HistoryRead { conn, pager, next: page.next }))
    }

    /// The next rows of the range, oldest first; `None` once it is read (or reading failed:
    /// the notes say so).
    pub fn next_page(&mut self) -> Option<Vec<HistoryRow>> {
        let request = self.next.take()?;
        match ask(self.conn, &request) {
            Ok(mut reply) => {
                let page = self.pager.on_reply(&mut reply);
                self.next = page.next;
                Some(page.rows)
            }
            Err(e) => {
                self.pager.interrupted(&format!("{e:#}"));
                None
            }
        }
    }

    /// Reads every page left into `each`, row by row.
    pub fn for_each(&mut self, mut each: impl FnMut(HistoryRow) -> Result<()>) -> Result<()> {
        while let Some(rows) = self.next_page() {
            for row in rows {
                each(row)?;
            }
        }
        Ok(())
    }

    /// What the reader should be told (see [`HistoryPager::notes`]).
    pub fn notes(&self) -> &[String] {
        self.pager.notes()
    }
}

/// Sends `request` and waits for its SNAPSHOT, each request with a deadline of its own.
fn ask(conn: &mut Connection, request: &Frame) -> Result<SnapshotReply> {
    conn.set_deadline(Some(REQUEST_TIMEOUT));
    conn.send(request)?;
    loop {
        match conn.recv()? {
            Frame::Snapshot(reply) => return Ok(*reply),
            Frame::Error { message, .. } => bail!("the session refused: {message}"),
            Frame::Exit { .. } => bail!("the session exited"),
            _ => {}
        }
    }
}
