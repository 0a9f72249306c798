//! `desk channel remove`: a member leaves a channel.

#[allow(unused_imports)]
use super::*;

pub(in crate::cli) fn remove(name: &str, member: &str, json: bool) -> Result<i32> {
    let name = parse_name(name)?;
    let (_, store) = store()?;
    if !store.remove_member(&name, member).map_err(post_error)? {
        return Err(fail(ErrorCode::NotAMember, format!("{member} is not a member of #{name}")));
    }
    let roster = roster(&store, &name)?;
    print_roster("channel", &roster, json, &format!("removed {member} from #{name}"))
}
