//! What the clients that take views are sent: a view of the screen model at their own size.
//!
//! Owns deciding which streaming client takes a view (its terminal's size, which the session
//! policy keeps, differs from the session's, or it asked for one always) and the repaints of
//! those views: a keyframe when one is due, then at most one repaint per
//! [`VIEW_REPAINT_INTERVAL`] (at once for a [`SMALL_CHANGE`]), each only into an empty queue, so
//! a slow client gets the latest view once it has drained, never a backlog; and the one
//! [`Timer::ViewRepaint`] armed for the earliest repaint held back. Invariants: a client that
//! changes between the raw stream and a view gets a keyframe of its new kind, its queued bytes
//! of the other kind discarded; the armed repaint timer is never later than the earliest
//! repaint held back.

use std::time::{Duration, Instant};

use super::client::{keyframe_chunks, output_chunks};
use super::clients::{ClientTable, client_id};
use super::timers::{Timer, Timers};
use desk_core::session::SessionPolicy;
use desk_term::screen::Screen;

/// At most one view repaint per client this often. 16 ms is one frame of a 60 Hz display:
/// a person cannot see repaints come faster, a change still shows well within the 50 ms a
/// viewer should take to follow one (issue 10's target), and during a flood a view client costs
/// at most ~60 renders of its screen a second, however fast the child writes.
pub(super) const VIEW_REPAINT_INTERVAL: Duration = Duration::from_millis(16);

/// 2 KiB: a change of the screen this small since a view's last repaint is repainted at once,
/// not at the next [`VIEW_REPAINT_INTERVAL`]. A typed key's echo is a few bytes, a line
/// editor's or an agent's redraw of its input box a few hundred to a couple of thousand; held
/// back 16 ms, keys typed less than 16 ms apart (a fast typist, key repeat) would each echo a
/// frame late (issue 22's typing target). A flood reads far more than this in a turn and stays
/// coalesced; a child that writes a little at a time costs one render per turn of the loop,
/// which each of its writes costs anyway.
pub(super) const SMALL_CHANGE: usize = 2 * 1024;

/// Give each streaming client the view it needs: none when its size is the session's (or
/// unknown), so it takes the raw fast path, unless it asked for a view always (HELLO's view
/// option); otherwise a view of its size. A client that changes between the two (its terminal
/// or the session was resized) needs a keyframe of its new kind: what its terminal shows was
/// drawn for the other.
pub(super) fn update(clients: &mut ClientTable, session: (u16, u16), policy: &SessionPolicy) {
    for (token, client) in clients.iter_mut() {
        let size = policy.client_size(client_id(*token));
        let wanted = size.filter(|size| (*size != session || client.always_view) && client.streams_output());
        let has = client.view.as_ref().map(desk_term::view::View::size);
        if wanted == has {
            continue;
        }
        client.view = wanted.map(|(cols, rows)| desk_term::view::View::new(cols, rows, client.status_line));
        client.view_dirty = false;
        client.view_unsent = 0;
        if client.streams_output() {
            // Raw bytes queued for the other kind are superseded by the keyframe.
            client.out.discard_backlog();
            client.needs_keyframe = true;
        }
    }
}

/// The repaint timer of the clients that take views.
#[derive(Default)]
pub(super) struct Views {
    /// When the armed [`Timer::ViewRepaint`] fires, if one is armed.
    repaint_armed: Option<Instant>,
}

impl Views {
    /// Keyframes for view clients that wait for one, and repaints for those whose screen
    /// changed, at most one per [`VIEW_REPAINT_INTERVAL`] each and only into an empty queue (a
    /// slow client gets the latest view once it has drained, never a backlog). Arms
    /// [`Timer::ViewRepaint`] for repaints not due yet.
    pub(super) fn repaint(&mut self, clients: &mut ClientTable, screen: &Screen, now: Instant, timers: &mut Timers) {
        let mut next: Option<Instant> = None;
        for client in clients.values_mut() {
            if client.view.is_none() || !client.streams_output() || !client.out.is_empty() || !client.stream_writable()
            {
                continue;
            }
            let Some(view) = client.view.as_mut() else { continue };
            if client.needs_keyframe {
                let frames = keyframe_chunks(&view.keyframe(screen));
                client.view_dirty = false;
                client.view_unsent = 0;
                client.next_repaint = Some(now + VIEW_REPAINT_INTERVAL);
                client.push_keyframe(&frames);
                continue;
            }
            if !client.view_dirty {
                continue;
            }
            match client.next_repaint {
                Some(at) if at > now && client.view_unsent > SMALL_CHANGE => {
                    next = Some(next.map_or(at, |n| n.min(at)));
                    continue;
                }
                _ => {}
            }
            let bytes = view.render(screen);
            client.view_dirty = false;
            client.view_unsent = 0;
            client.next_repaint = Some(now + VIEW_REPAINT_INTERVAL);
            if !bytes.is_empty() {
                client.push_repaint(&output_chunks(&bytes), bytes.len());
            }
        }
        if let Some(at) = next
            && self.repaint_armed.is_none_or(|armed| armed > at)
        {
            timers.arm(at, Timer::ViewRepaint);
            self.repaint_armed = Some(at);
        }
    }

    /// The armed [`Timer::ViewRepaint`] fired.
    pub(super) fn timer_fired(&mut self) {
        self.repaint_armed = None;
    }
}
