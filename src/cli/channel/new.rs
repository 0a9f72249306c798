//! `desk channel new`: a channel with its goal.

#[allow(unused_imports)]
use super::*;

pub(in crate::cli) fn new(name: &str, goal: Option<String>, checkin_after: Option<u64>, json: bool) -> Result<i32> {
    let name = parse_name(name)?;
    let (_, store) = store()?;
    match store.create_with(&name, goal.as_deref().unwrap_or(""), checkin_after, now_ms())? {
        Some(roster) => print_roster("channel", &roster, json, &format!("created #{name}")),
        None => Err(fail(ErrorCode::AlreadyExists, format!("channel #{name} already exists"))),
    }
}
