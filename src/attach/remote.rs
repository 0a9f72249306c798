//! Attaching a session on another host (`desk attach HOST:NAME`, docs/remote.md).
//!
//! Owns the link under a remote attach and its recovery: the session's master socket comes
//! over the host's relay as an ordinary socket, so the attach client speaks to it exactly as to
//! a local master (keyframes, views, the detach key, the master's size line). When the link
//! drops, the terminal is told `connection to HOST lost, reconnecting…`, and new links are tried
//! in a thread of their own with a growing pause between tries ([`BACKOFF`]); a new link's
//! WELCOME and keyframe redraw the whole screen. Invariants: typed input while disconnected is
//! refused (the bell rings; attach says how often when it ends), never buffered to arrive late;
//! the detach key works throughout, because no try ever blocks the attach loop; a host that
//! answers but no longer has the session ends the attach with the host's reason instead of
//! trying forever.

use anyhow::{Result, anyhow};
use mio::{Token, Waker};
use std::os::unix::net::UnixStream;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, TryRecvError, channel};
use std::time::{Duration, Instant};

use desk_common::config::Host;
use desk_common::paths::Paths;
use desk_common::remote::link::{HANDSHAKE_TIMEOUT, Link};
use desk_wire::relay::Target;

/// The wake-up of the attach loop when a try has an answer.
pub(super) const WAKE: Token = Token(4);

/// Pauses between tries: at once, then 0.5 s, 1 s, 2 s, 4 s, and 8 s from then on. A host that
/// blinked is back within a second; one that rebooted is found within 8 s of its sshd starting,
/// without a tight loop of ssh processes meanwhile.
const BACKOFF: [Duration; 6] = [
    Duration::ZERO,
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

/// How a try ended.
pub(super) enum Tried {
    /// A new link and the session's socket over it.
    Back(Link, UnixStream),
    /// The host did not answer (try again).
    Unreachable(String),
    /// The host answered, and the session is not there any more (stop).
    Gone(String),
}

/// The host side of a remote attach.
pub(super) struct Remote {
    pub(super) name: String,
    host: Host,
    paths: Paths,
    /// The link the current socket runs over (dropping it ends ssh).
    link: Option<Link>,
    waker: Arc<Waker>,
    /// While disconnected: the tries made, when the next is due, and the one under way.
    pub(super) lost: Option<Lost>,
}

pub(super) struct Lost {
    tries: usize,
    next: Instant,
    under_way: Option<Receiver<Tried>>,
    pub(super) last_error: String,
}

impl Remote {
    pub(super) fn new(name: String, host: Host, paths: Paths, link: Link, waker: Waker) -> Remote {
        Remote { name, host, paths, link: Some(link), waker: Arc::new(waker), lost: None }
    }

    /// The newest wire protocol the host's masters speak.
    pub(super) fn wire_version(&self) -> Option<u16> {
        self.link.as_ref().map(|l| l.handshake.wire_version)
    }

    /// The link dropped: start trying again.
    pub(super) fn lose(&mut self, why: String) {
        self.link = None;
        self.lost = Some(Lost { tries: 0, next: Instant::now(), under_way: None, last_error: why });
    }

    /// When the loop should look again (the next try's time), while disconnected.
    pub(super) fn due(&self) -> Option<Instant> {
        self.lost.as_ref().filter(|l| l.under_way.is_none()).map(|l| l.next)
    }

    /// Start a try if one is due; take the answer of the one under way if it has come.
    pub(super) fn poll(&mut self, session: &str) -> Option<Tried> {
        let lost = self.lost.as_mut()?;
        if let Some(rx) = &lost.under_way {
            return match rx.try_recv() {
                Ok(Tried::Back(link, stream)) => {
                    self.lost = None;
                    Some(Tried::Back(link, stream))
                }
                Ok(Tried::Unreachable(why)) => {
                    lost.tries += 1;
                    lost.next = Instant::now() + BACKOFF[lost.tries.min(BACKOFF.len() - 1)];
                    lost.under_way = None;
                    lost.last_error = why.clone();
                    Some(Tried::Unreachable(why))
                }
                Ok(gone @ Tried::Gone(_)) => Some(gone),
                Err(TryRecvError::Empty) => None,
                Err(TryRecvError::Disconnected) => {
                    lost.under_way = None;
                    None
                }
            };
        }
        if Instant::now() < lost.next {
            return None;
        }
        let (tx, rx) = channel();
        lost.under_way = Some(rx);
        let (name, host, paths, waker) = (self.name.clone(), self.host.clone(), self.paths.clone(), self.waker.clone());
        let session = session.to_string();
        std::thread::spawn(move || {
            let _ = tx.send(try_once(&name, &host, &paths, &session));
            let _ = waker.wake();
        });
        None
    }

    /// Keep the link of a try that succeeded.
    pub(super) fn keep(&mut self, link: Link) {
        self.link = Some(link);
    }
}

/// One try: a link, then the session's socket over it.
fn try_once(name: &str, host: &Host, paths: &Paths, session: &str) -> Tried {
    let link = match Link::connect(name, host, paths, HANDSHAKE_TIMEOUT) {
        Ok(link) => link,
        Err(e) => return Tried::Unreachable(format!("{e:#}")),
    };
    match link.open(Target::Session(session.to_string())) {
        Ok(stream) => Tried::Back(link, stream),
        Err(e) if link.down().is_some() => Tried::Unreachable(format!("{e:#}")),
        Err(e) => Tried::Gone(format!("{e:#}")),
    }
}

/// The first link and the session's socket over it, or an error naming the host and session.
pub(super) fn first(name: &str, host: &Host, paths: &Paths, session: &str) -> Result<(Link, UnixStream)> {
    let link = Link::connect(name, host, paths, HANDSHAKE_TIMEOUT)?;
    let stream = link.open(Target::Session(session.to_string())).map_err(|e| {
        desk_common::failure::fail(desk_common::failure::ErrorCode::NoSuchSession, format!("on host {name}: {e:#}"))
    })?;
    if link.down().is_some() {
        return Err(anyhow!("connection to host {name} lost"));
    }
    Ok((link, stream))
}
