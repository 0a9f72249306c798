//! The blocking client of `desk serve`'s control socket: one request, one response.
//!
//! Owns where the control socket is ([`socket_path`]) and [`request`], used by the CLI and the
//! dashboard; the messages themselves are `desk_wire::control`. Invariant: a request never
//! waits past its one deadline, however the daemon drips its answer. Uses only the standard
//! library's Unix sockets: no event loop.

use anyhow::{Context, Result, bail};
use desk_wire::control::{CONTROL_VERSION, Envelope, MAX_RESPONSE, Request, Response};
use std::io::{Read as _, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::paths::Paths;

/// The control socket. Its name starts with `_`, which no session name can, so it never
/// collides with a session's socket in the same directory.
pub fn socket_path(paths: &Paths) -> PathBuf {
    paths.runtime.join("_serve.sock")
}

/// A request to desk serve ran out of time: the daemon is there but did not answer (callers
/// tell this apart from finding no daemon at all).
#[derive(Debug, thiserror::Error)]
#[error("desk serve did not answer within {} s", .0.as_secs())]
pub struct TimedOut(pub Duration);

/// The CLI's side: one request, one response.
/// `timeout` bounds the whole request (write and answer), not each read: a daemon that
/// answers a byte at a time cannot stretch it. Running out of time is a [`TimedOut`] error.
pub fn request(socket: &Path, req: &Request, timeout: Duration) -> Result<Response> {
    let stream =
        UnixStream::connect(socket).with_context(|| format!("cannot reach desk serve at {}", socket.display()))?;
    request_on(stream, req, timeout)
}

/// [`request`] over a stream already connected to a daemon's control socket (a host's, over
/// its relay: docs/remote.md).
pub fn request_on(mut stream: UnixStream, req: &Request, timeout: Duration) -> Result<Response> {
    let deadline = std::time::Instant::now() + timeout;
    let left =
        || deadline.checked_duration_since(std::time::Instant::now()).filter(|d| !d.is_zero()).ok_or(TimedOut(timeout));
    stream.set_write_timeout(Some(left()?))?;
    let mut line = serde_json::to_vec(&Envelope { v: CONTROL_VERSION, body: req })?;
    line.push(b'\n');
    stream.write_all(&line).context("cannot write to desk serve")?;
    let mut answer = Vec::new();
    let mut buf = [0u8; 8192];
    loop {
        if answer.len() > MAX_RESPONSE {
            bail!("desk serve sent an answer longer than {MAX_RESPONSE} bytes");
        }
        stream.set_read_timeout(Some(left()?))?;
        match stream.read(&mut buf) {
            Ok(0) if answer.is_empty() => bail!("desk serve closed the connection without answering"),
            Ok(0) => bail!("desk serve closed the connection in the middle of its answer"),
            Ok(n) => {
                if let Some(end) = buf[..n].iter().position(|b| *b == b'\n') {
                    answer.extend_from_slice(&buf[..=end]);
                    break;
                }
                answer.extend_from_slice(&buf[..n]);
            }
            Err(e) if matches!(e.kind(), std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut) => {}
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e).context("desk serve did not answer"),
        }
    }
    let env: Envelope<Response> = serde_json::from_slice(&answer).context("desk serve sent a malformed answer")?;
    Ok(env.body)
}
