//! What limited a TCP flow, named from the kernel's own accounting: a
//! ranked verdict of factors, each with its share of the run, the evidence
//! it rests on and the fix an engineer would try. Pure functions over
//! what a run recorded ([`FlowEvidence`]); nothing here measures.
//!
//! The sender's time, by Linux's chrono accounting (`tcp_chrono_*`,
//! reported in `struct tcp_info` since 4.10): `tcpi_busy_time` is the time
//! the connection had data in flight, of which `tcpi_rwnd_limited` was
//! stalled by the peer's receive window and `tcpi_sndbuf_limited` by the
//! send buffer; the rest of the busy time was limited by the congestion
//! window, pacing, the path or the sender's own CPU. Time not busy is
//! application-limited: nothing was waiting to be sent. These are
//! cumulative over the connection's life, and each flow is a fresh
//! connection, so the end values are the run's.
//!
//! Each family of evidence is a file of its own, pure and tested over
//! constructed evidence: the hosts' CPUs (`cpu.rs`), the buffers at either
//! end (`buffers.rs`), the path (`path.rs`: a link of known rate that was
//! full, a delivery-rate plateau, a shaper either end read, the queue in
//! front of it or a policer), loss (`loss.rs`: what the kernel saw of it,
//! under any congestion control), short flows (`short_flow.rs`), the cost
//! of each call (`per_call.rs`) and the application (`application.rs`);
//! `rank.rs` orders their findings.
//!
//! How the busy time is split (mechanisms, not cases), in this order:
//! - a side that kept its CPU at least [`SATURATED`] busy limited whatever
//!   it was doing (a sender CPU-bound still has data in flight on
//!   loopback, so the chrono calls it busy); but a link whose rate is
//!   known and whose wire was busy (or whose payload rate was within
//!   [`LINK_FULL`] of its rate) is named first: the flow got the path's
//!   rate;
//! - a flow at its window's rate (window / RTT, with the window about
//!   half the socket buffer the kernel reports, [`WINDOW_OF_BUFFER`]) is
//!   limited by that buffer even when the chrono does not say so;
//! - a transfer that ended within a few round trips, or still in slow
//!   start, is a short flow;
//! - a delivery rate that sat on a plateau, nothing on either host
//!   binding, is the path's bottleneck: a queue in front of it when the
//!   round trip rose above `min_rtt` while the flow ran, a policer when
//!   segments were lost without that rise;
//! - a flow that spent a share of the run in loss recovery and
//!   retransmitted a share of its bytes is bounded by the loss, whatever
//!   its congestion control (Mathis' bound is evidence for a loss-based
//!   one, never the rule);
//! - a part that did not reach its bound is evidence, never the primary
//!   cause: with nothing at its bound, the verdict is undecided and says
//!   what would decide it.
//!
//! Queueing delay (smoothed RTT over `min_rtt`) is named beside the
//! primary factor when it is a large part of the round trip. Counters a
//! record lacks are listed in [`Verdict::missing`], never taken as zero.

mod application;
mod buffers;
mod cpu;
mod evidence;
mod loss;
mod path;
mod per_call;
mod rank;
mod series;
mod short_flow;
#[cfg(test)]
mod tests;
mod thresholds;
mod verdict;

pub use evidence::*;
pub use per_call::attribute_cpu;
pub use thresholds::*;
pub use verdict::*;

use application::*;
use buffers::*;
use cpu::*;
use loss::Busy;
use rank::*;
use series::Series;

use std::collections::BTreeMap;

/// The verdict for a flow seen from its receiver alone (netlab received
/// from a sender it cannot read: an iperf3 server under `-R`). Only the
/// receiver's own evidence is read, `flow.sender` and `flow.tcp` never: a
/// receiver short of CPU (saturated, its core taken by interrupt work, or
/// waiting for a core) is named; anything else is undecided, since the
/// sender's window, buffers, CPU and path are out of sight.
pub fn judge_receiver_side(flow: &FlowEvidence) -> Verdict {
    let mut verdict = Verdict::default();
    verdict.missing.push(
        "the sender's side (its TCP_INFO, CPU and buffers): the verdict rests on the receiver's evidence alone".into(),
    );
    if flow.receiver.wall_s <= 0.0 || flow.bytes == 0 {
        verdict.limits.push(undecided("nothing was delivered"));
        return verdict;
    }
    match receiver_short_of_cpu(flow, 1.0) {
        Some(limit) => verdict.limits.push(limit),
        None => {
            let mut limit = undecided(&format!(
                "the receiver was not short of CPU ({:.0}% of one CPU{}); what held the flow is on the sender's side or the path, which the receiver cannot see",
                100.0 * flow.receiver.utilisation(),
                flow.receiver.run_delay_s.map_or(String::new(), |d| format!(
                    ", waiting for a core {:.0}% of the run",
                    100.0 * d / flow.receiver.wall_s
                ))
            ));
            limit.evidence.insert(
                "receiver_cpu_pct".into(),
                100.0 * flow.receiver.utilisation(),
            );
            verdict.limits.push(limit);
        }
    }
    verdict
}

/// The verdict for one flow.
pub fn judge(flow: &FlowEvidence) -> Verdict {
    let mut verdict = Verdict::default();
    let wall = flow.sender.wall_s.max(flow.receiver.wall_s);
    if wall <= 0.0 || flow.bytes == 0 {
        verdict.missing.push("the flow moved no bytes".into());
        verdict.limits.push(undecided("nothing was delivered"));
        return verdict;
    }
    let delivered_bps = flow.bytes as f64 * 8.0 / flow.receiver.wall_s.max(1e-9);
    let Some(tcp) = &flow.tcp else {
        verdict.missing.push(if flow.subflows > 0 {
            format!("the connection's own TCP_INFO: each of its MPTCP subflows ({}) keeps a window, round trip and chrono accounting of its own, blind to the MPTCP socket's send queue", flow.subflows)
        } else {
            "the sender's TCP_INFO (no chrono accounting)".into()
        });
        match path::full_link_untimed(flow, delivered_bps) {
            Some(full) => verdict.limits.push(full),
            None => cpu_only(flow, &mut verdict),
        }
        return verdict;
    };
    let round_trip = RoundTrip {
        rtt_s: f64::from(tcp.min_rtt_us.unwrap_or(tcp.srtt_us).max(1)) / 1e6,
        link_bps: flow.path.rate_bps.map(|r| r as f64),
        delivered_bps,
    };
    let series = Series::of(flow, tcp);
    let (Some(busy), Some(rwnd), Some(sndbuf)) =
        (tcp.busy_us, tcp.rwnd_limited_us, tcp.sndbuf_limited_us)
    else {
        verdict.missing.push(
            "tcpi_busy_time, tcpi_rwnd_limited, tcpi_sndbuf_limited (a kernel before 4.10)".into(),
        );
        cpu_only(flow, &mut verdict);
        return verdict;
    };
    let share = |us: u64| (us as f64 / 1e6 / flow.sender.wall_s.max(1e-9)).min(1.0);
    let rwnd_share = share(rwnd);
    let sndbuf_share = share(sndbuf);
    let busy_share = share(busy);
    let rest_share = (busy_share - rwnd_share - sndbuf_share).max(0.0);
    let idle_share = (1.0 - busy_share).max(0.0);

    if rwnd_share > 0.0 {
        // A window held shut by a receiver short of CPU is that CPU.
        verdict.limits.push(
            receiver_short_of_cpu(flow, rwnd_share)
                .unwrap_or_else(|| receive_window(flow, rwnd_share, &round_trip)),
        );
    }
    if sndbuf_share > 0.0 {
        verdict
            .limits
            .push(send_buffer(flow, sndbuf_share, &round_trip));
    }
    if rest_share > 0.0 {
        verdict
            .limits
            .push(busy_time(flow, tcp, rest_share, &round_trip, &series));
    }
    if idle_share > 0.0 {
        verdict
            .limits
            .push(idle_time(flow, idle_share, &round_trip));
    }
    match receive_queue(&flow.receiver) {
        None => verdict
            .missing
            .push("the receiver's TcpExt counters (receive-queue pruning and drops)".into()),
        Some((_, lacking)) if !lacking.is_empty() => verdict.missing.push(format!(
            "TcpExt {} (this kernel does not count them)",
            lacking.join(", ")
        )),
        Some(_) => {}
    }
    verdict.missing.extend(flow.path.unread.iter().cloned());
    if series.samples == 0 {
        verdict.missing.push(
            "samples of TCP_INFO during the run (no delivery-rate plateau, RTT rise or time in recovery to read)"
                .into(),
        );
    }
    rank(&mut verdict);
    if let Some(queue) = path::queueing(flow, tcp, &series) {
        match verdict.limits.first_mut() {
            // A side short of CPU acknowledges late: the round trip grows
            // at the host, not in a queue on the path, so the delay is
            // that side's evidence rather than a factor of its own.
            Some(first) if first.factor.is_cpu() => first.evidence.extend(queue.evidence),
            _ => {
                verdict.limits.push(queue);
                rank(&mut verdict);
            }
        }
    }
    verdict.phases = phases(&flow.intervals);
    let marked: Vec<bool> = flow
        .intervals
        .iter()
        .filter_map(|i| i.app_limited)
        .collect();
    if let Some(first) = verdict.limits.first_mut()
        && !marked.is_empty()
    {
        // The kernel's own word on whether the sender ran out of data:
        // beside an application verdict it confirms it; beside any other
        // it says how often the flow was not pushing.
        let share = marked.iter().filter(|&&m| m).count() as f64 / marked.len() as f64;
        first
            .evidence
            .insert("app_limited_interval_ends_pct".into(), 100.0 * share);
    }
    verdict
}

/// Busy time not stalled by a buffer, each family asked in turn (see the
/// module's list): the first whose evidence binds names it.
fn busy_time(
    flow: &FlowEvidence,
    tcp: &SenderTcp,
    share: f64,
    round_trip: &RoundTrip,
    series: &Series,
) -> Limit {
    if let Some(limit) = paced(flow, share, round_trip.delivered_bps) {
        return limit;
    }
    let busy = Busy {
        flow,
        tcp,
        share,
        round_trip,
        series,
        loss: loss::cost(flow, tcp, series),
    };
    // A full link comes first: the flow got the path's rate, whatever
    // else was near its own limit (named beside it, in the fix).
    let host = cpu_limit(flow, share);
    if let Some(limit) = path::full_link(&busy, host.as_ref()) {
        return limit;
    }
    if let Some(h) = &host
        && let Some(verdict) = loss::against_host(&busy, h)
    {
        return verdict;
    }
    host.or_else(|| at_window(flow, share, round_trip))
        .or_else(|| short_flow::judge(&busy))
        .or_else(|| path::bottleneck(&busy))
        .or_else(|| loss::judge(&busy))
        .unwrap_or_else(|| nothing_at_bound(&busy))
}

/// Nothing reached its bound. The wire emulator saturated is the limit (a
/// part at its bound); a loss-based control whose window bound the flow,
/// with no loss, no plateau and no short run to explain it, was still
/// opening; otherwise the verdict is undecided, with the busiest part and
/// what was seen as evidence, and what would decide it.
fn nothing_at_bound(busy: &Busy) -> Limit {
    let delivered_bps = busy.round_trip.delivered_bps;
    let cwnd_rate = busy.tcp.cwnd_rate_bps();
    let parts = [
        ("the sender's CPU", busy.flow.sender.load()),
        ("the receiver's CPU", busy.flow.receiver.load()),
        (
            "the wire emulator's CPU",
            busy.flow.path.emulator_busy.unwrap_or(0.0),
        ),
    ];
    let (busiest, busiest_load) = parts
        .into_iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .expect("three parts");
    let mut evidence = BTreeMap::from([
        ("sender_cpu_pct".to_string(), 100.0 * parts[0].1),
        ("receiver_cpu_pct".to_string(), 100.0 * parts[1].1),
        ("cwnd_segments".to_string(), f64::from(busy.tcp.snd_cwnd)),
        ("cwnd_rate_mbit_s".to_string(), cwnd_rate / 1e6),
        ("delivered_mbit_s".to_string(), delivered_bps / 1e6),
        ("min_rtt_ms".to_string(), busy.round_trip.rtt_s * 1e3),
    ]);
    if let Some(emulator) = busy.flow.path.emulator_busy {
        evidence.insert("emulator_cpu_pct".into(), 100.0 * emulator);
    }
    busy.series.evidence(&mut evidence);
    if busy
        .flow
        .path
        .emulator_busy
        .is_some_and(|busy| busy >= SATURATED)
    {
        return Limit {
            factor: Factor::Emulator,
            share: busy.share,
            evidence,
            fix: format!(
                "the wire emulator (a user-space process carrying every packet) was busy {:.0}% of the run, at its bound, and nothing else bound: use a veth link (netem or tbf) where the kernel has them, or an unimpaired link (super-packets)",
                100.0 * busiest_load
            ),
        };
    }
    let window_bound = cwnd_rate <= WINDOW_SLACK * delivered_bps;
    if window_bound && busy.tcp.loss_based() && busy.tcp.total_retrans == 0 {
        let wall = busy.flow.sender.wall_s;
        return Limit {
            factor: Factor::CongestionWindow,
            share: busy.share,
            evidence,
            fix: format!(
                "no loss, no full link, no window or buffer at its rate, no saturated CPU, no plateau in the delivery rate: {}'s window ({} segments) bound the flow and was still opening; run longer (the run was {wall:.1} s) or raise the initial window (ip route ... initcwnd)",
                busy.tcp
                    .congestion_control
                    .as_deref()
                    .unwrap_or("the congestion control"),
                busy.tcp.snd_cwnd
            ),
        };
    }
    let mut decide = Vec::new();
    if busy.flow.path.rate_bps.is_none() {
        decide.push("the path's rate (a shaper or link either end could read, or --link-rate)");
    }
    if busy.series.plateau.is_none() {
        decide.push(if busy.series.samples == 0 {
            "samples of the delivery rate during the run"
        } else {
            "a steadier delivery rate (a longer run)"
        });
    }
    if busy.flow.sender.run_delay_s.is_none() || busy.flow.receiver.run_delay_s.is_none() {
        decide.push("each side's scheduler delay");
    }
    Limit {
        factor: Factor::Undecided,
        share: busy.share,
        evidence,
        fix: format!(
            "nothing reached its bound (no buffer or window at its rate, no full link, no plateau of the delivery rate, no loss that cost the flow its time); the busiest part was {busiest} at {:.0}% of what it could have had, below its bound, so it is evidence, not the cause{}",
            100.0 * busiest_load,
            if decide.is_empty() {
                String::new()
            } else {
                format!("; what would decide it: {}", decide.join("; "))
            }
        ),
    }
}
