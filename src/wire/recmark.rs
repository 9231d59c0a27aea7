//! Record marking for RPC over TCP (RFC 5531 §11).
//!
//! A record is sent as one or more fragments, each preceded by a 4-byte
//! big-endian header: the high bit marks the last fragment of the record, the
//! low 31 bits give the fragment's length.
//!
//! [`Assembler`] is the receiving side, apart from I/O: feed it whatever
//! bytes arrived ([`Assembler::push`]), then take whole records out
//! ([`Assembler::next_record`]). It refuses a record larger than its
//! configured maximum as soon as a fragment header announces it, before any
//! of that data is buffered, so a header claiming 2 GB costs nothing.

use thiserror::Error;

/// The last-fragment bit.
pub const LAST_FRAGMENT: u32 = 0x8000_0000;
/// The largest fragment length the header can carry.
pub const MAX_FRAGMENT: u32 = 0x7fff_ffff;

/// The header of a fragment of `len` bytes.
pub fn fragment_header(len: u32, last: bool) -> [u8; 4] {
    debug_assert!(len <= MAX_FRAGMENT);
    (len | if last { LAST_FRAGMENT } else { 0 }).to_be_bytes()
}

/// Splits a header into (length, last).
pub fn parse_header(header: [u8; 4]) -> (u32, bool) {
    let word = u32::from_be_bytes(header);
    (word & MAX_FRAGMENT, word & LAST_FRAGMENT != 0)
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum RecordError {
    #[error("record of at least {announced} bytes exceeds the maximum of {max}")]
    TooLarge { announced: u64, max: usize },
}

/// Reassembles records from a byte stream.
#[derive(Debug)]
pub struct Assembler {
    max_record: usize,
    /// Bytes received and not yet consumed.
    pending: Vec<u8>,
    /// Fragments of the record in progress.
    record: Vec<u8>,
    /// Offset in `pending` up to which bytes are consumed.
    consumed: usize,
    /// `record` holds a record already handed out; cleared on the next call.
    handed_out: bool,
}

impl Assembler {
    pub fn new(max_record: usize) -> Assembler {
        Assembler {
            max_record,
            pending: Vec::new(),
            record: Vec::new(),
            consumed: 0,
            handed_out: false,
        }
    }

    /// Adds bytes that arrived.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.consumed > 0 && self.consumed == self.pending.len() {
            self.pending.clear();
            self.consumed = 0;
        }
        self.pending.extend_from_slice(bytes);
    }

    /// The next whole record, `Ok(None)` when more bytes are needed.
    ///
    /// The record is lent, not allocated: the buffers are reused from record
    /// to record, so a steady stream of calls costs no allocation per call.
    pub fn next_record(&mut self) -> Result<Option<&[u8]>, RecordError> {
        if self.handed_out {
            self.record.clear();
            self.handed_out = false;
        }
        loop {
            let available = &self.pending[self.consumed..];
            let Some(header) = available.get(..4) else {
                self.compact();
                return Ok(None);
            };
            let (len, last) = parse_header(header.try_into().expect("4 bytes"));
            let total = self.record.len() as u64 + u64::from(len);
            if total > self.max_record as u64 {
                return Err(RecordError::TooLarge {
                    announced: total,
                    max: self.max_record,
                });
            }
            let len = len as usize;
            let Some(body) = available.get(4..4 + len) else {
                self.compact();
                return Ok(None);
            };
            self.record.extend_from_slice(body);
            self.consumed += 4 + len;
            if last {
                self.handed_out = true;
                return Ok(Some(&self.record));
            }
        }
    }

    /// Bytes held for records not yet whole (what a budget across many
    /// connections counts).
    pub fn buffered(&self) -> usize {
        let record = if self.handed_out {
            0
        } else {
            self.record.len()
        };
        record + self.pending.len() - self.consumed
    }

    /// Gives back memory a large record left behind once nothing is held,
    /// keeping `keep` bytes of each buffer for the next records.
    pub fn shrink_idle(&mut self, keep: usize) {
        if self.buffered() == 0 {
            if self.pending.capacity() > keep {
                self.pending.clear();
                self.consumed = 0;
                self.pending.shrink_to(keep);
            }
            if self.record.capacity() > keep {
                self.record.clear();
                self.handed_out = false;
                self.record.shrink_to(keep);
            }
        }
    }

    /// Whether a record is partly received (for telling a clean close from a cut one).
    pub fn in_progress(&self) -> bool {
        (!self.handed_out && !self.record.is_empty()) || self.consumed < self.pending.len()
    }

    fn compact(&mut self) {
        if self.consumed > 0 {
            self.pending.drain(..self.consumed);
            self.consumed = 0;
        }
    }
}

/// Frames `record` as a single last fragment.
pub fn single_fragment(record: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(4 + record.len());
    out.extend_from_slice(&fragment_header(record.len() as u32, true));
    out.extend_from_slice(record);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffered_counts_what_awaits_a_whole_record_and_idle_memory_is_given_back() {
        let mut a = Assembler::new(4 << 20);
        a.push(&fragment_header(1 << 20, true));
        a.push(&vec![7u8; 600 << 10]);
        assert!(a.next_record().unwrap().is_none());
        assert_eq!(a.buffered(), 4 + (600 << 10));
        a.shrink_idle(1024);
        assert_eq!(
            a.buffered(),
            4 + (600 << 10),
            "nothing is dropped while a record is held"
        );
        a.push(&vec![7u8; (1 << 20) - (600 << 10)]);
        assert_eq!(a.next_record().unwrap().map(<[u8]>::len), Some(1 << 20));
        assert_eq!(a.buffered(), 0);
        a.shrink_idle(1024);
        assert!(a.pending.capacity() <= 1024 && a.record.capacity() <= 1024);
        // And the next record still assembles.
        a.push(&single_fragment(b"abc"));
        assert_eq!(a.next_record().unwrap(), Some(&b"abc"[..]));
    }

    #[test]
    fn headers() {
        assert_eq!(fragment_header(40, true), [0x80, 0, 0, 40]);
        assert_eq!(fragment_header(3996, false), [0, 0, 0x0f, 0x9c]);
        assert_eq!(parse_header([0x80, 0, 0x0f, 0x9c]), (3996, true));
    }

    #[test]
    fn reassembles_fragments_split_anywhere() {
        // A record of "hello world" sent as "hello" + " world".
        let mut stream = Vec::new();
        stream.extend_from_slice(&fragment_header(5, false));
        stream.extend_from_slice(b"hello");
        stream.extend_from_slice(&fragment_header(6, true));
        stream.extend_from_slice(b" world");
        stream.extend_from_slice(&single_fragment(b"next"));
        for split in 0..stream.len() {
            let mut a = Assembler::new(1024);
            a.push(&stream[..split]);
            let mut got = Vec::new();
            while let Some(r) = a.next_record().unwrap() {
                got.push(r.to_vec());
            }
            a.push(&stream[split..]);
            while let Some(r) = a.next_record().unwrap() {
                got.push(r.to_vec());
            }
            assert_eq!(
                got,
                vec![b"hello world".to_vec(), b"next".to_vec()],
                "split {split}"
            );
            assert!(!a.in_progress());
        }
    }

    #[test]
    fn refuses_a_huge_announcement_at_once() {
        let mut a = Assembler::new(1 << 20);
        a.push(&[0xff, 0xff, 0xff, 0xff]);
        assert!(matches!(a.next_record(), Err(RecordError::TooLarge { .. })));
        // Many fragments adding up past the maximum are refused too.
        let mut a = Assembler::new(10);
        a.push(&fragment_header(6, false));
        a.push(b"abcdef");
        a.push(&fragment_header(6, true));
        assert!(matches!(
            a.next_record(),
            Err(RecordError::TooLarge {
                announced: 12,
                max: 10
            })
        ));
    }

    #[test]
    fn truncated_fragment_waits_and_reports_in_progress() {
        let mut a = Assembler::new(100);
        a.push(&fragment_header(10, true));
        a.push(b"abc");
        assert_eq!(a.next_record(), Ok(None));
        assert!(a.in_progress());
    }

    proptest::proptest! {
        #[test]
        fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..256)) {
            let mut a = Assembler::new(64);
            a.push(&bytes);
            while let Ok(Some(_)) = a.next_record() {}
        }
    }
}
