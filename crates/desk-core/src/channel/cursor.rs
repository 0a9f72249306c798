//! The ingest cursor's decision: where ingest of a conversation file resumes.
//!
//! Owns [`Mark`] — how far one conversation file has been turned into delivery items: the byte
//! offset just past the last ingested record, and that record's id — and the checks of a mark
//! against the file as it is now ([`resume`], [`ingested_prefix`]). Invariants: the records
//! after a mark are taken as new only while the file still has the record the mark names
//! ending exactly at its offset; an offset alone is never trusted (after a hand edit deletes a
//! record, the next record of the same length ends at the old offset). A file out of step with
//! its mark — shortened, edited before the mark, replaced — is read from its start, and each
//! record is then new only if its id was never ingested (the ingest ledger, which the caller
//! keeps): so a re-synchronisation delivers what was missed and nothing twice, however the
//! file was edited. Pure: bytes in, a decision out.

use super::format::{Record, end_mark};
use crate::delivery::item::ItemId;

/// How far one conversation file has been ingested.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mark {
    /// Just past the last ingested record.
    pub offset: u64,
    /// That record (absent: a cursor written before marks named their record, or a file that
    /// has no record left).
    pub last: Option<ItemId>,
}

/// Where ingest of a file resumes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Resume {
    /// The file is as the mark left it: the records from this offset on are new.
    After(usize),
    /// Read the file from its start: a record is new only if its id was never ingested. `why`
    /// says how the file fell out of step with its mark (none: it has no mark to be out of step
    /// with — a file never ingested, or one whose records were all removed).
    FromStart { why: Option<String> },
}

/// Where ingest of `bytes` (a whole conversation file) resumes, given its mark.
pub fn resume(bytes: &[u8], mark: Option<&Mark>) -> Resume {
    let Some(mark) = mark.filter(|m| m.offset > 0) else { return Resume::FromStart { why: None } };
    let out_of_step = |why: String| Resume::FromStart { why: Some(why) };
    let Ok(offset) = usize::try_from(mark.offset) else {
        return out_of_step(format!("its mark, byte {}, is past any file", mark.offset));
    };
    if offset > bytes.len() {
        return out_of_step(format!(
            "it is {} bytes, shorter than the {offset} bytes already ingested of it",
            bytes.len()
        ));
    }
    match &mark.last {
        Some(id) if bytes[..offset].ends_with(end_mark(id).as_bytes()) => Resume::After(offset),
        Some(id) => out_of_step(format!("message {id} no longer ends at byte {offset}, where ingest had stopped")),
        None => out_of_step(format!("its mark, byte {offset}, names no record")),
    }
}

/// The records of a file (`records`: all of them, parsed from its start) that its mark says
/// were ingested, when the file is still in step with it: the records up to one that ends
/// exactly at the mark's offset (and is the record it names, when it names one). `None`: out
/// of step, so the mark says nothing about which records were ingested.
pub fn ingested_prefix<'a>(records: &'a [Record], mark: &Mark) -> Option<&'a [Record]> {
    if mark.offset == 0 {
        return Some(&[]);
    }
    let n = records.iter().position(|r| r.end as u64 == mark.offset)? + 1;
    let last = &records[n - 1].message.id;
    mark.last.as_ref().is_none_or(|id| id == last).then(|| &records[..n])
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::channel::format::{parse, serialize, title};
    use crate::channel::{Kind, Message};

    fn msg(n: u64, body: &str) -> Message {
        Message {
            id: ItemId::sequential(n),
            author: "a".into(),
            ts_ms: n,
            thread: None,
            kind: Kind::Post,
            body: body.into(),
        }
    }

    fn file(msgs: &[Message]) -> Vec<u8> {
        let mut out = title("ch", None).into_bytes();
        for m in msgs {
            out.extend(serialize(m));
        }
        out
    }

    fn mark_after(bytes: &[u8], n: usize) -> Mark {
        let r = &parse(bytes, 0).records[n - 1];
        Mark { offset: r.end as u64, last: Some(r.message.id.clone()) }
    }

    #[test]
    fn an_untouched_file_resumes_after_its_mark() {
        let msgs = [msg(1, "M1"), msg(2, "M2"), msg(3, "M3")];
        let before = file(&msgs);
        let mark = mark_after(&before, 3);
        let mut after = before.clone();
        after.extend(serialize(&msg(4, "M4")));
        assert_eq!(resume(&after, Some(&mark)), Resume::After(before.len()));
        assert_eq!(resume(&before, Some(&mark)), Resume::After(before.len()));
        assert_eq!(resume(&after, None), Resume::FromStart { why: None });
    }

    /// The case: M1's record deleted by hand, then M4 (as long as M1) posted. M4 ends
    /// exactly where the cursor stopped, so an offset alone would take M4 as ingested; the
    /// mark's record says otherwise.
    #[test]
    fn a_deleted_record_puts_the_file_out_of_step_even_when_a_record_ends_at_the_old_offset() {
        let msgs = [msg(1, "M1"), msg(2, "M2"), msg(3, "M3")];
        let before = file(&msgs);
        let mark = mark_after(&before, 3);
        let edited = file(&msgs[1..]);
        assert!(matches!(resume(&edited, Some(&mark)), Resume::FromStart { why: Some(w) } if w.contains("shorter")));
        let mut reposted = edited.clone();
        reposted.extend(serialize(&msg(4, "M4")));
        assert_eq!(reposted.len(), before.len(), "M4 ends at the old offset");
        let r = resume(&reposted, Some(&mark));
        assert!(matches!(&r, Resume::FromStart { why: Some(w) } if w.contains("no longer ends at byte")), "{r:?}");
        // A legacy mark (an offset alone) is never trusted either.
        let legacy = Mark { offset: mark.offset, last: None };
        assert!(matches!(resume(&reposted, Some(&legacy)), Resume::FromStart { why: Some(_) }));
        assert!(ingested_prefix(&parse(&reposted, 0).records, &mark).is_none());
    }

    #[test]
    fn a_mark_at_nothing_reads_from_the_start_without_complaint() {
        let bytes = file(&[msg(1, "M1")]);
        assert_eq!(resume(&bytes, Some(&Mark { offset: 0, last: None })), Resume::FromStart { why: None });
        assert!(matches!(
            resume(&bytes, Some(&Mark { offset: u64::MAX, last: None })),
            Resume::FromStart { why: Some(_) }
        ));
    }

    #[test]
    fn the_ingested_prefix_is_known_only_while_the_file_is_in_step() {
        let msgs = [msg(1, "M1"), msg(2, "M2"), msg(3, "M3")];
        let bytes = file(&msgs);
        let records = parse(&bytes, 0).records;
        let mark = mark_after(&bytes, 2);
        let ids = |rs: &[Record]| rs.iter().map(|r| r.message.id.clone()).collect::<Vec<_>>();
        assert_eq!(ingested_prefix(&records, &mark).map(ids), Some(vec![msgs[0].id.clone(), msgs[1].id.clone()]));
        // A legacy mark at a record's end: that record and those before it.
        let legacy = Mark { offset: mark.offset, last: None };
        assert_eq!(ingested_prefix(&records, &legacy).map(ids).map(|v| v.len()), Some(2));
        // In the middle of a record, or naming another record: unknown.
        assert_eq!(ingested_prefix(&records, &Mark { offset: mark.offset - 3, last: None }), None);
        assert_eq!(ingested_prefix(&records, &Mark { offset: mark.offset, last: Some(msgs[2].id.clone()) }), None);
        assert_eq!(ingested_prefix(&records, &Mark { offset: 0, last: None }), Some(&[][..]));
    }
}
