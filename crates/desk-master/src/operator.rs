//! What the master does with an EVENT frame a client sends it: an operator's keys, an
//! operator's answer to a dialog (`super::answer`), the daemon's notify record
//! (docs/protocol.md §5.9).
//!
//! Owns turning a `keys` request into bytes for the child — each key parsed by
//! `desk_term::keys`, and typed one at a time, [`KEY_GAP`] apart, each encoded in the cursor-key
//! mode the program has set when it is typed — and journalling it with who sent it; and
//! journalling a `notify` record as the session's `notify` event. Invariants: a request is
//! checked whole before any key is typed (a bad key, too many bytes, or a full input queue for
//! its first key types nothing and is answered with an ERROR); a `keys` event is journalled only
//! for keys that were queued; keys of a later request are typed after those of an earlier one.
//! The session policy has already checked the client's role and that the terminal takes input.

use mio::Token;
use std::time::Instant;
use tracing::warn;

use super::event_loop::Master;
use super::timers::Timer;
use super::typing::{KEY_GAP, PendingKey};
use desk_wire::events::EventBody;
use desk_wire::operator::{ClientEvent, MAX_KEYS_BYTES};
use desk_wire::{ErrorCode, Frame};

impl Master {
    /// A `keys` or `notify` EVENT from the client `token`; an `Err` is the ERROR to answer.
    pub(super) fn on_client_event(
        &mut self,
        token: Token,
        body: serde_json::Map<String, serde_json::Value>,
        now: Instant,
    ) -> Result<(), Frame> {
        let event = ClientEvent::from_body(body).map_err(|e| Frame::error(ErrorCode::Malformed, e))?;
        match event {
            ClientEvent::Keys { keys, user, tty, via } => {
                let parsed = desk_term::keys::parse_all(&keys).map_err(|(at, e)| {
                    Frame::error(ErrorCode::Malformed, format!("key {at} ({:?}): {e}", keys[at - 1]))
                })?;
                let app_cursor = self.screen().modes().app_cursor_keys;
                let bytes = desk_term::keys::encode(&parsed, app_cursor);
                if bytes.len() > MAX_KEYS_BYTES {
                    return Err(Frame::error(
                        ErrorCode::Malformed,
                        format!(
                            "{} bytes of keys; at most {MAX_KEYS_BYTES} (send prompts with desk send)",
                            bytes.len()
                        ),
                    ));
                }
                let mut parsed = parsed.into_iter();
                if self.pending_keys().is_empty() {
                    // The first key now; the rest follow from the timer.
                    let Some(first) = parsed.next() else { return Ok(()) };
                    if !self.queue_input(token, &desk_term::keys::encode(&[first], app_cursor), now) {
                        return Ok(());
                    }
                    if !parsed.as_slice().is_empty() {
                        self.arm(now + KEY_GAP, Timer::KeysNext);
                    }
                }
                // Keys of an earlier request are still being typed: these follow them.
                self.pending_keys_mut().queue(parsed.map(|key| PendingKey { key, expect: None, misses: 0 }));
                // A person typed: delivery holds for them as for an attached controller.
                self.person_typed();
                self.emit(EventBody::Keys { keys, bytes: bytes.len(), user, tty, via });
                Ok(())
            }
            ClientEvent::Answer { option, deny: _, seen, user, tty, via } => {
                let choice = option.map_or(desk_core::dialog::Choice::Deny, desk_core::dialog::Choice::Option);
                self.on_answer(token, choice, seen, super::answer::Answerer { user, tty, via }, now)
            }
            ClientEvent::Notify { kind, message, item, suppressed } => {
                self.emit(EventBody::Notify { kind, message, item, suppressed });
                Ok(())
            }
            ClientEvent::Upgrade { binary, args, formats, user, via } => {
                tracing::info!(%binary, %user, %via, "asked to hand over to another desk-master");
                self.request_handover(token, binary.into(), args, &formats, now)
            }
        }
    }

    /// Type the next of an operator's keys (its [`Timer::KeysNext`] is due), in the cursor-key
    /// mode the program has now.
    pub(super) fn type_next_key(&mut self, now: Instant) {
        let Some(mut next) = self.pending_keys_mut().next() else { return };
        match self.answer_still_holds(&mut next) {
            Some(true) => {}
            None => {
                // Look again shortly: the agent may be half-way through redrawing its dialog.
                self.pending_keys_mut().put_back(next);
                self.arm(now + super::answer::RECHECK_GAP, Timer::KeysNext);
                return;
            }
            Some(false) => {
                let seen = next.expect.clone().unwrap_or_default();
                let dropped = 1 + self.pending_keys_mut().drop_answer(&seen);
                self.answer_stopped(&seen, dropped);
                if !self.pending_keys().is_empty() {
                    self.arm(now + KEY_GAP, Timer::KeysNext);
                }
                return;
            }
        }
        let bytes = desk_term::keys::encode(&[next.key], self.screen().modes().app_cursor_keys);
        if let Err(full) = self.type_for_person(&bytes) {
            warn!(
                "an operator's keys stop: {} bytes are already waiting for the child to read (limit {}); {} keys dropped",
                full.queued,
                full.limit,
                self.pending_keys().len() + 1
            );
            self.pending_keys_mut().clear();
            return;
        }
        if !self.pending_keys().is_empty() {
            self.arm(now + KEY_GAP, Timer::KeysNext);
        }
    }
}
