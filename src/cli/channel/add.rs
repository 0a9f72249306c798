//! `desk channel add`: a member joins a channel (an agent is told, through its queue).

#[allow(unused_imports)]
use super::*;

pub(in crate::cli) fn add(name: &str, member: &str, role: Role, queue_for_later: bool, json: bool) -> Result<i32> {
    let name = parse_name(name)?;
    let (paths, store) = store()?;
    // An agent member is a session: a name that is none is most often a typo, refused as `desk
    // send` refuses it (a person's name is anyone's).
    if role.is_agent()
        && !queue_for_later
        && let Ok(session) = SessionName::parse(member)
        && !crate::cli::session_known(&paths, &session)
    {
        let unknown = desk_common::suggest::unknown_session_in(&paths, member);
        return Err(fail(
            ErrorCode::NoSuchSession,
            format!("{unknown}; --queue-for-later adds it before it exists (its onboarding prompt waits for it)"),
        ));
    }
    let (roster, changed) = store.add_member(&name, member, role, now_ms()).map_err(post_error)?;
    // An agent's onboarding prompt is the daemon's to deliver.
    let daemon = if changed && role.is_agent() { crate::autostart::ensure_daemon(&paths) } else { Daemon::Running };
    let notes: Vec<String> = daemon.note().into_iter().collect();
    if !json {
        for n in &notes {
            eprintln!("desk: note: {n}");
        }
    }
    let human = if changed {
        if role.is_agent() {
            format!("added {member} to #{name} as {}; its onboarding prompt is queued", role.as_str())
        } else {
            format!("added {member} to #{name} as a person (mentions of @{member} notify the operator)")
        }
    } else {
        format!("{member} is already a {} of #{name}", role.as_str())
    };
    if json {
        output::print_ok("channel", &roster, &notes)?;
        return Ok(0);
    }
    print_roster("channel", &roster, json, &human)
}
