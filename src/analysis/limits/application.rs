//! The application's own limits: the pacing it asked for, and time with
//! nothing in flight (its producer, or two ends taking turns per call).

use super::buffers::RoundTrip;
use super::cpu::{cpu_limit, sender_cpu};
use super::evidence::*;
use super::thresholds::*;
use super::verdict::*;
use std::collections::BTreeMap;

/// A flow at the pacing rate its sender asked for (`--rate`): the
/// application's own limit, whether the kernel's pacing gate (busy time)
/// or the application's sleeps (idle time) held it.
pub(super) fn paced(flow: &FlowEvidence, share: f64, delivered_bps: f64) -> Option<Limit> {
    let rate = flow.paced_bps? as f64;
    (delivered_bps >= AT_WINDOW * rate / flow.path.overhead.max(1.0)).then(|| Limit {
        factor: Factor::Application,
        share,
        evidence: BTreeMap::from([
            ("paced_mbit_s".to_string(), rate / 1e6),
            ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
        ]),
        fix: format!(
            "the sender asked to be paced at {:.1} Mbit/s (--rate) and ran at {:.1}: raise or drop the rate",
            rate / 1e6,
            delivered_bps / 1e6
        ),
    })
}

/// Time with nothing in flight: the sender's pacing, its CPU, or the cost
/// of each call and wake-up.
pub(super) fn idle_time(flow: &FlowEvidence, share: f64, round_trip: &RoundTrip) -> Limit {
    if let Some(limit) = paced(flow, share, round_trip.delivered_bps) {
        return limit;
    }
    if let Some(limit) = cpu_limit(flow, share) {
        return limit;
    }
    let records = (flow.bytes as f64 / flow.record.max(1) as f64).max(1.0);
    let switches = (flow.sender.voluntary_cs + flow.sender.involuntary_cs) as f64 / records;
    if flow.record <= SMALL_RECORD && flow.sender.load() + flow.receiver.load() >= SATURATED {
        // Neither side saturated, but together they keep a core busy:
        // they take turns, each waking the other.
        let mut limit = sender_cpu(flow, share);
        limit.factor = Factor::PerCall;
        limit.evidence.insert(
            "receiver_cpu_pct".into(),
            100.0 * flow.receiver.utilisation(),
        );
        limit.fix = format!(
            "{}-byte records cost a system call and a wake-up each ({switches:.2} context switches per record, the two sides taking turns): use 64 KB records",
            flow.record
        );
        return limit;
    }
    let mut evidence = BTreeMap::from([
        (
            "sender_cpu_pct".to_string(),
            100.0 * flow.sender.utilisation(),
        ),
        ("context_switches_per_record".to_string(), switches),
    ]);
    let own = flow.sender.own_work_share();
    if let Some(own) = own {
        evidence.insert("sender_outside_write_pct".into(), 100.0 * own);
    }
    let fix = match (own, &flow.sender.record_layer) {
        (Some(own), Some(layer)) if own >= OWN_WORK => format!(
            "the sender had nothing in flight: it spent {:.0}% of the run in user space between its writes, {:.0}% {}: {}",
            100.0 * own,
            100.0 * layer.seconds / flow.sender.wall_s.max(1e-9),
            layer.clause(flow.bytes),
            layer.fixes()
        ),
        (Some(own), _) if own >= OWN_WORK => format!(
            "the sender had nothing in flight: it spent {:.0}% of the run producing data between its writes: a cheaper producer, or more threads producing",
            100.0 * own
        ),
        _ => format!(
            "the sender had nothing in flight and its CPU was not saturated: it waited between writes ({switches:.2} sleeps per record) for its producer (disk, a pipe, a slow read), which fed it too slowly"
        ),
    };
    Limit {
        factor: Factor::Application,
        share,
        evidence,
        fix,
    }
}
