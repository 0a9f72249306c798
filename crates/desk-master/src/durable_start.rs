//! Making a start's records durable, after `desk new` has heard "ready" and before the master
//! serves anyone.
//!
//! Owns [`sync`]: the generation counter and the launch record (which the starting CLI wrote
//! without waiting on the disk), the session record (written by this master before the child's
//! exec, likewise) and the directories that name them, synced once each. A start used to wait
//! on nine syncs before `desk new` returned (issue 22, docs/benchmarks.md §19); now it waits on
//! none, and these run while the CLI has already returned. May not depend on the loop: it runs
//! before the loop exists.
//!
//! What a crash leaves, at each point of a start (every record is replaced whole, through a
//! temporary file and a rename, so a reader sees an old or a new one, never a mix):
//!
//! | crash | when | left behind | why it is honest |
//! |---|---|---|---|
//! | the CLI | before it starts the master (counter and launch record written) | the counter and launch record of a generation that never ran; no session record, no socket | `desk ls` lists nothing running (nothing runs); the next start counts on from them |
//! | the master | before "ready" | as today: `desk new` reports that it died while starting and removes what it made | unchanged |
//! | the master | after "ready", before [`sync`] (`master-after-ready`) | the records, written but not yet synced (the kernel writes them back within seconds); a stale socket; the child gets SIGHUP | `desk new` said the session started, and it had; `desk ls` shows it `lost` (a stale socket, no exit record), never running; the next start takes the next generation |
//! | the machine | before [`sync`] returns | any of: the counter, the launch record, the session record, each old or new (the kernel's writeback keeps some and not others) | every process of the session died with it, and no client of this generation was served: nothing another process made durable names it. The next start counts on from the higher of the counter and the launch record, so no generation is handed out twice; a session whose record did not survive is not listed (it does not run), one whose record did is `lost` |
//! | the machine | after [`sync`] | every record of the start | as before this change |
//!
//! A failed sync (an I/O error) is logged, not fatal: the session runs, and ending it would
//! lose more than the durability of its records.

use std::path::Path;

use desk_common::paths::{Paths, SessionName};
use tracing::warn;

/// Sync the start's records and their directories; see the module documentation. The syncs are
/// issued together, one thread each, so the journal commits they wait on are shared: the
/// loop (and so a `desk ls` or `desk new --json` that asks this master) waits about one sync,
/// not six.
pub(crate) fn sync(paths: &Paths, name: &SessionName) {
    let state = paths.session_state(name);
    let files = paths.session(name);
    let records = [
        desk_common::session::generation_file(paths, name),
        desk_common::launch_record::launch_file(paths, name),
        files.meta.clone(),
    ];
    // The state directory names the counter and the launch record (and the journal, which this
    // start may have created); its parent names it, for a first start of the name; the
    // runtime directory names the session record.
    let dirs = [state.clone(), state.parent().unwrap_or(&state).to_path_buf(), paths.runtime.clone()];
    std::thread::scope(|scope| {
        // A thread that cannot be made (no memory, a process limit): synced here instead (the
        // closures hold references only, so each is copied into its thread).
        for file in &records {
            let sync = move || {
                if let Err(e) = sync_file(file) {
                    warn!("cannot make {} durable: {e}", file.display());
                }
            };
            if std::thread::Builder::new().spawn_scoped(scope, sync).is_err() {
                sync();
            }
        }
        for dir in &dirs {
            let sync = move || {
                if let Err(e) = desk_common::fsutil::sync_dir(dir) {
                    warn!("{e:#}");
                }
            };
            if std::thread::Builder::new().spawn_scoped(scope, sync).is_err() {
                sync();
            }
        }
    });
}

/// fsync one file (absent: nothing to sync — `desk master` run by hand writes no launch record).
fn sync_file(path: &Path) -> std::io::Result<()> {
    match std::fs::File::open(path) {
        Ok(file) => file.sync_all(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(e) => Err(e),
    }
}
