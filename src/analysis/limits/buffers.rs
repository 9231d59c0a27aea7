//! The buffers at either end: the receiver's advertised window (and what its
//! kernel did to fit the queue into it) and the sender's socket buffer.

use super::evidence::*;
use super::thresholds::*;
use super::verdict::*;
use std::collections::BTreeMap;

/// The receiver's kernel making room in its receive queue, and the
/// segments it dropped for want of it (`tcp_prune_queue`,
/// `tcp_data_queue`, `tcp_add_backlog`): the names in `TcpExt`.
pub(super) const RECEIVE_QUEUE: [&str; 8] = [
    "PruneCalled",
    "RcvPruned",
    "OfoPruned",
    "TCPRcvCollapsed",
    "TCPRcvQDrop",
    "TCPBacklogDrop",
    "TCPZeroWindowDrop",
    "TCPToZeroWindowAdv",
];

/// Of [`RECEIVE_QUEUE`], those that count dropped segments.
pub(super) const RECEIVE_DROPS: [&str; 4] = [
    "RcvPruned",
    "TCPRcvQDrop",
    "TCPBacklogDrop",
    "TCPZeroWindowDrop",
];

/// The receiver's queue counters that moved, and the names the record
/// lacks (None: no counters at all).
pub(super) fn receive_queue(
    side: &SideEvidence,
) -> Option<(BTreeMap<String, f64>, Vec<&'static str>)> {
    let counters = side.counters.as_ref()?;
    let mut moved = BTreeMap::new();
    let mut lacking = Vec::new();
    for name in RECEIVE_QUEUE {
        match counters.get(&format!("TcpExt.{name}")) {
            Some(&n) if n > 0 => {
                moved.insert(name.to_string(), n as f64);
            }
            Some(_) => {}
            None => lacking.push(name),
        }
    }
    Some((moved, lacking))
}

/// Segments the receiver's kernel dropped for want of room.
pub(super) fn receive_drops(side: &SideEvidence) -> u64 {
    side.counters.as_ref().map_or(0, |c| {
        RECEIVE_DROPS
            .iter()
            .map(|name| c.get(&format!("TcpExt.{name}")).copied().unwrap_or(0))
            .sum()
    })
}

/// How a buffer-bound verdict names one side's buffer.
pub(super) struct BufferWords {
    factor: Factor,
    /// The chrono's share, as evidence.
    stalled: &'static str,
    /// "receive" or "send".
    noun: &'static str,
    sysctl: &'static str,
    option: &'static str,
    /// Why a buffer over twice the BDP still filled.
    filled: &'static str,
}

pub(super) const RECEIVING: BufferWords = BufferWords {
    factor: Factor::ReceiveWindow,
    stalled: "rwnd_limited_share",
    noun: "receive",
    sysctl: "tcp_rmem",
    option: "--rcvbuf",
    filled: "and still filled: the reader fell behind (its reads, its CPU, its wake-ups)",
};

pub(super) const SENDING: BufferWords = BufferWords {
    factor: Factor::SendBuffer,
    stalled: "sndbuf_limited_share",
    noun: "send",
    sysctl: "tcp_wmem",
    option: "--sndbuf",
    filled: "and still filled with unacknowledged data (loss recovery holds it longer): raise net.ipv4.tcp_wmem's maximum further, or find the loss",
};

/// The receive buffer held the flow; what the receiver's kernel did to
/// fit the queue into it (pruned, collapsed, dropped, a zero window
/// advertised) is its evidence, and says the reader fell behind.
pub(super) fn receive_window(flow: &FlowEvidence, share: f64, round_trip: &RoundTrip) -> Limit {
    let mut limit = buffer_limit(&flow.receiver, &RECEIVING, share, round_trip);
    let reader = &flow.receiver;
    if reader.syscalls > 0 {
        limit.evidence.insert(
            "receiver_bytes_per_read".into(),
            flow.bytes as f64 / reader.syscalls as f64,
        );
    }
    if let Some(own) = reader.own_work_share() {
        limit
            .evidence
            .insert("receiver_outside_read_pct".into(), 100.0 * own);
        if own >= OWN_WORK {
            let work = reader.record_layer.as_ref().map_or(String::new(), |layer| {
                format!(
                    ", {:.0}% {}",
                    100.0 * layer.seconds / reader.wall_s.max(1e-9),
                    layer.clause(flow.bytes)
                )
            });
            limit.fix.push_str(&format!(
                "; the reader spent {:.0}% of the run on its own work between reads{work}, draining the buffer only between",
                100.0 * own
            ));
        }
    }
    if let Some((moved, _)) = receive_queue(&flow.receiver)
        && !moved.is_empty()
    {
        let said: Vec<String> = moved
            .iter()
            .map(|(name, n)| format!("{name} {n:.0}"))
            .collect();
        limit.fix.push_str(&format!(
            "; the receiver's kernel made room in its queue ({}): the reader fell behind its buffer",
            said.join(", ")
        ));
        limit.evidence.extend(moved);
    }
    limit
}

pub(super) fn send_buffer(flow: &FlowEvidence, share: f64, round_trip: &RoundTrip) -> Limit {
    buffer_limit(&flow.sender, &SENDING, share, round_trip)
}

/// A flow at the rate a buffer allows (either end's, the receiver's
/// first), whatever the chrono says: a pacing congestion control (bbr)
/// stops at its pacing gate before the window test that starts the
/// chrono's `rwnd_limited`.
pub(super) fn at_window(flow: &FlowEvidence, share: f64, round_trip: &RoundTrip) -> Option<Limit> {
    let delivered_bps = round_trip.delivered_bps;
    let window_rate = |buffer: Option<u64>| buffer.map(|b| round_trip.window_rate(b));
    for (bound, receiving) in [
        (window_rate(flow.receiver.socket_buffer), true),
        (window_rate(flow.sender.socket_buffer), false),
    ] {
        if bound.is_some_and(|b| delivered_bps >= AT_WINDOW * b) {
            let mut limit = if receiving {
                receive_window(flow, share, round_trip)
            } else {
                send_buffer(flow, share, round_trip)
            };
            limit
                .evidence
                .insert("delivered_mbit_s".into(), delivered_bps / 1e6);
            return Some(limit);
        }
    }
    None
}

/// A side's buffer held the flow: what it was, the rate it allows over
/// this round trip, what the path needs (twice the link's BDP, as the
/// kernel keeps about half a buffer for data; where the link's rate is
/// unknown, what 1 Gbit/s would need), and the fix for how it was bounded
/// (set by an option, or autotuning's maximum). A buffer over twice what
/// the flow delivered per round trip that still filled was not too small:
/// its side fell behind.
pub(super) fn buffer_limit(
    side: &SideEvidence,
    words: &BufferWords,
    share: f64,
    round_trip: &RoundTrip,
) -> Limit {
    let mut evidence = BTreeMap::from([
        (words.stalled.to_string(), share),
        ("rtt_ms".to_string(), round_trip.rtt_s * 1e3),
    ]);
    if let Some(bdp) = round_trip.link_bdp() {
        evidence.insert("bdp_bytes".into(), bdp);
    }
    if let Some(buffer) = side.socket_buffer {
        evidence.insert(format!("{}_buffer_bytes", words.noun), buffer as f64);
        evidence.insert(
            "window_rate_mbit_s".into(),
            round_trip.window_rate(buffer) / 1e6,
        );
    }
    if let Some(max) = side.buffer_max {
        evidence.insert(format!("{}_max_bytes", words.sysctl), max as f64);
    }
    let per_rtt = round_trip
        .link_bdp()
        .unwrap_or(round_trip.delivered_per_rtt());
    let target = match round_trip.link_bdp() {
        Some(bdp) => format!("at least twice the BDP, {}", mb(2.0 * bdp)),
        None => format!(
            "twice the rate you want times the round trip ({} for 1 Gbit/s over these {:.1} ms)",
            mb(2.0 * 1e9 / 8.0 * round_trip.rtt_s),
            round_trip.rtt_s * 1e3
        ),
    };
    let holds = side.socket_buffer.map_or(String::new(), |b| {
        format!(
            ": it allows about {:.1} Mbit/s over this {:.1} ms round trip",
            round_trip.window_rate(b) / 1e6,
            round_trip.rtt_s * 1e3
        )
    });
    let roomy = side.socket_buffer.filter(|&b| b as f64 >= 2.0 * per_rtt);
    let fix = if let Some(buffer) = roomy {
        format!(
            "the {} buffer ({}) is over twice {} ({}) {}",
            words.noun,
            mb(buffer as f64),
            if round_trip.link_bps.is_some() {
                "the BDP"
            } else {
                "what the flow delivered per round trip"
            },
            mb(per_rtt),
            words.filled
        )
    } else if side.buffer_set {
        format!(
            "the {} buffer was set ({}, {}){}{holds}; raise it to {target}, or leave it unset",
            words.noun,
            words.option,
            side.socket_buffer.map_or("?".into(), |b| mb(b as f64)),
            if words.factor == Factor::ReceiveWindow {
                ", which turns autotuning off"
            } else {
                ""
            },
        )
    } else {
        format!(
            "net.ipv4.{}'s maximum{} bounds the {} buffer{holds}; raise the maximum to {target}",
            words.sysctl,
            side.buffer_max
                .map_or(String::new(), |m| format!(" (now {})", mb(m as f64))),
            words.noun,
        )
    };
    Limit {
        factor: words.factor,
        share,
        evidence,
        fix,
    }
}

/// The round trip a window is spent over, and the rates it is set against.
pub(super) struct RoundTrip {
    /// `min_rtt` (the path's own), or the smoothed RTT without it, s.
    pub(super) rtt_s: f64,
    /// The bottleneck link's rate, where known.
    pub(super) link_bps: Option<f64>,
    pub(super) delivered_bps: f64,
}

impl RoundTrip {
    /// The bandwidth-delay product of the link, where its rate is known.
    pub(super) fn link_bdp(&self) -> Option<f64> {
        self.link_bps.map(|r| r / 8.0 * self.rtt_s)
    }

    /// What the flow delivered per round trip.
    pub(super) fn delivered_per_rtt(&self) -> f64 {
        self.delivered_bps / 8.0 * self.rtt_s
    }

    /// The rate a buffer of `bytes` allows: about half of it is window.
    pub(super) fn window_rate(&self, bytes: u64) -> f64 {
        bytes as f64 * WINDOW_OF_BUFFER * 8.0 / self.rtt_s
    }
}
