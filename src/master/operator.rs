//! What the master does with an EVENT frame a client sends it: an operator's keys, the
//! daemon's notify record (docs/protocol.md §5.9).
//!
//! Owns turning a `keys` request into bytes for the child — each key parsed by
//! `desk_term::keys`, encoded in the cursor-key mode the program has set at this moment, queued
//! as one INPUT — and journalling it with who sent it; and journalling a `notify` record as the
//! session's `notify` event. Invariants: keys are typed whole or not at all (a bad key or a full
//! input queue types nothing and is answered with an ERROR); a `keys` event is journalled only
//! for keys that were queued. The session policy has already checked the client's role and
//! that the terminal takes input.

use mio::Token;
use std::time::Instant;

use super::event_loop::Master;
use crate::events::EventBody;
use crate::wire::operator::{ClientEvent, MAX_KEYS_BYTES};
use crate::wire::{ErrorCode, Frame};

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
                let bytes = desk_term::keys::encode(&parsed, self.screen.modes().app_cursor_keys);
                if bytes.len() > MAX_KEYS_BYTES {
                    return Err(Frame::error(
                        ErrorCode::Malformed,
                        format!(
                            "{} bytes of keys; at most {MAX_KEYS_BYTES} (send prompts with desk send)",
                            bytes.len()
                        ),
                    ));
                }
                if self.queue_input(token, &bytes, now) {
                    // A person typed: delivery holds for them as for an attached controller.
                    self.last_controller_input_ms = Some(crate::clock::now_ms());
                    self.emit(EventBody::Keys { keys, bytes: bytes.len(), user, tty, via });
                }
                Ok(())
            }
            ClientEvent::Notify { kind, message, item, suppressed } => {
                self.emit(EventBody::Notify { kind, message, item, suppressed });
                Ok(())
            }
        }
    }
}
