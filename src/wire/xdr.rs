//! XDR, the External Data Representation (RFC 4506): the subset ONC RPC needs.
//!
//! Every item occupies a multiple of four bytes, big-endian (§3). Unsigned
//! and signed 32-bit integers (§4.1, §4.2), booleans and enums as integers
//! (§4.3, §4.4), 64-bit hypers (§4.5), variable-length opaque data and
//! strings as a 4-byte length, the bytes, and zero padding to a multiple of
//! four (§4.10, §4.11), and variable-length arrays as a count then the items
//! (§4.13).
//!
//! [`Reader`] never panics and never reads past its buffer: a length that
//! runs beyond the data, or beyond the caller's bound, is an error, so a
//! hostile length field cannot make netlab allocate or read out of bounds.

use thiserror::Error;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum XdrError {
    #[error("XDR data ends early: need {needed} more bytes at offset {offset}")]
    Truncated { offset: usize, needed: usize },
    #[error("XDR length {length} at offset {offset} exceeds the bound of {bound}")]
    TooLong {
        offset: usize,
        length: u32,
        bound: u32,
    },
    #[error("XDR padding at offset {0} is not zero")]
    Padding(usize),
    #[error("XDR boolean at offset {offset} is {value}, not 0 or 1")]
    Bool { offset: usize, value: u32 },
    /// RFC 4506 §4.11 strings are ASCII; netlab also takes UTF-8, but not
    /// bytes that are neither (decoding them lossily would change the
    /// string's length, so it could not be written back as it came).
    #[error("XDR string at offset {0} is not text (neither ASCII nor UTF-8)")]
    NotText(usize),
}

/// Bytes of zero padding that follow `len` bytes of opaque data.
pub fn padding(len: usize) -> usize {
    (4 - len % 4) % 4
}

/// Encodes XDR items by appending to a byte vector.
#[derive(Debug, Default)]
pub struct Writer {
    pub buf: Vec<u8>,
}

impl Writer {
    pub fn new() -> Self {
        Writer::default()
    }

    pub fn with_capacity(capacity: usize) -> Self {
        Writer {
            buf: Vec::with_capacity(capacity),
        }
    }

    pub fn u32(&mut self, v: u32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn i32(&mut self, v: i32) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn u64(&mut self, v: u64) -> &mut Self {
        self.buf.extend_from_slice(&v.to_be_bytes());
        self
    }

    pub fn bool(&mut self, v: bool) -> &mut Self {
        self.u32(u32::from(v))
    }

    /// Variable-length opaque data (§4.10).
    pub fn opaque(&mut self, data: &[u8]) -> &mut Self {
        self.u32(data.len() as u32);
        self.buf.extend_from_slice(data);
        self.buf.extend_from_slice(&[0u8; 3][..padding(data.len())]);
        self
    }

    /// A string (§4.11): encoded as opaque data.
    pub fn string(&mut self, s: &str) -> &mut Self {
        self.opaque(s.as_bytes())
    }

    pub fn into_bytes(self) -> Vec<u8> {
        self.buf
    }
}

/// Decodes XDR items from a byte slice.
#[derive(Debug, Clone)]
pub struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
}

impl<'a> Reader<'a> {
    pub fn new(buf: &'a [u8]) -> Self {
        Reader { buf, pos: 0 }
    }

    /// Bytes consumed so far.
    pub fn position(&self) -> usize {
        self.pos
    }

    /// Bytes left.
    pub fn remaining(&self) -> &'a [u8] {
        &self.buf[self.pos..]
    }

    fn take(&mut self, n: usize) -> Result<&'a [u8], XdrError> {
        let end = self.pos.checked_add(n).filter(|&e| e <= self.buf.len());
        match end {
            Some(end) => {
                let slice = &self.buf[self.pos..end];
                self.pos = end;
                Ok(slice)
            }
            None => Err(XdrError::Truncated {
                offset: self.pos,
                needed: n - (self.buf.len() - self.pos),
            }),
        }
    }

    pub fn u32(&mut self) -> Result<u32, XdrError> {
        let b = self.take(4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub fn i32(&mut self) -> Result<i32, XdrError> {
        Ok(self.u32()? as i32)
    }

    pub fn u64(&mut self) -> Result<u64, XdrError> {
        let hi = u64::from(self.u32()?);
        let lo = u64::from(self.u32()?);
        Ok(hi << 32 | lo)
    }

    pub fn bool(&mut self) -> Result<bool, XdrError> {
        let offset = self.pos;
        match self.u32()? {
            0 => Ok(false),
            1 => Ok(true),
            value => Err(XdrError::Bool { offset, value }),
        }
    }

    /// Variable-length opaque data of at most `bound` bytes, borrowed.
    pub fn opaque(&mut self, bound: u32) -> Result<&'a [u8], XdrError> {
        let length = self.array_len(bound)?;
        let data = self.take(length as usize)?;
        let pad_at = self.pos;
        let pad = self.take(padding(length as usize))?;
        if pad.iter().any(|&b| b != 0) {
            return Err(XdrError::Padding(pad_at));
        }
        Ok(data)
    }

    /// A string of at most `bound` bytes (not required to be UTF-8 on the
    /// wire; invalid sequences are replaced).
    pub fn string(&mut self, bound: u32) -> Result<String, XdrError> {
        let offset = self.pos;
        let bytes = self.opaque(bound)?;
        String::from_utf8(bytes.to_vec()).map_err(|_| XdrError::NotText(offset))
    }

    /// The count of a variable-length array (or the length of opaque data),
    /// at most `bound`.
    pub fn array_len(&mut self, bound: u32) -> Result<u32, XdrError> {
        let offset = self.pos;
        let length = self.u32()?;
        if length > bound {
            return Err(XdrError::TooLong {
                offset,
                length,
                bound,
            });
        }
        Ok(length)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integers_are_big_endian_words() {
        let mut w = Writer::new();
        w.u32(1).i32(-2).u64(0x0102_0304_0506_0708).bool(true);
        assert_eq!(
            w.buf,
            [
                0, 0, 0, 1, 0xff, 0xff, 0xff, 0xfe, 1, 2, 3, 4, 5, 6, 7, 8, 0, 0, 0, 1
            ]
        );
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.u32(), Ok(1));
        assert_eq!(r.i32(), Ok(-2));
        assert_eq!(r.u64(), Ok(0x0102_0304_0506_0708));
        assert_eq!(r.bool(), Ok(true));
        assert!(r.remaining().is_empty());
    }

    #[test]
    fn opaque_and_strings_are_padded() {
        // RFC 4506 §4.11: "sillyprog" is length 9, 9 bytes, 3 bytes of padding.
        let mut w = Writer::new();
        w.string("sillyprog");
        assert_eq!(w.buf, b"\x00\x00\x00\x09sillyprog\x00\x00\x00");
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.string(255).unwrap(), "sillyprog");
        for len in 0..9 {
            let data = vec![0xAB; len];
            let mut w = Writer::new();
            w.opaque(&data);
            assert_eq!(w.buf.len() % 4, 0);
            assert_eq!(w.buf.len(), 4 + len + padding(len));
            assert_eq!(Reader::new(&w.buf).opaque(100).unwrap(), &data[..]);
        }
    }

    #[test]
    fn hostile_lengths_are_refused() {
        // Announces 2 GB of opaque data in an 8-byte buffer.
        let bytes = [0x80, 0, 0, 0, 1, 2, 3, 4];
        assert!(matches!(
            Reader::new(&bytes).opaque(u32::MAX),
            Err(XdrError::Truncated { .. })
        ));
        assert!(matches!(
            Reader::new(&bytes).opaque(400),
            Err(XdrError::TooLong { .. })
        ));
        assert!(matches!(
            Reader::new(&[0, 0, 0, 1, 9, 9, 0, 0]).opaque(8),
            Err(XdrError::Padding(5))
        ));
        assert!(matches!(
            Reader::new(&[0, 0, 0, 2]).bool(),
            Err(XdrError::Bool { .. })
        ));
        assert!(matches!(
            Reader::new(&[0, 0]).u32(),
            Err(XdrError::Truncated {
                offset: 0,
                needed: 2
            })
        ));
    }

    proptest::proptest! {
        #[test]
        fn reader_never_panics(bytes in proptest::collection::vec(proptest::num::u8::ANY, 0..64)) {
            let mut r = Reader::new(&bytes);
            let _ = r.opaque(1 << 20);
            let _ = r.string(8);
            let _ = r.u64();
            let _ = r.array_len(16);
        }
    }

    #[test]
    fn a_string_that_is_not_text_is_refused_not_rewritten() {
        // Found by the rpc_server fuzz target's round trip: a lossy decode
        // turned a 255-byte name into 339 bytes that could not be sent back.
        let mut w = Writer::new();
        w.opaque(&[0x66, 0xff, 0x6f]);
        let mut r = Reader::new(&w.buf);
        assert_eq!(r.string(255), Err(XdrError::NotText(0)));
        let mut w = Writer::new();
        w.string("hôte");
        assert_eq!(Reader::new(&w.buf).string(255).unwrap(), "hôte");
    }
}
