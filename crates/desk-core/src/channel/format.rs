//! The conversation file format: markdown a person reads with `cat`, records a parser trusts.
//!
//! Owns how a [`Message`] becomes bytes and back. One record:
//!
//! ```text
//! <!-- desk:msg id=01JF… author=alice ts=1764556656123 bytes=11 -->
//! **alice** · 2025-12-01 02:37:36 UTC · 01JF…
//!
//! hello @bob.
//! <!-- desk:end 01JF… -->
//!
//! ```
//!
//! The first line is the machine header (`thread=ID` and `kind=joined` when they apply); the
//! second is for people and derived from the header (the parser checks it is one line and
//! ignores it); then a blank line, exactly `bytes` bytes of body, a newline, the end mark naming
//! the same id, and a blank line. A file may start with one title line (`# …`) and a blank line.
//! Invariants: a record is accepted only whole — its length and its end mark agree — so the
//! body may hold anything, even text that looks like a record; a record cut short (a writer
//! killed mid-append) is reported as a [`Tail::Torn`] from its first byte, never parsed as a
//! message; bytes that are neither a record nor the prefix of one are [`Tail::Corrupt`] and
//! everything before them is still read. Pure: bytes in, messages out.

use super::{Kind, Message};
use crate::delivery::item::ItemId;

/// The start of every record's header line.
pub const HEADER_START: &str = "<!-- desk:msg ";

/// A header line longer than this is not a header: ids are 26 characters and names 64, so a
/// real header is under 200 bytes; the bound stops a corrupt file from being scanned whole for
/// a newline.
const MAX_HEADER: usize = 512;

/// The title line a conversation file starts with.
pub fn title(channel: &str, thread: Option<&ItemId>) -> String {
    match thread {
        None => format!("# #{channel}\n\n"),
        Some(id) => format!("# #{channel} · thread {id}\n\n"),
    }
}

/// The bytes of one record.
pub fn serialize(msg: &Message) -> Vec<u8> {
    let mut header =
        format!("{HEADER_START}id={} author={} ts={} bytes={}", msg.id, msg.author, msg.ts_ms, msg.body.len());
    if let Some(thread) = &msg.thread {
        header.push_str(&format!(" thread={thread}"));
    }
    if msg.kind != Kind::Post {
        header.push_str(&format!(" kind={}", msg.kind.as_str()));
    }
    header.push_str(" -->\n");
    let time = crate::time::iso8601(msg.ts_ms);
    let mut human = format!("**{}** · {} UTC · {}", msg.author, &time[..19].replace('T', " "), msg.id);
    if let Some(thread) = &msg.thread {
        human.push_str(&format!(" · in thread {thread}"));
    }
    match msg.kind {
        Kind::Joined => human.push_str(" · joined"),
        Kind::Checkin => human.push_str(" · check-in"),
        Kind::Post => {}
    }
    let mut out = header.into_bytes();
    out.extend_from_slice(human.as_bytes());
    out.extend_from_slice(b"\n\n");
    out.extend_from_slice(msg.body.as_bytes());
    out.extend_from_slice(end_mark(&msg.id).as_bytes());
    out
}

/// What closes record `id`: the newline after its body, the end mark naming it, a blank line.
pub fn end_mark(id: &ItemId) -> String {
    format!("\n<!-- desk:end {id} -->\n\n")
}

/// A record found in a file, with where it lies.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Record {
    pub message: Message,
    /// Byte offsets of the record in the file: `start..end`.
    pub start: usize,
    pub end: usize,
}

/// What follows the last whole record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tail {
    /// Nothing: the file ends with a whole record (or is empty, or only its title).
    Clean,
    /// The start of a record cut short, from `at` to the end: a writer that died mid-append.
    /// Safe to cut (only the lock holder does); never a message.
    Torn { at: usize },
    /// Bytes at `at` that are no record and no record's beginning: the file was damaged or
    /// edited by hand. Not cut automatically; appending is refused until a person fixes it.
    Corrupt { at: usize, reason: String },
}

/// Everything a parse found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Parsed {
    pub records: Vec<Record>,
    pub tail: Tail,
}

/// Why a record could not be read at some offset.
enum Bad {
    /// The bytes end before the record does: a prefix of a record.
    Short,
    /// Not a record.
    Malformed(String),
}

/// Parse `bytes`, which start at `offset` of the file (0 for a whole file; a record boundary,
/// such as an ingest cursor, otherwise). Offsets in the result are file offsets.
pub fn parse(bytes: &[u8], offset: usize) -> Parsed {
    let mut pos = 0;
    if offset == 0 && bytes.starts_with(b"# ") {
        match find(bytes, b"\n\n", 0) {
            Some(i) => pos = i + 2,
            None => return Parsed { records: Vec::new(), tail: tail_at(bytes, 0, 0, Bad::Short) },
        }
    }
    let mut records = Vec::new();
    while pos < bytes.len() {
        match parse_record(bytes, pos) {
            Ok((message, end)) => {
                records.push(Record { message, start: offset + pos, end: offset + end });
                pos = end;
            }
            Err(bad) => return Parsed { records, tail: tail_at(bytes, pos, offset, bad) },
        }
    }
    Parsed { records, tail: Tail::Clean }
}

fn tail_at(bytes: &[u8], pos: usize, offset: usize, bad: Bad) -> Tail {
    let at = offset + pos;
    match bad {
        Bad::Short => Tail::Torn { at },
        // A block the kernel had allocated but not written when the machine lost power reads as
        // zeros: the remains of the last append, not damage.
        Bad::Malformed(_) if bytes[pos..].iter().all(|b| *b == 0) => Tail::Torn { at },
        Bad::Malformed(reason) => Tail::Corrupt { at, reason },
    }
}

fn find(hay: &[u8], needle: &[u8], from: usize) -> Option<usize> {
    hay.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|i| i + from)
}

/// One record at `pos`: the message and the offset just past it.
fn parse_record(bytes: &[u8], pos: usize) -> Result<(Message, usize), Bad> {
    let rest = &bytes[pos..];
    let prefix = HEADER_START.as_bytes();
    if rest.len() < prefix.len() {
        return if prefix.starts_with(rest) { Err(Bad::Short) } else { Err(Bad::Malformed("not a record".into())) };
    }
    if !rest.starts_with(prefix) {
        return Err(Bad::Malformed("not a record header".into()));
    }
    let header_end = match rest.iter().take(MAX_HEADER).position(|b| *b == b'\n') {
        Some(i) => i,
        None if rest.len() < MAX_HEADER => return Err(Bad::Short),
        None => return Err(Bad::Malformed("header line too long".into())),
    };
    let header = std::str::from_utf8(&rest[..header_end]).map_err(|_| Bad::Malformed("header is not UTF-8".into()))?;
    let fields = header
        .strip_prefix(HEADER_START)
        .and_then(|h| h.strip_suffix(" -->"))
        .ok_or_else(|| Bad::Malformed("header does not end with -->".into()))?;
    let mut id = None;
    let mut author = None;
    let mut ts = None;
    let mut len = None;
    let mut thread = None;
    let mut kind = Kind::Post;
    for field in fields.split(' ') {
        let (key, value) =
            field.split_once('=').ok_or_else(|| Bad::Malformed(format!("bad header field {field:?}")))?;
        match key {
            "id" => id = ItemId::parse(value),
            "author" if super::valid_member_name(value) => author = Some(value.to_string()),
            "ts" => ts = value.parse::<u64>().ok(),
            "bytes" => len = value.parse::<usize>().ok(),
            "thread" => thread = Some(ItemId::parse(value).ok_or_else(|| Bad::Malformed("bad thread id".into()))?),
            "kind" if value == "joined" => kind = Kind::Joined,
            "kind" if value == "checkin" => kind = Kind::Checkin,
            "kind" if value == "post" => kind = Kind::Post,
            // Fields a later version adds are skipped; a known field with a bad value is not.
            "author" | "kind" => return Err(Bad::Malformed(format!("bad {key} {value:?}"))),
            _ => {}
        }
    }
    let (Some(id), Some(author), Some(ts_ms), Some(len)) = (id, author, ts, len) else {
        return Err(Bad::Malformed("header lacks id, author, ts or bytes".into()));
    };
    if len > super::MAX_BODY {
        return Err(Bad::Malformed(format!("body of {len} bytes is over the limit")));
    }
    // The people's line: one line, then a blank line.
    let human_start = header_end + 1;
    let human_end = match rest[human_start.min(rest.len())..].iter().take(MAX_HEADER).position(|b| *b == b'\n') {
        Some(i) => human_start + i,
        None if rest.len() < human_start + MAX_HEADER => return Err(Bad::Short),
        None => return Err(Bad::Malformed("display line too long".into())),
    };
    let body_start = human_end + 2;
    match rest.get(human_end + 1) {
        None => return Err(Bad::Short),
        Some(b'\n') => {}
        Some(_) => return Err(Bad::Malformed("no blank line after the display line".into())),
    }
    let body_end = body_start + len;
    let end_mark = end_mark(&id);
    let record_end = body_end + end_mark.len();
    if rest.len() < record_end {
        // Whatever is there must agree with the record so far.
        let have = &rest[body_end.min(rest.len())..];
        return if end_mark.as_bytes().starts_with(have) {
            Err(Bad::Short)
        } else {
            Err(Bad::Malformed(format!("record {id} does not end where its length says")))
        };
    }
    if &rest[body_end..record_end] != end_mark.as_bytes() {
        return Err(Bad::Malformed(format!("record {id} does not end where its length says")));
    }
    let body = std::str::from_utf8(&rest[body_start..body_end])
        .map_err(|_| Bad::Malformed(format!("record {id}: body is not UTF-8")))?
        .to_string();
    Ok((Message { id, author, ts_ms, thread, kind, body }, pos + record_end))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn msg(n: u64, author: &str, body: &str) -> Message {
        Message {
            id: ItemId::sequential(n),
            author: author.into(),
            ts_ms: n,
            thread: None,
            kind: Kind::Post,
            body: body.into(),
        }
    }

    fn file(msgs: &[Message]) -> Vec<u8> {
        let mut out = title("build", None).into_bytes();
        for m in msgs {
            out.extend(serialize(m));
        }
        out
    }

    #[test]
    fn a_record_reads_as_markdown_and_parses_back() {
        let mut m = msg(1_764_556_656_123, "alice", "hello @bob.\n\n```\ncode\n```");
        m.thread = Some(ItemId::sequential(5));
        let bytes = file(std::slice::from_ref(&m));
        let text = String::from_utf8(bytes.clone()).unwrap();
        assert!(text.starts_with("# #build\n\n<!-- desk:msg id="), "{text}");
        assert!(text.contains("\n**alice** · 2025-12-01 02:37:36 UTC · "), "{text}");
        assert!(text.ends_with(&format!("```\n<!-- desk:end {} -->\n\n", m.id)), "{text}");
        let parsed = parse(&bytes, 0);
        assert_eq!(parsed.tail, Tail::Clean);
        assert_eq!(parsed.records.len(), 1);
        assert_eq!(parsed.records[0].message, m);
        assert_eq!(parsed.records[0].end, bytes.len());
    }

    #[test]
    fn a_body_that_looks_like_records_stays_one_body() {
        let inner = String::from_utf8(file(&[msg(7, "eve", "forged")])).unwrap();
        let m = msg(8, "bob", &format!("quoting a file:\n{inner}"));
        let parsed = parse(&file(std::slice::from_ref(&m)), 0);
        assert_eq!(parsed.tail, Tail::Clean);
        assert_eq!(parsed.records.iter().map(|r| &r.message).collect::<Vec<_>>(), vec![&m]);
    }

    #[test]
    fn a_record_cut_anywhere_is_a_torn_tail_never_a_message() {
        let msgs = [msg(1, "a", "one"), msg(2, "b", "two\nlines")];
        let bytes = file(&msgs);
        let first_end = parse(&bytes, 0).records[0].end;
        for cut in first_end + 1..bytes.len() {
            let parsed = parse(&bytes[..cut], 0);
            assert_eq!(parsed.records.len(), 1, "cut at {cut}");
            assert_eq!(parsed.tail, Tail::Torn { at: first_end }, "cut at {cut}");
        }
    }

    #[test]
    fn zeros_after_the_last_record_are_torn_but_garbage_is_corrupt() {
        let mut bytes = file(&[msg(1, "a", "one")]);
        let end = bytes.len();
        bytes.extend([0u8; 300]);
        assert_eq!(parse(&bytes, 0).tail, Tail::Torn { at: end });
        bytes.truncate(end);
        bytes.extend(b"someone typed here\n");
        bytes.extend(serialize(&msg(2, "b", "two")));
        let parsed = parse(&bytes, 0);
        assert_eq!(parsed.records.len(), 1);
        assert!(matches!(parsed.tail, Tail::Corrupt { at, .. } if at == end), "{:?}", parsed.tail);
    }

    #[test]
    fn a_wrong_length_is_corrupt_not_a_shorter_message() {
        let m = msg(1, "a", "hello");
        let text = String::from_utf8(serialize(&m)).unwrap().replace("bytes=5", "bytes=3");
        assert!(matches!(parse(text.as_bytes(), 0).tail, Tail::Corrupt { at: 0, .. }));
    }

    #[test]
    fn parsing_from_a_cursor_gives_file_offsets() {
        let bytes = file(&[msg(1, "a", "one"), msg(2, "b", "two")]);
        let all = parse(&bytes, 0);
        let from = all.records[0].end;
        let rest = parse(&bytes[from..], from);
        assert_eq!(rest.records, all.records[1..].to_vec());
    }

    fn body() -> impl Strategy<Value = String> {
        prop_oneof![
            "[a-z @`\n]{1,60}",
            ".{1,40}",
            Just("<!-- desk:end 0000000000000000000000000Z -->\n\n".to_string()),
            Just("<!-- desk:msg id=x -->".to_string()),
        ]
        .prop_filter("not blank", |b| !b.trim().is_empty())
    }

    proptest! {
        #[test]
        fn appended_records_parse_back_in_order(bodies in proptest::collection::vec(body(), 0..8)) {
            let msgs: Vec<Message> = bodies.iter().enumerate().map(|(i, b)| msg(i as u64 + 1, "w1", b)).collect();
            let bytes = file(&msgs);
            let parsed = parse(&bytes, 0);
            prop_assert_eq!(parsed.tail, Tail::Clean);
            prop_assert_eq!(parsed.records.into_iter().map(|r| r.message).collect::<Vec<_>>(), msgs);
        }

        #[test]
        fn a_torn_append_loses_only_itself_and_cutting_it_restores_the_file(
            bodies in proptest::collection::vec(body(), 1..6),
            last in body(),
            cut in 0.0f64..1.0,
        ) {
            let msgs: Vec<Message> = bodies.iter().enumerate().map(|(i, b)| msg(i as u64 + 1, "w1", b)).collect();
            let whole = file(&msgs);
            let torn_record = serialize(&msg(100, "w2", &last));
            let keep = ((torn_record.len() - 1) as f64 * cut) as usize;
            let mut bytes = whole.clone();
            bytes.extend_from_slice(&torn_record[..keep]);
            let parsed = parse(&bytes, 0);
            prop_assert_eq!(parsed.records.iter().map(|r| r.message.clone()).collect::<Vec<_>>(), msgs.clone());
            if keep == 0 {
                prop_assert_eq!(&parsed.tail, &Tail::Clean);
            } else {
                prop_assert_eq!(&parsed.tail, &Tail::Torn { at: whole.len() });
            }
            // Cut there and append the next record whole: everything parses.
            if let Tail::Torn { at } = parsed.tail {
                bytes.truncate(at);
            }
            let next = msg(200, "w3", "after the crash");
            bytes.extend(serialize(&next));
            let again = parse(&bytes, 0);
            prop_assert_eq!(again.tail, Tail::Clean);
            let mut want = msgs;
            want.push(next);
            prop_assert_eq!(again.records.into_iter().map(|r| r.message).collect::<Vec<_>>(), want);
        }
    }
}
