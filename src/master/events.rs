//! The master's session events: numbering, journalling and streaming them to observers.
//!
//! Owns turning what the loop sees (the output events of the screen model's parse, output flow, clients coming and going,
//! resizes, the exit) into [`Event`]s: each gets the next sequence number, is appended to the
//! session's journal and is sent to every observer. A title change that only moves the
//! title's animation (a spinner frame, an idle mark: `desk_core::title`) is no event at all, and
//! title changes are rate-limited (the journal keeps at most one title per [`TITLE_INTERVAL`],
//! always ending on the latest words), and so are bells, notifications, mode
//! changes and resizes ([`NoiseLimiter`]: at most one of each kind per [`NOISE_INTERVAL`],
//! ending on the latest), so a child that rings or flips modes in a loop costs neither the
//! daemon's CPU nor the journal's room for durable evidence. Invariants: a journal failure (a
//! full disk) is logged and never stops the session; observers see events in sequence order.

use std::rc::Rc;
use std::time::{Duration, Instant};
use tracing::warn;

use super::event_loop::Master;
use super::timers::Timer;
use crate::clock::now_ms;
use crate::events::{Event, EventBody};
use crate::term_events::{Mode, OutputEvent};
use crate::wire::{Frame, Role};

/// At most one journalled title per 500 ms: a spinner's frames are noise, its text is not.
pub(super) const TITLE_INTERVAL: Duration = Duration::from_millis(500);

/// At most one bell, one notification, one change of each mode and one resize per 500 ms, like
/// titles: a person notices nothing faster, and a child ringing in a loop made thousands of
/// events a second (65 % of a daemon core, a journal rotated every 5 s).
pub(super) const NOISE_INTERVAL: Duration = Duration::from_millis(500);

/// Which rate-limited stream an event belongs to; each is limited on its own.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum NoiseKey {
    Bell,
    Notification,
    Mode(Mode),
    Resize,
}

impl NoiseKey {
    pub(super) fn of(body: &EventBody) -> Option<NoiseKey> {
        match body {
            EventBody::Bell => Some(NoiseKey::Bell),
            EventBody::Notification { .. } => Some(NoiseKey::Notification),
            EventBody::Mode { mode, .. } => Some(NoiseKey::Mode(*mode)),
            EventBody::Resize { .. } => Some(NoiseKey::Resize),
            _ => None,
        }
    }

    /// Whether a held-back event equal to the last one emitted says nothing new (a mode that
    /// flipped and flipped back, a resize undone); a second bell does say something.
    fn repeats_are_news(self) -> bool {
        matches!(self, NoiseKey::Bell | NoiseKey::Notification)
    }
}

#[derive(Debug)]
struct NoiseSlot {
    key: NoiseKey,
    last_at: Instant,
    last: EventBody,
    pending: Option<EventBody>,
}

/// The rate limit of [`NoiseKey`] events: pure, the clock is an argument. The first event of
/// a stream passes; later ones within [`NOISE_INTERVAL`] are held, the latest replacing the
/// earlier, and released by [`NoiseLimiter::due`] once the interval has passed.
#[derive(Debug, Default)]
pub(super) struct NoiseLimiter {
    slots: Vec<NoiseSlot>,
}

impl NoiseLimiter {
    /// Offer an event: returns it if it may be emitted now; otherwise it is held, and the
    /// time to call [`NoiseLimiter::due`] is returned when no release was pending yet.
    pub(super) fn offer(&mut self, key: NoiseKey, body: EventBody, now: Instant) -> Result<EventBody, Option<Instant>> {
        match self.slots.iter_mut().find(|s| s.key == key) {
            None => {
                self.slots.push(NoiseSlot { key, last_at: now, last: body.clone(), pending: None });
                Ok(body)
            }
            Some(slot) if now.duration_since(slot.last_at) >= NOISE_INTERVAL && slot.pending.is_none() => {
                slot.last_at = now;
                slot.last = body.clone();
                Ok(body)
            }
            Some(slot) => {
                let first = slot.pending.is_none();
                slot.pending = Some(body);
                Err(first.then_some(slot.last_at + NOISE_INTERVAL))
            }
        }
    }

    /// The held events whose interval has passed (each stream's latest), and when to call
    /// again for those still held.
    pub(super) fn due(&mut self, now: Instant) -> (Vec<EventBody>, Option<Instant>) {
        let mut out = Vec::new();
        let mut next: Option<Instant> = None;
        for slot in &mut self.slots {
            let Some(body) = slot.pending.take() else { continue };
            let at = slot.last_at + NOISE_INTERVAL;
            if now < at {
                slot.pending = Some(body);
                next = Some(next.map_or(at, |n| n.min(at)));
                continue;
            }
            if body != slot.last || slot.key.repeats_are_news() {
                slot.last_at = now;
                slot.last = body.clone();
                out.push(body);
            }
        }
        (out, next)
    }

    /// Every held event, now (the session is ending: its last word is kept, not dropped).
    pub(super) fn flush(&mut self) -> Vec<EventBody> {
        let far = self.slots.iter().map(|s| s.last_at + NOISE_INTERVAL).max();
        far.map_or_else(Vec::new, |at| self.due(at).0)
    }
}

/// Output that stops for this long counts as quiet: longer than an agent's redraw bursts,
/// short enough that "quiet" is fresh evidence for readiness.
pub(super) const OUTPUT_QUIET_AFTER: Duration = Duration::from_millis(1000);

impl Master {
    /// Number, journal and broadcast one event.
    pub(super) fn emit(&mut self, body: EventBody) {
        let seq = self.journal.allocate_seq();
        let event = Event { seq, ts_ms: crate::clock::now_ms(), generation: self.meta.generation, body };
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

    /// Emit a bell, notification, mode change or resize through the [`NoiseLimiter`].
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

#[cfg(test)]
mod tests {
    use super::*;

    fn bodies(limiter: &mut NoiseLimiter, offers: &[(EventBody, u64)], start: Instant) -> Vec<EventBody> {
        let mut out = Vec::new();
        for (body, ms) in offers {
            let now = start + Duration::from_millis(*ms);
            out.extend(limiter.due(now).0);
            if let Ok(b) = limiter.offer(NoiseKey::of(body).unwrap(), body.clone(), now) {
                out.push(b);
            }
        }
        out
    }

    #[test]
    fn a_ringing_loop_becomes_one_bell_per_interval() {
        let start = Instant::now();
        let mut limiter = NoiseLimiter::default();
        // 1000 bells in one second.
        let offers: Vec<(EventBody, u64)> = (0..1000).map(|i| (EventBody::Bell, i)).collect();
        let mut out = bodies(&mut limiter, &offers, start);
        out.extend(limiter.flush());
        assert_eq!(out, vec![EventBody::Bell; 3], "at 0, 500 and the held one at the end");
    }

    #[test]
    fn mode_flips_end_on_the_latest_state_and_an_undone_flip_is_not_news() {
        let start = Instant::now();
        let on = |on| EventBody::Mode { mode: Mode::BracketedPaste, on };
        let mut limiter = NoiseLimiter::default();
        let out = bodies(&mut limiter, &[(on(true), 0), (on(false), 1), (on(true), 2)], start);
        assert_eq!(out, vec![on(true)]);
        // The held latest equals the emitted state: nothing new to say.
        assert_eq!(limiter.due(start + NOISE_INTERVAL).0, vec![]);
        let out = bodies(&mut limiter, &[(on(false), 600), (on(true), 601), (on(false), 602)], start);
        assert_eq!(out, vec![on(false)]);
        let (due, next) = limiter.due(start + Duration::from_millis(700));
        assert_eq!((due, next), (vec![], Some(start + Duration::from_millis(1100))), "held until its interval");
        let (due, next) = limiter.due(start + Duration::from_millis(1100));
        assert!(due.is_empty() && next.is_none(), "the held 'off' equals the emitted one");
        // Streams are limited independently: a resize passes while bracketed paste is held.
        let mut limiter = NoiseLimiter::default();
        let resize = EventBody::Resize { cols: 100, rows: 30 };
        let out = bodies(&mut limiter, &[(on(true), 0), (on(false), 1), (resize.clone(), 2)], start);
        assert_eq!(out, vec![on(true), resize]);
        assert_eq!(limiter.flush(), vec![on(false)]);
    }
}
