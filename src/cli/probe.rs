//! Asking many masters at once, from one thread: the fan-out behind `desk ls`.
//!
//! Owns one non-blocking connection per session socket: HELLO is written to every master
//! first, then every WELCOME is read as it arrives through one `mio` poll, until all have
//! answered or the deadline has passed. A thread per master (what `desk ls` did before) cost
//! more than the masters' answers at a few hundred sessions; one thread keeps the other core
//! free for the masters themselves. Invariants: a session is [`Answer::Welcome`] only from its
//! own master's WELCOME; a master that is stopped, drips its answer, refuses, or whose
//! connection queue is full is [`Answer::Unresponsive`] with the reason, by the deadline; no
//! connection outlives the call. Depends on the wire codec only, not on the session files.

use anyhow::{Context, Result};
use mio::net::UnixStream;
use mio::{Events, Interest, Poll, Token};
use std::io::{ErrorKind, Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use desk_wire::{Frame, FrameDecoder, OLDEST_PROTOCOL_VERSION, PROTOCOL_VERSION, Role, SessionInfo};

/// What one master said.
#[derive(Debug)]
pub(super) enum Answer {
    /// It answered HELLO with a WELCOME in our protocol version.
    Welcome(Box<SessionInfo>),
    /// It did not complete a WELCOME: why (timed out, refused, another version, ...).
    Unresponsive(String),
    /// No socket file.
    Absent,
    /// A socket file nobody listens on: its master died.
    Stale,
}

/// 16 KiB per read: a WELCOME is a few hundred bytes (a title of at most 1 KiB, the command
/// line, the state); one read takes all of it.
const READ_CHUNK: usize = 16 * 1024;

/// One master being asked.
struct Asking {
    stream: UnixStream,
    /// HELLO bytes not yet written.
    hello: Vec<u8>,
    /// The version of that HELLO: what the master speaks, from its session record.
    version: u16,
    decoder: FrameDecoder,
}

/// Ask the master behind each socket for its WELCOME (as a query client), all at once, until
/// `deadline`. Answers are in the order of `sockets`. Fails only when the poll itself cannot be
/// set up, or a socket cannot be connected to for a reason other than the ones [`Answer`]
/// names (permissions, say) — as a probe of that one socket would.
pub(super) fn ask_all(sockets: &[PathBuf], deadline: Instant, budget: Duration) -> Result<Vec<Answer>> {
    let mut poll = Poll::new().context("cannot create a poll to ask the masters")?;
    let hello = |version| {
        Frame::Hello { version, role: Role::Query, cols: 0, rows: 0, status_line: false, view: false }.to_bytes()
    };
    let mut answers: Vec<Option<Answer>> = Vec::with_capacity(sockets.len());
    let mut asking: Vec<Option<Asking>> = Vec::with_capacity(sockets.len());
    for (i, path) in sockets.iter().enumerate() {
        let mut stream = match UnixStream::connect(path) {
            Ok(stream) => stream,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                answers.push(Some(Answer::Absent));
                asking.push(None);
                continue;
            }
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => {
                answers.push(Some(Answer::Stale));
                asking.push(None);
                continue;
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                answers.push(Some(Answer::Unresponsive(
                    "its master is not accepting connections (its connection queue is full)".into(),
                )));
                asking.push(None);
                continue;
            }
            Err(e) => return Err(e).with_context(|| format!("cannot connect to {}", path.display())),
        };
        poll.registry()
            .register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE)
            .context("cannot register a connection to a master")?;
        let version = desk_common::session::hello_version(path);
        let mut conn = Asking { stream, hello: hello(version), version, decoder: FrameDecoder::new() };
        // The socket's buffer is empty: this writes all of HELLO at once, nearly always.
        let answer = write_hello(&mut conn).err();
        answers.push(answer);
        asking.push(if answers[i].is_none() { Some(conn) } else { None });
    }

    let mut pending = answers.iter().filter(|a| a.is_none()).count();
    let mut events = Events::with_capacity(1024);
    let mut buf = vec![0u8; READ_CHUNK];
    while pending > 0 {
        let Some(left) = deadline.checked_duration_since(Instant::now()) else { break };
        match poll.poll(&mut events, Some(left)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(e) => return Err(e).context("cannot wait for the masters"),
        }
        for event in events.iter() {
            let i = event.token().0;
            let Some(conn) = asking.get_mut(i).and_then(Option::as_mut) else { continue };
            let mut answer = None;
            if event.is_writable() && !conn.hello.is_empty() {
                answer = write_hello(conn).err();
            }
            if answer.is_none() && (event.is_readable() || event.is_read_closed() || event.is_error()) {
                answer = read_welcome(conn, &mut buf);
            }
            if let Some(answer) = answer {
                answers[i] = Some(answer);
                asking[i] = None;
                pending -= 1;
            }
        }
    }
    let late = format!("its master did not answer within {} ms", budget.as_millis());
    Ok(answers.into_iter().map(|a| a.unwrap_or_else(|| Answer::Unresponsive(late.clone()))).collect())
}

/// Write what the socket takes of HELLO, then say that nothing follows; `Err` holds the
/// answer when the master is gone.
fn write_hello(conn: &mut Asking) -> Result<(), Answer> {
    while !conn.hello.is_empty() {
        match conn.stream.write(&conn.hello) {
            Ok(0) => return Err(Answer::Unresponsive("the session closed the connection".into())),
            Ok(n) => {
                conn.hello.drain(..n);
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => return Ok(()),
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(Answer::Unresponsive(format!("cannot write to the session: {e}"))),
        }
    }
    // The master reads HELLO and the end of the stream in one wake-up: it answers WELCOME and
    // forgets the client at once, instead of waking a second time when we close. Half the
    // wake-ups of every master per listing; the WELCOME still reaches us (our read side stays
    // open).
    let _ = conn.stream.shutdown(std::net::Shutdown::Write);
    Ok(())
}

/// Read what has arrived; the answer once a whole first frame (or the end) is there.
fn read_welcome(conn: &mut Asking, buf: &mut [u8]) -> Option<Answer> {
    loop {
        match conn.decoder.next_frame() {
            Ok(Some(frame)) => return Some(welcome(frame, conn.version)),
            Ok(None) => {}
            Err(e) => return Some(Answer::Unresponsive(format!("the session sent a malformed frame: {e}"))),
        }
        match conn.stream.read(buf) {
            Ok(0) => return Some(Answer::Unresponsive("the session closed the connection".into())),
            Ok(n) => conn.decoder.push(&buf[..n]),
            Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Some(Answer::Unresponsive(format!("cannot read from the session: {e}"))),
        }
    }
}

/// A master's first frame, as an answer (the same judgement as the blocking client's).
fn welcome(frame: Frame, hello: u16) -> Answer {
    match frame {
        Frame::Welcome { version, info } if desk_wire::welcome_accepted(hello, version) => Answer::Welcome(info),
        Frame::Welcome { version, .. } => Answer::Unresponsive(format!(
            "the session answered in protocol version {version} to a HELLO in {hello}; this desk speaks {OLDEST_PROTOCOL_VERSION} to {PROTOCOL_VERSION}"
        )),
        Frame::Error { code, message } => {
            Answer::Unresponsive(format!("the session refused the connection ({code:?}): {message}"))
        }
        other => Answer::Unresponsive(format!("the session answered {:?} instead of WELCOME", other.kind())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    fn info(name: &str) -> SessionInfo {
        SessionInfo {
            name: name.into(),
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

    /// Serve `listener` until `stop`: every connection gets `answer`, after its HELLO when
    /// `read_hello`. Non-blocking accepts, so the thread ends when the test does.
    fn serve_each(
        listener: UnixListener,
        answer: Vec<u8>,
        read_hello: bool,
        stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    ) -> std::thread::JoinHandle<()> {
        listener.set_nonblocking(true).unwrap();
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                let Ok((mut s, _)) = listener.accept() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                s.set_nonblocking(false).unwrap();
                if read_hello {
                    let _ = s.read(&mut [0u8; 64]);
                }
                // A client that gave up on a late answer has closed its end: nothing to do.
                let _ = s.write_all(&answer);
            }
        })
    }

    #[test]
    fn every_kind_of_socket_gets_its_own_answer_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = |n: &str| dir.path().join(n);
        // Answers at once; never answers; refuses; a socket file with no listener; no file.
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let welcome = Frame::Welcome { version: PROTOCOL_VERSION, info: Box::new(info("good")) }.to_bytes();
        let good = serve_each(UnixListener::bind(path("good")).unwrap(), welcome, true, stop.clone());
        let _silent = UnixListener::bind(path("silent")).unwrap();
        let refusal = Frame::error(desk_wire::ErrorCode::SessionFull, "full").to_bytes();
        let refusing = serve_each(UnixListener::bind(path("refusing")).unwrap(), refusal, false, stop.clone());
        drop(UnixListener::bind(path("stale")).unwrap());
        let sockets: Vec<PathBuf> = ["good", "silent", "refusing", "stale", "absent"].map(path).to_vec();
        // The answering masters are threads of this loaded test process: one not scheduled
        // within the budget is late, which is the right answer for it but not the case under
        // test. Such a round is asked again with a longer budget (the silent socket must still
        // wait for the deadline, so each round costs its budget).
        let mut budget = Duration::from_millis(300);
        let answers = loop {
            let started = Instant::now();
            let answers = ask_all(&sockets, started + budget, budget).unwrap();
            // By the deadline, with slack for a loaded machine: never waiting on the silent one.
            assert!(started.elapsed() < budget + Duration::from_secs(5), "{:?}", started.elapsed());
            let late = |a: &Answer| matches!(a, Answer::Unresponsive(why) if why.contains("did not answer"));
            if !(late(&answers[0]) || late(&answers[2])) || budget >= Duration::from_secs(10) {
                break answers;
            }
            budget *= 4;
        };
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        good.join().unwrap();
        refusing.join().unwrap();
        let waited = format!("{} ms", budget.as_millis());
        assert!(matches!(&answers[0], Answer::Welcome(i) if i.name == "good"), "{answers:?}");
        assert!(matches!(&answers[1], Answer::Unresponsive(why) if why.contains(&waited)), "{answers:?}");
        assert!(matches!(&answers[2], Answer::Unresponsive(why) if why.contains("full")), "{answers:?}");
        assert!(matches!(answers[3], Answer::Stale), "{answers:?}");
        assert!(matches!(answers[4], Answer::Absent), "{answers:?}");
    }
}
