//! The IPv4 (RFC 791 §3.1) and TCP (RFC 9293 §3.1) header fields a packet
//! timeline needs: ports, flags, sequence and acknowledgement numbers, the
//! window and the payload length of a captured frame.
//!
//! In smoltcp's shape: [`TcpPacket`] is a view over a buffer, each field's
//! byte range named once in a `field` module, beside the one IPv4 view
//! ([`super::ipv4::Ipv4Packet`]); `new_checked` verifies the buffer holds
//! the whole header, after which no accessor can panic, and a segment is
//! parsed only from IPv4 carrying TCP.
//! [`Segment`] is the parsed form: [`Segment::parse`] reads a frame and
//! [`Segment::emit`] writes one (IPv4 without options, TCP without options,
//! the payload left as zeros), so tests and the fuzz target can check round
//! trips. Checksums are neither checked nor written: captures on loopback
//! and veth carry partial checksums (the kernel offloads them).
//!
//! The payload length comes from the IPv4 total length, so a frame captured
//! with a short snap length still says how much data it carried.

use super::ipv4::{Ipv4Error, Ipv4Packet};
use thiserror::Error;

/// Why bytes are not an IPv4 TCP segment.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum SegmentError {
    #[error("truncated: {have} bytes where the header needs {need}")]
    Truncated { have: usize, need: usize },
    #[error("IP version {0}, not 4")]
    Version(u8),
    #[error("header length {0} is below the minimum of 20")]
    HeaderLen(usize),
    #[error("IP protocol {0}, not TCP (6)")]
    NotTcp(u8),
    #[error("IP total length {total} is shorter than its headers ({headers})")]
    TotalLen { total: usize, headers: usize },
}

impl From<Ipv4Error> for SegmentError {
    fn from(e: Ipv4Error) -> SegmentError {
        match e {
            Ipv4Error::Truncated { have, need } => SegmentError::Truncated { have, need },
            Ipv4Error::Version(v) => SegmentError::Version(v),
            Ipv4Error::HeaderLen(len) => SegmentError::HeaderLen(len),
        }
    }
}

/// TCP flag bits (RFC 9293 §3.1).
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

use super::ipv4::PROTO_TCP;

/// Byte ranges of the TCP header fields.
mod tcp_field {
    use std::ops::Range;
    pub const SRC_PORT: Range<usize> = 0..2;
    pub const DST_PORT: Range<usize> = 2..4;
    pub const SEQ_NUM: Range<usize> = 4..8;
    pub const ACK_NUM: Range<usize> = 8..12;
    /// Data offset in the high nibble.
    pub const DATA_OFF: usize = 12;
    pub const FLAGS: usize = 13;
    pub const WIN_SIZE: Range<usize> = 14..16;
}

use super::ipv4::HEADER_LEN as IPV4_HEADER_LEN;
/// Length of a TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;

fn u16_at(data: &[u8], range: std::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([data[range.start], data[range.start + 1]])
}

fn u32_at(data: &[u8], range: std::ops::Range<usize>) -> u32 {
    let b = &data[range];
    u32::from_be_bytes([b[0], b[1], b[2], b[3]])
}

fn truncated(have: usize, need: usize) -> Result<(), SegmentError> {
    if have < need {
        Err(SegmentError::Truncated { have, need })
    } else {
        Ok(())
    }
}

/// A view of a TCP header at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct TcpPacket<T: AsRef<[u8]>> {
    buffer: T,
}

impl<T: AsRef<[u8]>> TcpPacket<T> {
    /// Checks that `buffer` holds the whole TCP header, options included.
    pub fn new_checked(buffer: T) -> Result<Self, SegmentError> {
        truncated(buffer.as_ref().len(), TCP_HEADER_LEN)?;
        let packet = TcpPacket { buffer };
        let header_len = packet.header_len();
        if header_len < TCP_HEADER_LEN {
            return Err(SegmentError::HeaderLen(header_len));
        }
        truncated(packet.buffer.as_ref().len(), header_len)?;
        Ok(packet)
    }

    pub fn src_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), tcp_field::SRC_PORT)
    }

    pub fn dst_port(&self) -> u16 {
        u16_at(self.buffer.as_ref(), tcp_field::DST_PORT)
    }

    pub fn seq_number(&self) -> u32 {
        u32_at(self.buffer.as_ref(), tcp_field::SEQ_NUM)
    }

    pub fn ack_number(&self) -> u32 {
        u32_at(self.buffer.as_ref(), tcp_field::ACK_NUM)
    }

    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[tcp_field::DATA_OFF] >> 4) * 4
    }

    pub fn flags(&self) -> u8 {
        self.buffer.as_ref()[tcp_field::FLAGS]
    }

    pub fn window_len(&self) -> u16 {
        u16_at(self.buffer.as_ref(), tcp_field::WIN_SIZE)
    }
}

/// A captured segment's header fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub src_addr: std::net::Ipv4Addr,
    pub dst_addr: std::net::Ipv4Addr,
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    pub window: u16,
    /// TCP payload bytes (from the IP total length, so a short capture still knows it).
    pub payload: u32,
}

impl Segment {
    /// Parses an IPv4/TCP frame after `link_header` bytes of link-layer header.
    pub fn parse(frame: &[u8], link_header: usize) -> Result<Segment, SegmentError> {
        let ip_bytes = frame.get(link_header..).ok_or(SegmentError::Truncated {
            have: frame.len(),
            need: link_header,
        })?;
        let ip = Ipv4Packet::new_checked(ip_bytes)?;
        if ip.protocol() != PROTO_TCP {
            return Err(SegmentError::NotTcp(ip.protocol()));
        }
        let tcp = TcpPacket::new_checked(ip.payload())?;
        let headers = ip.header_len() + tcp.header_len();
        let total = ip.total_len();
        if total < headers {
            return Err(SegmentError::TotalLen { total, headers });
        }
        Ok(Segment {
            src_addr: ip.src_addr(),
            dst_addr: ip.dst_addr(),
            src_port: tcp.src_port(),
            dst_port: tcp.dst_port(),
            seq: tcp.seq_number(),
            ack: tcp.ack_number(),
            flags: tcp.flags(),
            window: tcp.window_len(),
            payload: (total - headers) as u32,
        })
    }

    /// Bytes [`Segment::emit`] writes: the headers, then the payload.
    pub fn buffer_len(&self) -> usize {
        IPV4_HEADER_LEN + TCP_HEADER_LEN + self.payload as usize
    }

    /// Writes the segment as an IPv4 datagram (no options, TTL 64, checksums
    /// zero) with a zero payload into `buffer`, which must be at least
    /// [`Segment::buffer_len`] bytes. Payloads beyond an IPv4 datagram's
    /// 65535 bytes cannot be written.
    pub fn emit(&self, buffer: &mut [u8]) -> Result<usize, SegmentError> {
        let len = self.buffer_len();
        truncated(buffer.len(), len)?;
        let total = u16::try_from(len).map_err(|_| SegmentError::TotalLen {
            total: len,
            headers: IPV4_HEADER_LEN + TCP_HEADER_LEN,
        })?;
        let out = &mut buffer[..len];
        out.fill(0);
        let (ip, tcp) = out.split_at_mut(IPV4_HEADER_LEN);
        let mut ip = Ipv4Packet::new_unchecked(ip);
        ip.set_header_len(IPV4_HEADER_LEN);
        ip.set_total_len(total);
        ip.set_ttl(64);
        ip.set_protocol(PROTO_TCP);
        ip.set_src_addr(self.src_addr);
        ip.set_dst_addr(self.dst_addr);
        tcp[tcp_field::SRC_PORT].copy_from_slice(&self.src_port.to_be_bytes());
        tcp[tcp_field::DST_PORT].copy_from_slice(&self.dst_port.to_be_bytes());
        tcp[tcp_field::SEQ_NUM].copy_from_slice(&self.seq.to_be_bytes());
        tcp[tcp_field::ACK_NUM].copy_from_slice(&self.ack.to_be_bytes());
        tcp[tcp_field::DATA_OFF] = ((TCP_HEADER_LEN / 4) as u8) << 4;
        tcp[tcp_field::FLAGS] = self.flags;
        tcp[tcp_field::WIN_SIZE].copy_from_slice(&self.window.to_be_bytes());
        Ok(len)
    }
}

/// Parses an IPv4/TCP frame after `link_header` bytes of link-layer header
/// (`None` for anything else: the capture keeps only TCP segments).
pub fn parse(frame: &[u8], link_header: usize) -> Option<Segment> {
    Segment::parse(frame, link_header).ok()
}

/// `[SYN ACK]`-style flag names.
pub fn flag_names(f: u8) -> String {
    let names: Vec<&str> = [
        (flags::SYN, "SYN"),
        (flags::FIN, "FIN"),
        (flags::RST, "RST"),
        (flags::PSH, "PSH"),
        (flags::ACK, "ACK"),
    ]
    .iter()
    .filter(|(bit, _)| f & bit != 0)
    .map(|(_, name)| *name)
    .collect();
    format!("[{}]", names.join(" "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::Ipv4Addr;

    /// An Ethernet frame carrying 198.18.0.1:40000 -> 198.18.0.2:5001, PSH ACK,
    /// 4 bytes of payload (header fields written out by hand).
    const FRAME: [u8; 58] = [
        // Ethernet: dst, src, type 0x0800
        0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0x08, 0x00,
        // IPv4: v4 ihl 5, tos, total 44, id, frag, ttl 64, proto 6, csum, src, dst
        0x45, 0, 0, 44, 0, 0, 0x40, 0, 64, 6, 0, 0, 198, 18, 0, 1, 198, 18, 0, 2,
        // TCP: sport 40000, dport 5001, seq 1, ack 2, doff 5, flags PSH|ACK, win, csum, urg
        0x9c, 0x40, 0x13, 0x89, 0, 0, 0, 1, 0, 0, 0, 2, 0x50, 0x18, 0xff, 0xff, 0, 0, 0, 0,
        // payload
        b'd', b'a', b't', b'a',
    ];

    fn segment() -> Segment {
        Segment {
            src_addr: Ipv4Addr::new(198, 18, 0, 1),
            dst_addr: Ipv4Addr::new(198, 18, 0, 2),
            src_port: 40000,
            dst_port: 5001,
            seq: 1,
            ack: 2,
            flags: flags::PSH | flags::ACK,
            window: 0xffff,
            payload: 4,
        }
    }

    #[test]
    fn test_deconstruct() {
        let s = Segment::parse(&FRAME, 14).unwrap();
        assert_eq!(s, segment());
        assert_eq!(flag_names(s.flags), "[PSH ACK]");
        // The same packet on a TUN device has no link header.
        assert_eq!(parse(&FRAME[14..], 0), Some(s));
        let ip = Ipv4Packet::new_checked(&FRAME[14..]).unwrap();
        assert_eq!(
            (ip.header_len(), ip.total_len(), ip.protocol()),
            (20, 44, 6)
        );
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        assert_eq!((tcp.header_len(), tcp.window_len()), (20, 0xffff));
    }

    #[test]
    fn test_construct() {
        let mut bytes = [0xa5u8; 44];
        assert_eq!(segment().emit(&mut bytes), Ok(44));
        // The frame's IP and TCP headers, identification and fragment
        // fields aside (emit writes them as zero) and the payload zeroed.
        let mut want = FRAME[14..].to_vec();
        want[6] = 0;
        want[40..].fill(0);
        assert_eq!(bytes.to_vec(), want);
        assert_eq!(Segment::parse(&bytes, 0), Ok(segment()));
    }

    #[test]
    fn emit_refuses_a_short_buffer() {
        let mut small = [0u8; 43];
        assert_eq!(
            segment().emit(&mut small),
            Err(SegmentError::Truncated { have: 43, need: 44 })
        );
    }

    #[test]
    fn truncated_and_foreign_frames_are_refused_by_name() {
        // Every field read lies in the first 48 bytes.
        for cut in 0..48 {
            assert!(parse(&FRAME[..cut], 14).is_none(), "cut {cut}");
        }
        let mut udp = FRAME;
        udp[23] = 17;
        assert_eq!(Segment::parse(&udp, 14), Err(SegmentError::NotTcp(17)));
        let mut v6 = FRAME;
        v6[14] = 0x60;
        assert_eq!(Segment::parse(&v6, 14), Err(SegmentError::Version(6)));
        let mut short_ihl = FRAME;
        short_ihl[14] = 0x44;
        assert_eq!(
            Segment::parse(&short_ihl, 14),
            Err(SegmentError::HeaderLen(16))
        );
        let mut short_total = FRAME;
        short_total[17] = 39;
        assert_eq!(
            Segment::parse(&short_total, 14),
            Err(SegmentError::TotalLen {
                total: 39,
                headers: 40
            })
        );
    }

    proptest::proptest! {
        #[test]
        fn segments_survive_emit_then_parse(
            src in proptest::prelude::any::<u32>(),
            dst in proptest::prelude::any::<u32>(),
            ports in proptest::prelude::any::<(u16, u16)>(),
            seq in proptest::prelude::any::<u32>(),
            ack in proptest::prelude::any::<u32>(),
            flags in proptest::prelude::any::<u8>(),
            window in proptest::prelude::any::<u16>(),
            payload in 0u32..2000,
        ) {
            let s = Segment {
                src_addr: src.into(),
                dst_addr: dst.into(),
                src_port: ports.0,
                dst_port: ports.1,
                seq,
                ack,
                flags,
                window,
                payload,
            };
            let mut buffer = vec![0u8; s.buffer_len()];
            s.emit(&mut buffer).unwrap();
            proptest::prop_assert_eq!(Segment::parse(&buffer, 0), Ok(s));
        }
    }
}
