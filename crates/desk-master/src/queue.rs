//! Byte queues between the master and its peers.
//!
//! [`OutQueue`] owns the encoded frames waiting to be written to one client. Frames are shared
//! (`Rc`) because the same OUTPUT frame goes to every attached client; a frame is either
//! written whole or still (partly) queued, so discarding a backlog never cuts a frame and the
//! stream stays well-formed; nor does it cut a keyframe whose first chunk has been written, so a
//! client never sees one keyframe run into the next. Discarding drops only stream frames
//! (OUTPUT, KEYFRAME): replies and errors stay queued, in order. [`InputQueue`] owns the bytes waiting to be written to the child's
//! PTY; it refuses a push that would exceed its bound instead of growing or dropping bytes.
//! Neither queue reorders bytes.

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

#[derive(Debug, Default)]
pub struct OutQueue {
    frames: VecDeque<Rc<[u8]>>,
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
        self.queued += frame.len();
        self.control += control_len(&frame);
        self.frames.push_back(frame);
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
            started = unfinished_keyframe(&self.frames[keep]);
            keep += 1;
        }
        if keep == 0 {
            self.head_off = 0;
        }
        let rest = self.frames.split_off(keep);
        self.frames.extend(rest.into_iter().filter(|f| !stream_frame(f)));
        self.queued = self.frames.iter().map(|f| f.len()).sum::<usize>() - self.head_off;
        before - self.queued
    }

    /// What is queued, for a master handing its clients over to another process image: the
    /// frames, how much of the first one was written, and whether the last frame written was
    /// a keyframe chunk with more to follow.
    pub fn saved(&self) -> (Vec<&[u8]>, usize, bool) {
        (self.frames.iter().map(|f| &f[..]).collect(), self.head_off, self.mid_keyframe)
    }

    /// The queue [`OutQueue::saved`] described.
    pub fn restored(frames: Vec<Vec<u8>>, head_off: usize, mid_keyframe: bool) -> OutQueue {
        let mut queue = OutQueue { mid_keyframe, ..OutQueue::default() };
        for frame in frames {
            queue.push(Rc::from(frame));
        }
        let head_off = if queue.frames.front().is_some_and(|f| head_off < f.len()) { head_off } else { 0 };
        queue.head_off = head_off;
        queue.queued -= head_off;
        queue
    }

    /// Write until drained or the writer would block.
    pub fn flush_to(&mut self, writer: &mut impl Write) -> io::Result<Flush> {
        while !self.frames.is_empty() {
            let mut slices: [IoSlice<'_>; MAX_IOVECS] = [IoSlice::new(&[]); MAX_IOVECS];
            let mut count = 0;
            for (i, frame) in self.frames.iter().take(MAX_IOVECS).enumerate() {
                let start = if i == 0 { self.head_off } else { 0 };
                slices[i] = IoSlice::new(&frame[start..]);
                count += 1;
            }
            match writer.write_vectored(&slices[..count]) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => self.consume(n),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(Flush::Blocked),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            }
        }
        Ok(Flush::Drained)
    }

    fn consume(&mut self, mut n: usize) {
        self.queued -= n;
        while n > 0 {
            let Some(front) = self.frames.front() else { break };
            let left = front.len() - self.head_off;
            if n >= left {
                n -= left;
                self.mid_keyframe = unfinished_keyframe(front);
                self.control -= control_len(front);
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
