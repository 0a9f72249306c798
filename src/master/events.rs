//! The master's session events: numbering, journalling and streaming them to observers.
//!
//! Owns turning what the loop sees (scanner findings, output flow, clients coming and going,
//! resizes, the exit) into [`Event`]s: each gets the next sequence number, is appended to the
//! session's journal and is sent to every observer. Title changes are rate-limited (an
//! animated spinner title changes ten times a second; the journal keeps at most one title per
//! [`TITLE_INTERVAL`], always ending on the latest one). Invariants: a journal failure (a full
//! disk) is logged and never stops the session; observers see events in sequence order.

use std::rc::Rc;
use std::time::{Duration, Instant};
use tracing::warn;

use super::event_loop::Master;
use super::timers::Timer;
use crate::events::{Event, EventBody};
use crate::scanner::ScanEvent;
use crate::session::now_ms;
use crate::wire::{Frame, Role};

/// At most one journalled title per 500 ms: a spinner's frames are noise, its text is not.
pub const TITLE_INTERVAL: Duration = Duration::from_millis(500);

/// Output that stops for this long counts as quiet: longer than an agent's redraw bursts,
/// short enough that "quiet" is fresh evidence for readiness.
pub const OUTPUT_QUIET_AFTER: Duration = Duration::from_millis(1000);

impl Master {
    /// Number, journal and broadcast one event.
    pub(super) fn emit(&mut self, body: EventBody) {
        let seq = self.journal.allocate_seq();
        let event = Event { seq, ts_ms: crate::session::now_ms(), generation: self.meta.generation, body };
        if let Err(e) = self.journal.append(&event, event.body.is_durable()) {
            if !self.journal_failed {
                warn!("events journal failed; events are still streamed: {e:#}");
                self.journal_failed = true;
            }
        } else {
            self.journal_failed = false;
        }
        let frame: Rc<[u8]> = Rc::from(Frame::Event(event.to_json_map()).to_bytes());
        for client in self.clients.values_mut() {
            if client.role == Some(Role::Observer) && client.alive() {
                client.push_control_bytes(&frame);
            }
        }
    }

    pub(super) fn on_scan(&mut self, events: Vec<ScanEvent>, now: Instant) {
        for event in events {
            match event {
                ScanEvent::Title { title } => {
                    let changes = self.authority.on_title(&title, now, now_ms());
                    self.title_changed(title, now);
                    self.announce(changes);
                }
                ScanEvent::IconName { .. } => {}
                ScanEvent::Bell => self.emit(EventBody::Bell),
                ScanEvent::Notification { title, body } => {
                    let text = match &title {
                        Some(t) => format!("{t}: {body}"),
                        None => body.clone(),
                    };
                    self.emit(EventBody::Notification { title, body });
                    let changes = self.authority.on_notification(&text, now, now_ms());
                    self.announce(changes);
                }
                ScanEvent::StateReport { state, kind } => {
                    self.emit(EventBody::Report { state: state.clone(), kind: kind.clone() });
                    let changes = self.authority.on_report(&state, kind.as_deref(), now, now_ms());
                    self.announce(changes);
                }
                ScanEvent::Mode { mode, on } => {
                    self.emit(EventBody::Mode { mode, on });
                    let changes = self.authority.on_mode(mode, on, now, now_ms());
                    self.announce(changes);
                }
            }
        }
    }

    fn title_changed(&mut self, title: String, now: Instant) {
        let due = self.last_title_event.is_none_or(|at| now.duration_since(at) >= TITLE_INTERVAL);
        if due {
            self.pending_title = None;
            self.last_title_event = Some(now);
            self.emit(EventBody::Title { title });
        } else {
            if self.pending_title.is_none() {
                let at = self.last_title_event.map_or(now, |t| t + TITLE_INTERVAL);
                self.timers.arm(at, Timer::TitleFlush);
            }
            self.pending_title = Some(title);
        }
    }

    pub(super) fn flush_title(&mut self, now: Instant) {
        if let Some(title) = self.pending_title.take() {
            self.last_title_event = Some(now);
            self.emit(EventBody::Title { title });
        }
    }

    /// Called for every chunk of output.
    pub(super) fn note_output(&mut self, now: Instant) {
        self.last_output = now;
        self.state_output(now);
        if !self.output_active {
            self.output_active = true;
            self.emit(EventBody::Output { active: true });
            self.timers.arm(now + OUTPUT_QUIET_AFTER, Timer::OutputQuiet);
        }
    }

    pub(super) fn check_output_quiet(&mut self, now: Instant) {
        if !self.output_active {
            return;
        }
        let quiet_at = self.last_output + OUTPUT_QUIET_AFTER;
        if now >= quiet_at {
            self.output_active = false;
            self.emit(EventBody::Output { active: false });
            self.state_quiet(now);
        } else {
            self.timers.arm(quiet_at, Timer::OutputQuiet);
        }
    }
}
