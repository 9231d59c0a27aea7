//! Short flows: a transfer that ended within a few round trips, or still
//! in slow start, never reached the path's rate. What it took (round
//! trips, the handshake) and the window it reached against the one the
//! path needed say by how much.

use super::evidence::*;
use super::loss::Busy;
use super::thresholds::*;
use super::verdict::*;
use std::collections::BTreeMap;

/// A transfer over in this many round trips or fewer is short: slow start
/// from an initial window of 10 segments needs about log2(BDP / 14.5 KB)
/// round trips to fill a path (10 for 15 MB), and a few more to settle.
pub const SHORT_ROUNDS: f64 = 12.0;

/// A loss-based control still in slow start at the end of a transfer of
/// up to this many round trips, with no plateau, ended in slow start.
pub const SLOW_START_ROUNDS: f64 = 40.0;

/// A short flow, named with what it took.
pub(super) fn judge(busy: &Busy) -> Option<Limit> {
    let rtt_s = busy.round_trip.rtt_s;
    let rounds = busy.flow.sender.wall_s / rtt_s;
    let in_slow_start = busy.tcp.loss_based()
        && busy.tcp.total_retrans == 0
        && busy
            .tcp
            .snd_ssthresh
            .is_some_and(|s| s >= INFINITE_SSTHRESH);
    let short = rounds <= SHORT_ROUNDS
        || (in_slow_start && busy.series.plateau.is_none() && rounds <= SLOW_START_ROUNDS);
    if !short {
        return None;
    }
    let reached =
        f64::from(busy.series.max_cwnd.max(busy.tcp.snd_cwnd)) * f64::from(busy.tcp.snd_mss);
    let mut evidence = BTreeMap::from([
        ("round_trips".to_string(), rounds),
        ("min_rtt_ms".to_string(), rtt_s * 1e3),
        ("bytes".to_string(), busy.flow.bytes as f64),
        ("window_reached_bytes".to_string(), reached),
        (
            "delivered_mbit_s".to_string(),
            busy.round_trip.delivered_bps / 1e6,
        ),
    ]);
    let needed = busy.round_trip.link_bdp();
    let window = match needed {
        Some(bdp) => {
            evidence.insert("window_needed_bytes".into(), bdp);
            format!(
                "its window reached {} of the {} the path needed ({:.1} Mbit/s × {:.1} ms)",
                mb(reached),
                mb(bdp),
                busy.round_trip.link_bps.unwrap_or(0.0) / 1e6,
                rtt_s * 1e3
            )
        }
        None => format!(
            "its window reached {} (the path's rate is unknown, so the window it needed is too)",
            mb(reached)
        ),
    };
    let handshake = match busy.flow.handshake_s {
        Some(h) => {
            evidence.insert("handshake_ms".into(), h * 1e3);
            let whole = h + busy.flow.sender.wall_s;
            evidence.insert("handshake_share".into(), h / whole.max(1e-9));
            format!(
                "; the handshake took {:.1} ms more ({:.0}% of the whole)",
                h * 1e3,
                100.0 * h / whole.max(1e-9)
            )
        }
        None => String::new(),
    };
    let how = if in_slow_start {
        "ended still in slow start (the slow-start threshold never set)"
    } else {
        "ended within a few round trips of its start"
    };
    Some(Limit {
        factor: Factor::ShortFlow,
        share: busy.share,
        evidence,
        fix: format!(
            "the transfer ({}) took {rounds:.0} round trips of {:.1} ms and {how}: {window}{handshake}; send more per connection, reuse the connection (pooling, keep-alive; net.ipv4.tcp_slow_start_after_idle=0 keeps its window), or raise the initial window (ip route change ... initcwnd 20 initrwnd 20)",
            mb(busy.flow.bytes as f64),
            rtt_s * 1e3
        ),
    })
}
