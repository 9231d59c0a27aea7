//! Ethernet II frames (IEEE 802.3 framing as DIX Ethernet uses it) and
//! what the 1990 host model reads inside them: ARP over Ethernet for IPv4
//! (RFC 826), the IPv4 header (RFC 791 §3.1) and UDP (RFC 768).
//!
//! Invariants: parsing never panics and never reads past the buffer; every
//! frame [`Frame::emit`] writes parses back to the same [`Frame`]; an IPv4
//! header is emitted with a correct checksum (RFC 1071) and a parsed one
//! with a wrong checksum is refused, as `ipintr` refused it (4.2BSD
//! ip_input.c: `ips_badsum`). Options in an IPv4 header are kept as bytes,
//! not interpreted; frames are padded to Ethernet's 60-byte minimum.

use super::ipv4::{self, Ipv4Error, Ipv4Packet};
use std::net::Ipv4Addr;
use thiserror::Error;

pub type Mac = [u8; 6];
pub const BROADCAST_MAC: Mac = [0xff; 6];
/// Ethernet's smallest frame without its FCS.
pub const MIN_FRAME: usize = 60;
pub const ETHERTYPE_IPV4: u16 = 0x0800;
pub const ETHERTYPE_ARP: u16 = 0x0806;

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum EtherError {
    #[error("frame of {0} bytes is shorter than its headers")]
    Truncated(usize),
    #[error("IPv4 header checksum is wrong")]
    BadChecksum,
    #[error("not IPv4 (version {0})")]
    NotIpv4(u8),
    #[error("IPv4 header length {0} is impossible")]
    BadHeaderLength(usize),
    #[error("ARP for hardware type {0}, protocol {1:#06x}: not Ethernet/IPv4")]
    NotEthernetArp(u16, u16),
    #[error("buffer of {have} bytes cannot hold a {need}-byte frame")]
    Short { have: usize, need: usize },
}

/// An ARP packet for IPv4 over Ethernet (RFC 826).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Arp {
    /// 1 request, 2 reply.
    pub op: u16,
    pub sender_mac: Mac,
    pub sender_ip: Ipv4Addr,
    pub target_mac: Mac,
    pub target_ip: Ipv4Addr,
}

pub const ARP_REQUEST: u16 = 1;
pub const ARP_REPLY: u16 = 2;

/// An IPv4 datagram (RFC 791), its payload as bytes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ipv4 {
    pub tos: u8,
    pub id: u16,
    /// Flags and fragment offset as the header carries them.
    pub frag: u16,
    pub ttl: u8,
    pub protocol: u8,
    pub src: Ipv4Addr,
    pub dst: Ipv4Addr,
    pub options: Vec<u8>,
    pub payload: Vec<u8>,
}

use super::ipv4::PROTO_UDP as IPPROTO_UDP;

/// What an Ethernet frame carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Payload {
    Arp(Arp),
    Ipv4(Ipv4),
    /// Any other type, its bytes (padding included) as they came.
    Other(u16, Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Frame {
    pub dst: Mac,
    pub src: Mac,
    pub payload: Payload,
}

fn u16_at(b: &[u8], at: usize) -> u16 {
    u16::from_be_bytes([b[at], b[at + 1]])
}

fn ip_at(b: &[u8], at: usize) -> Ipv4Addr {
    Ipv4Addr::new(b[at], b[at + 1], b[at + 2], b[at + 3])
}

fn mac_at(b: &[u8], at: usize) -> Mac {
    let mut mac = [0; 6];
    mac.copy_from_slice(&b[at..at + 6]);
    mac
}

impl Frame {
    /// Reads a frame as a TAP device hands it over (no preamble, no FCS).
    pub fn parse(b: &[u8]) -> Result<Frame, EtherError> {
        if b.len() < 14 {
            return Err(EtherError::Truncated(b.len()));
        }
        let (dst, src, ethertype) = (mac_at(b, 0), mac_at(b, 6), u16_at(b, 12));
        let body = &b[14..];
        let payload = match ethertype {
            ETHERTYPE_ARP => Payload::Arp(Arp::parse(body)?),
            ETHERTYPE_IPV4 => Payload::Ipv4(Ipv4::parse(body)?),
            other => Payload::Other(other, body.to_vec()),
        };
        Ok(Frame { dst, src, payload })
    }

    /// The frame's length as emitted (padded to the minimum).
    pub fn emitted_len(&self) -> usize {
        let body = match &self.payload {
            Payload::Arp(_) => 28,
            Payload::Ipv4(ip) => ip.header_len() + ip.payload.len(),
            Payload::Other(_, bytes) => bytes.len(),
        };
        (14 + body).max(MIN_FRAME)
    }

    /// Writes the frame into `out` (at least [`Frame::emitted_len`] bytes) and
    /// returns its length.
    pub fn emit(&self, out: &mut [u8]) -> Result<usize, EtherError> {
        let need = self.emitted_len();
        if out.len() < need {
            return Err(EtherError::Short {
                have: out.len(),
                need,
            });
        }
        out[..need].fill(0);
        out[0..6].copy_from_slice(&self.dst);
        out[6..12].copy_from_slice(&self.src);
        let body = &mut out[14..need];
        let ethertype = match &self.payload {
            Payload::Arp(arp) => {
                arp.emit(body);
                ETHERTYPE_ARP
            }
            Payload::Ipv4(ip) => {
                ip.emit(body);
                ETHERTYPE_IPV4
            }
            Payload::Other(kind, bytes) => {
                body[..bytes.len()].copy_from_slice(bytes);
                *kind
            }
        };
        out[12..14].copy_from_slice(&ethertype.to_be_bytes());
        Ok(need)
    }

    pub fn to_bytes(&self) -> Vec<u8> {
        let mut out = vec![0; self.emitted_len()];
        let n = self.emit(&mut out).expect("sized to the frame");
        out.truncate(n);
        out
    }
}

impl Arp {
    fn parse(b: &[u8]) -> Result<Arp, EtherError> {
        if b.len() < 28 {
            return Err(EtherError::Truncated(b.len() + 14));
        }
        let (htype, ptype) = (u16_at(b, 0), u16_at(b, 2));
        if htype != 1 || ptype != ETHERTYPE_IPV4 || b[4] != 6 || b[5] != 4 {
            return Err(EtherError::NotEthernetArp(htype, ptype));
        }
        Ok(Arp {
            op: u16_at(b, 6),
            sender_mac: mac_at(b, 8),
            sender_ip: ip_at(b, 14),
            target_mac: mac_at(b, 18),
            target_ip: ip_at(b, 24),
        })
    }

    fn emit(&self, b: &mut [u8]) {
        b[0..2].copy_from_slice(&1u16.to_be_bytes());
        b[2..4].copy_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        b[4] = 6;
        b[5] = 4;
        b[6..8].copy_from_slice(&self.op.to_be_bytes());
        b[8..14].copy_from_slice(&self.sender_mac);
        b[14..18].copy_from_slice(&self.sender_ip.octets());
        b[18..24].copy_from_slice(&self.target_mac);
        b[24..28].copy_from_slice(&self.target_ip.octets());
    }
}

impl Ipv4 {
    /// A UDP datagram (RFC 768) from `src:sport` to `dst:dport`, its
    /// checksum left 0 ("no checksum", as 4.2BSD's udp_cksum = 0 sent).
    pub fn udp(src: Ipv4Addr, dst: Ipv4Addr, ports: (u16, u16), ttl: u8, data: &[u8]) -> Ipv4 {
        let mut payload = Vec::with_capacity(8 + data.len());
        payload.extend_from_slice(&ports.0.to_be_bytes());
        payload.extend_from_slice(&ports.1.to_be_bytes());
        payload.extend_from_slice(&((8 + data.len()) as u16).to_be_bytes());
        payload.extend_from_slice(&[0, 0]);
        payload.extend_from_slice(data);
        Ipv4 {
            tos: 0,
            id: 0,
            frag: 0,
            ttl,
            protocol: IPPROTO_UDP,
            src,
            dst,
            options: Vec::new(),
            payload,
        }
    }

    pub fn header_len(&self) -> usize {
        20 + self.options.len().div_ceil(4) * 4
    }

    /// The UDP destination port, when this is a whole UDP datagram.
    pub fn udp_dst_port(&self) -> Option<u16> {
        (self.protocol == IPPROTO_UDP && self.frag & 0x1fff == 0 && self.payload.len() >= 8)
            .then(|| u16_at(&self.payload, 2))
    }

    fn parse(b: &[u8]) -> Result<Ipv4, EtherError> {
        let ip = Ipv4Packet::new_checked(b).map_err(|e| match e {
            Ipv4Error::Truncated { have, need } if need == ipv4::HEADER_LEN => {
                EtherError::Truncated(have + 14)
            }
            Ipv4Error::Truncated { need, .. } => EtherError::BadHeaderLength(need),
            Ipv4Error::Version(v) => EtherError::NotIpv4(v),
            Ipv4Error::HeaderLen(len) => EtherError::BadHeaderLength(len),
        })?;
        let (hlen, total) = (ip.header_len(), ip.total_len());
        if total < hlen || total > b.len() {
            return Err(EtherError::BadHeaderLength(hlen));
        }
        if !ip.verify_checksum() {
            return Err(EtherError::BadChecksum);
        }
        Ok(Ipv4 {
            tos: ip.tos(),
            id: ip.ident(),
            frag: ip.flags_frag(),
            ttl: ip.ttl(),
            protocol: ip.protocol(),
            src: ip.src_addr(),
            dst: ip.dst_addr(),
            options: ip.options().to_vec(),
            payload: b[hlen..total].to_vec(),
        })
    }

    fn emit(&self, b: &mut [u8]) {
        let hlen = self.header_len();
        let total = hlen + self.payload.len();
        let mut ip = Ipv4Packet::new_unchecked(&mut b[..total]);
        ip.set_header_len(hlen);
        ip.set_tos(self.tos);
        ip.set_total_len(total as u16);
        ip.set_ident(self.id);
        ip.set_flags_frag(self.frag);
        ip.set_ttl(self.ttl);
        ip.set_protocol(self.protocol);
        ip.set_src_addr(self.src);
        ip.set_dst_addr(self.dst);
        let options = ip.options_mut();
        options[..self.options.len()].copy_from_slice(&self.options);
        options[self.options.len()..].fill(0);
        ip.fill_checksum();
        ip.payload_mut().copy_from_slice(&self.payload);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rip_probe() -> Frame {
        Frame {
            dst: BROADCAST_MAC,
            src: [2, 0, 0, 0, 0, 5],
            payload: Payload::Ipv4(Ipv4::udp(
                Ipv4Addr::new(10, 90, 0, 5),
                Ipv4Addr::new(10, 90, 0, 255),
                (520, 520),
                30,
                &[2, 1, 0, 0],
            )),
        }
    }

    #[test]
    fn frames_round_trip_and_are_padded_to_the_minimum() {
        let frame = rip_probe();
        let bytes = frame.to_bytes();
        assert_eq!(bytes.len(), MIN_FRAME, "a 46-byte frame is padded to 60");
        assert_eq!(Frame::parse(&bytes), Ok(frame.clone()));
        let Payload::Ipv4(ip) = &frame.payload else {
            unreachable!()
        };
        assert_eq!(ip.udp_dst_port(), Some(520));
        let arp = Frame {
            dst: BROADCAST_MAC,
            src: [2, 0, 0, 0, 0, 1],
            payload: Payload::Arp(Arp {
                op: ARP_REQUEST,
                sender_mac: [2, 0, 0, 0, 0, 1],
                sender_ip: Ipv4Addr::new(10, 90, 0, 1),
                target_mac: [0; 6],
                target_ip: Ipv4Addr::new(10, 90, 0, 255),
            }),
        };
        assert_eq!(Frame::parse(&arp.to_bytes()), Ok(arp));
    }

    #[test]
    fn a_corrupted_header_checksum_is_refused() {
        let mut bytes = rip_probe().to_bytes();
        bytes[14 + 8] ^= 1; // the TTL, under the header checksum
        assert_eq!(Frame::parse(&bytes), Err(EtherError::BadChecksum));
    }

    #[test]
    fn truncated_and_lying_headers_are_errors_not_panics() {
        let bytes = rip_probe().to_bytes();
        for cut in 0..bytes.len() {
            let _ = Frame::parse(&bytes[..cut]);
        }
        let mut long = bytes.clone();
        long[14 + 2..14 + 4].copy_from_slice(&2000u16.to_be_bytes());
        assert!(matches!(
            Frame::parse(&long),
            Err(EtherError::BadHeaderLength(_))
        ));
    }
}
