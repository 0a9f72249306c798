//! The check the fuzzer runs (`fuzz/fuzz_targets/wire_decode.rs`), kept here so that `cargo
//! test` replays the committed corpus through exactly the same assertions without the fuzzer.
//!
//! Input layout: byte 0 modulo 16 is how many of the following bytes are read sizes (fewer if
//! the input is shorter); the rest is the byte stream. The stream is pushed to a
//! [`FrameDecoder`] in reads of those sizes, cycling (a size byte `n` is a read of `n` bytes,
//! 0 a read of everything left), draining after every push; with no sizes it is pushed whole.

use super::{DecodeError, Frame, FrameDecoder, HEADER_LEN, MAX_ERROR_MESSAGE, MAX_PAYLOAD};

/// Decode `data` as described above and panic if the codec misbehaves: the cut stream gives
/// other frames or another error than the whole stream, the decoder holds more than one frame
/// plus one read, or a decoded frame does not encode to bytes that decode back to it.
#[doc(hidden)]
pub fn fuzz_check(data: &[u8]) {
    let Some((&first, rest)) = data.split_first() else { return };
    let (sizes, stream) = rest.split_at(usize::from(first % 16).min(rest.len()));
    let mut reads = Vec::new();
    let mut offset = 0;
    for &size in sizes.iter().cycle() {
        if offset == stream.len() {
            break;
        }
        let end = if size == 0 { stream.len() } else { (offset + usize::from(size)).min(stream.len()) };
        reads.push(&stream[offset..end]);
        offset = end;
    }
    if reads.is_empty() {
        reads.push(stream);
    }
    let cut = decode_all(reads);
    let whole = decode_all([stream]);
    assert_eq!(cut, whole, "cutting the stream changed what it decodes to");
    if let Some(error) = &whole.1 {
        check_error_frame(error);
    }
    for frame in &whole.0 {
        check_reencoding(frame);
    }
}

/// A decoding failure is answered with an ERROR frame (docs/protocol.md §3): that frame must
/// encode and decode back to the same code and the message cut to its limit at a character
/// boundary, and its code must say what failed.
pub(crate) fn check_error_frame(error: &DecodeError) {
    let frame = Frame::error(error.code(), error.to_string());
    let Frame::Error { code, message } = &frame else { unreachable!("Frame::error makes an ERROR") };
    let expected = match error {
        DecodeError::TooLarge { .. } => super::ErrorCode::TooLarge,
        DecodeError::UnknownType(_) => super::ErrorCode::UnknownType,
        DecodeError::Malformed { kind: super::FrameType::Hello, .. } => super::ErrorCode::BadHello,
        DecodeError::Reserved { .. } | DecodeError::Malformed { .. } => super::ErrorCode::Malformed,
    };
    assert_eq!(*code, expected, "{error}");
    let full = error.to_string();
    assert!(message.len() <= MAX_ERROR_MESSAGE && full.starts_with(message.as_str()), "{message:?} of {full:?}");
    assert!(message.len() == full.len() || message.len() + 4 > MAX_ERROR_MESSAGE, "cut short: {message:?}");
    let mut decoder = FrameDecoder::new();
    decoder.push(&frame.to_bytes());
    assert_eq!(decoder.next_frame(), Ok(Some(frame.clone())), "the ERROR frame for {error} does not decode back");
    assert_eq!(decoder.buffered(), 0);
}

fn decode_all<'a>(reads: impl IntoIterator<Item = &'a [u8]>) -> (Vec<Frame>, Option<DecodeError>) {
    let mut decoder = FrameDecoder::new();
    let mut frames = Vec::new();
    for read in reads {
        decoder.push(read);
        assert!(decoder.held() <= HEADER_LEN + MAX_PAYLOAD + read.len(), "decoder holds {} bytes", decoder.held());
        loop {
            match decoder.next_frame() {
                Ok(Some(frame)) => frames.push(frame),
                Ok(None) => break,
                Err(e) => return (frames, Some(e)),
            }
        }
    }
    (frames, None)
}

fn check_reencoding(frame: &Frame) {
    let (_, payload) = frame.flags_and_payload();
    if payload.len() > MAX_PAYLOAD {
        // Encoding writes JSON in its canonical form, which can be longer than what was
        // received (`1e5` becomes `100000.0`); only EVENT bodies hold numbers that can grow.
        assert!(matches!(frame, Frame::Event(_)), "a {} frame outgrew the limit when re-encoded", frame.kind());
        return;
    }
    let bytes = frame.to_bytes();
    let mut decoder = FrameDecoder::new();
    decoder.push(&bytes);
    match decoder.next_frame() {
        Ok(Some(again)) => assert_eq!(&again, frame, "a re-encoded frame decodes to another frame"),
        other => panic!("a re-encoded {} frame does not decode: {other:?}", frame.kind()),
    }
    assert_eq!(decoder.buffered(), 0, "a re-encoded frame left bytes over");
}

#[cfg(test)]
mod tests {
    use super::fuzz_check;
    use std::path::PathBuf;

    fn corpus() -> Vec<(PathBuf, Vec<u8>)> {
        let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fuzz/corpus/wire_decode");
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .expect("fuzz/corpus/wire_decode exists")
            .map(|e| e.expect("entry").path())
            .collect();
        files.sort();
        files.into_iter().map(|path| (path.clone(), std::fs::read(&path).expect("readable corpus file"))).collect()
    }

    #[test]
    fn the_committed_fuzz_corpus_passes_the_fuzz_check() {
        let corpus = corpus();
        assert!(corpus.len() >= 50, "only {} corpus files", corpus.len());
        for (path, data) in corpus {
            let outcome = std::panic::catch_unwind(|| fuzz_check(&data));
            assert!(outcome.is_ok(), "{} fails the fuzz check", path.display());
        }
    }

    #[test]
    fn cut_and_whole_streams_of_valid_frames_pass() {
        use crate::Frame;
        let mut stream = vec![3, 1, 0, 7];
        for frame in [Frame::Ping(1), Frame::Output(b"hi".to_vec()), Frame::Detach] {
            frame.encode(&mut stream);
        }
        fuzz_check(&stream);
        fuzz_check(&[]);
        fuzz_check(&[0x0f]);
    }
}
