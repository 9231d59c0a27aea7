//! The wire view: what a capture of the link shows, reduced to the figures
//! Van Jacobson read off his scope: packets and bytes each way, the packet
//! size histogram, gaps between packets, bursts and idle time.
//!
//! Definitions (per direction, since each direction of a full-duplex link is
//! its own wire):
//! - a packet's *serialisation time* is its length × 8 / link rate; on an
//!   unshaped link netlab uses 1 µs instead (no rate to divide by);
//! - two packets are *back to back* when the gap between their starts is at
//!   most 1.5 × the first one's serialisation time (a little slack for
//!   timestamp noise); a *burst* is a maximal run of back-to-back packets;
//! - *idle time* is the sum of the parts of each gap beyond the previous
//!   packet's serialisation time, i.e. time the wire carried nothing.

use crate::record::testbed::{DirectionSummary, WireSummary};
use serde::{Deserialize, Serialize};

/// One captured packet.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireEvent {
    /// Capture timestamp, ns (any epoch, monotone within a capture).
    pub t_ns: u64,
    /// Length on the wire (link-layer header included where there is one).
    pub len: u32,
    /// Sent by the capturing side (true) or received by it (false).
    pub outgoing: bool,
}

/// Upper bounds (inclusive) of the packet size histogram's buckets; the last bucket is "larger".
pub const SIZE_BUCKETS: [u32; 8] = [64, 128, 256, 512, 1024, 1518, 9018, 65535];

fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let rank = ((sorted.len() - 1) as f64 * q).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}

fn direction(events: &[WireEvent], rate_bps: Option<u64>) -> DirectionSummary {
    let mut s = DirectionSummary {
        size_histogram: vec![0; SIZE_BUCKETS.len() + 1],
        ..Default::default()
    };
    if events.is_empty() {
        return s;
    }
    let serialisation_ns = |len: u32| match rate_bps {
        Some(rate) if rate > 0 => u64::from(len) * 8 * 1_000_000_000 / rate,
        _ => 1_000,
    };
    let mut gaps = Vec::with_capacity(events.len());
    let (mut burst_len, mut bursts, mut burst_packets, mut longest) = (1u64, 0u64, 0u64, 1u64);
    let mut idle_ns = 0u64;
    for (i, e) in events.iter().enumerate() {
        s.packets += 1;
        s.bytes += u64::from(e.len);
        let bucket = SIZE_BUCKETS
            .iter()
            .position(|&b| e.len <= b)
            .unwrap_or(SIZE_BUCKETS.len());
        s.size_histogram[bucket] += 1;
        if i == 0 {
            continue;
        }
        let prev = events[i - 1];
        let gap = e.t_ns.saturating_sub(prev.t_ns);
        gaps.push(gap as f64 / 1000.0);
        let busy = serialisation_ns(prev.len);
        idle_ns += gap.saturating_sub(busy);
        if gap * 2 <= busy * 3 {
            burst_len += 1;
        } else {
            if burst_len > 1 {
                bursts += 1;
                burst_packets += burst_len;
            }
            longest = longest.max(burst_len);
            burst_len = 1;
        }
    }
    if burst_len > 1 {
        bursts += 1;
        burst_packets += burst_len;
    }
    longest = longest.max(burst_len);
    gaps.sort_by(f64::total_cmp);
    s.mean_size = s.bytes as f64 / s.packets as f64;
    s.gap_us_p50 = percentile(&gaps, 0.5);
    s.gap_us_p90 = percentile(&gaps, 0.9);
    s.gap_us_p99 = percentile(&gaps, 0.99);
    s.gap_us_max = gaps.last().copied().unwrap_or(0.0);
    s.bursts = bursts;
    s.mean_burst_packets = if bursts > 0 {
        burst_packets as f64 / bursts as f64
    } else {
        0.0
    };
    s.longest_burst_packets = longest;
    s.idle_ms = idle_ns as f64 / 1e6;
    s.span_ms = events
        .last()
        .map_or(0.0, |l| (l.t_ns - events[0].t_ns) as f64 / 1e6);
    s
}

/// Summarises a capture (events in capture order).
pub fn summarize(events: &[WireEvent], rate_bps: Option<u64>) -> WireSummary {
    let (out, inc): (Vec<WireEvent>, Vec<WireEvent>) = events.iter().partition(|e| e.outgoing);
    WireSummary {
        outgoing: direction(&out, rate_bps),
        incoming: direction(&inc, rate_bps),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(t_us: u64, len: u32, outgoing: bool) -> WireEvent {
        WireEvent {
            t_ns: t_us * 1000,
            len,
            outgoing,
        }
    }

    #[test]
    fn bursts_gaps_and_idle_at_10_mbit() {
        // 1500 B at 10 Mbit/s takes 1200 µs. Three back to back, a 10 ms pause, two back to back.
        let events = [
            ev(0, 1500, true),
            ev(1200, 1500, true),
            ev(2400, 1500, true),
            ev(13_600, 1500, true),
            ev(14_800, 1500, true),
            ev(500, 66, false),
        ];
        let s = summarize(&events, Some(10_000_000));
        let o = &s.outgoing;
        assert_eq!(o.packets, 5);
        assert_eq!(o.bytes, 7500);
        assert_eq!(o.bursts, 2);
        assert_eq!(o.longest_burst_packets, 3);
        assert!((o.mean_burst_packets - 2.5).abs() < 1e-9);
        // Idle: the gap of 11,200 µs minus 1,200 µs busy = 10 ms.
        assert!((o.idle_ms - 10.0).abs() < 1e-9, "{}", o.idle_ms);
        assert!((o.span_ms - 14.8).abs() < 1e-9);
        assert_eq!(o.gap_us_p50, 1200.0);
        assert_eq!(o.gap_us_max, 11_200.0);
        assert_eq!(o.size_histogram[5], 5); // 1024 < 1500 <= 1518
        assert_eq!(s.incoming.packets, 1);
        assert_eq!(s.incoming.size_histogram[1], 1); // 64 < 66 <= 128
    }

    #[test]
    fn empty_and_single() {
        let s = summarize(&[], None);
        assert_eq!(s.outgoing.packets, 0);
        let s = summarize(&[ev(5, 100, true)], None);
        assert_eq!(s.outgoing.packets, 1);
        assert_eq!(s.outgoing.bursts, 0);
        assert_eq!(s.outgoing.longest_burst_packets, 1);
    }
}

/// The segments of the last complete call in a port-filtered capture of a
/// request/response protocol: from the client's first data segment of a
/// request to the server's first data segment of the reply, one line each
/// with the time since the call began, e.g.
/// `+40.912 ms server->client 0 B [ACK]`.
pub fn last_call_timeline(
    events: &[crate::record::testbed::TimelineEvent],
    server_port: u16,
) -> Vec<String> {
    let to_server = |e: &crate::record::testbed::TimelineEvent| e.dst_port == server_port;
    // Where each request begins: client data after server data (or first).
    let mut starts = Vec::new();
    let mut last_data_from_server = true;
    for (i, e) in events.iter().enumerate() {
        if e.payload == 0 {
            continue;
        }
        if to_server(e) {
            if last_data_from_server {
                starts.push(i);
            }
            last_data_from_server = false;
        } else {
            last_data_from_server = true;
        }
    }
    for &start in starts.iter().rev() {
        let Some(end) = events[start..]
            .iter()
            .position(|e| !to_server(e) && e.payload > 0)
            .map(|p| start + p)
        else {
            continue;
        };
        let t0 = events[start].t_ns;
        return events[start..=end]
            .iter()
            .map(|e| {
                format!(
                    "+{:.3} ms {} {} B {}",
                    e.t_ns.saturating_sub(t0) as f64 / 1e6,
                    if to_server(e) {
                        "client->server"
                    } else {
                        "server->client"
                    },
                    e.payload,
                    crate::wire::tcpseg::flag_names(e.flags)
                )
            })
            .collect();
    }
    Vec::new()
}

#[cfg(test)]
mod timeline_tests {
    use super::*;
    use crate::record::testbed::TimelineEvent;

    fn ev(t_us: u64, to_server: bool, payload: u32, flags: u8) -> TimelineEvent {
        let (src_port, dst_port) = if to_server {
            (40000, 5001)
        } else {
            (5001, 40000)
        };
        TimelineEvent {
            t_ns: t_us * 1000,
            src_port,
            dst_port,
            payload,
            flags,
        }
    }

    #[test]
    fn picks_the_last_complete_call() {
        let events = [
            ev(0, true, 4000, 0x18),
            ev(40_000, false, 0, 0x10),
            ev(40_010, true, 148, 0x18),
            ev(40_050, false, 28, 0x18),
            // Second call, the one shown.
            ev(50_000, true, 4000, 0x18),
            ev(50_005, true, 0, 0x10),
            ev(91_000, false, 0, 0x10),
            ev(91_010, true, 148, 0x18),
            ev(91_100, false, 28, 0x18),
            // A third call that never got its reply.
            ev(95_000, true, 4000, 0x18),
        ];
        let lines = last_call_timeline(&events, 5001);
        assert_eq!(lines.len(), 5, "{lines:?}");
        assert_eq!(lines[0], "+0.000 ms client->server 4000 B [PSH ACK]");
        assert_eq!(lines[2], "+41.000 ms server->client 0 B [ACK]");
        assert_eq!(lines[4], "+41.100 ms server->client 28 B [PSH ACK]");
        assert!(last_call_timeline(&events[9..], 5001).is_empty());
    }
}
