//! The master's session events: numbering, journalling and streaming them to observers.
//!
//! Owns turning what the loop sees (the output events of the screen model's parse, output flow,
//! clients coming and going, resizes, the exit) into [`Event`]s: each gets the next sequence
//! number, is appended to the session's journal and is sent to every observer. A title change
//! that only moves the title's animation (a spinner frame, an idle mark: `desk_core::title`) is
//! no event at all, and title changes are rate-limited (the journal keeps at most one title per
//! [`TITLE_INTERVAL`], always ending on the latest words), and so are bells, notifications,
//! mode changes and resizes, through the
//! [`NoiseLimiter`](super::noise::NoiseLimiter). Invariants: a journal failure (a
//! full disk) is logged and never stops the session; observers see events in sequence order.

use std::rc::Rc;
use std::time::{Duration, Instant};
use tracing::warn;

use super::event_loop::Master;
use super::noise::NoiseKey;
use super::timers::Timer;
use desk_common::clock::now_ms;
use desk_term::events::OutputEvent;
use desk_wire::events::{Event, EventBody};
use desk_wire::{Frame, Role};

/// At most one journalled title per 500 ms: a spinner's frames are noise, its text is not.
pub(super) const TITLE_INTERVAL: Duration = Duration::from_millis(500);

/// Output that stops for this long counts as quiet: longer than an agent's redraw bursts,
/// short enough that "quiet" is fresh evidence for readiness.
pub(super) const OUTPUT_QUIET_AFTER: Duration = Duration::from_millis(1000);

impl Master {
    /// Number, journal and broadcast one event.
    pub(super) fn emit(&mut self, body: EventBody) {
        let seq = self.journal.allocate_seq();
        let event = Event { seq, ts_ms: desk_common::clock::now_ms(), generation: self.meta.generation, body };
        let mut gap = None;
        if let Err(e) = self.journal.append(&event, event.body.is_durable()) {
            if !self.journal_failed {
                warn!("events journal failed; events are still streamed: {e:#}");
                self.journal_failed = true;
            }
            let (from, _, _) = self.journal_gap.take().unwrap_or((seq, seq, String::new()));
            self.journal_gap = Some((from, seq, format!("{e:#}")));
        } else {
            self.journal_failed = false;
            gap = self.journal_gap.take();
        }
        let frame: Rc<[u8]> = Rc::from(Frame::Event(event.to_json_map()).to_bytes());
        for client in self.clients.values_mut() {
            if client.role == Some(Role::Observer) && client.alive() {
                client.push_control_bytes(&frame);
            }
        }
        if let Some((from_seq, to_seq, reason)) = gap {
            warn!(from_seq, to_seq, "events journal works again; recording the gap");
            self.emit(EventBody::Gap { from_seq, to_seq, reason });
        }
    }

    /// What the screen model's parse found in a chunk of output, in stream order.
    pub(super) fn on_output_events(&mut self, events: impl Iterator<Item = OutputEvent>, now: Instant) {
        for event in events {
            match event {
                OutputEvent::Title { title } => {
                    let changes = self.authority.on_title(&title, now, now_ms());
                    self.title_changed(title, now);
                    self.announce(changes);
                }
                OutputEvent::IconName { .. } => {}
                OutputEvent::Bell => self.emit_noise(EventBody::Bell, now),
                OutputEvent::Notification { title, body } => {
                    let text = match &title {
                        Some(t) => format!("{t}: {body}"),
                        None => body.clone(),
                    };
                    self.emit_noise(EventBody::Notification { title, body }, now);
                    let changes = self.authority.on_notification(&text, now, now_ms());
                    self.announce(changes);
                }
                OutputEvent::StateReport { state, kind } => {
                    self.emit(EventBody::Report { state: state.clone(), kind: kind.clone() });
                    let changes = self.authority.on_report(&state, kind.as_deref(), now, now_ms());
                    self.announce(changes);
                }
                OutputEvent::Mode { mode, on } => {
                    self.emit_noise(EventBody::Mode { mode, on }, now);
                    let changes = self.authority.on_mode(mode, on, now, now_ms());
                    self.announce(changes);
                }
            }
        }
    }

    /// Emit a bell, notification, mode change or resize through the [`NoiseLimiter`](super::noise::NoiseLimiter).
    pub(super) fn emit_noise(&mut self, body: EventBody, now: Instant) {
        let Some(key) = NoiseKey::of(&body) else { return self.emit(body) };
        match self.noise.offer(key, body, now) {
            Ok(body) => self.emit(body),
            Err(Some(at)) => self.timers.arm(at, Timer::NoiseFlush),
            Err(None) => {}
        }
    }

    /// Emit the held noise events that are due (the `NoiseFlush` timer).
    pub(super) fn flush_noise(&mut self, now: Instant) {
        let (due, next) = self.noise.due(now);
        for body in due {
            self.emit(body);
        }
        if let Some(at) = next {
            self.timers.arm(at, Timer::NoiseFlush);
        }
    }

    /// Emit every held noise event now (before the exit).
    pub(super) fn flush_all_noise(&mut self) {
        for body in self.noise.flush() {
            self.emit(body);
        }
    }

    fn title_changed(&mut self, title: String, now: Instant) {
        // Back to the words last emitted, only the animation moved (a spinner frame, the idle
        // mark): no event, and a title with other words held back meanwhile is stale.
        if let Some((_, last)) = &self.last_title_event
            && (*last == title || desk_core::title::only_animation_changed(last, &title))
        {
            self.pending_title = None;
            return;
        }
        let due = self.last_title_event.as_ref().is_none_or(|(at, _)| now.duration_since(*at) >= TITLE_INTERVAL);
        if due {
            self.pending_title = None;
            self.last_title_event = Some((now, title.clone()));
            self.emit(EventBody::Title { title });
        } else {
            if self.pending_title.is_none() {
                let at = self.last_title_event.as_ref().map_or(now, |(t, _)| *t + TITLE_INTERVAL);
                self.timers.arm(at, Timer::TitleFlush);
            }
            self.pending_title = Some(title);
        }
    }

    pub(super) fn flush_title(&mut self, now: Instant) {
        if let Some(title) = self.pending_title.take() {
            self.last_title_event = Some((now, title.clone()));
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
            self.release_idle_memory();
        } else {
            self.timers.arm(quiet_at, Timer::OutputQuiet);
        }
    }
}
