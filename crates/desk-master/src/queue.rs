//! Byte queues between the master and its peers.
//!
//! [`OutQueue`] owns the encoded frames waiting to be written to one client. Frames are shared
//! (`Rc`) because the same OUTPUT frame goes to every attached client; a frame is either
//! written whole or still (partly) queued, so discarding a backlog never cuts a frame and the
//! stream stays well-formed; nor does it cut a keyframe whose first chunk has been written, so a
//! client never sees one keyframe run into the next. Discarding drops only stream frames
//! (OUTPUT, KEYFRAME): replies and errors stay queued, in order. A client that handed its
//! terminal to the master (docs/protocol.md §5.16) has its stream frames queued for that
//! terminal instead, as bare payloads ([`Sink::Terminal`]), in the same queue: the one order
//! decides when each sink is written, so a reply never overtakes the output before it on the
//! other sink. [`InputQueue`] owns the bytes waiting to be written to the child's PTY; it
//! refuses a push that would exceed its bound instead of growing or dropping bytes. Neither
//! queue reorders bytes.

use std::collections::VecDeque;
use std::io::{self, IoSlice, Write};
use std::rc::Rc;

use desk_wire::{FLAG_MORE, FrameType, HEADER_LEN};

/// How many frames one `write_vectored` call gathers: enough to empty a typical backlog in one
/// system call, small enough for the stack.
const MAX_IOVECS: usize = 64;

/// Result of writing as much as the peer would take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flush {
    /// Everything queued was written.
    Drained,
    /// The peer would block; the rest waits for the next writability edge.
    Blocked,
}

/// Where a queued frame goes: the client's socket (the whole frame), or the terminal the client
/// handed over (the payload alone).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Sink {
    Socket,
    Terminal,
}

/// Result of [`OutQueue::flush_split`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Split {
    Drained,
    /// This sink would block.
    Blocked(Sink),
    /// The next frame's sink was not offered (it is known to be blocked, or not to be written
    /// yet).
    Held(Sink),
}

#[derive(Debug)]
struct Queued {
    frame: Rc<[u8]>,
    sink: Sink,
}

#[derive(Debug, Default)]
pub struct OutQueue {
    frames: VecDeque<Queued>,
    /// Frames queued for the terminal.
    terminal: usize,
    /// Bytes of the front frame already written.
    head_off: usize,
    /// Unwritten bytes across all frames.
    queued: usize,
    /// The last frame written whole was a keyframe chunk with more to follow.
    mid_keyframe: bool,
    /// Bytes of queued frames that are not stream frames (whole frames, the head included).
    control: usize,
}

/// A KEYFRAME chunk that says more chunks follow.
fn unfinished_keyframe(frame: &[u8]) -> bool {
    frame.len() >= HEADER_LEN && frame[4] == FrameType::Keyframe as u8 && frame[5] & FLAG_MORE != 0
}

/// OUTPUT and KEYFRAME frames: what a keyframe can replace.
fn stream_frame(frame: &[u8]) -> bool {
    frame.len() >= HEADER_LEN && (frame[4] == FrameType::Output as u8 || frame[4] == FrameType::Keyframe as u8)
}

fn control_len(frame: &[u8]) -> usize {
    if stream_frame(frame) { 0 } else { frame.len() }
}

impl OutQueue {
    pub fn push(&mut self, frame: Rc<[u8]>) {
        self.push_to(frame, Sink::Socket);
    }

    /// Queue `frame` for `sink`; only stream frames go to a terminal.
    pub fn push_to(&mut self, frame: Rc<[u8]>, sink: Sink) {
        let sink = if stream_frame(&frame) { sink } else { Sink::Socket };
        self.queued += frame.len();
        self.control += control_len(&frame);
        self.terminal += usize::from(sink == Sink::Terminal);
        self.frames.push_back(Queued { frame, sink });
    }

    /// Frames queued for the terminal.
    pub fn terminal_frames(&self) -> usize {
        self.terminal
    }

    /// Drop every frame queued for the terminal, a partly written one too (the terminal is
    /// being given up: a keyframe will redraw it).
    pub fn drop_terminal_frames(&mut self) {
        if self.frames.front().is_some_and(|q| q.sink == Sink::Terminal) {
            self.head_off = 0;
        }
        self.frames.retain(|q| q.sink == Sink::Socket);
        self.terminal = 0;
        self.queued = self.frames.iter().map(|q| q.frame.len()).sum::<usize>() - self.head_off;
    }

    pub fn queued_bytes(&self) -> usize {
        self.queued
    }

    /// Bytes of queued replies, errors and other frames a backlog discard keeps.
    pub fn control_bytes(&self) -> usize {
        self.control
    }

    pub fn is_empty(&self) -> bool {
        self.queued == 0
    }

    /// Give the frame list's capacity back when nothing is queued (an idle client then costs
    /// no queue memory); a queue with frames in it is left alone.
    pub fn release_if_empty(&mut self) {
        if self.frames.is_empty() {
            self.frames = VecDeque::new();
        }
    }

    /// Drop every stream frame (OUTPUT, KEYFRAME) not yet started; a partly written front frame
    /// is kept so the peer receives it whole, and so is the rest of a keyframe the peer has
    /// started to receive. Other frames stay, in order. Returns the number of bytes discarded.
    pub fn discard_backlog(&mut self) -> usize {
        let before = self.queued;
        let mut keep = 0;
        let mut started = self.head_off > 0 || self.mid_keyframe;
        while started && keep < self.frames.len() {
            started = unfinished_keyframe(&self.frames[keep].frame);
            keep += 1;
        }
        if keep == 0 {
            self.head_off = 0;
        }
        let rest = self.frames.split_off(keep);
        self.frames.extend(rest.into_iter().filter(|q| !stream_frame(&q.frame)));
        self.terminal = self.frames.iter().filter(|q| q.sink == Sink::Terminal).count();
        self.queued = self.frames.iter().map(|q| q.frame.len()).sum::<usize>() - self.head_off;
        before - self.queued
    }

    /// What is queued, for a master handing its clients over to another process image: the
    /// frames, how much of the first one was written, and whether the last frame written was
    /// a keyframe chunk with more to follow. Frames for a terminal are not handed over (see
    /// [`OutQueue::drop_terminal_frames`]).
    pub fn saved(&self) -> (Vec<&[u8]>, usize, bool) {
        (self.frames.iter().map(|q| &q.frame[..]).collect(), self.head_off, self.mid_keyframe)
    }

    /// The queue [`OutQueue::saved`] described.
    pub fn restored(frames: Vec<Vec<u8>>, head_off: usize, mid_keyframe: bool) -> OutQueue {
        let mut queue = OutQueue { mid_keyframe, ..OutQueue::default() };
        for frame in frames {
            queue.push(Rc::from(frame));
        }
        let head_off = if queue.frames.front().is_some_and(|q| head_off < q.frame.len()) { head_off } else { 0 };
        queue.head_off = head_off;
        queue.queued -= head_off;
        queue
    }

    /// Write until drained or the writer would block (a queue with no terminal frames).
    pub fn flush_to(&mut self, writer: &mut impl Write) -> io::Result<Flush> {
        match self.flush_split(Some(writer), None::<&mut io::Sink>) {
            Ok(Split::Drained) => Ok(Flush::Drained),
            Ok(_) => Ok(Flush::Blocked),
            Err((_, e)) => Err(e),
        }
    }

    /// Write in queue order until drained, a sink would block, or the next frame's sink is not
    /// offered (`None`). Consecutive frames for one sink go in one vectored write; a terminal
    /// gets the payloads alone. An error names the sink it came from.
    pub fn flush_split<S: Write, T: Write>(
        &mut self,
        mut socket: Option<&mut S>,
        mut terminal: Option<&mut T>,
    ) -> Result<Split, (Sink, io::Error)> {
        while let Some(front) = self.frames.front() {
            let sink = front.sink;
            if sink == Sink::Terminal && self.head_off < HEADER_LEN {
                // A terminal takes the payload alone: the header counts as written.
                self.consume(HEADER_LEN - self.head_off);
                continue;
            }
            let mut slices: [IoSlice<'_>; MAX_IOVECS] = [IoSlice::new(&[]); MAX_IOVECS];
            let mut count = 0;
            for (i, queued) in self.frames.iter().take(MAX_IOVECS).enumerate() {
                if queued.sink != sink {
                    break;
                }
                let start = match (i, sink) {
                    (0, _) => self.head_off,
                    (_, Sink::Terminal) => HEADER_LEN,
                    (_, Sink::Socket) => 0,
                };
                slices[i] = IoSlice::new(&queued.frame[start..]);
                count += 1;
            }
            let written = match sink {
                Sink::Socket => match socket.as_deref_mut() {
                    Some(w) => w.write_vectored(&slices[..count]),
                    None => return Ok(Split::Held(sink)),
                },
                Sink::Terminal => match terminal.as_deref_mut() {
                    Some(w) => w.write_vectored(&slices[..count]),
                    None => return Ok(Split::Held(sink)),
                },
            };
            match written {
                Ok(0) => return Err((sink, io::ErrorKind::WriteZero.into())),
                Ok(n) => self.consume_written(n, sink),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Split::Blocked(sink)),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err((sink, e)),
            }
        }
        Ok(Split::Drained)
    }

    /// Account for `n` bytes written to `sink` from the front: for a terminal, the headers of
    /// the frames after the first were never part of the write.
    fn consume_written(&mut self, mut n: usize, sink: Sink) {
        while n > 0 {
            let Some(front) = self.frames.front() else { break };
            if sink == Sink::Terminal && front.sink == Sink::Terminal && self.head_off < HEADER_LEN {
                self.consume(HEADER_LEN - self.head_off);
                continue;
            }
            let take = n.min(front.frame.len() - self.head_off);
            self.consume(take);
            n -= take;
        }
    }

    fn consume(&mut self, mut n: usize) {
        self.queued -= n;
        while n > 0 {
            let Some(front) = self.frames.front() else { break };
            let left = front.frame.len() - self.head_off;
            if n >= left {
                n -= left;
                self.mid_keyframe = unfinished_keyframe(&front.frame);
                self.control -= control_len(&front.frame);
                self.terminal -= usize::from(front.sink == Sink::Terminal);
                self.frames.pop_front();
                self.head_off = 0;
            } else {
                self.head_off += n;
                n = 0;
            }
        }
    }
}

/// The push did not fit; nothing of it was queued.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputFull {
    pub queued: usize,
    pub limit: usize,
}

#[derive(Debug)]
pub struct InputQueue {
    buf: VecDeque<u8>,
    limit: usize,
}

impl InputQueue {
    pub fn new(limit: usize) -> InputQueue {
        InputQueue { buf: VecDeque::new(), limit }
    }

    /// Queue all of `bytes`, or none of them.
    pub fn push(&mut self, bytes: &[u8]) -> Result<(), InputFull> {
        if self.buf.len() + bytes.len() > self.limit {
            return Err(InputFull { queued: self.buf.len(), limit: self.limit });
        }
        self.buf.extend(bytes);
        Ok(())
    }

    /// The bytes waiting, oldest first.
    pub fn bytes(&self) -> Vec<u8> {
        self.buf.iter().copied().collect()
    }

    pub fn len(&self) -> usize {
        self.buf.len()
    }

    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }

    /// Write until drained or the writer would block.
    pub fn flush_to(&mut self, writer: &mut impl Write) -> io::Result<Flush> {
        while !self.buf.is_empty() {
            let (front, _) = self.buf.as_slices();
            match writer.write(front) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => {
                    self.buf.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Flush::Blocked),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(Flush::Drained)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A writer that accepts at most `budget` bytes, then blocks.
    struct Throttled {
        got: Vec<u8>,
        budget: usize,
    }

    impl Write for Throttled {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            if self.budget == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let n = buf.len().min(self.budget);
            self.budget -= n;
            self.got.extend_from_slice(&buf[..n]);
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn frame(bytes: &[u8]) -> Rc<[u8]> {
        Rc::from(bytes)
    }

    fn output(text: &[u8]) -> Rc<[u8]> {
        Rc::from(desk_wire::Frame::Output(text.to_vec()).to_bytes())
    }

    #[test]
    fn partial_writes_resume_where_they_stopped() {
        let mut q = OutQueue::default();
        q.push(frame(b"hello "));
        q.push(frame(b"world"));
        let mut w = Throttled { got: Vec::new(), budget: 3 };
        assert_eq!(q.flush_to(&mut w).unwrap(), Flush::Blocked);
        assert_eq!(q.queued_bytes(), 8);
        w.budget = 100;
        assert_eq!(q.flush_to(&mut w).unwrap(), Flush::Drained);
        assert_eq!(w.got, b"hello world");
        assert!(q.is_empty());
    }

    /// A writer that takes whole vectored writes up to `budget` bytes (as writev does).
    struct Gathering(Throttled);

    impl Write for Gathering {
        fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
            self.0.write(buf)
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            if self.0.budget == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            let mut n = 0;
            for buf in bufs {
                match self.0.write(buf) {
                    Ok(k) => n += k,
                    Err(_) => break,
                }
            }
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    fn gathering(budget: usize) -> Gathering {
        Gathering(Throttled { got: Vec::new(), budget })
    }

    #[test]
    fn a_terminal_gets_the_payloads_and_the_socket_waits_its_turn() {
        let mut q = OutQueue::default();
        q.push_to(output(b"before"), Sink::Socket);
        q.push_to(output(b"abc"), Sink::Terminal);
        q.push_to(keyframe(false, b""), Sink::Terminal);
        q.push_to(output(b"defg"), Sink::Terminal);
        let exit = frame(&desk_wire::Frame::Detach.to_bytes());
        q.push_to(exit.clone(), Sink::Terminal);
        assert_eq!(q.terminal_frames(), 3, "a control frame always goes to the socket");
        let (mut sock, mut term) = (gathering(1000), gathering(5));
        assert_eq!(q.flush_split(Some(&mut sock), Some(&mut term)).unwrap(), Split::Blocked(Sink::Terminal));
        assert_eq!(sock.0.got, &output(b"before")[..]);
        assert_eq!(term.0.got, b"abcde");
        term.0.budget = 100;
        assert_eq!(q.flush_split(Some(&mut sock), Some(&mut term)).unwrap(), Split::Drained);
        assert_eq!(term.0.got, b"abcdefg");
        assert_eq!(sock.0.got, [&output(b"before")[..], &exit[..]].concat());
        assert!(q.is_empty() && q.terminal_frames() == 0);
    }

    #[test]
    fn frames_for_a_terminal_not_offered_hold_back_everything_after_them() {
        let mut q = OutQueue::default();
        q.push_to(output(b"x"), Sink::Socket);
        q.push_to(output(b"y"), Sink::Terminal);
        q.push_to(frame(&desk_wire::Frame::Detach.to_bytes()), Sink::Socket);
        let mut sock = gathering(1000);
        assert_eq!(q.flush_split(Some(&mut sock), None::<&mut Gathering>).unwrap(), Split::Held(Sink::Terminal));
        assert_eq!(sock.0.got, &output(b"x")[..]);
        q.drop_terminal_frames();
        assert_eq!(q.queued_bytes(), HEADER_LEN);
        assert_eq!(q.flush_split(Some(&mut sock), None::<&mut Gathering>).unwrap(), Split::Drained);
    }

    #[test]
    fn discarding_a_backlog_keeps_a_partly_written_frame_whole() {
        let mut q = OutQueue::default();
        q.push(output(b"abcdef"));
        q.push(output(b"ghi"));
        q.push(output(b"jkl"));
        let mut w = Throttled { got: Vec::new(), budget: 2 };
        q.flush_to(&mut w).unwrap();
        assert_eq!(q.discard_backlog(), 2 * (HEADER_LEN + 3));
        w.budget = 100;
        q.flush_to(&mut w).unwrap();
        assert_eq!(w.got, &output(b"abcdef")[..]);
    }

    #[test]
    fn discarding_with_nothing_started_empties_the_queue() {
        let mut q = OutQueue::default();
        q.push(output(b"abc"));
        assert_eq!(q.discard_backlog(), HEADER_LEN + 3);
        assert!(q.is_empty());
    }

    fn keyframe(more: bool, data: &[u8]) -> Rc<[u8]> {
        Rc::from(desk_wire::Frame::Keyframe { more, data: data.to_vec() }.to_bytes())
    }

    #[test]
    fn discarding_never_cuts_a_keyframe_whose_first_bytes_are_out() {
        let mut q = OutQueue::default();
        let chunks = [keyframe(true, b"\x1bcab"), keyframe(true, b"cd"), keyframe(false, b"ef")];
        for chunk in &chunks {
            q.push(chunk.clone());
        }
        q.push(output(b"output"));
        let mut w = Throttled { got: Vec::new(), budget: 3 };
        q.flush_to(&mut w).unwrap();
        assert_eq!(q.discard_backlog(), HEADER_LEN + 6);
        w.budget = 1000;
        q.flush_to(&mut w).unwrap();
        assert_eq!(w.got, chunks.concat());
    }

    #[test]
    fn discarding_keeps_the_rest_of_a_keyframe_after_a_whole_first_chunk() {
        let mut q = OutQueue::default();
        let chunks = [keyframe(true, b"\x1bcab"), keyframe(false, b"cd")];
        q.push(chunks[0].clone());
        q.push(chunks[1].clone());
        q.push(output(b"output"));
        let mut w = Throttled { got: Vec::new(), budget: chunks[0].len() };
        q.flush_to(&mut w).unwrap();
        assert_eq!(q.discard_backlog(), HEADER_LEN + 6);
        w.budget = 1000;
        q.flush_to(&mut w).unwrap();
        assert_eq!(w.got, chunks.concat());
        // The keyframe is complete: the next discard drops everything not started.
        q.push(output(b"more"));
        assert_eq!(q.discard_backlog(), HEADER_LEN + 4);
        assert!(q.is_empty());
    }

    #[test]
    fn discarding_keeps_replies_and_errors_in_order() {
        use desk_wire::{ErrorCode, Frame};
        let mut q = OutQueue::default();
        let pong: Rc<[u8]> = Rc::from(Frame::Pong(7).to_bytes());
        let error: Rc<[u8]> = Rc::from(Frame::error(ErrorCode::InputFull, "full").to_bytes());
        for f in [output(b"one"), pong.clone(), output(b"two"), error.clone(), keyframe(false, b"k")] {
            q.push(f);
        }
        assert_eq!(q.control_bytes(), pong.len() + error.len());
        q.discard_backlog();
        assert_eq!(q.queued_bytes(), pong.len() + error.len());
        let mut w = Throttled { got: Vec::new(), budget: 1000 };
        q.flush_to(&mut w).unwrap();
        assert_eq!(w.got, [&pong[..], &error[..]].concat());
        assert_eq!(q.control_bytes(), 0);
    }

    #[test]
    fn input_queue_refuses_a_push_that_does_not_fit_whole() {
        let mut q = InputQueue::new(5);
        q.push(b"abc").unwrap();
        assert_eq!(q.push(b"def"), Err(InputFull { queued: 3, limit: 5 }));
        assert_eq!(q.len(), 3);
        q.push(b"de").unwrap();
        let mut w = Throttled { got: Vec::new(), budget: 100 };
        assert_eq!(q.flush_to(&mut w).unwrap(), Flush::Drained);
        assert_eq!(w.got, b"abcde");
    }
}
