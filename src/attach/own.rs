//! Attach's own part of the terminal, as the client's loop drives it: whether the status line
//! is on, the fleet it describes and when to read it again, and the bytes that draw it.
//!
//! Owns the status row's life — on while it is wanted (`--no-status` and `[attach]
//! status_line = false` turn it off) and the terminal has room ([`ui::STATUS_MIN_ROWS`]) —
//! the inotify watch on the runtime directory that says which sessions' files changed, the
//! timers that read the fleet (at most every [`super::FLEET_READ_INTERVAL`] while it changes,
//! the slow parts every [`super::SLOW_READ_INTERVAL`]) and tick its ages, and the text last
//! drawn (drawn again only when it changes, or when the terminal may have lost it).
//! Invariants: the watch is taken off the poll from its first event until the fleet is read
//! again, so a fleet that changes all the time wakes this process at most once per read
//! interval; nothing here writes to the terminal itself (it returns bytes for the client's
//! queue, which writes them between frames).

use mio::unix::SourceFd;
use mio::{Interest, Poll};
use nix::sys::inotify::{AddWatchFlags, InitFlags, Inotify};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

use super::ui::{self, Ui};
use super::{AttachOptions, FLEET, FLEET_READ_INTERVAL, SLOW_READ_INTERVAL, TICK};
use crate::attention::FleetReader;
use desk_common::paths::Paths;
use desk_core::attention::Here;

pub(super) struct Own {
    pub(super) paths: Paths,
    pub(super) ui: Ui,
    pub(super) fleet: FleetReader,
    /// The status line is wanted (not turned off by flag or configuration).
    pub(super) status_wanted: bool,
    /// It is on now (wanted, and the terminal has room).
    pub(super) status_on: bool,
    /// The terminal's size.
    pub(super) term: (u16, u16),
    inotify: Option<Inotify>,
    watching: bool,
    fleet_due: Option<Instant>,
    slow_due: Option<Instant>,
    tick_due: Option<Instant>,
    /// The status text last drawn.
    drawn: Option<String>,
    /// An answer waits for its PONG: the PING's nonce and what was chosen.
    pub(super) answer_pending: Option<(u64, String)>,
    /// A SNAPSHOT was asked for, to read the session's dialog.
    pub(super) asked_dialog: bool,
    /// A prompt was drawn over the session's screen (no status line to draw it on).
    pub(super) drew_over: bool,
    nonce: u64,
}

impl Own {
    pub(super) fn new(paths: Paths, opts: &AttachOptions, cols: u16, rows: u16) -> Own {
        let status_wanted = opts.status;
        let ui = Ui::new(opts.prefix_key, opts.detach_key, opts.read_only);
        Own {
            fleet: FleetReader::new(paths.clone()).with_stuck_source(opts.stuck),
            paths,
            ui,
            status_wanted,
            status_on: status_wanted && room(cols, rows),
            term: (cols, rows),
            inotify: None,
            watching: false,
            fleet_due: None,
            slow_due: None,
            tick_due: None,
            drawn: None,
            answer_pending: None,
            asked_dialog: false,
            drew_over: false,
            nonce: 0,
        }
    }

    /// The size the client reports to the session: its terminal's, less the status row.
    pub(super) fn session_size(&self) -> (u16, u16) {
        (self.term.0, self.term.1 - u16::from(self.status_on))
    }

    /// The terminal was resized; whether the status line came on or went off.
    pub(super) fn resized(&mut self, cols: u16, rows: u16) -> bool {
        self.term = (cols, rows);
        let was = self.status_on;
        self.status_on = self.status_wanted && room(cols, rows);
        self.drawn = None;
        was != self.status_on
    }

    /// Start watching the fleet: the runtime directory's changes, and a first full read soon.
    pub(super) fn watch_fleet(&mut self, poll: &Poll) {
        let flags = AddWatchFlags::IN_MOVED_TO | AddWatchFlags::IN_DELETE | AddWatchFlags::IN_CLOSE_WRITE;
        // Without a watch (the user's inotify watches spent) the fleet is read once, at the start,
        // and the status line keeps that reading; attach itself goes on.
        if let Ok(inotify) = Inotify::init(InitFlags::IN_NONBLOCK | InitFlags::IN_CLOEXEC)
            && inotify.add_watch(&self.paths.runtime, flags).is_ok()
        {
            self.inotify = Some(inotify);
        }
        self.rewatch(poll);
        let now = Instant::now();
        self.fleet_due = Some(now);
        self.slow_due = Some(now);
        self.tick_due = Some(now + TICK);
    }

    fn rewatch(&mut self, poll: &Poll) {
        if let Some(inotify) = &self.inotify
            && !self.watching
        {
            let fd = inotify.as_fd().as_raw_fd();
            self.watching = poll.registry().register(&mut SourceFd(&fd), FLEET, Interest::READABLE).is_ok();
        }
    }

    /// Note what changed in the runtime directory; stop listening until the fleet is read.
    pub(super) fn on_inotify(&mut self, poll: &Poll) {
        self.drain();
        if let Some(inotify) = &self.inotify
            && self.watching
        {
            let fd = inotify.as_fd().as_raw_fd();
            let _ = poll.registry().deregister(&mut SourceFd(&fd));
            self.watching = false;
        }
        if self.fleet.has_changes() && self.fleet_due.is_none() {
            self.fleet_due = Some(Instant::now() + FLEET_READ_INTERVAL);
        }
    }

    fn drain(&mut self) {
        let Some(inotify) = &self.inotify else { return };
        while let Ok(events) = inotify.read_events() {
            if events.is_empty() {
                break;
            }
            for event in events {
                if event.mask.contains(AddWatchFlags::IN_Q_OVERFLOW) {
                    self.fleet.all_changed();
                } else if let Some(file) = event.name.as_ref().and_then(|n| n.to_str()) {
                    self.fleet.file_changed(file);
                }
            }
        }
    }

    /// The earliest timer.
    pub(super) fn due(&self) -> Option<Instant> {
        [self.fleet_due, self.slow_due, self.tick_due].into_iter().flatten().min()
    }

    /// Run the timers that are due; whether the status line may have changed.
    pub(super) fn on_timers(&mut self, poll: &Poll, now: Instant, now_ms: u64) -> bool {
        let mut changed = false;
        if self.fleet_due.is_some_and(|at| at <= now) {
            self.fleet_due = None;
            self.drain();
            self.fleet.read_sessions();
            self.rewatch(poll);
            changed = true;
        }
        if self.slow_due.is_some_and(|at| at <= now) {
            self.fleet.read_slow();
            self.slow_due = Some(now + SLOW_READ_INTERVAL);
            changed = true;
        }
        if self.tick_due.is_some_and(|at| at <= now) {
            self.tick_due = Some(now + TICK);
            changed = true;
        }
        changed | self.ui.expire(now_ms)
    }

    /// Read the whole fleet now (a prompt needs it and the status line, which keeps it
    /// current, is off).
    pub(super) fn read_fleet_now(&mut self) {
        if !self.status_on {
            self.fleet.all_changed();
            self.fleet.read_sessions();
            self.fleet.read_slow();
        }
    }

    /// The status line's text for session `here` now, `width` cells.
    pub(super) fn status_text(&self, here: &str, now_ms: u64) -> String {
        let (state, since_ms) = match self.fleet.session(here) {
            Some(seen) => (seen.look.state_words(), seen.look.since_ms),
            None => ("…".to_string(), 0),
        };
        let here = Here { name: here.to_string(), state, since_ms };
        self.ui.status_text(&here, &self.fleet.needs(), now_ms, usize::from(self.term.0))
    }

    /// The bytes that draw the status line for `here`, if it is on and (unless `force`) its
    /// text changed; with `force`, the text is drawn again even if unchanged (the terminal
    /// lost it: a keyframe's reset, a switch of screen).
    pub(super) fn status_bytes(&mut self, here: &str, force: bool, now_ms: u64) -> Option<Vec<u8>> {
        if !self.status_on && !self.ui.reading() {
            return None;
        }
        let text = self.status_text(here, now_ms);
        if !force && self.drawn.as_deref() == Some(text.as_str()) {
            return None;
        }
        self.drawn = Some(text.clone());
        self.drew_over |= !self.status_on;
        let mut bytes = ui::draw_status(self.term.1, &text);
        let overlay = self.ui.overlay(usize::from(self.term.0), usize::from(self.term.1.saturating_sub(1)));
        if !overlay.is_empty() {
            bytes.extend(ui::draw_overlay(self.term.1, &overlay));
        }
        Some(bytes)
    }

    /// Forget what was drawn: the next [`Own::status_bytes`] draws.
    pub(super) fn lost_status(&mut self) {
        self.drawn = None;
    }

    /// The bytes that clear the status row on the way out, so the shell's prompt does not
    /// come up under a stale status line.
    pub(super) fn leave_status_row(&self) -> Vec<u8> {
        if self.drawn.is_some() { format!("\x1b[{};1H\x1b[0m\x1b[2K", self.term.1).into_bytes() } else { Vec::new() }
    }

    /// The prefix key, if there is one.
    pub(super) fn ui_prefix(&self) -> Option<u8> {
        self.ui.prefix()
    }

    /// A fresh PING nonce for an answer.
    pub(super) fn next_nonce(&mut self) -> u64 {
        self.nonce += 1;
        // Out of the range a master would ever echo by accident.
        0xde5c_0000_0000_0000 | self.nonce
    }
}

/// Whether a terminal of `cols x rows` has room for the status line.
fn room(cols: u16, rows: u16) -> bool {
    rows >= ui::STATUS_MIN_ROWS && cols >= ui::STATUS_MIN_COLS
}
