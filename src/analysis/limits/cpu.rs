//! The hosts' CPUs: a side saturated (by its core or its budget), its
//! core full of interrupt work, or waiting for a core other work held.

use super::evidence::*;
use super::thresholds::*;
use super::verdict::*;
use std::collections::BTreeMap;

/// The side its CPU budget throttled longest, when that was at least
/// [`THROTTLED`] of the run: the cgroup's own count, not a comparison of
/// loads that other work on the host can tip.
fn throttled_side(flow: &FlowEvidence) -> Option<Side> {
    let held = |side: &SideEvidence| {
        let throttled = side.throttled();
        (side.cpu_budget.is_some_and(|b| b < 1.0) && throttled >= THROTTLED).then_some(throttled)
    };
    match (held(&flow.sender), held(&flow.receiver)) {
        (Some(s), Some(r)) if r > s => Some(Side::Receiver),
        (Some(_), _) => Some(Side::Sender),
        (None, Some(_)) => Some(Side::Receiver),
        (None, None) => None,
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    Sender,
    Receiver,
}

/// Without the chrono accounting: a throttled or saturated side, or
/// undecided.
pub(super) fn cpu_only(flow: &FlowEvidence, verdict: &mut Verdict) {
    let (sender, receiver) = (flow.sender.load(), flow.receiver.load());
    if let Some(side) = throttled_side(flow) {
        verdict.limits.push(match side {
            Side::Sender => sender_cpu(flow, sender.min(1.0)),
            Side::Receiver => receiver_cpu(flow, receiver.min(1.0)),
        });
    } else if sender >= SATURATED && sender >= receiver {
        verdict.limits.push(sender_cpu(flow, sender.min(1.0)));
    } else if receiver >= SATURATED {
        verdict.limits.push(receiver_cpu(flow, receiver.min(1.0)));
    } else {
        let mut limit = undecided(
            "neither side's CPU was saturated and the kernel's accounting of the sender's time is missing",
        );
        limit
            .evidence
            .insert("sender_cpu_pct".into(), 100.0 * flow.sender.utilisation());
        limit.evidence.insert(
            "receiver_cpu_pct".into(),
            100.0 * flow.receiver.utilisation(),
        );
        verdict.limits.push(limit);
    }
}

pub(super) fn sender_cpu(flow: &FlowEvidence, share: f64) -> Limit {
    let records = (flow.bytes as f64 / flow.record.max(1) as f64).max(1.0);
    let side = &flow.sender;
    let mut evidence = BTreeMap::from([
        ("sender_cpu_pct".to_string(), 100.0 * side.utilisation()),
        ("cpu_us_per_record".to_string(), side.cpu_s * 1e6 / records),
        (
            "calls_per_record".to_string(),
            side.syscalls as f64 / records,
        ),
        (
            "context_switches_per_record".to_string(),
            (side.voluntary_cs + side.involuntary_cs) as f64 / records,
        ),
        ("record_bytes".to_string(), flow.record as f64),
    ]);
    core_evidence(side, "sender", &mut evidence);
    if let Some(fix) = budget_bound(side, "sender", "--sender-cpu", &mut evidence) {
        return Limit {
            factor: Factor::SenderCpu,
            share,
            evidence,
            fix,
        };
    }
    if let Some(fix) = record_layer_bound(side, "sender", flow.bytes, &mut evidence) {
        return Limit {
            factor: Factor::SenderCpu,
            share,
            evidence,
            fix,
        };
    }
    if flow.record <= SMALL_RECORD {
        // The packet work each write sets off on its core (on loopback
        // and veth, the receive path itself runs in softirq there) is a
        // per-call cost too, charged to no process.
        let interrupts = match side.core {
            Some(core) if side.load() < SATURATED => format!(
                ", and its core spent {:.0}% of the run on the packet work in softirq",
                100.0 * core.interrupt_share
            ),
            _ => String::new(),
        };
        Limit {
            factor: Factor::PerCall,
            share,
            fix: format!(
                "{}-byte writes cost a system call each ({:.2} µs of CPU per record{interrupts}): use 64 KB records",
                flow.record,
                side.cpu_s * 1e6 / records
            ),
            evidence,
        }
    } else {
        Limit {
            factor: Factor::SenderCpu,
            share,
            fix: format!(
                "the sender's core is saturated copying ({:.0} ns per KB): send without the copy (--strategy sendfile, splice or zerocopy) or spread flows over cores (-P)",
                side.cpu_s * 1e9 / (flow.bytes as f64 / 1024.0)
            ),
            evidence,
        }
    }
}

/// A side whose CPU held the flow back: throttled by its budget, then
/// saturated, then contended; the sender first. The slower end bounds a
/// stream however the sender's chrono labels the time (a pacing control,
/// or a write blocked on a full buffer while the receiver waits for a
/// core).
pub(super) fn cpu_limit(flow: &FlowEvidence, share: f64) -> Option<Limit> {
    match throttled_side(flow) {
        Some(Side::Sender) => return Some(sender_cpu(flow, share)),
        Some(Side::Receiver) => return Some(receiver_cpu(flow, share)),
        None => {}
    }
    let (sender, receiver) = (flow.sender.load(), flow.receiver.load());
    if sender >= SATURATED && sender >= receiver {
        return Some(sender_cpu(flow, share));
    }
    if receiver >= SATURATED {
        return Some(receiver_cpu(flow, share));
    }
    if flow.record <= SMALL_RECORD && flow.sender.load_with_interrupts() >= SATURATED {
        return Some(sender_cpu(flow, share));
    }
    if let Some(limit) = core_bound(&flow.sender, "sender", Factor::SenderCpu, share)
        .or_else(|| core_bound(&flow.receiver, "receiver", Factor::ReceiverCpu, share))
    {
        return Some(limit);
    }
    if let Some(waited) = flow.sender.contended() {
        return Some(contention("sender", &flow.sender, waited, share));
    }
    flow.receiver
        .contended()
        .map(|waited| contention("receiver", &flow.receiver, waited, share))
}

/// The receiver alone short of CPU: saturated (or at its budget), its
/// core saturated by interrupt work, or waiting for a core.
pub(super) fn receiver_short_of_cpu(flow: &FlowEvidence, share: f64) -> Option<Limit> {
    let side = &flow.receiver;
    if side.load() >= SATURATED {
        return Some(receiver_cpu(flow, share));
    }
    core_bound(side, "receiver", Factor::ReceiverCpu, share).or_else(|| {
        side.contended()
            .map(|w| contention("receiver", side, w, share))
    })
}

/// A side's core, as evidence: which, how busy, and how much of it was
/// interrupt and softirq work.
pub(super) fn core_evidence(side: &SideEvidence, who: &str, evidence: &mut BTreeMap<String, f64>) {
    if let Some(core) = side.core {
        evidence.insert(format!("{who}_core"), f64::from(core.cpu));
        evidence.insert(format!("{who}_core_busy_pct"), 100.0 * core.busy_share);
        evidence.insert(
            format!("{who}_core_softirq_pct"),
            100.0 * core.interrupt_share,
        );
    }
}

/// A side whose core was saturated while the side itself was not, the
/// difference being interrupt and softirq work charged to no process:
/// CPU-bound on its core though its own accounting says otherwise.
pub(super) fn core_bound(
    side: &SideEvidence,
    who: &str,
    factor: Factor,
    share: f64,
) -> Option<Limit> {
    let core = side.core?;
    if core.busy_share < SATURATED
        || core.interrupt_share < INTERRUPT_WORK
        || side.utilisation() < CONTENDED
    {
        return None;
    }
    // Other tasks on its core (the other end, other jobs) or a wait for
    // it: then the core was shared, not filled by packet work, and
    // steering that work away is not the fix. The contention rule, or
    // nothing, speaks instead.
    let others = core.busy_share - core.interrupt_share - side.utilisation();
    if others >= CONTENDED || side.waited().unwrap_or(0.0) >= CONTENDED {
        return None;
    }
    let mut evidence = BTreeMap::from([(format!("{who}_cpu_pct"), 100.0 * side.utilisation())]);
    core_evidence(side, who, &mut evidence);
    // How long it waited for its core (below a fifth, or this is not
    // the verdict), as the contention rule reads it.
    if let Some(waited) = side.waited() {
        evidence.insert(format!("{who}_run_delay_share"), waited);
    }
    Some(Limit {
        factor,
        share,
        evidence,
        fix: format!(
            "the {who}'s core (CPU {}) was busy {:.0}% of the run, {:.0}% of it interrupt and softirq work that no process is charged for (the {who} itself ran {:.0}%): the core is saturated though the {who} is not; steer the packet work to another core (RPS/RFS, the interface's IRQ affinity) or pin the {who} away from it",
            core.cpu,
            100.0 * core.busy_share,
            100.0 * core.interrupt_share,
            100.0 * side.utilisation()
        ),
    })
}

/// A side held to a CPU budget that it used up (or that throttled it):
/// the budget's fix, with its evidence added.
pub(super) fn budget_bound(
    side: &SideEvidence,
    who: &str,
    option: &str,
    evidence: &mut BTreeMap<String, f64>,
) -> Option<String> {
    let budget = side.cpu_budget.filter(|&b| b < 1.0)?;
    evidence.insert(format!("{who}_budget_pct"), 100.0 * budget);
    evidence.insert(format!("{who}_budget_used_pct"), 100.0 * side.load());
    if let Some(t) = side.throttled_s {
        evidence.insert(format!("{who}_throttled_share"), side.throttled());
        evidence.insert(format!("{who}_throttled_s"), t);
    }
    Some(format!(
        "the {who}'s data path is held to {:.1}% of one CPU (a cgroup quota, {option}) and used {:.0}% of it{}: lift or raise the budget, or spend less CPU per byte (larger records, zero-copy)",
        100.0 * budget,
        100.0 * side.load().min(1.0),
        side.throttled_s.map_or(String::new(), |_| format!(
            ", throttled {:.0}% of the run",
            100.0 * side.throttled()
        ))
    ))
}

/// A saturated side with a TLS record layer: its share of the side's CPU
/// named first ("the sender's core spent 61% of its time sealing TLS
/// records"), the encryption called the bound when it is the larger part
/// of the cost, else the copy and TCP beside it.
pub(super) fn record_layer_bound(
    side: &SideEvidence,
    who: &str,
    bytes: u64,
    evidence: &mut BTreeMap<String, f64>,
) -> Option<String> {
    let layer = side.record_layer.as_ref()?;
    let share = side.record_share()?;
    evidence.insert(format!("{who}_{}_pct", layer.work), 100.0 * share);
    if let Some(alone) = layer.alone_ns_per_kb {
        evidence.insert(format!("{who}_cipher_alone_ns_per_kb"), alone);
    }
    let kb = (bytes as f64 / 1024.0).max(1e-9);
    let clause = layer.clause(bytes);
    let rest = (side.cpu_s - layer.seconds).max(0.0) * 1e9 / kb;
    Some(if share >= RECORD_LAYER_BOUND {
        format!(
            "the {who}'s core spent {:.0}% of its time {clause}: the encryption bounds the run; {}",
            100.0 * share,
            layer.fixes()
        )
    } else {
        format!(
            "the {who}'s core spent {:.0}% of its time {clause} and the rest ({rest:.0} ns per KB) in the kernel's copy and TCP: the copy bounds the run more than the encryption; spread connections over cores (-P), or let the kernel seal as it copies (kTLS{})",
            100.0 * share,
            if layer.kernel_tls {
                ""
            } else {
                ": absent on this kernel"
            }
        )
    })
}

pub(super) fn contention(who: &str, side: &SideEvidence, waited: f64, share: f64) -> Limit {
    let mut evidence = BTreeMap::from([
        (format!("{who}_cpu_pct"), 100.0 * side.utilisation()),
        (format!("{who}_run_delay_share"), waited),
        (
            format!("{who}_involuntary_switches"),
            side.involuntary_cs as f64,
        ),
    ]);
    core_evidence(side, who, &mut evidence);
    let other = match side.core {
        Some(core) if core.interrupt_share >= INTERRUPT_WORK => format!(
            "other work shares its core, {:.0}% of that core's time interrupt and softirq work (packet processing, charged to no process); give it a core of its own (pin it away from the packet work, or steer that with RPS/RFS)",
            100.0 * core.interrupt_share
        ),
        _ => "other work shares its core; give it a core of its own (pin the ends apart, stop the competing load)".into(),
    };
    Limit {
        factor: Factor::CpuContention,
        share,
        evidence,
        fix: format!(
            "the {who} was runnable but waiting for a CPU {:.0}% of the run (it ran {:.0}%): {other}",
            100.0 * waited,
            100.0 * side.utilisation()
        ),
    }
}

pub(super) fn receiver_cpu(flow: &FlowEvidence, share: f64) -> Limit {
    let side = &flow.receiver;
    let reads = side.syscalls.max(1) as f64;
    let mut evidence = BTreeMap::from([
        ("receiver_cpu_pct".to_string(), 100.0 * side.utilisation()),
        ("bytes_per_read".to_string(), flow.bytes as f64 / reads),
        (
            "context_switches_per_read".to_string(),
            (side.voluntary_cs + side.involuntary_cs) as f64 / reads,
        ),
    ]);
    core_evidence(side, "receiver", &mut evidence);
    if let Some(fix) = budget_bound(side, "receiver", "--receiver-cpu", &mut evidence) {
        return Limit {
            factor: Factor::ReceiverCpu,
            share,
            evidence,
            fix,
        };
    }
    if let Some(fix) = record_layer_bound(side, "receiver", flow.bytes, &mut evidence) {
        return Limit {
            factor: Factor::ReceiverCpu,
            share,
            evidence,
            fix,
        };
    }
    Limit {
        factor: Factor::ReceiverCpu,
        share,
        evidence,
        fix: format!(
            "the receiver's core is saturated ({:.0} bytes per read): read larger chunks, receive without the copy (--recv splice or zerocopy), or spread flows over cores (-P)",
            flow.bytes as f64 / reads
        ),
    }
}
