//! `TCP_INFO`: the kernel's own view of one TCP connection.
//!
//! The layout is `struct tcp_info` of `include/uapi/linux/tcp.h`. It only ever
//! grows at the end, and `getsockopt` returns how many bytes this kernel
//! filled, so [`TcpInfo::parse`] reads each field only when the returned
//! length covers it and leaves it `None` otherwise. Parsing from bytes (rather
//! than transmuting a struct) keeps that rule in one place and testable.

use serde::{Deserialize, Serialize};
use std::os::fd::{AsRawFd, BorrowedFd};

/// The fields netlab reports, in the kernel's units converted to plain ones.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TcpInfo {
    /// Smoothed round-trip time, microseconds.
    pub rtt_us: u32,
    /// Round-trip time variation, microseconds.
    pub rttvar_us: u32,
    /// Congestion window, in segments.
    pub snd_cwnd: u32,
    /// Sender's maximum segment size in force.
    pub snd_mss: u32,
    /// Largest segment received so far (receiver's estimate of the peer's MSS).
    pub rcv_mss: u32,
    /// Path MTU.
    pub pmtu: u32,
    /// Segments retransmitted over the connection's life.
    pub total_retrans: u32,
    /// Segments sent, including pure ACKs and retransmissions.
    pub segs_out: Option<u32>,
    /// Segments received, including pure ACKs.
    pub segs_in: Option<u32>,
    /// Segments sent that carried data.
    pub data_segs_out: Option<u32>,
    /// Segments received that carried data.
    pub data_segs_in: Option<u32>,
    /// Bytes acknowledged by the peer.
    pub bytes_acked: Option<u64>,
    /// Bytes received from the peer.
    pub bytes_received: Option<u64>,
    /// The kernel's most recent delivery-rate estimate, bytes per second.
    pub delivery_rate_bps: Option<u64>,
    /// Minimum RTT seen, microseconds.
    pub min_rtt_us: Option<u32>,
    /// Microseconds the sender was limited by the receive window.
    pub rwnd_limited_us: Option<u64>,
    /// Microseconds the sender was limited by its send buffer.
    pub sndbuf_limited_us: Option<u64>,
    /// Microseconds the connection had data in flight.
    pub busy_time_us: Option<u64>,
    /// Whether the last delivery-rate sample was taken while the sender
    /// had too little to send to fill its window (the application, not
    /// the path, set that rate): `tcpi_delivery_rate_app_limited`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub delivery_rate_app_limited: Option<bool>,
    /// The congestion-avoidance state (`tcpi_ca_state`: 0 open, 1
    /// disorder, 2 CWR, 3 recovery, 4 loss).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ca_state: Option<u8>,
    /// The slow-start threshold, segments (`0x7fffffff`: never set).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_ssthresh: Option<u32>,
    /// Bytes sent, retransmissions included, and of them retransmitted
    /// (Linux 4.19).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_sent: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_retrans: Option<u64>,
    /// The peer's advertised window, bytes (Linux 6.2).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snd_wnd: Option<u32>,
}

fn u32_at(buf: &[u8], offset: usize) -> Option<u32> {
    buf.get(offset..offset + 4)
        .map(|b| u32::from_ne_bytes(b.try_into().expect("4 bytes")))
}

fn u64_at(buf: &[u8], offset: usize) -> Option<u64> {
    buf.get(offset..offset + 8)
        .map(|b| u64::from_ne_bytes(b.try_into().expect("8 bytes")))
}

/// Byte offsets in `struct tcp_info` (the first eight fields are u8s).
mod offset {
    /// The byte holding `tcpi_delivery_rate_app_limited` (bit 0), a
    /// bitfield after `tcpi_snd_wscale`/`tcpi_rcv_wscale`; meaningful
    /// only in layouts that carry `tcpi_delivery_rate` (Linux 4.9).
    pub const APP_LIMITED: usize = 7;
    pub const SND_MSS: usize = 16;
    pub const RCV_MSS: usize = 20;
    pub const PMTU: usize = 60;
    pub const RTT: usize = 68;
    pub const RTTVAR: usize = 72;
    pub const SND_CWND: usize = 80;
    pub const TOTAL_RETRANS: usize = 100;
    pub const BYTES_ACKED: usize = 120;
    pub const BYTES_RECEIVED: usize = 128;
    pub const SEGS_OUT: usize = 136;
    pub const SEGS_IN: usize = 140;
    pub const MIN_RTT: usize = 148;
    pub const DATA_SEGS_IN: usize = 152;
    pub const DATA_SEGS_OUT: usize = 156;
    pub const DELIVERY_RATE: usize = 160;
    pub const BUSY_TIME: usize = 168;
    pub const RWND_LIMITED: usize = 176;
    pub const SNDBUF_LIMITED: usize = 184;
    pub const CA_STATE: usize = 1;
    pub const SND_SSTHRESH: usize = 76;
    pub const BYTES_SENT: usize = 200;
    pub const BYTES_RETRANS: usize = 208;
    /// The oldest layout (Linux 2.6) ends after tcpi_total_retrans.
    pub const MINIMUM: usize = 104;
}

impl TcpInfo {
    /// Parses the bytes `getsockopt(TCP_INFO)` filled. `None` if even the
    /// oldest layout is not covered.
    pub fn parse(buf: &[u8]) -> Option<TcpInfo> {
        if buf.len() < offset::MINIMUM {
            return None;
        }
        Some(TcpInfo {
            rtt_us: u32_at(buf, offset::RTT)?,
            rttvar_us: u32_at(buf, offset::RTTVAR)?,
            snd_cwnd: u32_at(buf, offset::SND_CWND)?,
            snd_mss: u32_at(buf, offset::SND_MSS)?,
            rcv_mss: u32_at(buf, offset::RCV_MSS)?,
            pmtu: u32_at(buf, offset::PMTU)?,
            total_retrans: u32_at(buf, offset::TOTAL_RETRANS)?,
            segs_out: u32_at(buf, offset::SEGS_OUT),
            segs_in: u32_at(buf, offset::SEGS_IN),
            data_segs_out: u32_at(buf, offset::DATA_SEGS_OUT),
            data_segs_in: u32_at(buf, offset::DATA_SEGS_IN),
            bytes_acked: u64_at(buf, offset::BYTES_ACKED),
            bytes_received: u64_at(buf, offset::BYTES_RECEIVED),
            delivery_rate_bps: u64_at(buf, offset::DELIVERY_RATE),
            min_rtt_us: u32_at(buf, offset::MIN_RTT),
            busy_time_us: u64_at(buf, offset::BUSY_TIME),
            rwnd_limited_us: u64_at(buf, offset::RWND_LIMITED),
            sndbuf_limited_us: u64_at(buf, offset::SNDBUF_LIMITED),
            delivery_rate_app_limited: u64_at(buf, offset::DELIVERY_RATE)
                .map(|_| buf[offset::APP_LIMITED] & 1 == 1),
            ca_state: buf.get(offset::CA_STATE).copied(),
            snd_ssthresh: u32_at(buf, offset::SND_SSTHRESH),
            bytes_sent: u64_at(buf, offset::BYTES_SENT),
            bytes_retrans: u64_at(buf, offset::BYTES_RETRANS),
            snd_wnd: u32_at(buf, state_offset::SND_WND),
        })
    }

    /// Reads `TCP_INFO` from a connected TCP socket.
    pub fn read(fd: BorrowedFd<'_>) -> std::io::Result<TcpInfo> {
        let mut buf = [0u8; 512];
        let len = read_raw(fd, &mut buf)?;
        TcpInfo::parse(&buf[..len])
            .ok_or_else(|| std::io::Error::other(format!("TCP_INFO returned only {len} bytes")))
    }
}

/// The share of what a sender sent that it sent again: bytes retransmitted
/// over bytes sent (`tcpi_bytes_retrans`, `tcpi_bytes_sent`, 4.19), else
/// segments (`tcpi_total_retrans` over `tcpi_data_segs_out`); `None` with
/// nothing sent to count against.
pub fn retransmitted_share(
    bytes_retrans: Option<u64>,
    bytes_sent: Option<u64>,
    total_retrans: u32,
    data_segs_out: Option<u32>,
) -> Option<f64> {
    match (bytes_retrans, bytes_sent) {
        (Some(retrans), Some(sent)) if sent > 0 => Some(retrans as f64 / sent as f64),
        _ => data_segs_out
            .filter(|&n| n > 0)
            .map(|n| f64::from(total_retrans) / f64::from(n)),
    }
}

impl TcpInfo {
    /// The chrono counters, µs: busy, receive-window-limited and
    /// send-buffer-limited (a kernel before 4.10 has none).
    pub fn chrono_us(&self) -> Option<[u64; 3]> {
        Some([
            self.busy_time_us?,
            self.rwnd_limited_us?,
            self.sndbuf_limited_us?,
        ])
    }

    /// See [`retransmitted_share`].
    pub fn retransmitted_share(&self) -> Option<f64> {
        retransmitted_share(
            self.bytes_retrans,
            self.bytes_sent,
            self.total_retrans,
            self.data_segs_out,
        )
    }
}

/// BBR's bandwidth estimate, bits/s, from `TCP_CC_INFO` (`struct
/// tcp_bbr_info`: `bbr_bw_lo`, `bbr_bw_hi`, bytes per second); `None` for
/// a congestion control that reports no BBR info, or fewer bytes.
pub fn bbr_bandwidth(fd: BorrowedFd<'_>) -> Option<u64> {
    let mut buf = [0u8; 20];
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for len bytes; the kernel writes at most len.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CC_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 || (len as usize) < buf.len() {
        return None;
    }
    parse_bbr_bandwidth(&buf)
}

/// `struct tcp_bbr_info`'s bandwidth as bits/s (its first two u32s).
pub fn parse_bbr_bandwidth(buf: &[u8]) -> Option<u64> {
    let lo = u64::from(u32_at(buf, 0)?);
    let hi = u64::from(u32_at(buf, 4)?);
    Some(((hi << 32) | lo).saturating_mul(8))
}

/// What `TCP_INFO` says of a connection that has stopped moving: its
/// state, what is outstanding and how long since anything arrived. Read
/// only when a data path gave up waiting (`endpoint::stall`), never on it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct TcpState {
    /// `tcpi_state` (include/net/tcp_states.h).
    pub state: u8,
    /// Retransmission timeouts in a row for the same data (`tcpi_retransmits`).
    pub retransmits: u8,
    /// Zero-window probes sent without an answer (`tcpi_probes`).
    pub probes: u8,
    /// Exponential backoff of the retransmission timer (`tcpi_backoff`).
    pub backoff: u8,
    /// Retransmission timeout, microseconds.
    pub rto_us: u32,
    /// Segments sent and not yet acknowledged.
    pub unacked: u32,
    /// Milliseconds since data was last received, and since an ACK was.
    pub last_data_recv_ms: u32,
    pub last_ack_recv_ms: u32,
    /// Bytes written and not yet sent (Linux 4.6).
    pub notsent_bytes: Option<u32>,
    /// The peer's advertised window, bytes (Linux 6.2).
    pub snd_wnd: Option<u32>,
}

mod state_offset {
    pub const STATE: usize = 0;
    pub const RETRANSMITS: usize = 2;
    pub const PROBES: usize = 3;
    pub const BACKOFF: usize = 4;
    pub const RTO: usize = 8;
    pub const UNACKED: usize = 24;
    pub const LAST_DATA_RECV: usize = 52;
    pub const LAST_ACK_RECV: usize = 56;
    pub const NOTSENT_BYTES: usize = 144;
    pub const SND_WND: usize = 228;
}

/// `tcpi_state`'s names, in the kernel's order (TCP_ESTABLISHED = 1).
const STATE_NAMES: [&str; 12] = [
    "?",
    "ESTABLISHED",
    "SYN-SENT",
    "SYN-RECV",
    "FIN-WAIT-1",
    "FIN-WAIT-2",
    "TIME-WAIT",
    "CLOSE",
    "CLOSE-WAIT",
    "LAST-ACK",
    "LISTEN",
    "CLOSING",
];

impl TcpState {
    /// Both views of one `TCP_INFO` read (one system call for a sampler
    /// that wants the two).
    pub fn read_with_info(fd: BorrowedFd<'_>) -> std::io::Result<(TcpState, TcpInfo)> {
        let mut buf = [0u8; 512];
        let len = read_raw(fd, &mut buf)?;
        TcpState::parse(&buf[..len])
            .zip(TcpInfo::parse(&buf[..len]))
            .ok_or_else(|| std::io::Error::other(format!("TCP_INFO returned only {len} bytes")))
    }

    pub fn parse(buf: &[u8]) -> Option<TcpState> {
        use state_offset::*;
        if buf.len() < offset::MINIMUM {
            return None;
        }
        Some(TcpState {
            state: buf[STATE],
            retransmits: buf[RETRANSMITS],
            probes: buf[PROBES],
            backoff: buf[BACKOFF],
            rto_us: u32_at(buf, RTO)?,
            unacked: u32_at(buf, UNACKED)?,
            last_data_recv_ms: u32_at(buf, LAST_DATA_RECV)?,
            last_ack_recv_ms: u32_at(buf, LAST_ACK_RECV)?,
            notsent_bytes: u32_at(buf, NOTSENT_BYTES),
            snd_wnd: u32_at(buf, SND_WND),
        })
    }

    pub fn read(fd: BorrowedFd<'_>) -> std::io::Result<TcpState> {
        let mut buf = [0u8; 512];
        let len = read_raw(fd, &mut buf)?;
        TcpState::parse(&buf[..len])
            .ok_or_else(|| std::io::Error::other(format!("TCP_INFO returned only {len} bytes")))
    }

    /// In words, for a stalled cell's reason: "TCP_INFO: ESTABLISHED, 312
    /// segments unacknowledged, backoff 11, ...".
    pub fn describe(&self) -> String {
        let mut parts = vec![
            STATE_NAMES
                .get(usize::from(self.state))
                .copied()
                .unwrap_or("?")
                .to_string(),
            format!("{} segments unacknowledged", self.unacked),
        ];
        if self.backoff > 0 {
            parts.push(format!("backoff {}", self.backoff));
        }
        if self.retransmits > 0 {
            parts.push(format!("{} timeouts in a row", self.retransmits));
        }
        if self.probes > 0 {
            parts.push(format!("{} window probes unanswered", self.probes));
        }
        parts.push(format!("RTO {:.0} ms", f64::from(self.rto_us) / 1000.0));
        if let Some(bytes) = self.notsent_bytes.filter(|&b| b > 0) {
            parts.push(format!("{bytes} bytes not yet sent"));
        }
        match self.snd_wnd {
            Some(0) => parts.push("peer's window 0 bytes (the peer is not reading)".into()),
            Some(window) => parts.push(format!("peer's window {window} bytes")),
            None => {}
        }
        if self.unacked > 0 && self.backoff > 0 {
            parts.push("(nothing acknowledged since: the path or the peer stopped)".into());
        }
        parts.push(format!(
            "last data received {:.1} s ago, last ACK {:.1} s ago",
            f64::from(self.last_data_recv_ms) / 1000.0,
            f64::from(self.last_ack_recv_ms) / 1000.0
        ));
        format!("TCP_INFO: {}", parts.join(", "))
    }
}

/// `getsockopt(TCP_INFO)` into `buf`: how many bytes the kernel filled.
fn read_raw(fd: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for len bytes; the kernel writes at most len.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_INFO,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(len as usize)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    #[test]
    fn parses_fields_at_their_offsets() {
        let mut buf = vec![0u8; 200];
        buf[offset::RTT..offset::RTT + 4].copy_from_slice(&1234u32.to_ne_bytes());
        buf[offset::CA_STATE] = 3;
        buf[offset::SND_SSTHRESH..offset::SND_SSTHRESH + 4]
            .copy_from_slice(&0x7fff_ffffu32.to_ne_bytes());
        buf[offset::SND_CWND..offset::SND_CWND + 4].copy_from_slice(&10u32.to_ne_bytes());
        buf[offset::SEGS_OUT..offset::SEGS_OUT + 4].copy_from_slice(&77u32.to_ne_bytes());
        buf[offset::DELIVERY_RATE..offset::DELIVERY_RATE + 8]
            .copy_from_slice(&5_000_000u64.to_ne_bytes());
        let info = TcpInfo::parse(&buf).unwrap();
        assert_eq!(info.rtt_us, 1234);
        assert_eq!(info.snd_cwnd, 10);
        assert_eq!(info.segs_out, Some(77));
        assert_eq!(info.delivery_rate_bps, Some(5_000_000));
        assert_eq!(info.sndbuf_limited_us, Some(0));
        assert_eq!(info.delivery_rate_app_limited, Some(false));
        assert_eq!(info.ca_state, Some(3));
        assert_eq!(info.snd_ssthresh, Some(0x7fff_ffff));
        // A 4.18 layout (200 bytes) has no byte counts of what was sent.
        assert_eq!(info.bytes_sent, None);
        buf.resize(216, 0);
        buf[offset::BYTES_SENT..offset::BYTES_SENT + 8].copy_from_slice(&9000u64.to_ne_bytes());
        buf[offset::BYTES_RETRANS..offset::BYTES_RETRANS + 8].copy_from_slice(&90u64.to_ne_bytes());
        let info = TcpInfo::parse(&buf).unwrap();
        assert_eq!(
            (info.bytes_sent, info.bytes_retrans),
            (Some(9000), Some(90))
        );
        assert_eq!(
            parse_bbr_bandwidth(&[0x40, 0x42, 0x0f, 0, 1, 0, 0, 0]),
            Some(((1u64 << 32) + 1_000_000) * 8)
        );
        // Bit 0 of byte 7; the fastopen bits beside it do not count.
        buf[offset::APP_LIMITED] = 0b110;
        assert_eq!(
            TcpInfo::parse(&buf).unwrap().delivery_rate_app_limited,
            Some(false)
        );
        buf[offset::APP_LIMITED] = 0b111;
        assert_eq!(
            TcpInfo::parse(&buf).unwrap().delivery_rate_app_limited,
            Some(true)
        );
    }

    #[test]
    fn a_stalled_connection_is_described_from_its_state_fields() {
        let mut buf = vec![0u8; state_offset::SND_WND];
        buf[state_offset::STATE] = 1;
        buf[state_offset::BACKOFF] = 11;
        buf[state_offset::UNACKED..state_offset::UNACKED + 4]
            .copy_from_slice(&312u32.to_ne_bytes());
        buf[state_offset::RTO..state_offset::RTO + 4].copy_from_slice(&204_000u32.to_ne_bytes());
        let state = TcpState::parse(&buf).unwrap();
        assert_eq!(
            (state.backoff, state.unacked, state.snd_wnd),
            (11, 312, None)
        );
        let words = state.describe();
        assert!(
            words.starts_with("TCP_INFO: ESTABLISHED, 312 segments unacknowledged, backoff 11"),
            "{words}"
        );
        assert!(words.contains("RTO 204 ms"), "{words}");
        assert!(TcpState::parse(&buf[..50]).is_none());
    }

    #[test]
    fn short_layouts_leave_newer_fields_empty() {
        let info = TcpInfo::parse(&[0u8; offset::MINIMUM]).unwrap();
        assert_eq!(info.segs_out, None);
        assert_eq!(info.delivery_rate_bps, None);
        assert_eq!(info.delivery_rate_app_limited, None);
        assert!(TcpInfo::parse(&[0u8; 50]).is_none());
    }

    #[test]
    fn real_connection_counts_its_bytes() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        client.write_all(&[7u8; 10_000]).unwrap();
        let mut got = vec![0u8; 10_000];
        server.read_exact(&mut got).unwrap();
        server.write_all(b"ok").unwrap();
        let mut ack = [0u8; 2];
        client.read_exact(&mut ack).unwrap();
        let info = TcpInfo::read(client.as_fd()).unwrap();
        // Linux counts the SYN in bytes_acked on the active side.
        assert!(
            matches!(info.bytes_acked, Some(10_000..=10_001)),
            "{info:?}"
        );
        let info = TcpInfo::read(server.as_fd()).unwrap();
        assert_eq!(info.bytes_received, Some(10_000));
        assert!(info.data_segs_in.unwrap() >= 1);
        assert!(info.snd_mss > 0);
    }
}
