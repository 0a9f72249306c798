//! `desk resize`: set a `fixed` session's size.

#[allow(unused_imports)]
use super::*;

/// `desk resize NAME COLSxROWS`: set a `fixed` session's size. The master refuses it under the
/// other policies (their size follows the controllers); a PING after the RESIZE tells success
/// (PONG, frames are answered in order) from refusal (ERROR first).
pub(in crate::cli) fn resize(
    name: &SessionName,
    (cols, rows): (u16, u16),
    ids: &crate::cli::output::Ids,
) -> Result<i32> {
    let paths = paths()?;
    let mut conn = connect(&paths, name)?;
    conn.send(&Frame::Resize { cols, rows })?;
    conn.send(&Frame::Ping(1))?;
    conn.set_deadline(Some(session::PROBE_DEADLINE));
    loop {
        match conn.recv().map_err(|e| ended(&paths, name, e))? {
            Frame::Pong(_) => break,
            Frame::Error { message, .. } => return Err(failure(1, format!("cannot resize session {name}: {message}"))),
            _ => continue,
        }
    }
    println!("resized session {} to {cols}x{rows}", ids.session(name.as_str()));
    Ok(0)
}
