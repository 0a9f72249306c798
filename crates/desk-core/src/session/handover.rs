//! The session policy saved for a handover and restored in the binary the master re-executes
//! (`desk upgrade`, docs/upgrading.md).
//!
//! Owns the saved form of what the policy knows about the session and its connections
//! ([`SavedPolicy`]), with every instant turned into a duration before "now" (an `Instant` means
//! nothing in another process image), and the rule of when a session may hand over at all
//! ([`SessionPolicy::handover_refusal`]). Invariants: only connections the policy has not
//! closed are saved (the loop hands over exactly those); a restored policy arms again the
//! timers its connections need (the handshake deadline of one that has not said HELLO, the
//! slow-client deadline of one that is behind), so no deadline is lost by a handover.

use std::collections::{BTreeMap, VecDeque};
use std::time::Instant;

use desk_wire::Role;
use serde::{Deserialize, Serialize};

use crate::time::{instant_before as back, ms_before as ago};

use super::{Conn, Effect, HANDSHAKE_DEADLINE, SLOW_CLIENT_DEADLINE, SessionPolicy, SizePolicy, Timer};
use crate::session::ClientId;

/// What a restored policy needs; see the module documentation.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedPolicy {
    /// `SizePolicy`'s name.
    pub size_policy: String,
    pub size: (u16, u16),
    pub clients: Vec<SavedConn>,
    /// The most recently active controller.
    pub latest: Option<u64>,
    pub terminal_open: bool,
}

/// One connection the policy has not closed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedConn {
    pub id: u64,
    /// `None`: it has not said HELLO yet.
    pub role: Option<Role>,
    pub size: Option<(u16, u16)>,
    /// Milliseconds since it last said HELLO or typed.
    pub idle_ms: u64,
    /// Milliseconds it has been behind the output stream, if it is.
    pub behind_ms: Option<u64>,
}

impl SessionPolicy {
    /// Why the session cannot hand over now, if it cannot: its child exited (there is nothing
    /// to keep), or a stop is under way (its escalation must not be lost in the exec).
    pub fn handover_refusal(&self) -> Option<&'static str> {
        if self.child_exited || !self.terminal_open {
            return Some("the session is exiting");
        }
        if self.kill_requested {
            return Some("the session is being stopped");
        }
        None
    }

    /// A handed-over client's size as the loop of the binary before kept it: a master from
    /// before the policy kept viewers' sizes saved only controllers' in its policy record. Taken
    /// only where the policy knows none.
    pub fn adopt_client_size(&mut self, client: ClientId, size: Option<(u16, u16)>) {
        if let Some(conn) = self.clients.get_mut(&client)
            && conn.size.is_none()
        {
            conn.size = size.filter(|(c, r)| desk_term::screen::valid_size(*c, *r));
        }
    }

    /// The policy's state at `now`, for [`SessionPolicy::restore`] in another process image.
    pub fn save(&self, now: Instant) -> SavedPolicy {
        let clients = self
            .clients
            .iter()
            .filter(|(_, c)| !c.closed)
            .map(|(id, c)| SavedConn {
                id: id.0,
                role: c.role,
                size: c.size,
                idle_ms: ago(now, c.last_active),
                behind_ms: c.behind_since.map(|at| ago(now, at)),
            })
            .collect();
        SavedPolicy {
            size_policy: self.size_policy.to_string(),
            size: self.size,
            clients,
            latest: self.latest.map(|id| id.0),
            terminal_open: self.terminal_open,
        }
    }

    /// The policy `saved` describes, speaking protocol versions up to `speaks`, with the timers
    /// its connections need queued as effects. `Err` names what is wrong with the record.
    pub fn restore(saved: SavedPolicy, speaks: u16, now: Instant) -> Result<SessionPolicy, String> {
        let size_policy: SizePolicy = saved.size_policy.parse().map_err(|e: super::UnknownSizePolicy| e.to_string())?;
        if !desk_term::screen::valid_size(saved.size.0, saved.size.1) {
            return Err(format!("a saved session size of {}x{}", saved.size.0, saved.size.1));
        }
        if saved.clients.len() > super::MAX_CLIENTS {
            return Err(format!("{} saved connections, more than a session serves", saved.clients.len()));
        }
        let mut policy = SessionPolicy::new(saved.size, size_policy).speaking(speaks);
        policy.terminal_open = saved.terminal_open;
        let mut clients = BTreeMap::new();
        let mut effects = VecDeque::new();
        for conn in saved.clients {
            let id = ClientId(conn.id);
            let behind_since = conn.behind_ms.map(|ms| back(now, ms));
            if conn.role.is_none() {
                effects.push_back(Effect::Arm { at: now + HANDSHAKE_DEADLINE, timer: Timer::Handshake(id) });
            }
            if let Some(at) = behind_since {
                effects.push_back(Effect::Arm { at: at + SLOW_CLIENT_DEADLINE, timer: Timer::SlowClient(id) });
            }
            let conn = Conn {
                role: conn.role,
                closed: false,
                size: conn.size.filter(|(c, r)| desk_term::screen::valid_size(*c, *r)),
                last_active: back(now, conn.idle_ms),
                behind_since,
            };
            clients.insert(id, conn);
        }
        policy.latest = saved.latest.map(ClientId).filter(|id| clients.contains_key(id));
        policy.clients = clients;
        policy.effects = effects;
        Ok(policy)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_wire::{Frame, PROTOCOL_VERSION};
    use std::time::Duration;

    fn hello(role: Role, cols: u16, rows: u16) -> Frame {
        Frame::Hello { version: PROTOCOL_VERSION, role, cols, rows, status_line: false, view: false }
    }

    #[test]
    fn a_restored_policy_keeps_its_connections_and_arms_their_deadlines_again() {
        let t0 = Instant::now();
        let mut policy = SessionPolicy::new((80, 24), SizePolicy::Latest);
        for id in 1..=3 {
            policy.on_connect(ClientId(id), t0).unwrap();
        }
        policy.on_frame(ClientId(1), hello(Role::Controller, 100, 30), t0);
        policy.on_frame(ClientId(2), hello(Role::Viewer, 40, 10), t0);
        policy.on_backlog_discarded(ClientId(2), t0 + Duration::from_secs(1));
        while policy.poll_effect().is_some() {}
        let now = t0 + Duration::from_secs(3);
        let saved = policy.save(now);
        let json = serde_json::to_string(&saved).unwrap();
        let mut restored = SessionPolicy::restore(serde_json::from_str(&json).unwrap(), PROTOCOL_VERSION, now).unwrap();
        assert_eq!(restored.size(), (100, 30));
        assert_eq!(restored.client_count(), 3);
        let effects: Vec<_> = std::iter::from_fn(|| restored.poll_effect()).collect();
        assert_eq!(
            effects,
            vec![
                Effect::Arm {
                    at: t0 + Duration::from_secs(1) + SLOW_CLIENT_DEADLINE,
                    timer: Timer::SlowClient(ClientId(2))
                },
                Effect::Arm { at: now + HANDSHAKE_DEADLINE, timer: Timer::Handshake(ClientId(3)) },
            ]
        );
        // The controller is still the latest: a second one of another size does not resize
        // the session until it is more recently active.
        assert_eq!(restored.save(now), saved);
        // The viewer stays behind: at its deadline it is evicted, as without the handover.
        restored.on_timer(Timer::SlowClient(ClientId(2)), t0 + Duration::from_secs(1) + SLOW_CLIENT_DEADLINE);
        assert!(matches!(restored.poll_effect(), Some(Effect::Evict { client: ClientId(2), .. })));
    }

    #[test]
    fn a_stopping_or_exited_session_does_not_hand_over() {
        let t0 = Instant::now();
        let mut policy = SessionPolicy::new((80, 24), SizePolicy::Latest);
        assert_eq!(policy.handover_refusal(), None);
        policy.on_stop_requested(t0);
        assert_eq!(policy.handover_refusal(), Some("the session is being stopped"));
        let mut policy = SessionPolicy::new((80, 24), SizePolicy::Latest);
        policy.on_child_exited(t0);
        assert_eq!(policy.handover_refusal(), Some("the session is exiting"));
    }
}
