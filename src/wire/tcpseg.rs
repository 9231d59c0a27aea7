//! Just enough of IPv4 (RFC 791 §3.1) and TCP (RFC 9293 §3.1) headers to
//! draw a packet timeline: ports, flags, sequence numbers and payload length
//! of a captured frame. Parsing only; every length is checked against the
//! frame, so truncated or hostile frames yield `None`, never a panic.

/// TCP flag bits.
pub mod flags {
    pub const FIN: u8 = 0x01;
    pub const SYN: u8 = 0x02;
    pub const RST: u8 = 0x04;
    pub const PSH: u8 = 0x08;
    pub const ACK: u8 = 0x10;
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Segment {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: u32,
    pub ack: u32,
    pub flags: u8,
    /// TCP payload bytes (from the IP total length, so a short capture still knows it).
    pub payload: u32,
}

/// Parses an IPv4/TCP frame after `link_header` bytes of link-layer header.
pub fn parse(frame: &[u8], link_header: usize) -> Option<Segment> {
    let ip = frame.get(link_header..)?;
    let version_ihl = *ip.first()?;
    if version_ihl >> 4 != 4 {
        return None;
    }
    let ihl = usize::from(version_ihl & 0x0f) * 4;
    if ihl < 20 || *ip.get(9)? != 6 {
        return None;
    }
    let total = usize::from(u16::from_be_bytes([*ip.get(2)?, *ip.get(3)?]));
    let tcp = ip.get(ihl..)?;
    let word = |i: usize| -> Option<u32> {
        Some(u32::from_be_bytes([
            *tcp.get(i)?,
            *tcp.get(i + 1)?,
            *tcp.get(i + 2)?,
            *tcp.get(i + 3)?,
        ]))
    };
    let data_offset = usize::from(*tcp.get(12)? >> 4) * 4;
    if data_offset < 20 || total < ihl + data_offset {
        return None;
    }
    Some(Segment {
        src_port: u16::from_be_bytes([*tcp.first()?, *tcp.get(1)?]),
        dst_port: u16::from_be_bytes([*tcp.get(2)?, *tcp.get(3)?]),
        seq: word(4)?,
        ack: word(8)?,
        flags: *tcp.get(13)?,
        payload: (total - ihl - data_offset) as u32,
    })
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

    #[test]
    fn parses_a_real_frame() {
        let s = parse(&FRAME, 14).unwrap();
        assert_eq!((s.src_port, s.dst_port), (40000, 5001));
        assert_eq!((s.seq, s.ack), (1, 2));
        assert_eq!(s.flags, flags::PSH | flags::ACK);
        assert_eq!(s.payload, 4);
        assert_eq!(flag_names(s.flags), "[PSH ACK]");
        // The same packet on a TUN device has no link header.
        assert_eq!(parse(&FRAME[14..], 0), Some(s));
    }

    #[test]
    fn truncated_and_foreign_frames_are_none() {
        // Every field read lies in the first 48 bytes.
        for cut in 0..48 {
            assert!(parse(&FRAME[..cut], 14).is_none(), "cut {cut}");
        }
        let mut udp = FRAME;
        udp[23] = 17;
        assert!(parse(&udp, 14).is_none());
        let mut v6 = FRAME;
        v6[14] = 0x60;
        assert!(parse(&v6, 14).is_none());
    }
}
