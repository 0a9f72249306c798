//! The master's session events: numbering, journalling and streaming them to observers.
//!
//! Owns turning what the loop sees (the output events of the screen model's parse, clients
//! coming and going, resizes, the exit, the state authority's changes and the output flow that
//! `super::state` announces) into session events
//! ([`Event`](desk_wire::events::Event)s): each is numbered and appended to the session's
//! journal by the [`JournalSink`](super::journal_sink::JournalSink) and sent to every observer
//! ([`Master::emit`], the loop's).
//! Titles, bells, notifications, mode changes and resizes pass the rate limits of
//! `super::noise` first ([`TitleLimiter`](super::noise::TitleLimiter),
//! [`NoiseLimiter`](super::noise::NoiseLimiter)). Invariants: a journal failure (a full disk)
//! never stops the session; observers see events in sequence order.

use std::time::Instant;

use super::event_loop::Master;
use super::noise::{NoiseKey, TitleStep};
use super::timers::Timer;
use desk_common::clock::now_ms;
use desk_term::events::OutputEvent;
use desk_wire::events::EventBody;

impl Master {
    /// What the screen model's parse found in a chunk of output, in stream order.
    pub(super) fn on_output_events(&mut self, events: impl Iterator<Item = OutputEvent>, now: Instant) {
        for event in events {
            match event {
                OutputEvent::Title { title } => {
                    let state = self.observe(|a| a.on_title(&title, now, now_ms()));
                    self.title_changed(title, now);
                    self.emit_all(state);
                }
                OutputEvent::IconName { .. } => {}
                OutputEvent::Bell => self.emit_noise(EventBody::Bell, now),
                OutputEvent::Notification { title, body } => {
                    let text = match &title {
                        Some(t) => format!("{t}: {body}"),
                        None => body.clone(),
                    };
                    self.emit_noise(EventBody::Notification { title, body }, now);
                    let state = self.observe(|a| a.on_notification(&text, now, now_ms()));
                    self.emit_all(state);
                }
                OutputEvent::StateReport { state, kind } => {
                    self.emit(EventBody::Report { state: state.clone(), kind: kind.clone() });
                    let state = self.observe(|a| a.on_report(&state, kind.as_deref(), now, now_ms()));
                    self.emit_all(state);
                }
                OutputEvent::Mode { mode, on } => {
                    self.emit_noise(EventBody::Mode { mode, on }, now);
                    let state = self.observe(|a| a.on_mode(mode, on, now, now_ms()));
                    self.emit_all(state);
                }
            }
        }
    }

    /// Emit a bell, notification, mode change or resize through the [`NoiseLimiter`](super::noise::NoiseLimiter).
    pub(super) fn emit_noise(&mut self, body: EventBody, now: Instant) {
        let Some(key) = NoiseKey::of(&body) else { return self.emit(body) };
        match self.noise_mut().offer(key, body, now) {
            Ok(body) => self.emit(body),
            Err(Some(at)) => self.arm(at, Timer::NoiseFlush),
            Err(None) => {}
        }
    }

    /// Emit the held noise events that are due (the `NoiseFlush` timer).
    pub(super) fn flush_noise(&mut self, now: Instant) {
        let (due, next) = self.noise_mut().due(now);
        for body in due {
            self.emit(body);
        }
        if let Some(at) = next {
            self.arm(at, Timer::NoiseFlush);
        }
    }

    /// Emit every held noise event now (before the exit).
    pub(super) fn flush_all_noise(&mut self) {
        for body in self.noise_mut().flush() {
            self.emit(body);
        }
    }

    fn title_changed(&mut self, title: String, now: Instant) {
        match self.titles_mut().offer(title, now) {
            TitleStep::Emit(title) => self.emit(EventBody::Title { title }),
            TitleStep::Held(Some(at)) => self.arm(at, Timer::TitleFlush),
            TitleStep::Held(None) | TitleStep::Same => {}
        }
    }

    pub(super) fn flush_title(&mut self, now: Instant) {
        if let Some(title) = self.titles_mut().flush(now) {
            self.emit(EventBody::Title { title });
        }
    }
}
