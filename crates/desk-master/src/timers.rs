//! The master's timers.
//!
//! Owns pending deadlines, earliest first; the event loop turns the earliest into its poll
//! timeout, so an idle master sleeps until one is due: with none but the socket check armed, it
//! wakes once per [`super::socket_watch::CHECK_INTERVAL`] for one `lstat`. Invariant: a timer
//! fires at most once; a client's timers are cancelled when it leaves or no longer needs them,
//! so a connection that came and went never wakes an idle master later.

use desk_core::session::Timer as PolicyTimer;
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::time::Instant;

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(super) enum Timer {
    /// One the session policy armed (handshakes, slow clients, kill escalation, exit flush):
    /// reported back to it when due.
    Policy(PolicyTimer),
    /// Journal the latest title held back by the title rate limit.
    TitleFlush,
    /// Emit the bells, notifications, mode changes and resizes held back by the noise limit.
    NoiseFlush,
    /// Check whether output has gone quiet.
    OutputQuiet,
    /// Read the screen for the provider's screen rules.
    ScreenCheck,
    /// A state lease may have run out.
    StateTick,
    /// The start-up quiet period ended (for a child that prints nothing).
    ReadyCheck,
    /// Clients with views have repaints due.
    ViewRepaint,
    /// The info file may be checked again (the last change of a busy spell is written).
    InfoFile,
    /// The session log's waiting lines are due to be written.
    LogFlush,
    /// The next of an operator's keys is due to be typed.
    KeysNext,
    /// A handover (`desk upgrade`) that waits for a quiet point gives up now.
    Handover,
    /// Look whether the socket file is still this master's ([`super::socket_watch`]).
    SocketCheck,
}

#[derive(Debug, Default)]
pub(super) struct Timers {
    heap: BinaryHeap<Reverse<(Instant, Timer)>>,
}

impl Timers {
    pub(super) fn arm(&mut self, at: Instant, timer: Timer) {
        self.heap.push(Reverse((at, timer)));
    }

    /// Forget every pending instance of `timer`. Linear in the pending timers, which are a
    /// handful per client.
    pub(super) fn cancel(&mut self, timer: Timer) {
        self.heap.retain(|Reverse((_, t))| *t != timer);
    }

    pub(super) fn next_deadline(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Remove and return one timer due at `now`, if any.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<Timer> {
        match self.heap.peek() {
            Some(Reverse((at, _))) if *at <= now => self.heap.pop().map(|Reverse((_, t))| t),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use desk_core::session::ClientId;
    use std::time::Duration;

    #[test]
    fn timers_fire_in_deadline_order_and_only_when_due() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        timers.arm(t0 + Duration::from_secs(2), Timer::Policy(PolicyTimer::Escalate));
        timers.arm(t0 + Duration::from_secs(1), Timer::Policy(PolicyTimer::SlowClient(ClientId(20))));
        assert_eq!(timers.next_deadline(), Some(t0 + Duration::from_secs(1)));
        assert_eq!(timers.pop_due(t0), None);
        assert_eq!(
            timers.pop_due(t0 + Duration::from_secs(5)),
            Some(Timer::Policy(PolicyTimer::SlowClient(ClientId(20))))
        );
        assert_eq!(timers.pop_due(t0 + Duration::from_secs(5)), Some(Timer::Policy(PolicyTimer::Escalate)));
        assert_eq!(timers.pop_due(t0 + Duration::from_secs(5)), None);
    }

    #[test]
    fn a_cancelled_timer_never_fires_and_leaves_no_deadline() {
        let t0 = Instant::now();
        let mut timers = Timers::default();
        timers.arm(t0 + Duration::from_secs(10), Timer::Policy(PolicyTimer::Handshake(ClientId(7))));
        timers.arm(t0 + Duration::from_secs(20), Timer::Policy(PolicyTimer::Handshake(ClientId(8))));
        timers.cancel(Timer::Policy(PolicyTimer::Handshake(ClientId(7))));
        assert_eq!(timers.next_deadline(), Some(t0 + Duration::from_secs(20)));
        timers.cancel(Timer::Policy(PolicyTimer::Handshake(ClientId(8))));
        assert_eq!(timers.next_deadline(), None);
    }
}
