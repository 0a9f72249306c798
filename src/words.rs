//! How desk writes a session's state for people: the one spelling `desk ls`, `desk dash` and
//! `desk explain` share.
//!
//! Owns the words of a state as a person reads them — an activity with what a blocked agent
//! waits for (`blocked(approval)`), how a session ended (`exited(3)`, `killed(SIGKILL)`), its
//! attached terminals (`2 (1 ro)`) — so that the same session reads the same everywhere. The
//! JSON answers keep the parts apart (`activity.value` `blocked`, `wait` `approval`) in these
//! same words. Pure: no I/O.

use desk_wire::ExitStatus;
use desk_wire::state::Activity;

/// An activity, with what a blocked agent waits for: `idle`, `working`, `blocked(approval)`,
/// `blocked`, `unknown`.
pub fn activity(activity: Activity, wait: Option<&str>) -> String {
    activity_named(activity.as_str(), wait)
}

/// [`activity`] from the activity's word as JSON gives it (a host's `desk ls --json`, whose
/// desk may know words this one does not).
pub fn activity_named(activity: &str, wait: Option<&str>) -> String {
    match wait.filter(|w| !w.is_empty()) {
        Some(wait) if activity == Activity::Blocked.as_str() => format!("{activity}({wait})"),
        _ => activity.to_string(),
    }
}

/// A session's STATUS in a listing: `running`, or how and how long ago it ended (`exited(3)
/// 5m ago`), after `down: ` when the supervisor keeps it down. `ended`: its exit status
/// (`None`: ended without one known) and when (Unix ms; `None`: not known, and not said), for a
/// session that ended.
pub fn status(status: &str, ended: Option<(Option<ExitStatus>, Option<u64>)>, now_ms: u64) -> String {
    let Some((how, at_ms)) = ended else { return status.to_string() };
    let how = how.map_or_else(|| "exited".to_string(), self::ended);
    let how = match at_ms {
        Some(at_ms) => format!("{how} {}", desk_core::time::ago(now_ms, at_ms)),
        None => how,
    };
    if status == "down" { format!("down: {how}") } else { how }
}

/// How a session ended: `exited(3)`, `killed(SIGKILL)`.
pub fn ended(status: ExitStatus) -> String {
    match status {
        ExitStatus::Code(code) => format!("exited({code})"),
        ExitStatus::Signal(signal) => format!("killed({})", desk_common::signals::name(signal)),
    }
}

/// The terminals attached to a session: every controller and viewer, the viewers (read-only,
/// a dashboard's preview among them) named apart: `1`, `2 (1 ro)`.
pub fn clients(controllers: u32, viewers: u32) -> String {
    let all = controllers + viewers;
    if viewers > 0 { format!("{all} ({viewers} ro)") } else { all.to_string() }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_spelling_for_each_state() {
        assert_eq!(activity(Activity::Blocked, Some("approval")), "blocked(approval)");
        assert_eq!(activity(Activity::Blocked, None), "blocked");
        assert_eq!(activity(Activity::Idle, Some("stale")), "idle");
        assert_eq!(ended(ExitStatus::Code(3)), "exited(3)");
        assert_eq!(ended(ExitStatus::Signal(9)), "killed(SIGKILL)");
        assert_eq!(clients(1, 0), "1");
        assert_eq!(clients(1, 1), "2 (1 ro)");
        assert_eq!(clients(0, 0), "0");
    }
}
