//! The session's screen as the master keeps it: the screen model and the log of what scrolls
//! off it.
//!
//! Owns [`SessionScreen`]: the one screen model (`desk_term::screen::Screen`) every byte of
//! output is parsed by, the session log (`desk log`) when the session keeps one, and the buffer
//! the parse's output events are found into (kept between chunks for its capacity). Invariants:
//! each byte of output is parsed once, here, and what the parse found is handed back in stream
//! order; the lines that scroll off reach the log in order (the caller arms the flush the log
//! asks for); a log that cannot be written is given up, with a warning, and the session goes on
//! without it. What the screen is shown to (clients, views, snapshots) is the loop's.

use desk_common::screen_log::LogWriter;
use desk_term::events::OutputEvent;
use desk_term::screen::Screen;
use tracing::warn;

pub(super) struct SessionScreen {
    model: Screen,
    /// The session log (which keeps the lines waiting to be written).
    log: Option<LogWriter>,
    /// The output events of the chunk being handled; kept between chunks for its capacity.
    found: Vec<OutputEvent>,
}

impl SessionScreen {
    /// `model`, whose log text is on when there is a `log` to take it.
    pub(super) fn new(model: Screen, log: Option<LogWriter>) -> SessionScreen {
        SessionScreen { model, log, found: Vec::new() }
    }

    /// The screen model, to read or render.
    pub(super) fn model(&self) -> &Screen {
        &self.model
    }

    /// Parse a chunk of output; the output events it found, in stream order. Give the vector
    /// back with [`SessionScreen::recycle`] when done with them.
    pub(super) fn feed(&mut self, data: &[u8]) -> Vec<OutputEvent> {
        let mut found = std::mem::take(&mut self.found);
        self.model.feed(data, &mut found);
        found
    }

    /// The vector [`SessionScreen::feed`] handed out, emptied, for the next chunk.
    pub(super) fn recycle(&mut self, mut found: Vec<OutputEvent>) {
        found.clear();
        self.found = found;
    }

    /// The replies the terminal owes the program (to queries it wrote), taken.
    pub(super) fn take_replies(&mut self) -> Vec<u8> {
        self.model.take_replies()
    }

    pub(super) fn resize(&mut self, cols: u16, rows: u16) {
        self.model.resize(cols, rows);
    }

    /// Hands the lines the screen scrolled off since the last call to the log; whether they
    /// are the first waiting there (then the caller arms the log's flush, due within
    /// [`desk_common::screen_log::FLUSH_AFTER`]).
    pub(super) fn drain_log(&mut self) -> bool {
        let Some(log) = &mut self.log else {
            return false;
        };
        let mut first = false;
        self.model.take_log_text(|text| first = log.push(text));
        first
    }

    /// Writes the log's waiting lines; a log that cannot be written is given up.
    pub(super) fn flush_log(&mut self) {
        if let Some(log) = &mut self.log
            && let Err(e) = log.flush()
        {
            warn!("{e:#}; the session log stops here");
            self.log = None;
        }
    }

    /// Lines wait in the log to be written.
    pub(super) fn log_has_pending(&self) -> bool {
        self.log.as_ref().is_some_and(LogWriter::has_pending)
    }

    /// Writes the log's waiting lines and makes them durable (the child exited).
    pub(super) fn sync_log(&mut self) {
        if let Some(log) = &mut self.log
            && let Err(e) = log.sync()
        {
            warn!("{e:#}");
        }
    }

    /// Give back what only a busy session needs (`super::memory`): the log's buffer, once
    /// written, and the cells of rows that show nothing.
    pub(super) fn release_idle_memory(&mut self) {
        self.flush_log();
        if let Some(log) = &mut self.log {
            log.release_memory();
        }
        self.model.release_idle_memory();
    }

    /// The log's cap, when the session keeps one.
    pub(super) fn log_cap(&self) -> Option<u64> {
        self.log.as_ref().map(LogWriter::cap)
    }
}
