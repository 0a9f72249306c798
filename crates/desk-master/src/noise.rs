//! The rate limit of the master's noisy events: titles, bells, notifications, mode changes,
//! resizes.
//!
//! Owns [`TitleLimiter`]: a title change that only moves the title's animation (a spinner
//! frame, an idle mark: `desk_core::title`) is no event at all, and at most one title per
//! [`TITLE_INTERVAL`] is, always ending on the latest words. Owns [`NoiseLimiter`]: at most one
//! event of each other kind per [`NOISE_INTERVAL`], the latest
//! held back replacing the earlier and released once the interval has passed, so a child that
//! rings or flips modes in a loop costs neither the daemon's CPU nor the journal's room for
//! durable evidence. Invariants: the first event of a stream passes at once; a stream always
//! ends on its latest event; a held event equal to the last one emitted is dropped when it says
//! nothing new (a mode flipped and flipped back). Pure: the clock is an argument.

use desk_term::events::Mode;
use desk_wire::events::EventBody;
use std::time::{Duration, Instant};

/// At most one bell, one notification, one change of each mode and one resize per 500 ms, like
/// titles: a person notices nothing faster, and a child ringing in a loop made thousands of
/// events a second (65 % of a daemon core, a journal rotated every 5 s).
pub(super) const NOISE_INTERVAL: Duration = Duration::from_millis(500);

/// At most one journalled title per 500 ms: a spinner's frames are noise, its text is not.
pub(super) const TITLE_INTERVAL: Duration = Duration::from_millis(500);

/// What becomes of a title the screen model saw ([`TitleLimiter::offer`]).
#[derive(Debug, PartialEq, Eq)]
pub(super) enum TitleStep {
    /// Emit it as a `title` event now.
    Emit(String),
    /// Held back by the rate limit; when a flush was not armed yet, arm
    /// [`TitleLimiter::flush`] for this time.
    Held(Option<Instant>),
    /// Nothing new: the words last emitted, or only their animation moved.
    Same,
}

/// The rate limit of title events: pure, the clock is an argument.
#[derive(Debug, Default)]
pub(super) struct TitleLimiter {
    /// When the last title event was emitted, and its title.
    last: Option<(Instant, String)>,
    /// The latest title held back by the rate limit.
    pending: Option<String>,
}

impl TitleLimiter {
    pub(super) fn offer(&mut self, title: String, now: Instant) -> TitleStep {
        // Back to the words last emitted, only the animation moved (a spinner frame, the idle
        // mark): no event, and a title with other words held back meanwhile is stale.
        if let Some((_, last)) = &self.last
            && (*last == title || desk_core::title::only_animation_changed(last, &title))
        {
            self.pending = None;
            return TitleStep::Same;
        }
        let due = self.last.as_ref().is_none_or(|(at, _)| now.duration_since(*at) >= TITLE_INTERVAL);
        if due {
            self.pending = None;
            self.last = Some((now, title.clone()));
            return TitleStep::Emit(title);
        }
        let arm = self.pending.is_none().then(|| self.last.as_ref().map_or(now, |(t, _)| *t + TITLE_INTERVAL));
        self.pending = Some(title);
        TitleStep::Held(arm)
    }

    /// The held title, to emit now (its flush is due, or the session is ending).
    pub(super) fn flush(&mut self, now: Instant) -> Option<String> {
        let title = self.pending.take()?;
        self.last = Some((now, title.clone()));
        Some(title)
    }
}

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
    fn titles_are_limited_to_one_per_interval_and_end_on_the_latest_words() {
        let start = Instant::now();
        let at = |ms| start + Duration::from_millis(ms);
        let mut titles = TitleLimiter::default();
        assert_eq!(titles.offer("a".into(), at(0)), TitleStep::Emit("a".into()));
        assert_eq!(titles.offer("a".into(), at(10)), TitleStep::Same);
        assert_eq!(titles.offer("b".into(), at(20)), TitleStep::Held(Some(at(500))));
        assert_eq!(titles.offer("c".into(), at(30)), TitleStep::Held(None), "the flush is armed already");
        assert_eq!(titles.flush(at(500)), Some("c".into()));
        assert_eq!(titles.flush(at(501)), None);
        // Back to the emitted words while another is held: the held one is stale.
        assert_eq!(titles.offer("d".into(), at(600)), TitleStep::Held(Some(at(1000))));
        assert_eq!(titles.offer("c".into(), at(610)), TitleStep::Same);
        assert_eq!(titles.flush(at(1000)), None);
        assert_eq!(titles.offer("e".into(), at(1000)), TitleStep::Emit("e".into()));
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
