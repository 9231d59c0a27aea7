//! The path as a cause of its own: a link of known rate that was full; a
//! delivery rate that sat on a plateau with nothing on either host
//! binding (the path's bottleneck, its rate learnt from the flow); a
//! shaper either end read whose rate matches; and how the bottleneck held
//! the flow: a queue in front of it (the round trip rose above `min_rtt`
//! while the flow ran), a policer (loss without that rise), or neither.

use super::evidence::*;
use super::loss::Busy;
use super::loss::{LossCost, RECOVERY_SHARE};
use super::series::Series;
use super::thresholds::*;
use super::verdict::*;
use std::collections::BTreeMap;

/// A shaper whose rate is within this share of the flow's wire rate
/// (above it, or up to its rate's reach below) is the one that held it.
pub const SHAPER_MATCH: f64 = 0.15;

/// A flow that delivered at least this share of its plateau ran at it.
pub const AT_PLATEAU: f64 = 0.7;

/// A flow is policed, not queued, when at least this share of its bytes
/// was retransmitted without the round trip rising.
pub const POLICED: f64 = 0.001;

/// The shaper either end read that held a flow whose payload rate was
/// `payload_bps`: the slowest whose rate the flow's wire rate reached to
/// within [`SHAPER_MATCH`].
pub(super) fn matching_shaper(flow: &FlowEvidence, payload_bps: f64) -> Option<&ShaperEvidence> {
    let wire_bps = payload_bps * flow.path.overhead.max(1.0);
    flow.path
        .shapers
        .iter()
        .filter(|s| {
            let rate = s.rate_bps as f64;
            wire_bps >= (1.0 - SHAPER_MATCH) * rate && wire_bps <= (1.0 + SHAPER_MATCH) * rate
        })
        .min_by_key(|s| s.rate_bps)
}

/// How a bottleneck held the flow, in words, and the fix that calls for.
fn held(
    tcp: &SenderTcp,
    series: &Series,
    loss: Option<&LossCost>,
    rate_bps: f64,
    evidence: &mut BTreeMap<String, f64>,
) -> (String, String) {
    let queue = series.queue_ms(tcp);
    let min = tcp.min_rtt_us.map_or(0.0, |m| f64::from(m) / 1e3);
    let lost = loss.map_or(0.0, |l| l.retrans_share);
    if let Some(q) = queue {
        evidence.insert("queueing_ms".into(), q);
        (
            format!(
                "a queue in front of it: the round trip rose {q:.1} ms above the path's {min:.2} ms while the flow ran{}",
                if lost > 0.0 {
                    format!(
                        ", and it dropped {:.2}% of the bytes when full",
                        100.0 * lost
                    )
                } else {
                    String::new()
                }
            ),
            format!(
                "for more throughput, a faster bottleneck (or a higher shaper rate); for less delay, a shorter queue or AQM at it (fq_codel, cake), or bbr, which keeps the queue small (it held {q:.1} ms here)"
            ),
        )
    } else if lost >= POLICED {
        (
            format!(
                "a policer: {:.2}% of the bytes were lost without the round trip rising above the path's {min:.2} ms, so nothing queued: what exceeded {:.1} Mbit/s was dropped",
                100.0 * lost,
                rate_bps / 1e6
            ),
            format!(
                "pace the sender below {:.1} Mbit/s (SO_MAX_PACING_RATE, tc fq maxrate, or bbr, which paces), or have the policer replaced by a shaper that queues",
                rate_bps / 1e6
            ),
        )
    } else {
        (
            format!(
                "no queue built (the round trip stayed near the path's {min:.2} ms) and nothing was lost: the flow ran at the bottleneck's rate"
            ),
            "nothing on either host holds this flow: a faster path (or a higher shaper rate) is the only fix".into(),
        )
    }
}

/// A link of known rate that the flow filled (its payload rate within
/// [`LINK_FULL`] of the link's, or its emulated wire busy that share of
/// the run). `host`, a side near its own CPU bound, is named beside it.
pub(super) fn full_link(busy: &Busy, host: Option<&Limit>) -> Option<Limit> {
    let loss = busy.loss.as_ref();
    let rate = busy.flow.path.rate_bps? as f64;
    let delivered_bps = busy.round_trip.delivered_bps;
    let payload_rate = rate / busy.flow.path.overhead.max(1.0);
    let wire_busy = busy
        .flow
        .path
        .wire_busy_s
        .map(|s| s / busy.flow.sender.wall_s.max(1e-9));
    let full =
        delivered_bps >= LINK_FULL * payload_rate || wire_busy.is_some_and(|b| b >= LINK_FULL);
    // A flow well over the rate did not cross that link (a shaper on
    // another interface, a speed the driver misreports).
    let crossed = delivered_bps <= (1.0 + SHAPER_MATCH) * payload_rate;
    if !full || !crossed {
        return None;
    }
    let mut evidence = BTreeMap::from([
        ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
        ("link_payload_mbit_s".to_string(), payload_rate / 1e6),
        ("link_mbit_s".to_string(), rate / 1e6),
    ]);
    if let Some(b) = wire_busy {
        evidence.insert("wire_busy_share".into(), b);
    }
    busy.series.evidence(&mut evidence);
    if let Some(l) = loss {
        l.evidence(&mut evidence);
    }
    let (how, _) = held(busy.tcp, busy.series, loss, payload_rate, &mut evidence);
    let hosts = match host {
        None => "nothing on either host limits this flow".to_string(),
        Some(near) => {
            evidence.extend(near.evidence.clone());
            format!(
                "{} was near its own limit too, and would bind on a faster link ({})",
                near.factor.describe(),
                near.fix
            )
        }
    };
    Some(Limit {
        factor: Factor::Link,
        share: busy.share,
        evidence,
        fix: format!(
            "the link is full: {:.1} of {:.1} Mbit/s of payload ({}); {how}; {hosts}",
            delivered_bps / 1e6,
            payload_rate / 1e6,
            busy.flow.path.rate_source
        ),
    })
}

/// A link of known rate that the flow filled, read without the sender's
/// TCP_INFO (a connection of several subflows, whose TCP_INFO is each
/// subflow's own): the payload rate against the link's, and neither host
/// saturated. Says nothing of how the bottleneck held the flow (no round
/// trip or loss to read), and says so.
pub(super) fn full_link_untimed(flow: &FlowEvidence, delivered_bps: f64) -> Option<Limit> {
    let rate = flow.path.rate_bps? as f64;
    let payload_rate = rate / flow.path.overhead.max(1.0);
    let full = delivered_bps >= LINK_FULL * payload_rate;
    let crossed = delivered_bps <= (1.0 + SHAPER_MATCH) * payload_rate;
    let hosts_free = flow.sender.load() < SATURATED && flow.receiver.load() < SATURATED;
    if !(full && crossed && hosts_free) {
        return None;
    }
    Some(Limit {
        factor: Factor::Link,
        share: 1.0,
        evidence: BTreeMap::from([
            ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
            ("link_payload_mbit_s".to_string(), payload_rate / 1e6),
            ("link_mbit_s".to_string(), rate / 1e6),
            (
                "sender_cpu_pct".to_string(),
                100.0 * flow.sender.utilisation(),
            ),
            (
                "receiver_cpu_pct".to_string(),
                100.0 * flow.receiver.utilisation(),
            ),
        ]),
        fix: format!(
            "the link is full: {:.1} of {:.1} Mbit/s of payload ({}), neither host's CPU saturated: a faster path (or a higher shaper rate) is the only fix",
            delivered_bps / 1e6,
            payload_rate / 1e6,
            flow.path.rate_source
        ),
    })
}

/// The path's bottleneck learnt from the flow: its delivery rate sat on a
/// plateau and the flow ran at it, with nothing on either host binding
/// (asked before this). Not the path's when a link of known rate was well
/// above the plateau (something else held the flow below it), nor when the
/// flow spent [`RECOVERY_SHARE`] of the run recovering from loss without
/// a queue or a shaper to show for it (loss, not a bottleneck, set the
/// rate: see `loss.rs`).
pub(super) fn bottleneck(busy: &Busy) -> Option<Limit> {
    let loss = busy.loss.as_ref();
    let plateau = busy.series.plateau?;
    let delivered_bps = busy.round_trip.delivered_bps;
    if delivered_bps < AT_PLATEAU * plateau.rate_bps {
        return None;
    }
    if let Some(rate) = busy.flow.path.rate_bps
        && busy.flow.path.rate_exact
        && rate as f64 / busy.flow.path.overhead.max(1.0) * LINK_FULL > plateau.rate_bps
    {
        return None;
    }
    let shaper = matching_shaper(busy.flow, plateau.rate_bps);
    let recovering = loss.is_some_and(|l| l.recovery_share.unwrap_or(0.0) >= RECOVERY_SHARE);
    if recovering && shaper.is_none() && busy.series.queue_ms(busy.tcp).is_none() {
        return None;
    }
    let mut evidence = BTreeMap::from([
        ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
        ("min_rtt_ms".to_string(), busy.round_trip.rtt_s * 1e3),
    ]);
    busy.series.evidence(&mut evidence);
    if let Some(l) = loss {
        l.evidence(&mut evidence);
    }
    if let Some(rate) = busy.flow.path.rate_bps {
        evidence.insert("interface_mbit_s".into(), rate as f64 / 1e6);
    }
    let (how, fix) = held(busy.tcp, busy.series, loss, plateau.rate_bps, &mut evidence);
    let what = match shaper {
        Some(s) => {
            evidence.insert("shaper_mbit_s".into(), s.rate_bps as f64 / 1e6);
            evidence.insert("shaper_drops".into(), s.drops as f64);
            format!("{} is the bottleneck, read by that end", s.describe())
        }
        None => {
            "no shaper either end could read matches it: the bottleneck is beyond the hosts".into()
        }
    };
    Some(Limit {
        factor: Factor::Path,
        share: busy.share,
        evidence,
        fix: format!(
            "the path's bottleneck at {:.1} Mbit/s: the kernel's delivery rate sat there ({} samples within {:.0}%) and the flow delivered {:.1}, with no window, buffer or CPU binding; {what}; {how}; {fix}",
            plateau.rate_bps / 1e6,
            plateau.samples,
            100.0 * plateau.spread,
            delivered_bps / 1e6
        ),
    })
}

/// Queueing delay beside the primary factor, when it is a large part of
/// the round trip: the samples' median RTT while the flow ran (the end's
/// smoothed RTT without samples) over `min_rtt`.
pub(super) fn queueing(flow: &FlowEvidence, tcp: &SenderTcp, series: &Series) -> Option<Limit> {
    let min = f64::from(tcp.min_rtt_us?) / 1e3;
    let delay = series.queue_ms(tcp)?;
    let rtt = min + delay;
    let mut evidence = BTreeMap::from([
        ("srtt_ms".to_string(), f64::from(tcp.srtt_us) / 1e3),
        ("min_rtt_ms".to_string(), min),
        ("queueing_ms".to_string(), delay),
    ]);
    if let Some(drops) = flow.path.queue_drops {
        evidence.insert("queue_drops".into(), drops as f64);
    }
    let queue = flow.path.queue_bytes.map_or("the queue".to_string(), |b| {
        format!("the {} queue", mb(b as f64))
    });
    Some(Limit {
        factor: Factor::QueueingDelay,
        share: delay / rtt,
        evidence,
        fix: format!(
            "{queue} in front of the bottleneck adds {delay:.0} ms to a {min:.0} ms path: shrink it or use fq_codel"
        ),
    })
}
