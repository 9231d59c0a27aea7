//! Segmentation offload through the wire emulator: the virtio-net header a
//! TUN device opened with `IFF_VNET_HDR` puts before each packet, the
//! cutting of a TCP/IPv4 GSO super-packet into the wire segments a NIC
//! would have sent, and the joining of consecutive segments into one
//! super-packet again.
//!
//! An impaired link must decide each wire packet's fate (loss, delay,
//! duplication, corruption, reordering), but one read and one write per
//! wire packet cost the emulator a system call each way per 1.5 KB, and
//! with them the link fell to a tenth of a veth. So the devices hand over
//! super-packets of up to 64 KB; the emulator plans their segments without
//! copying them ([`Plan`]), lets the link model decide each one, and writes
//! every run of consecutive segments that leave at the same instant,
//! unaltered, as one super-packet ([`Plan::emit_run`]), which the
//! receiving stack takes whole as it takes a GRO packet.
//!
//! The formats:
//! - `struct virtio_net_hdr` (virtio 1.2 §5.1.6, the 10-byte legacy form
//!   TUN uses by default, little-endian here): flags, GSO type, header
//!   length, segment size (the MSS), checksum start and offset;
//! - IPv4 (RFC 791 §3.1) and TCP (RFC 9293 §3.1) headers, cut as Linux's
//!   `tcp_gso_segment` cuts them: each segment carries the headers with
//!   its own total length, IP identification (the first's plus its index)
//!   and header checksum (RFC 1071), its sequence number advanced by the
//!   payload before it, CWR only on the first, FIN and PSH only on the
//!   last;
//! - a partial checksum (`VIRTIO_NET_HDR_F_NEEDS_CSUM`): the transport
//!   checksum field holds the folded pseudo-header sum (RFC 9293 §3.1,
//!   RFC 768) and the receiver trusts the rest, as it trusts a local
//!   sender's; [`finalize_checksum`] completes it where a packet must
//!   carry a real one (a corrupted copy, which the receiver must verify
//!   and drop).
//!
//! Invariants: [`Plan::of`] refuses what it cannot cut (not TCP over IPv4,
//! headers past the packet, a zero segment size) before any accessor
//! reads, so nothing here indexes out of bounds on any input; joining every
//! segment of a plan gives back the original packet's payload and headers
//! (checksum fields excepted), which the unit tests and the fuzz target
//! check.

use crate::checksum;
use crate::wire::ipv4::{self, Ipv4Error, Ipv4Packet};
use thiserror::Error;

/// `struct virtio_net_hdr` before each packet with `IFF_VNET_HDR`.
pub const VNET_HDR_LEN: usize = 10;
/// The checksum is partial: complete it from `csum_start` on.
pub const F_NEEDS_CSUM: u8 = 1;
pub const GSO_NONE: u8 = 0;
pub const GSO_TCPV4: u8 = 1;
/// The sender set CWR in the super-packet's first segment (RFC 3168).
pub const GSO_ECN: u8 = 0x80;

const TCP: u8 = ipv4::PROTO_TCP;
const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;
/// The TCP checksum's offset in its header.
const TCP_CSUM_OFFSET: usize = 16;

/// Why a packet cannot be cut into segments.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Error)]
pub enum GsoError {
    #[error("truncated: {have} bytes where {need} are needed")]
    Truncated { have: usize, need: usize },
    #[error("GSO type {0:#x} is not TCP over IPv4")]
    NotTcpV4(u8),
    #[error("IP version {0}, not 4")]
    Version(u8),
    #[error("IP header length {0} is below 20")]
    IpHeaderLen(usize),
    #[error("IP protocol {0}, not TCP")]
    NotTcp(u8),
    #[error("TCP header length {0} is below 20")]
    TcpHeaderLen(usize),
    #[error("segment size 0")]
    ZeroSegmentSize,
}

/// The virtio-net header's fields.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct VnetHeader {
    pub flags: u8,
    pub gso_type: u8,
    pub hdr_len: u16,
    pub gso_size: u16,
    pub csum_start: u16,
    pub csum_offset: u16,
}

impl VnetHeader {
    pub fn parse(bytes: &[u8]) -> Result<VnetHeader, GsoError> {
        let b: &[u8; VNET_HDR_LEN] = bytes
            .get(..VNET_HDR_LEN)
            .and_then(|b| b.try_into().ok())
            .ok_or(GsoError::Truncated {
                have: bytes.len(),
                need: VNET_HDR_LEN,
            })?;
        let le = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Ok(VnetHeader {
            flags: b[0],
            gso_type: b[1],
            hdr_len: le(2),
            gso_size: le(4),
            csum_start: le(6),
            csum_offset: le(8),
        })
    }

    pub fn emit(&self, out: &mut [u8; VNET_HDR_LEN]) {
        out[0] = self.flags;
        out[1] = self.gso_type;
        out[2..4].copy_from_slice(&self.hdr_len.to_le_bytes());
        out[4..6].copy_from_slice(&self.gso_size.to_le_bytes());
        out[6..8].copy_from_slice(&self.csum_start.to_le_bytes());
        out[8..10].copy_from_slice(&self.csum_offset.to_le_bytes());
    }

    /// Whether the packet after it is a super-packet to cut.
    pub fn is_gso(&self) -> bool {
        self.gso_type & !GSO_ECN != GSO_NONE
    }
}

/// A TCP/IPv4 super-packet's wire segments, planned over the packet in
/// place: where its headers end and how its payload divides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Plan {
    ip_header: usize,
    headers: usize,
    mss: usize,
    payload: usize,
    ecn: bool,
}

impl Plan {
    /// Plans the segments of `packet` (the IP packet after its virtio-net
    /// header `vnet`), checking every field the cutting reads.
    pub fn of(vnet: &VnetHeader, packet: &[u8]) -> Result<Plan, GsoError> {
        if vnet.gso_type & !GSO_ECN != GSO_TCPV4 {
            return Err(GsoError::NotTcpV4(vnet.gso_type));
        }
        let need = |n: usize| {
            if packet.len() < n {
                Err(GsoError::Truncated {
                    have: packet.len(),
                    need: n,
                })
            } else {
                Ok(())
            }
        };
        let ip = Ipv4Packet::new_checked(packet).map_err(|e| match e {
            Ipv4Error::Truncated { have, need } => GsoError::Truncated { have, need },
            Ipv4Error::Version(v) => GsoError::Version(v),
            Ipv4Error::HeaderLen(len) => GsoError::IpHeaderLen(len),
        })?;
        if ip.protocol() != TCP {
            return Err(GsoError::NotTcp(ip.protocol()));
        }
        let ip_header = ip.header_len();
        need(ip_header + 20)?;
        let tcp_header = usize::from(packet[ip_header + 12] >> 4) * 4;
        if tcp_header < 20 {
            return Err(GsoError::TcpHeaderLen(tcp_header));
        }
        let headers = ip_header + tcp_header;
        need(headers)?;
        if vnet.gso_size == 0 {
            return Err(GsoError::ZeroSegmentSize);
        }
        Ok(Plan {
            ip_header,
            headers,
            mss: usize::from(vnet.gso_size),
            payload: packet.len() - headers,
            ecn: vnet.gso_type & GSO_ECN != 0,
        })
    }

    /// How many wire segments (at least one, even with no payload).
    pub fn segments(&self) -> usize {
        self.payload.div_ceil(self.mss).max(1)
    }

    /// Payload bytes of segment `i`.
    pub fn payload_of(&self, i: usize) -> usize {
        self.payload.saturating_sub(i * self.mss).min(self.mss)
    }

    /// Segment `i`'s length on the wire: its IP packet.
    pub fn wire_len(&self, i: usize) -> usize {
        self.headers + self.payload_of(i)
    }

    /// Segments `first .. first + count` of `packet` as one packet into
    /// `out`, virtio-net header first: a super-packet (with the original's
    /// segment size) when `count > 1`, else a plain packet; either way
    /// with a partial checksum, as the sender's stack left it.
    pub fn emit_run(&self, packet: &[u8], first: usize, count: usize, out: &mut Vec<u8>) {
        let count = count.min(self.segments().saturating_sub(first)).max(1);
        let start = self.headers + first * self.mss;
        let payload: usize = (first..first + count).map(|i| self.payload_of(i)).sum();
        let total = self.headers + payload;
        let vnet = VnetHeader {
            flags: F_NEEDS_CSUM,
            gso_type: if count > 1 {
                GSO_TCPV4 | if self.ecn && first == 0 { GSO_ECN } else { 0 }
            } else {
                GSO_NONE
            },
            hdr_len: self.headers as u16,
            gso_size: if count > 1 { self.mss as u16 } else { 0 },
            csum_start: self.ip_header as u16,
            csum_offset: TCP_CSUM_OFFSET as u16,
        };
        out.clear();
        out.resize(VNET_HDR_LEN, 0);
        vnet.emit((&mut out[..VNET_HDR_LEN]).try_into().expect("10 bytes"));
        out.extend_from_slice(&packet[..self.headers]);
        out.extend_from_slice(
            &packet[start.min(packet.len())..(start + payload).min(packet.len())],
        );
        // IPv4: total length, identification, header checksum.
        let mut ip = Ipv4Packet::new_unchecked(&mut out[VNET_HDR_LEN..]);
        ip.set_total_len(total as u16);
        ip.set_ident(ip.ident().wrapping_add(first as u16));
        ip.fill_checksum();
        let pseudo = ip.pseudo_header_sum(total - self.ip_header);
        let p = ip.into_inner();
        // TCP: sequence number, flags, partial checksum.
        let tcp = self.ip_header;
        let seq = u32::from_be_bytes(p[tcp + 4..tcp + 8].try_into().expect("4 bytes"))
            .wrapping_add((first * self.mss) as u32);
        p[tcp + 4..tcp + 8].copy_from_slice(&seq.to_be_bytes());
        if first > 0 {
            p[tcp + 13] &= !TCP_CWR;
        }
        if first + count < self.segments() {
            p[tcp + 13] &= !(TCP_FIN | TCP_PSH);
        }
        p[tcp + TCP_CSUM_OFFSET..tcp + TCP_CSUM_OFFSET + 2].copy_from_slice(&pseudo.to_be_bytes());
    }
}

/// Completes a partial checksum in `packet` (an IP packet; `vnet` its
/// header), so the packet carries the real one; returns the header to
/// write it with (no partial checksum). A header without one, or whose
/// offsets fall outside the packet, is returned as it was.
pub fn finalize_checksum(vnet: &VnetHeader, packet: &mut [u8]) -> VnetHeader {
    let start = usize::from(vnet.csum_start);
    let field = start + usize::from(vnet.csum_offset);
    if vnet.flags & F_NEEDS_CSUM == 0 || field + 2 > packet.len() {
        return *vnet;
    }
    let mut sum = checksum::naive16(&packet[start..]);
    // UDP sends zero as "no checksum" (RFC 768): all ones stands for it.
    if sum == 0 && packet.get(ipv4::field::PROTOCOL) == Some(&ipv4::PROTO_UDP) {
        sum = 0xffff;
    }
    packet[field..field + 2].copy_from_slice(&sum.to_be_bytes());
    VnetHeader {
        flags: vnet.flags & !F_NEEDS_CSUM,
        ..*vnet
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// An IPv4/TCP super-packet of `payload` bytes as a sender's stack
    /// hands it over: partial checksum, `flags` on the TCP header.
    fn super_packet(payload: usize, mss: u16, flags: u8) -> (VnetHeader, Vec<u8>) {
        let total = 20 + 32 + payload;
        let mut p = vec![0u8; total];
        p[0] = 0x45;
        p[2..4].copy_from_slice(&(total as u16).to_be_bytes());
        p[4..6].copy_from_slice(&0xfff0u16.to_be_bytes());
        p[6] = 0x40; // DF
        p[8] = 64;
        p[9] = TCP;
        p[12..16].copy_from_slice(&[198, 18, 0, 1]);
        p[16..20].copy_from_slice(&[198, 18, 0, 2]);
        let ip_sum = checksum::naive16(&p[..20]);
        p[10..12].copy_from_slice(&ip_sum.to_be_bytes());
        p[20..22].copy_from_slice(&40000u16.to_be_bytes());
        p[22..24].copy_from_slice(&5001u16.to_be_bytes());
        p[24..28].copy_from_slice(&0xffff_ff00u32.to_be_bytes()); // wraps
        p[32] = 8 << 4; // 32-byte header: timestamps
        p[33] = flags;
        for (i, b) in p[52..].iter_mut().enumerate() {
            *b = (i * 7 + 3) as u8;
        }
        let pseudo = Ipv4Packet::new_unchecked(&p[..]).pseudo_header_sum(total - 20);
        p[36..38].copy_from_slice(&pseudo.to_be_bytes());
        let vnet = VnetHeader {
            flags: F_NEEDS_CSUM,
            gso_type: GSO_TCPV4,
            hdr_len: 52,
            gso_size: mss,
            csum_start: 20,
            csum_offset: 16,
        };
        (vnet, p)
    }

    /// A segment's TCP checksum verifies once completed, and its IP
    /// header's checksum verifies as written.
    fn checksums_hold(written: &[u8]) {
        let vnet = VnetHeader::parse(written).unwrap();
        let mut ip = written[VNET_HDR_LEN..].to_vec();
        assert_eq!(checksum::naive16(&ip[..20]), 0, "IP header checksum");
        let done = finalize_checksum(&vnet, &mut ip);
        assert_eq!(done.flags & F_NEEDS_CSUM, 0);
        // Verifying: the sum over the pseudo-header and the segment is all ones.
        let tcp_len = ip.len() - 20;
        let sum = checksum::sum_naive16(&ip[12..20])
            + u64::from(TCP)
            + tcp_len as u64
            + checksum::sum_naive16(&ip[20..]);
        assert_eq!(checksum::fold(sum), 0xffff, "TCP checksum");
    }

    #[test]
    fn a_super_packet_cuts_into_wire_segments_as_a_nic_would() {
        let (vnet, packet) = super_packet(3000, 1448, TCP_PSH | TCP_FIN | TCP_CWR | 0x10);
        let plan = Plan::of(&vnet, &packet).unwrap();
        assert_eq!(plan.segments(), 3);
        assert_eq!(
            (0..3).map(|i| plan.wire_len(i)).collect::<Vec<_>>(),
            [52 + 1448, 52 + 1448, 52 + 104]
        );
        let mut out = Vec::new();
        for i in 0..3 {
            plan.emit_run(&packet, i, 1, &mut out);
            let v = VnetHeader::parse(&out).unwrap();
            assert_eq!(v.gso_type, GSO_NONE);
            let ip = &out[VNET_HDR_LEN..];
            assert_eq!(ip.len(), plan.wire_len(i));
            assert_eq!(u16::from_be_bytes([ip[2], ip[3]]) as usize, ip.len());
            assert_eq!(u16::from_be_bytes([ip[4], ip[5]]), 0xfff0 + i as u16);
            let seq = u32::from_be_bytes(ip[24..28].try_into().unwrap());
            assert_eq!(seq, 0xffff_ff00u32.wrapping_add(1448 * i as u32));
            let flags = ip[33];
            assert_eq!(flags & TCP_CWR != 0, i == 0, "CWR on the first only");
            assert_eq!(
                flags & (TCP_FIN | TCP_PSH) != 0,
                i == 2,
                "FIN, PSH on the last only"
            );
            assert_eq!(flags & 0x10, 0x10, "ACK on all");
            assert_eq!(
                &ip[52..],
                &packet[52 + 1448 * i..52 + 1448 * i + plan.payload_of(i)]
            );
            checksums_hold(&out);
        }
    }

    #[test]
    fn a_run_of_segments_is_one_super_packet_again() {
        let (vnet, packet) = super_packet(10_000, 1000, 0x18);
        let plan = Plan::of(&vnet, &packet).unwrap();
        let mut out = Vec::new();
        // Segments 3..7: a super-packet the receiver can take whole.
        plan.emit_run(&packet, 3, 4, &mut out);
        let v = VnetHeader::parse(&out).unwrap();
        assert_eq!((v.gso_type, v.gso_size, v.hdr_len), (GSO_TCPV4, 1000, 52));
        assert_eq!(
            (v.csum_start, v.csum_offset, v.flags),
            (20, 16, F_NEEDS_CSUM)
        );
        assert_eq!(out.len() - VNET_HDR_LEN, 52 + 4000);
        assert_eq!(&out[VNET_HDR_LEN + 52..], &packet[52 + 3000..52 + 7000]);
        assert_eq!(out[VNET_HDR_LEN + 33] & TCP_PSH, 0, "not the last: no PSH");
        checksums_hold(&out);
    }

    #[test]
    fn a_completed_checksum_makes_a_corrupted_copy_detectable() {
        let (vnet, packet) = super_packet(500, 1448, 0x10);
        let plan = Plan::of(&vnet, &packet).unwrap();
        let mut out = Vec::new();
        plan.emit_run(&packet, 0, 1, &mut out);
        let v = VnetHeader::parse(&out).unwrap();
        let mut ip = out[VNET_HDR_LEN..].to_vec();
        finalize_checksum(&v, &mut ip);
        ip[300] ^= 0x04;
        let sum = checksum::sum_naive16(&ip[12..20])
            + u64::from(TCP)
            + (ip.len() - 20) as u64
            + checksum::sum_naive16(&ip[20..]);
        assert_ne!(
            checksum::fold(sum),
            0xffff,
            "one flipped bit fails the checksum"
        );
    }

    #[test]
    fn what_cannot_be_cut_is_refused_not_read_past() {
        let (vnet, packet) = super_packet(3000, 1448, 0x10);
        assert_eq!(
            Plan::of(
                &VnetHeader {
                    gso_type: 4,
                    ..vnet
                },
                &packet
            ),
            Err(GsoError::NotTcpV4(4))
        );
        assert_eq!(
            Plan::of(
                &VnetHeader {
                    gso_size: 0,
                    ..vnet
                },
                &packet
            ),
            Err(GsoError::ZeroSegmentSize)
        );
        assert!(matches!(
            Plan::of(&vnet, &packet[..40]),
            Err(GsoError::Truncated { .. })
        ));
        let mut udp = packet.clone();
        udp[9] = ipv4::PROTO_UDP;
        assert_eq!(
            Plan::of(&vnet, &udp),
            Err(GsoError::NotTcp(ipv4::PROTO_UDP))
        );
        let mut short = packet.clone();
        short[32] = 2 << 4;
        assert_eq!(Plan::of(&vnet, &short), Err(GsoError::TcpHeaderLen(8)));
        assert!(VnetHeader::parse(&[0u8; 9]).is_err());
    }

    proptest! {
        /// Any split of a super-packet into runs carries every payload
        /// byte once, in order, each run's sequence number where its
        /// payload starts, and valid checksums.
        #[test]
        fn runs_rejoin_the_payload(
            payload in 0usize..20_000,
            mss in 1u16..2000,
            cuts in proptest::collection::vec(1usize..8, 1..40),
        ) {
            let (vnet, packet) = super_packet(payload, mss, 0x18);
            let plan = Plan::of(&vnet, &packet).unwrap();
            let mut joined = Vec::new();
            let mut first = 0;
            let mut cuts = cuts.into_iter().cycle();
            let mut out = Vec::new();
            while first < plan.segments() {
                let count = cuts.next().unwrap().min(plan.segments() - first);
                plan.emit_run(&packet, first, count, &mut out);
                let ip = &out[VNET_HDR_LEN..];
                let seq = u32::from_be_bytes(ip[24..28].try_into().unwrap());
                prop_assert_eq!(seq, 0xffff_ff00u32.wrapping_add(joined.len() as u32));
                checksums_hold(&out);
                joined.extend_from_slice(&ip[52..]);
                first += count;
            }
            prop_assert_eq!(&joined[..], &packet[52..]);
        }

        #[test]
        fn the_vnet_header_round_trips(bytes in proptest::array::uniform10(any::<u8>())) {
            let h = VnetHeader::parse(&bytes).unwrap();
            let mut out = [0u8; VNET_HDR_LEN];
            h.emit(&mut out);
            prop_assert_eq!(out, bytes);
        }
    }
}
