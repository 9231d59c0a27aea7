//! The IPv4 header (RFC 791 §3.1) as one checked view over a buffer, in
//! smoltcp's shape: [`Ipv4Packet`] wraps any `AsRef<[u8]>`, each field's
//! byte range is named once in [`field`], and [`Ipv4Packet::new_checked`]
//! verifies that the buffer holds the whole header (20 bytes at least,
//! version 4, its own header length within the buffer), after which no
//! getter can panic. Over `AsMut<[u8]>` the same view writes the fields
//! and fills the header checksum (RFC 1071).
//!
//! The total length is not checked against the buffer: a capture with a
//! short snap length holds less than the datagram, and still says how long
//! it was. A reader that needs the whole datagram checks
//! [`Ipv4Packet::total_len`] itself.
//!
//! Its readers: the capture's TCP segments ([`super::tcpseg`]), the 1990
//! Ethernet's datagrams ([`super::ether`]) and the wire emulator's GSO
//! cutter (`crate::testbed::gso`); the bottleneck's disciplines read a
//! datagram's flow key and ECN codepoint, and mark it CE (RFC 3168 §5).

use crate::checksum;
use std::net::Ipv4Addr;
use thiserror::Error;

/// Why bytes are not an IPv4 header.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum Ipv4Error {
    #[error("truncated: {have} bytes where the header needs {need}")]
    Truncated { have: usize, need: usize },
    #[error("IP version {0}, not 4")]
    Version(u8),
    #[error("IP header length {0} is below the minimum of 20")]
    HeaderLen(usize),
}

/// Byte ranges of the IPv4 header's fields.
pub mod field {
    use std::ops::Range;
    /// Version in the high nibble, header length in 32-bit words in the low.
    pub const VER_IHL: usize = 0;
    /// DSCP and ECN (the type of service).
    pub const TOS: usize = 1;
    pub const TOTAL_LEN: Range<usize> = 2..4;
    pub const IDENT: Range<usize> = 4..6;
    /// Flags (3 bits) and fragment offset (13 bits).
    pub const FLAGS_FRAG: Range<usize> = 6..8;
    pub const TTL: usize = 8;
    pub const PROTOCOL: usize = 9;
    pub const CHECKSUM: Range<usize> = 10..12;
    pub const SRC_ADDR: Range<usize> = 12..16;
    pub const DST_ADDR: Range<usize> = 16..20;
}

/// Length of an IPv4 header without options.
pub const HEADER_LEN: usize = 20;

/// IP protocol numbers used here.
pub const PROTO_TCP: u8 = 6;
pub const PROTO_UDP: u8 = 17;

/// A view of an IPv4 header at the start of a buffer.
#[derive(Debug, Clone, Copy)]
pub struct Ipv4Packet<T: AsRef<[u8]>> {
    buffer: T,
}

fn u16_at(data: &[u8], range: std::ops::Range<usize>) -> u16 {
    u16::from_be_bytes([data[range.start], data[range.start + 1]])
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// A view without checks: for a buffer about to be written, at least
    /// [`HEADER_LEN`] bytes plus its options (the setters index into it).
    pub fn new_unchecked(buffer: T) -> Ipv4Packet<T> {
        Ipv4Packet { buffer }
    }

    /// Checks that `buffer` holds a whole IPv4 header.
    pub fn new_checked(buffer: T) -> Result<Ipv4Packet<T>, Ipv4Error> {
        let have = buffer.as_ref().len();
        if have < HEADER_LEN {
            return Err(Ipv4Error::Truncated {
                have,
                need: HEADER_LEN,
            });
        }
        let packet = Ipv4Packet { buffer };
        if packet.version() != 4 {
            return Err(Ipv4Error::Version(packet.version()));
        }
        let need = packet.header_len();
        if need < HEADER_LEN {
            return Err(Ipv4Error::HeaderLen(need));
        }
        if have < need {
            return Err(Ipv4Error::Truncated { have, need });
        }
        Ok(packet)
    }

    /// The buffer the view was made over.
    pub fn into_inner(self) -> T {
        self.buffer
    }

    pub fn version(&self) -> u8 {
        self.buffer.as_ref()[field::VER_IHL] >> 4
    }

    /// The header's length in bytes, options included.
    pub fn header_len(&self) -> usize {
        usize::from(self.buffer.as_ref()[field::VER_IHL] & 0x0f) * 4
    }

    pub fn tos(&self) -> u8 {
        self.buffer.as_ref()[field::TOS]
    }

    /// The datagram's length as its header says, header included.
    pub fn total_len(&self) -> usize {
        usize::from(u16_at(self.buffer.as_ref(), field::TOTAL_LEN))
    }

    pub fn ident(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::IDENT)
    }

    /// Flags and fragment offset as the header carries them.
    pub fn flags_frag(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::FLAGS_FRAG)
    }

    pub fn ttl(&self) -> u8 {
        self.buffer.as_ref()[field::TTL]
    }

    pub fn protocol(&self) -> u8 {
        self.buffer.as_ref()[field::PROTOCOL]
    }

    pub fn checksum(&self) -> u16 {
        u16_at(self.buffer.as_ref(), field::CHECKSUM)
    }

    pub fn src_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::SRC_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    pub fn dst_addr(&self) -> Ipv4Addr {
        let b = &self.buffer.as_ref()[field::DST_ADDR];
        Ipv4Addr::new(b[0], b[1], b[2], b[3])
    }

    /// The options, as bytes (padding included).
    pub fn options(&self) -> &[u8] {
        &self.buffer.as_ref()[HEADER_LEN..self.header_len()]
    }

    /// Whether the header's checksum verifies (RFC 1071: the one's
    /// complement sum of the header, checksum included, is all ones).
    pub fn verify_checksum(&self) -> bool {
        checksum::naive16(&self.buffer.as_ref()[..self.header_len()]) == 0
    }

    /// The folded pseudo-header sum (RFC 9293 §3.1, RFC 768) of a
    /// transport segment of `len` bytes in this datagram: what a partial
    /// TCP or UDP checksum field holds.
    pub fn pseudo_header_sum(&self, len: usize) -> u16 {
        let addresses = &self.buffer.as_ref()[field::SRC_ADDR.start..field::DST_ADDR.end];
        let sum = checksum::sum_naive16(addresses) + u64::from(self.protocol()) + len as u64;
        checksum::fold(sum)
    }

    /// What follows the header (as much of it as the buffer holds).
    pub fn payload(&self) -> &[u8] {
        &self.buffer.as_ref()[self.header_len()..]
    }
}

/// The ECN field's codepoints (RFC 3168 §5), the TOS byte's low 2 bits.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ecn {
    /// 00: the sender does not do ECN.
    NotEct,
    /// 01.
    Ect1,
    /// 10.
    Ect0,
    /// 11: Congestion Experienced, set by a router on the way.
    Ce,
}

impl<T: AsRef<[u8]>> Ipv4Packet<T> {
    /// The ECN codepoint.
    pub fn ecn(&self) -> Ecn {
        match self.tos() & 0b11 {
            0b00 => Ecn::NotEct,
            0b01 => Ecn::Ect1,
            0b10 => Ecn::Ect0,
            _ => Ecn::Ce,
        }
    }

    /// A key shared by the datagrams of one flow, as a queue discipline
    /// hashes them: the addresses, the protocol and, for TCP and UDP, the
    /// ports (when the first fragment's payload holds them; later
    /// fragments and other protocols hash by addresses and protocol).
    pub fn flow_key(&self) -> u64 {
        let b = self.buffer.as_ref();
        let mut key = [0u8; 13];
        key[..8].copy_from_slice(&b[field::SRC_ADDR.start..field::DST_ADDR.end]);
        key[8] = self.protocol();
        let first_fragment = self.flags_frag() & 0x1fff == 0;
        let payload = self.payload();
        if first_fragment && matches!(self.protocol(), PROTO_TCP | PROTO_UDP) && payload.len() >= 4
        {
            key[9..13].copy_from_slice(&payload[..4]);
        }
        // FNV-1a: stable across runs and hosts, so a seeded run repeats.
        key.iter().fold(0xcbf2_9ce4_8422_2325u64, |h, &byte| {
            (h ^ u64::from(byte)).wrapping_mul(0x0000_0100_0000_01b3)
        })
    }
}

impl<T: AsRef<[u8]> + AsMut<[u8]>> Ipv4Packet<T> {
    /// Version 4 and a header of `header_len` bytes (a multiple of 4).
    pub fn set_header_len(&mut self, header_len: usize) {
        self.buffer.as_mut()[field::VER_IHL] = 0x40 | (header_len / 4) as u8;
    }

    pub fn set_tos(&mut self, tos: u8) {
        self.buffer.as_mut()[field::TOS] = tos;
    }

    pub fn set_total_len(&mut self, len: u16) {
        self.buffer.as_mut()[field::TOTAL_LEN].copy_from_slice(&len.to_be_bytes());
    }

    pub fn set_ident(&mut self, ident: u16) {
        self.buffer.as_mut()[field::IDENT].copy_from_slice(&ident.to_be_bytes());
    }

    pub fn set_flags_frag(&mut self, flags_frag: u16) {
        self.buffer.as_mut()[field::FLAGS_FRAG].copy_from_slice(&flags_frag.to_be_bytes());
    }

    pub fn set_ttl(&mut self, ttl: u8) {
        self.buffer.as_mut()[field::TTL] = ttl;
    }

    pub fn set_protocol(&mut self, protocol: u8) {
        self.buffer.as_mut()[field::PROTOCOL] = protocol;
    }

    pub fn set_src_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::SRC_ADDR].copy_from_slice(&addr.octets());
    }

    pub fn set_dst_addr(&mut self, addr: Ipv4Addr) {
        self.buffer.as_mut()[field::DST_ADDR].copy_from_slice(&addr.octets());
    }

    /// The options' bytes, between the fixed header and the header's end.
    pub fn options_mut(&mut self) -> &mut [u8] {
        let end = self.header_len();
        &mut self.buffer.as_mut()[HEADER_LEN..end]
    }

    /// Marks the datagram Congestion Experienced, as a router does where
    /// it would otherwise drop (RFC 3168 §5), and fills the checksum anew.
    /// Only an ECN-capable datagram (ECT(0) or ECT(1)) is marked; one
    /// already CE stays so. Whether it carries CE now.
    pub fn mark_ce(&mut self) -> bool {
        match self.ecn() {
            Ecn::NotEct => false,
            Ecn::Ce => true,
            Ecn::Ect0 | Ecn::Ect1 => {
                let tos = self.tos() | 0b11;
                self.set_tos(tos);
                self.fill_checksum();
                true
            }
        }
    }

    /// Computes the header checksum over the header as it stands and
    /// writes it.
    pub fn fill_checksum(&mut self) {
        let end = self.header_len();
        let header = &mut self.buffer.as_mut()[..end];
        header[field::CHECKSUM].fill(0);
        let sum = checksum::naive16(header);
        header[field::CHECKSUM].copy_from_slice(&sum.to_be_bytes());
    }

    /// What follows the header.
    pub fn payload_mut(&mut self) -> &mut [u8] {
        let start = self.header_len();
        &mut self.buffer.as_mut()[start..]
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// RFC 1071 §3's worked example is not an IP header; this is a real
    /// one (a ping from 192.168.0.1 to 192.168.0.199, checksum 0xb861).
    const HEADER: [u8; 20] = [
        0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0xb8, 0x61, 0xc0, 0xa8, 0x00,
        0x01, 0xc0, 0xa8, 0x00, 0xc7,
    ];

    #[test]
    fn ecn_capable_datagrams_are_marked_and_others_left_alone() {
        for (tos, ecn, marked) in [
            (0x00, Ecn::NotEct, false),
            (0x01, Ecn::Ect1, true),
            (0x02, Ecn::Ect0, true),
            (0xb8 | 0x02, Ecn::Ect0, true),
            (0x03, Ecn::Ce, true),
        ] {
            let mut header = HEADER;
            let mut ip = Ipv4Packet::new_checked(&mut header[..]).unwrap();
            ip.set_tos(tos);
            ip.fill_checksum();
            assert_eq!(ip.ecn(), ecn);
            assert_eq!(ip.mark_ce(), marked, "tos {tos:#x}");
            assert!(ip.verify_checksum());
            // The DSCP bits stay; the ECN bits are CE only when marked.
            assert_eq!(ip.tos() & 0xfc, tos & 0xfc);
            assert_eq!(ip.ecn() == Ecn::Ce, marked);
        }
    }

    proptest! {
        /// The fuzz target `ipv4_header`'s property, over headers the
        /// view accepts: marking keeps the checksum valid, touches only
        /// the ECN bits, is idempotent, and leaves the flow key.
        #[test]
        fn marking_keeps_the_header_valid_and_the_flow_key(mut bytes in proptest::collection::vec(any::<u8>(), 20..80)) {
            bytes[0] = 0x45;
            let mut ip = Ipv4Packet::new_checked(&mut bytes[..]).unwrap();
            ip.fill_checksum();
            let (key, tos, ecn) = (ip.flow_key(), ip.tos(), ip.ecn());
            prop_assert_eq!(ip.mark_ce(), ecn != Ecn::NotEct);
            prop_assert!(ip.verify_checksum());
            prop_assert_eq!(ip.tos() & 0xfc, tos & 0xfc);
            prop_assert_eq!(ip.flow_key(), key);
            let once = bytes.clone();
            Ipv4Packet::new_checked(&mut bytes[..]).unwrap().mark_ce();
            prop_assert_eq!(bytes, once);
        }
    }

    #[test]
    fn one_flow_shares_a_key_and_its_ports_tell_it_from_another() {
        let datagram = |sport: u16, frag: u16| {
            let mut b = HEADER.to_vec();
            b.extend_from_slice(&sport.to_be_bytes());
            b.extend_from_slice(&53u16.to_be_bytes());
            b.extend_from_slice(&[0; 4]);
            let mut ip = Ipv4Packet::new_checked(&mut b[..]).unwrap();
            ip.set_flags_frag(frag);
            b
        };
        let key = |b: &[u8]| Ipv4Packet::new_checked(b).unwrap().flow_key();
        assert_eq!(key(&datagram(5000, 0)), key(&datagram(5000, 0)));
        assert_ne!(key(&datagram(5000, 0)), key(&datagram(5001, 0)));
        // A later fragment has no ports: it hashes by addresses alone.
        assert_eq!(key(&datagram(5000, 185)), key(&datagram(5001, 185)));
    }

    #[test]
    fn a_real_header_reads_field_by_field_and_verifies() {
        let ip = Ipv4Packet::new_checked(&HEADER[..]).unwrap();
        assert_eq!(ip.version(), 4);
        assert_eq!(ip.header_len(), 20);
        assert_eq!(ip.total_len(), 0x73);
        assert_eq!(ip.flags_frag(), 0x4000);
        assert_eq!(ip.ttl(), 64);
        assert_eq!(ip.protocol(), PROTO_UDP);
        assert_eq!(ip.checksum(), 0xb861);
        assert_eq!(ip.src_addr(), Ipv4Addr::new(192, 168, 0, 1));
        assert_eq!(ip.dst_addr(), Ipv4Addr::new(192, 168, 0, 199));
        assert!(ip.verify_checksum());
        assert!(ip.options().is_empty() && ip.payload().is_empty());
    }

    #[test]
    fn filling_the_checksum_writes_the_real_one() {
        let mut bytes = HEADER;
        bytes[10..12].fill(0xee);
        let mut ip = Ipv4Packet::new_unchecked(&mut bytes[..]);
        assert!(!ip.verify_checksum());
        ip.fill_checksum();
        assert_eq!(ip.checksum(), 0xb861);
        assert!(ip.verify_checksum());
    }

    #[test]
    fn what_is_not_a_whole_header_is_refused_by_name() {
        assert_eq!(
            Ipv4Packet::new_checked(&HEADER[..19]).unwrap_err(),
            Ipv4Error::Truncated { have: 19, need: 20 }
        );
        let mut v6 = HEADER;
        v6[0] = 0x65;
        assert_eq!(
            Ipv4Packet::new_checked(&v6[..]).unwrap_err(),
            Ipv4Error::Version(6)
        );
        let mut short = HEADER;
        short[0] = 0x44;
        assert_eq!(
            Ipv4Packet::new_checked(&short[..]).unwrap_err(),
            Ipv4Error::HeaderLen(16)
        );
        let mut options = HEADER;
        options[0] = 0x46;
        assert_eq!(
            Ipv4Packet::new_checked(&options[..]).unwrap_err(),
            Ipv4Error::Truncated { have: 20, need: 24 }
        );
    }

    proptest! {
        #[test]
        fn written_fields_read_back_and_the_header_verifies(
            tos: u8, total: u16, ident: u16, frag: u16, ttl: u8, protocol: u8,
            src: [u8; 4], dst: [u8; 4], options in proptest::collection::vec(any::<u8>(), 0..=10),
        ) {
            let header_len = HEADER_LEN + options.len().div_ceil(4) * 4;
            let mut bytes = vec![0u8; header_len + 3];
            let mut ip = Ipv4Packet::new_unchecked(&mut bytes[..]);
            ip.set_header_len(header_len);
            ip.set_tos(tos);
            ip.set_total_len(total);
            ip.set_ident(ident);
            ip.set_flags_frag(frag);
            ip.set_ttl(ttl);
            ip.set_protocol(protocol);
            ip.set_src_addr(src.into());
            ip.set_dst_addr(dst.into());
            ip.options_mut()[..options.len()].copy_from_slice(&options);
            ip.fill_checksum();
            let ip = Ipv4Packet::new_checked(&bytes[..]).unwrap();
            prop_assert_eq!(ip.header_len(), header_len);
            prop_assert_eq!(
                (ip.tos(), ip.total_len(), ip.ident(), ip.flags_frag(), ip.ttl(), ip.protocol()),
                (tos, usize::from(total), ident, frag, ttl, protocol)
            );
            prop_assert_eq!((ip.src_addr(), ip.dst_addr()), (Ipv4Addr::from(src), Ipv4Addr::from(dst)));
            prop_assert_eq!(&ip.options()[..options.len()], &options[..]);
            prop_assert_eq!(ip.payload().len(), 3);
            prop_assert!(ip.verify_checksum());
        }
    }
}
