//! The header of netlab's UDP test datagrams (`netlab stream --udp`):
//! what the receiver needs to count loss, duplicates and reordering and to
//! estimate jitter (RFC 3550, section 6.4.1 and appendix A.8) and one-way
//! latency. netlab's own format, in the manner of iperf3's UDP header:
//!
//! ```text
//!  0               4       5       8              16              24
//! +---------------+-------+-------+---------------+---------------+----
//! | magic "NLUD"  | kind  | zero  | sequence (64) | sent, ns (64) | payload
//! +---------------+-------+-------+---------------+---------------+----
//! ```
//!
//! All fields big-endian. `kind` 0 is data (the payload follows, the
//! stream's pattern); 1 is the end marker, whose `sequence` is the number
//! of data datagrams sent (it is sent three times: a lost marker costs the
//! receiver only a wait). `sent` is the sender's CLOCK_MONOTONIC in
//! nanoseconds: comparable with the receiver's only on the same host.
//!
//! Between hosts (through agents) a test starts with consent, so that no
//! agent can be made to send to an address that did not ask: kind 2,
//! *hello*, goes from the sender to the receiver, and kind 3, *consent*,
//! answers it; each carries the run's token as its payload, and its
//! `sequence` and `sent` are zero. The sender sends no data before a
//! consent with its token has come back from the address it sends to.

use thiserror::Error;

pub const MAGIC: [u8; 4] = *b"NLUD";
pub const HEADER_LEN: usize = 24;

mod field {
    use std::ops::Range;
    pub const MAGIC: Range<usize> = 0..4;
    pub const KIND: usize = 4;
    pub const ZERO: Range<usize> = 5..8;
    pub const SEQUENCE: Range<usize> = 8..16;
    pub const SENT: Range<usize> = 16..24;
}

/// What a datagram is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    Data,
    /// The end: `sequence` holds the data datagrams sent.
    End,
    /// A sender asks to send; the run's token follows.
    Hello,
    /// The receiver agrees; the token it was asked with follows.
    Consent,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Header {
    pub kind: Kind,
    pub sequence: u64,
    pub sent_ns: u64,
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum HeaderError {
    #[error("datagram of {0} bytes is shorter than the {HEADER_LEN}-byte header")]
    Short(usize),
    #[error("not a netlab test datagram (magic {0:02x?})")]
    Magic([u8; 4]),
    #[error("unknown datagram kind {0}")]
    Kind(u8),
    #[error("reserved bytes not zero")]
    Reserved,
}

impl Header {
    /// Parses the header at the start of `datagram`.
    pub fn parse(datagram: &[u8]) -> Result<Header, HeaderError> {
        if datagram.len() < HEADER_LEN {
            return Err(HeaderError::Short(datagram.len()));
        }
        let magic: [u8; 4] = datagram[field::MAGIC].try_into().expect("4 bytes");
        if magic != MAGIC {
            return Err(HeaderError::Magic(magic));
        }
        let kind = match datagram[field::KIND] {
            0 => Kind::Data,
            1 => Kind::End,
            2 => Kind::Hello,
            3 => Kind::Consent,
            other => return Err(HeaderError::Kind(other)),
        };
        if datagram[field::ZERO].iter().any(|&b| b != 0) {
            return Err(HeaderError::Reserved);
        }
        let u64_at = |range: std::ops::Range<usize>| {
            u64::from_be_bytes(datagram[range].try_into().expect("8 bytes"))
        };
        Ok(Header {
            kind,
            sequence: u64_at(field::SEQUENCE),
            sent_ns: u64_at(field::SENT),
        })
    }

    /// Writes the header into the first [`HEADER_LEN`] bytes of `buf`.
    ///
    /// # Panics
    /// If `buf` is shorter than the header.
    pub fn emit(&self, buf: &mut [u8]) {
        buf[field::MAGIC].copy_from_slice(&MAGIC);
        buf[field::KIND] = match self.kind {
            Kind::Data => 0,
            Kind::End => 1,
            Kind::Hello => 2,
            Kind::Consent => 3,
        };
        buf[field::ZERO].fill(0);
        buf[field::SEQUENCE].copy_from_slice(&self.sequence.to_be_bytes());
        buf[field::SENT].copy_from_slice(&self.sent_ns.to_be_bytes());
    }
}

/// A hello or consent datagram carrying `token`.
pub fn handshake(kind: Kind, token: &[u8]) -> Vec<u8> {
    let mut datagram = vec![0u8; HEADER_LEN + token.len()];
    Header {
        kind,
        sequence: 0,
        sent_ns: 0,
    }
    .emit(&mut datagram);
    datagram[HEADER_LEN..].copy_from_slice(token);
    datagram
}

/// The token of a hello or consent datagram of `kind` (`None`: another
/// kind, a nonzero sequence or time, or not a datagram of ours).
pub fn handshake_token(datagram: &[u8], kind: Kind) -> Option<&[u8]> {
    match Header::parse(datagram) {
        Ok(header) if header.kind == kind && header.sequence == 0 && header.sent_ns == 0 => {
            Some(&datagram[HEADER_LEN..])
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_header_round_trips_and_reads_as_drawn() {
        let header = Header {
            kind: Kind::Data,
            sequence: 0x0102_0304_0506_0708,
            sent_ns: 42,
        };
        let mut buf = [0xffu8; 30];
        header.emit(&mut buf);
        assert_eq!(&buf[..8], b"NLUD\0\0\0\0");
        assert_eq!(&buf[8..16], &[1, 2, 3, 4, 5, 6, 7, 8]);
        assert_eq!(buf[23], 42);
        assert_eq!(buf[24], 0xff, "the payload is not touched");
        assert_eq!(Header::parse(&buf), Ok(header));
    }

    #[test]
    fn foreign_and_short_datagrams_are_named() {
        assert_eq!(Header::parse(&[0; 10]), Err(HeaderError::Short(10)));
        assert_eq!(
            Header::parse(&[b'X'; 24]),
            Err(HeaderError::Magic([b'X'; 4]))
        );
        let mut end = [0u8; 24];
        Header {
            kind: Kind::End,
            sequence: 9,
            sent_ns: 0,
        }
        .emit(&mut end);
        assert_eq!(Header::parse(&end).unwrap().kind, Kind::End);
        let hello = handshake(Kind::Hello, &[9; 16]);
        assert_eq!(hello.len(), HEADER_LEN + 16);
        assert_eq!(handshake_token(&hello, Kind::Hello), Some(&[9u8; 16][..]));
        assert_eq!(handshake_token(&hello, Kind::Consent), None);
        assert_eq!(handshake_token(&end, Kind::Hello), None);
        end[4] = 7;
        assert_eq!(Header::parse(&end), Err(HeaderError::Kind(7)));
        end[4] = 0;
        end[6] = 1;
        assert_eq!(Header::parse(&end), Err(HeaderError::Reserved));
    }
}
