//! The master's side of its info file (`desk_common::info_file`): when to compare what HELLO
//! would be answered with what the file says, and when to write it.
//!
//! Owns the file's bookkeeping, with private fields: the master's start time as `/proc` counts it
//! (no file is kept without one, nor after the session exited), its protocol and executable
//! (looked up once: a handover makes a new `InfoFile` in the new binary) and what a listing
//! shows of its generation's launch record (read once, at the first write), the record last written, when
//! an output-only turn may next compare, when a change of the output times alone may next be
//! written, whether the loop must arm its [`super::timers::Timer::InfoFile`], and whether
//! something other than PTY output happened since the last check. Invariants: a turn that
//! handled a client, a signal or a timer has its changes written at its end; a turn that only
//! read the PTY is checked at most once per [`INFO_FILE_INTERVAL`], and a change of the time of
//! the last output alone is written at most once per [`INFO_OUTPUT_TIME_INTERVAL`], a timer
//! catching the last of a busy spell. So a flood costs ten `SessionInfo` comparisons and one
//! write a second, not one per read, and an idle master is never woken for it. A record that
//! cannot be written is removed rather than left stale (without one, `desk ls` asks the master).

use anyhow::Context;
use std::path::PathBuf;
use std::time::Instant;
use tracing::warn;

use desk_common::info_file::{INFO_FILE_INTERVAL, INFO_OUTPUT_TIME_INTERVAL, InfoRecord};
use desk_common::launch_record::LaunchFacts;
use desk_wire::SessionInfo;

#[derive(Debug)]
pub(super) struct InfoFile {
    path: PathBuf,
    master_start: Option<u64>,
    /// The protocol and executable of this process, written with every record.
    identity: desk_common::info_file::MasterIdentity,
    /// What a listing shows of this generation's launch record, written with every record;
    /// looked up at the first write (`None` until then).
    launch: Option<Option<LaunchFacts>>,
    last: Option<SessionInfo>,
    next: Option<Instant>,
    output_next: Option<Instant>,
    armed: bool,
    poked: bool,
}

impl InfoFile {
    /// The info file at `path` of this process (none is kept when its start time is unknown).
    pub(super) fn new(path: PathBuf) -> InfoFile {
        InfoFile {
            path,
            master_start: desk_common::procfs::state_and_start(std::process::id()).map(|(_, start)| start),
            identity: desk_common::info_file::MasterIdentity::of_self(super::speaks_protocol()),
            launch: None,
            last: None,
            next: None,
            output_next: None,
            armed: false,
            poked: false,
        }
    }

    /// Something other than PTY output happened: the end of this turn compares.
    pub(super) fn poke(&mut self) {
        self.poked = true;
    }

    /// The loop's `InfoFile` timer fired.
    pub(super) fn timer_fired(&mut self) {
        self.armed = false;
    }

    /// Keep the file what HELLO would be answered now (`info`, computed only when compared),
    /// under the invariants above. Returns when the loop must arm its `InfoFile` timer, if it
    /// must arm one now.
    pub(super) fn refresh(
        &mut self,
        now: Instant,
        size_policy: &Option<String>,
        info: impl FnOnce() -> SessionInfo,
    ) -> Option<Instant> {
        let master_start = self.master_start?;
        let throttled = self.next.filter(|at| now < *at);
        if !std::mem::take(&mut self.poked)
            && let Some(at) = throttled
        {
            // Only the PTY was read since the last check: what output changes (the title, a
            // state from the screen, the output times) is checked when the interval is over.
            return self.arm(at);
        }
        // Checked now: output-only turns wait for the interval again, written or not.
        self.next = Some(now + INFO_FILE_INTERVAL);
        let info = info();
        if let Some(last) = &self.last {
            if *last == info {
                return None;
            }
            let discrete = !same_but_output_times(last, &info);
            if !discrete && let Some(at) = self.output_next.filter(|at| now < *at) {
                return self.arm(at);
            }
        }
        self.write(master_start, size_policy, info, now);
        None
    }

    fn arm(&mut self, at: Instant) -> Option<Instant> {
        (!std::mem::replace(&mut self.armed, true)).then_some(at)
    }

    fn write(&mut self, master_start: u64, size_policy: &Option<String>, info: SessionInfo, now: Instant) {
        self.next = Some(now + INFO_FILE_INTERVAL);
        self.output_next = Some(now + INFO_OUTPUT_TIME_INTERVAL);
        let launch = self.launch.get_or_insert_with(|| launch_facts(&info)).clone();
        let record =
            InfoRecord { master_start, size_policy: size_policy.clone(), info, master: Some(self.identity), launch };
        let written = serde_json::to_vec(&record)
            .context("cannot encode the info file")
            .and_then(|bytes| desk_common::info_file::write(&self.path, &bytes));
        match written {
            Ok(()) => self.last = Some(record.info),
            Err(e) => {
                // An older record must not be believed: without one, `desk ls` asks this master.
                warn!("{e:#}");
                let _ = desk_common::fsutil::remove_if_exists(&self.path);
                self.last = None;
            }
        }
    }

    /// The session exited: the exit record says how it is now, and the info file would say it
    /// runs. It is removed and not written again.
    pub(super) fn stop(&mut self) {
        self.master_start = None;
        if let Err(e) = desk_common::fsutil::remove_if_exists(&self.path) {
            warn!("{e:#}");
        }
    }
}

/// What a listing shows of the launch record of this master's session, when that record is of
/// its generation (a master started by hand has none, or an older generation's). Read once: only
/// a start writes the record, and none runs while this master does.
fn launch_facts(info: &SessionInfo) -> Option<LaunchFacts> {
    let paths = desk_common::paths::Paths::from_env().ok()?;
    let name = desk_common::paths::SessionName::parse(&info.name).ok()?;
    let record = desk_common::launch_record::read(&paths, &name).ok().flatten()?;
    (record.generation == info.generation).then(|| record.facts())
}

/// Whether `a` and `b` differ at most in the times that move with every read of output: the
/// time of the last output, and when each axis's evidence was last seen (a `working` lease
/// that output renews, `no evidence` as of the last output). Only a changing master compares,
/// at most ten times a second, so the clone costs nothing that matters.
pub(super) fn same_but_output_times(a: &SessionInfo, b: &SessionInfo) -> bool {
    let (Some(sa), Some(_)) = (&a.state, &b.state) else { return a == b };
    let mut b = b.clone();
    if let Some(state) = b.state.as_mut() {
        state.last_output_ms = sa.last_output_ms;
        state.lifecycle.evidence.at_ms = sa.lifecycle.evidence.at_ms;
        state.activity.evidence.at_ms = sa.activity.evidence.at_ms;
        state.health.evidence.at_ms = sa.health.evidence.at_ms;
    }
    *a == b
}
