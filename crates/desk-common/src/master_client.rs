//! The blocking client side of the wire protocol: connect, HELLO, WELCOME, then one request and
//! its answer, every wait bounded by one deadline.
//!
//! Owns [`Connection`], used by the short CLI commands (`ls`, `peek`, `kill`, `events`) and by any
//! other Rust tool that talks to a master. Invariants: a request never waits past its deadline,
//! however the master drips bytes; a WELCOME in another protocol version is refused with a message
//! naming both versions. Uses only the standard library's Unix sockets: no event loop.

use anyhow::{Context, Result, bail};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use desk_wire::{Frame, FrameDecoder, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION, Role, SessionInfo};

/// How long a CLI request waits for a master before calling it unresponsive: one deadline
/// for the whole request (handshake and answer), not per read, so a master that drips a byte
/// at a time cannot stretch it. Masters answer within microseconds; this only guards against a
/// wedged or stopped one.
pub const REQUEST_TIMEOUT: Duration = Duration::from_secs(5);

/// A blocking request/reply connection to a master, used by the short CLI commands. Every
/// wait is bounded by one deadline for the whole request (see [`Connection::open_within`] and
/// [`Connection::set_deadline`]), never by a timeout per read.
pub struct Connection {
    stream: UnixStream,
    decoder: FrameDecoder,
    pub info: SessionInfo,
    /// When the current request gives up, and the budget it had (for the message); `None`
    /// waits as long as the master stays connected (`desk events --follow`).
    deadline: Option<(Instant, Duration)>,
    /// The connection's protocol version, as WELCOME named it (docs/protocol.md §12).
    pub version: u16,
}

/// "5 s" or "300 ms".
fn budget(d: Duration) -> String {
    if d.subsec_millis() == 0 { format!("{} s", d.as_secs()) } else { format!("{} ms", d.as_millis()) }
}

impl Connection {
    /// Connect with `role`, send HELLO and wait for WELCOME, all within [`REQUEST_TIMEOUT`].
    pub fn open(stream: UnixStream, role: Role, cols: u16, rows: u16) -> Result<Connection> {
        Self::open_within(stream, role, cols, rows, REQUEST_TIMEOUT)
    }

    /// [`Connection::open`] with its own budget; the deadline stays set for the request that
    /// follows the handshake (a snapshot, say) until [`Connection::set_deadline`] moves it.
    pub fn open_within(stream: UnixStream, role: Role, cols: u16, rows: u16, within: Duration) -> Result<Connection> {
        let mut conn = Connection {
            stream,
            decoder: FrameDecoder::new(),
            info: SessionInfo {
                name: String::new(),
                generation: 0,
                provider: String::new(),
                pid: 0,
                master_pid: 0,
                command: Vec::new(),
                cwd: String::new(),
                cols: 0,
                rows: 0,
                controllers: 0,
                viewers: 0,
                observers: 0,
                title: String::new(),
                started_at_ms: 0,
                state: None,
            },
            deadline: Some((Instant::now() + within, within)),
            version: PROTOCOL_VERSION,
        };
        // The version its master speaks, from the session record beside its socket.
        let hello = conn.stream.peer_addr().ok().and_then(|a| a.as_pathname().map(crate::session::hello_version));
        let hello = hello.unwrap_or(PROTOCOL_VERSION);
        conn.send(&Frame::Hello { version: hello, role, cols, rows, status_line: false, view: false })?;
        match conn.recv()? {
            Frame::Welcome { version, info } if desk_wire::welcome_accepted(hello, version) => {
                conn.info = *info;
                conn.version = version;
            }
            Frame::Welcome { version, .. } => {
                bail!(
                    "the session answered in protocol version {version} to a HELLO in {hello}; this desk speaks {OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}"
                )
            }
            Frame::Error { code, message } => bail!("the session refused the connection ({code:?}): {message}"),
            other => bail!("the session answered {:?} instead of WELCOME", other.kind()),
        }
        Ok(conn)
    }

    /// Give the next request `within` from now (`None`: no deadline).
    pub fn set_deadline(&mut self, within: Option<Duration>) {
        self.deadline = within.map(|d| (Instant::now() + d, d));
    }

    /// Time left before the deadline; an error once it has passed.
    fn remaining(&self) -> Result<Option<Duration>> {
        let Some((at, within)) = self.deadline else { return Ok(None) };
        match at.checked_duration_since(Instant::now()) {
            Some(left) if !left.is_zero() => Ok(Some(left)),
            _ => bail!("the session did not answer within {}", budget(within)),
        }
    }

    pub fn send(&mut self, frame: &Frame) -> Result<()> {
        let bytes = frame.to_bytes();
        let mut written = 0;
        while written < bytes.len() {
            let left = self.remaining()?;
            self.stream.set_write_timeout(left).context("cannot set a timeout")?;
            match self.stream.write(&bytes[written..]) {
                Ok(0) => bail!("the session closed the connection"),
                Ok(n) => written += n,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => {}
                Err(e) => return Err(e).context("cannot write to the session"),
            }
        }
        Ok(())
    }

    /// Wait for the next frame, until the deadline. A closed connection is an error.
    pub fn recv(&mut self) -> Result<Frame> {
        let mut buf = [0u8; 16 * 1024];
        loop {
            if let Some(frame) = self.decoder.next_frame().context("the session sent a malformed frame")? {
                return Ok(frame);
            }
            let left = self.remaining()?;
            self.stream.set_read_timeout(left).context("cannot set a timeout")?;
            let n = match self.stream.read(&mut buf) {
                Ok(n) => n,
                // The deadline is checked again at the top of the loop.
                Err(e) if e.kind() == ErrorKind::WouldBlock || e.kind() == ErrorKind::TimedOut => continue,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) => return Err(e).context("cannot read from the session"),
            };
            if n == 0 {
                bail!("the session closed the connection");
            }
            self.decoder.push(&buf[..n]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> SessionInfo {
        SessionInfo {
            name: "t".into(),
            generation: 1,
            provider: "shell".into(),
            state: None,
            pid: 1,
            master_pid: 2,
            command: vec!["sh".into()],
            cwd: "/".into(),
            cols: 80,
            rows: 24,
            controllers: 0,
            viewers: 0,
            observers: 0,
            title: String::new(),
            started_at_ms: 0,
        }
    }

    fn open_against(answer: Frame) -> Result<Connection> {
        let (ours, mut theirs) = UnixStream::pair()?;
        theirs.write_all(&answer.to_bytes())?;
        Connection::open(ours, Role::Query, 0, 0)
    }

    #[test]
    fn a_welcome_in_this_version_opens_the_connection() {
        let conn = open_against(Frame::Welcome { version: PROTOCOL_VERSION, info: Box::new(info()) }).unwrap();
        assert_eq!(conn.info, info());
    }

    #[test]
    fn a_welcome_in_another_version_is_refused() {
        let err = open_against(Frame::Welcome { version: PROTOCOL_VERSION + 1, info: Box::new(info()) }).err().unwrap();
        assert!(format!("{err:#}").contains(&format!("protocol version {}", PROTOCOL_VERSION + 1)), "{err:#}");
    }

    #[test]
    fn a_welcome_in_an_older_version_this_desk_speaks_opens_the_connection_in_that_version() {
        let conn = open_against(Frame::Welcome { version: OLDEST_PROTOCOL_VERSION, info: Box::new(info()) }).unwrap();
        assert_eq!(conn.version, OLDEST_PROTOCOL_VERSION);
    }
}
