//! Figures derived from one bulk transfer's raw measurements, and the rule
//! that names the bottleneck.
//!
//! Units: MB/s is 10⁶ bytes per second and Mbit/s 10⁶ bits per second (as
//! network engineers and iperf3 count link rates); a KB in "µs CPU per KB"
//! is 1024 bytes, the unit of Van Jacobson's per-KB costs.

use crate::analysis::limits::{
    CoreEvidence, FlowEvidence, InterfaceDrops, IntervalEvidence, PathEvidence, RecordLayer,
    SenderTcp, SideEvidence,
};
use crate::endpoint::bulk::types::UdpLossSites;
use crate::endpoint::bulk::types::{EndpointReport, ZerocopyReceiveStats, ZerocopyStats};
use crate::experiments::stream::record::FlowResult;
use crate::experiments::stream::record::Record;
use crate::experiments::stream::record::StreamData;
use crate::experiments::stream::record::{Bottleneck, StreamFigures};
use crate::record::stats::Spread;
use crate::record::testbed::{EmulatorReport, Framing, LinkFacts};

/// CPU utilisation (CPU seconds over wall seconds) above which a side counts
/// as saturated. Below 100% because a saturated process still blocks briefly
/// (for instance while the peer drains a full socket buffer).
pub const SATURATED: f64 = 0.85;

/// Names the bottleneck from each side's CPU utilisation (0..1 or a little
/// above, for processes whose softirq work is charged to them). The busier
/// side wins when both are saturated.
pub fn bottleneck(sender_util: f64, receiver_util: f64) -> Bottleneck {
    if sender_util.max(receiver_util) < SATURATED {
        Bottleneck::Neither
    } else if sender_util >= receiver_util {
        Bottleneck::Sender
    } else {
        Bottleneck::Receiver
    }
}

fn ratio(num: f64, den: f64) -> f64 {
    if den > 0.0 { num / den } else { 0.0 }
}

/// Derives the printed figures from both endpoints' reports.
pub fn figures(sender: &EndpointReport, receiver: &EndpointReport, record: u64) -> StreamFigures {
    let bytes = receiver.bytes as f64;
    let rate = ratio(bytes, receiver.wall_s);
    let kb = bytes / 1024.0;
    let sender_util = ratio(sender.usage.cpu_s(), sender.wall_s);
    let receiver_util = ratio(receiver.usage.cpu_s(), receiver.wall_s);
    // QUIC's datagrams stand for TCP's segments.
    let data_segments = sender
        .tcp_info
        .as_ref()
        .and_then(|t| t.data_segs_out)
        .map(u64::from)
        .or(sender.quic.as_ref().map(|q| q.datagrams_sent));
    let records = (sender.bytes as f64 / record.max(1) as f64).ceil();
    StreamFigures {
        throughput_mb_s: rate / 1e6,
        throughput_mbit_s: rate * 8.0 / 1e6,
        sender_cpu_pct: 100.0 * sender_util,
        receiver_cpu_pct: 100.0 * receiver_util,
        sender_us_per_kb: ratio(sender.usage.cpu_s() * 1e6, kb),
        receiver_us_per_kb: ratio(receiver.usage.cpu_s() * 1e6, kb),
        bottleneck: bottleneck(sender_util, receiver_util),
        data_segments,
        mean_segment_bytes: data_segments.filter(|&n| n > 0).map(|n| bytes / n as f64),
        us_per_record: ratio(sender.wall_s * 1e6, records),
    }
}

/// What the limits analysis reads about one TCP connection (judged by
/// `analysis::limits::judge`): its two
/// reports, the link it crossed (`reverse`: from B to A) and the
/// emulator's counts in its direction. `None` for UDP.
pub fn flow_evidence(
    sender: &EndpointReport,
    receiver: &EndpointReport,
    record: u64,
    paced_bps: Option<u64>,
    reverse: bool,
    link: Option<&LinkFacts>,
    emulator: Option<&EmulatorReport>,
) -> Option<FlowEvidence> {
    if sender.udp.is_some() || receiver.udp.is_some() || sender.quic.is_some() {
        return None;
    }
    // --mptcp: TCP_INFO and its samples are one subflow's, not the
    // connection's (a subflow's chrono accounting does not see data held
    // in the MPTCP socket's own send queue, so it reads as a sender with
    // nothing to send), so the verdict reads the connection's bytes
    // against the paths' summed rate and the hosts' CPU, and no window.
    let one_path = subflows(sender) == 0;
    Some(FlowEvidence {
        bytes: receiver.bytes,
        record,
        sender: side_evidence(sender, true),
        receiver: side_evidence(receiver, false),
        tcp: sender_tcp(sender).filter(|_| one_path),
        path: path_evidence(sender, receiver, usize::from(reverse), link, emulator),
        paced_bps,
        intervals: interval_evidence(if one_path { &sender.intervals } else { &[] }),
        samples: interval_evidence(if one_path { &sender.samples } else { &[] }),
        handshake_s: sender.handshake_s,
        subflows: subflows(sender),
    })
}

/// How many subflows an `--mptcp` sender saw (0 for plain TCP or a
/// connection that fell back).
fn subflows(sender: &EndpointReport) -> usize {
    sender.mptcp.as_ref().map_or(0, |m| m.subflows.len())
}

/// One end's account as the limits analysis reads it; `sends`: the
/// sending end (its interface's transmit counts, else its receive counts).
fn side_evidence(r: &EndpointReport, sends: bool) -> SideEvidence {
    SideEvidence {
        wall_s: r.wall_s,
        cpu_s: r.usage.cpu_s(),
        user_s: Some(r.usage.user_s),
        syscalls: r.syscalls,
        voluntary_cs: r.usage.voluntary_cs,
        involuntary_cs: r.usage.involuntary_cs,
        socket_buffer: r.buffer.map(|b| b.bytes),
        buffer_set: r.buffer.is_some_and(|b| b.set),
        buffer_max: r.buffer.and_then(|b| b.autotune_max),
        run_delay_s: r.run_delay_s,
        cpu_budget: r.cpu_budget.as_ref().map(|b| b.percent / 100.0),
        throttled_s: r.cpu_budget.as_ref().and_then(|b| b.throttled_s),
        counters: (!r.counters.0.is_empty()).then(|| r.counters.0.clone()),
        core: r.core.map(|c| CoreEvidence {
            cpu: c.cpu,
            busy_share: c.busy_share,
            interrupt_share: c.softirq_share + c.irq_share,
        }),
        interface: r.interface.as_ref().map(|i| InterfaceDrops {
            name: i.name.clone(),
            dropped: if sends { i.tx_dropped } else { i.rx_dropped },
            errors: if sends { i.tx_errors } else { i.rx_errors },
        }),
        record_layer: r.tls.as_ref().map(|t| RecordLayer {
            work: if sends { "sealing" } else { "opening" }.into(),
            seconds: t.record_s,
            suite: t.suite.clone(),
            alone_ns_per_kb: t.cipher_alone.map(|c| {
                if sends {
                    c.seal_ns_per_kb
                } else {
                    c.open_ns_per_kb
                }
            }),
            kernel_tls: t.kernel_tls == crate::endpoint::tls::KernelTls::Present,
        }),
    }
}

/// The sender's TCP_INFO at the end, as the limits analysis reads it.
fn sender_tcp(sender: &EndpointReport) -> Option<SenderTcp> {
    sender
        .tcp_info
        .as_ref()
        .map(|t| SenderTcp::of(t, sender.congestion_control.clone(), sender.bbr_bw_bps))
}

/// The path's rate, where it came from and whether it is the path's own:
/// a link profile's rate where there is one; on a real path, the slower of
/// the two ends' interfaces as their drivers report them.
fn path_rate(
    sender: &EndpointReport,
    receiver: &EndpointReport,
    link: Option<&LinkFacts>,
) -> (Option<u64>, String, bool) {
    let speeds: Vec<&crate::measure::ifstat::LinkSpeed> = [sender, receiver]
        .iter()
        .filter_map(|r| r.link_speed.as_ref())
        .filter(|s| !s.nominal())
        .collect();
    let slower = speeds.iter().min_by_key(|s| s.mbit_s);
    match (link.and_then(|l| l.profile.rate_bps), slower) {
        // --mptcp's second path is shaped as the first: with a subflow
        // over each, the connection's path is the two together.
        (Some(rate), _)
            if subflows(sender) > 1
                && let Some(second) = link.and_then(|l| l.second_path.as_ref()) =>
        {
            (
                Some(rate.saturating_mul(2)),
                format!(
                    "two paths' rate, {} each: the link ({}) and --mptcp's second path ({})",
                    crate::testbed::link::format_rate(rate),
                    link.map_or("", |l| l.detail.as_str()),
                    second.detail
                ),
                true,
            )
        }
        (Some(rate), _) => (
            Some(rate),
            link.map_or(String::new(), |l| format!("the link's rate, {}", l.detail)),
            true,
        ),
        // A speed below what the flow carried is not the path's rate (a
        // virtual device unknown to `nominal`).
        (None, Some(slower))
            if link.is_none()
                && (receiver.bytes as f64 * 8.0 / receiver.wall_s.max(1e-9))
                    < slower.mbit_s as f64 * 1e6 =>
        {
            let said: Vec<String> = speeds
                .iter()
                .map(|s| format!("{} {} Mbit/s", s.interface, s.mbit_s))
                .collect();
            (
                Some(slower.mbit_s * 1_000_000),
                format!(
                    "the interfaces' reported speed ({}; ethtool's Speed)",
                    said.join(", ")
                ),
                false,
            )
        }
        _ => (None, String::new(), false),
    }
}

/// The path the flow crossed in `direction` (0: A to B): its rate, its
/// framing, the emulator's counts and both ends' shapers.
fn path_evidence(
    sender: &EndpointReport,
    receiver: &EndpointReport,
    direction: usize,
    link: Option<&LinkFacts>,
    emulator: Option<&EmulatorReport>,
) -> PathEvidence {
    let mss = f64::from(sender.tcp_info.as_ref().map_or(1448, |t| t.snd_mss.max(1)));
    // IP and TCP headers with timestamps (52 bytes), and Ethernet's 38
    // of framing where the link frames as Ethernet.
    let framing = match link.and_then(|l| l.profile.impair.framing) {
        Some(Framing::Ethernet) => 38.0,
        _ => 0.0,
    };
    let (rate_bps, rate_source, rate_exact) = path_rate(sender, receiver, link);
    let mut path = PathEvidence {
        rate_bps,
        rate_source,
        overhead: (mss + 52.0 + framing) / mss,
        wire_busy_s: emulator
            .map(|e| e.model[direction].wire_busy_ms / 1e3)
            .filter(|&busy| busy > 0.0),
        queue_bytes: link.and_then(|l| l.profile.queue_bytes),
        queue_drops: emulator.map(|e| e.queue_drops[direction]),
        emulator_busy: emulator
            .filter(|e| e.wall_s > 0.0)
            .map(|e| e.usage.cpu_s() / e.wall_s),
        rate_exact,
        shapers: Vec::new(),
        unread: Vec::new(),
    };
    for (end, who, direction) in [
        (sender, "the sender", "egress"),
        (receiver, "the receiver", "ingress, via ifb"),
    ] {
        path.shapers.extend(
            end.shapers
                .iter()
                .map(|s| crate::analysis::limits::ShaperEvidence {
                    host: who.into(),
                    interface: s.interface.clone(),
                    direction: direction.into(),
                    kind: s.kind.clone(),
                    rate_bps: s.rate_bps,
                    drops: s.drops,
                    overlimits: s.overlimits,
                    backlog_bytes: Some(s.backlog_bytes),
                }),
        );
        if let Some(why) = &end.shapers_unread {
            path.unread.push(format!("{who}'s shapers: {why}"));
        }
    }
    // Without a link profile's rate, the slowest shaper either end read
    // bounds the path (beyond the hosts a slower hop may still undercut
    // it, so the rate is not the path's own).
    if link.and_then(|l| l.profile.rate_bps).is_none()
        && let Some(slowest) = path.shapers.iter().min_by_key(|s| s.rate_bps)
        && path.rate_bps.is_none_or(|r| slowest.rate_bps < r)
    {
        path.rate_bps = Some(slowest.rate_bps);
        path.rate_source = slowest.describe();
        path.rate_exact = false;
    }
    path
}

/// The sender's intervals (or samples) that carry the kernel's chrono
/// accounting.
fn interval_evidence(
    samples: &[crate::endpoint::bulk::types::IntervalSample],
) -> Vec<IntervalEvidence> {
    samples
        .iter()
        .filter_map(|i| {
            let c = i.chrono?;
            Some(IntervalEvidence {
                start_s: i.start_s,
                end_s: i.end_s,
                busy: c.busy,
                rwnd_limited: c.rwnd_limited,
                sndbuf_limited: c.sndbuf_limited,
                app_limited: i.app_limited,
                // BBR's own estimate, where it has one, is the smoother of
                // the two (a windowed maximum).
                delivery_rate_bps: i.bbr_bw_mbit_s.or(i.delivery_rate_mbit_s).map(|r| r * 1e6),
                rtt_us: (i.rtt_us > 0).then_some(i.rtt_us),
                ca_state: i.ca_state,
                retransmits: i.retransmits,
                cwnd: i.cwnd,
            })
        })
        .collect()
}

/// Where a UDP run's datagrams were lost (None for TCP, or when the
/// receiver could not count its losses: no end marker). `reverse`: the
/// run went B→A on the link.
pub fn udp_loss_sites(
    sender: &EndpointReport,
    receiver: &EndpointReport,
    reverse: bool,
    link: Option<&LinkFacts>,
    emulator: Option<&EmulatorReport>,
) -> Option<UdpLossSites> {
    let got = receiver.udp.as_ref()?;
    let sent = sender.udp.as_ref()?;
    let lost = got.lost?;
    let direction = usize::from(reverse);
    let on_the_link = emulator.map(|e| e.model[direction].lost + e.device_refused[direction]);
    let link_queue = emulator.map(|e| e.queue_drops[direction]);
    let left_on_the_link = emulator.map(|e| e.left_held[direction]);
    // The TUN device counts in rx_dropped the packets it refused as
    // malformed (EINVAL), which the emulator counts as the link's; not
    // those it had no room for or wrote when down.
    let receiving_device = emulator.map(|e| {
        e.device_full[direction]
            + e.device_gone[direction]
            + receiver.interface.as_ref().map_or(0, |i| {
                i.rx_dropped.saturating_sub(e.device_refused[direction])
            })
    });
    let sender_device = sender.interface.as_ref().map(|i| i.tx_dropped);
    let sender_queue = sender.counters.0.get("Udp.SndbufErrors").copied();
    // Only where the receiver reads its own namespace's counters: on
    // loopback they are every process's.
    let own_namespace = receiver.interface.is_some();
    let receiver_stack = own_namespace.then(|| got.stack_drops.values().sum::<u64>());
    // A full buffer: in a namespace of its own, the receiver's socket is
    // the only UDP one and `Udp.RcvbufErrors` is its count. SO_RXQ_OVFL
    // counts besides the datagrams whose checksum failed as they were
    // read, which are the stack's (`Udp.InErrors`), so it serves only
    // where the namespace is shared.
    let receiver_socket = if own_namespace {
        receiver
            .counters
            .0
            .get("Udp.RcvbufErrors")
            .copied()
            .or(got.socket_drops)
    } else {
        got.socket_drops
    };
    let explained = [
        on_the_link,
        link_queue,
        left_on_the_link,
        receiving_device,
        sender_device,
        sender_queue,
        receiver_stack,
        receiver_socket,
        Some(got.malformed),
    ]
    .into_iter()
    .flatten()
    .sum::<u64>();
    let jitter_cause = match link {
        None => {
            "the two ends' scheduling (no link: each datagram waits for the receiver to be woken)"
                .to_string()
        }
        Some(l) if l.profile.jitter_us > 0 => format!(
            "the link's own jitter, ±{:.1} ms on each packet's delay",
            l.profile.jitter_us as f64 / 1e3
        ),
        Some(l)
            if l.profile.rate_bps.is_some()
                && emulator.is_some_and(|e| e.max_queued[direction] > 1) =>
        {
            format!(
                "the queue in front of the link (up to {} packets waited in it)",
                emulator.map_or(0, |e| e.max_queued[direction])
            )
        }
        Some(_) => "the hosts' scheduling: the link adds no jitter of its own".to_string(),
    };
    Some(UdpLossSites {
        lost,
        refused_at_send: sent.send_errors,
        sender_device,
        sender_queue,
        on_the_link,
        link_queue,
        receiving_device,
        left_on_the_link,
        receiver_stack,
        receiver_socket,
        arrived_malformed: got.malformed,
        unexplained: lost.saturating_sub(explained),
        counted_beyond_lost: explained.saturating_sub(lost),
        jitter_cause,
    })
}

/// Several connections' reports of one side as one: bytes, calls, CPU,
/// switches, faults and zero-copy counts added; the wall time the longest
/// (the side's whole data path); the first connection's TCP_INFO, MSS and
/// CPUs; the namespace-wide counters and interface deltas of the report
/// that ended last (each covers the whole namespace, so adding them would
/// count a packet once per connection).
pub fn combine(reports: &[&EndpointReport]) -> EndpointReport {
    let Some(first) = reports.first() else {
        return EndpointReport::default();
    };
    let last = reports
        .iter()
        .max_by(|a, b| a.wall_s.total_cmp(&b.wall_s))
        .unwrap_or(first);
    let mut out = (*first).clone();
    out.pid = 0;
    out.bytes = reports.iter().map(|r| r.bytes).sum();
    out.syscalls = reports.iter().map(|r| r.syscalls).sum();
    out.wall_s = last.wall_s;
    out.counters = last.counters.clone();
    out.interface = last.interface.clone();
    out.verified = reports.iter().all(|r| r.verified);
    let usage = &mut out.usage;
    usage.user_s = reports.iter().map(|r| r.usage.user_s).sum();
    usage.sys_s = reports.iter().map(|r| r.usage.sys_s).sum();
    usage.voluntary_cs = reports.iter().map(|r| r.usage.voluntary_cs).sum();
    usage.involuntary_cs = reports.iter().map(|r| r.usage.involuntary_cs).sum();
    usage.minor_faults = reports.iter().map(|r| r.usage.minor_faults).sum();
    usage.major_faults = reports.iter().map(|r| r.usage.major_faults).sum();
    usage.cpu_ns = reports.iter().map(|r| r.usage.cpu_ns).sum();
    let sends: Vec<&ZerocopyStats> = reports.iter().filter_map(|r| r.zerocopy.as_ref()).collect();
    out.zerocopy = (!sends.is_empty()).then(|| ZerocopyStats {
        completed: sends.iter().map(|z| z.completed).sum(),
        copied: sends.iter().map(|z| z.copied).sum(),
    });
    let receives: Vec<&ZerocopyReceiveStats> = reports
        .iter()
        .filter_map(|r| r.zerocopy_receive.as_ref())
        .collect();
    out.zerocopy_receive = (!receives.is_empty()).then(|| ZerocopyReceiveStats {
        mapped: receives.iter().map(|z| z.mapped).sum(),
        copied: receives.iter().map(|z| z.copied).sum(),
        calls: receives.iter().map(|z| z.calls).sum(),
        unavailable: receives.iter().find_map(|z| z.unavailable.clone()),
    });
    // --mptcp: every connection's subflows, so that each path's share
    // covers them all.
    if out.mptcp.is_some() {
        let all = reports.iter().filter_map(|r| r.mptcp.as_ref());
        out.mptcp = Some(crate::endpoint::bulk::types::MptcpStats {
            subflows: all.clone().flat_map(|m| m.subflows.clone()).collect(),
            fell_back: all.clone().any(|m| m.fell_back),
            unread: all.clone().find_map(|m| m.unread.clone()),
        });
    }
    if let Some(data) = reports
        .iter()
        .map(|r| r.tcp_info.as_ref().and_then(|t| t.data_segs_out))
        .sum::<Option<u32>>()
        && let Some(info) = out.tcp_info.as_mut()
    {
        // Segments add up; the rest of TCP_INFO stays the first connection's.
        info.data_segs_out = Some(data);
    }
    out
}

/// The figures of connections taken together ([`combine`]): throughput the
/// sum of bytes over the longest receiver's time, CPU percent of one CPU
/// summed over the processes (above 100 when they spread over cores), the
/// bottleneck that of the busiest single process.
pub fn combined_figures(
    flows: &[&FlowResult],
    record: u64,
) -> (EndpointReport, EndpointReport, StreamFigures) {
    let sender = combine(&flows.iter().map(|f| &f.sender).collect::<Vec<_>>());
    let receiver = combine(&flows.iter().map(|f| &f.receiver).collect::<Vec<_>>());
    let mut together = figures(&sender, &receiver, record);
    let busiest = |pick: fn(&StreamFigures) -> f64| {
        flows.iter().map(|f| pick(&f.figures)).fold(0.0, f64::max) / 100.0
    };
    together.bottleneck = bottleneck(
        busiest(|f| f.sender_cpu_pct),
        busiest(|f| f.receiver_cpu_pct),
    );
    (sender, receiver, together)
}

/// Jain's fairness index, (Σx)² / (n Σx²): 1 when every connection got the
/// same, 1/n when one got everything (R. Jain, D. Chiu, W. Hawe, DEC-TR-301,
/// 1984). None for fewer than two or all zero.
pub fn jain_fairness(rates: &[f64]) -> Option<f64> {
    let n = rates.len() as f64;
    let sum: f64 = rates.iter().sum();
    let squares: f64 = rates.iter().map(|x| x * x).sum();
    (rates.len() >= 2 && squares > 0.0).then(|| sum * sum / (n * squares))
}

/// min/median/max of the headline figures over the runs.
pub fn summary_json(records: &[Record]) -> serde_json::Value {
    let results: Vec<_> = records
        .iter()
        .filter_map(|r| match &r.data {
            StreamData {
                result: Some(result),
                ..
            } => Some(result),
            _ => None,
        })
        .collect();
    let spread = |f: &dyn Fn(&crate::experiments::stream::record::StreamResult) -> f64| {
        Spread::of(&results.iter().map(|r| f(r)).collect::<Vec<_>>())
    };
    serde_json::json!({
        "runs": results.len(),
        "throughput_mb_s": spread(&|r| r.figures.throughput_mb_s),
        "throughput_mbit_s": spread(&|r| r.figures.throughput_mbit_s),
        "sender_us_per_kb": spread(&|r| r.figures.sender_us_per_kb),
        "receiver_us_per_kb": spread(&|r| r.figures.receiver_us_per_kb),
        "sender_cpu_pct": spread(&|r| r.figures.sender_cpu_pct),
        "receiver_cpu_pct": spread(&|r| r.figures.receiver_cpu_pct),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::{rusage::ProcessUsage, tcpinfo::TcpInfo};

    #[test]
    fn udp_losses_are_placed_by_each_sites_counter_and_the_rest_is_unexplained() {
        use crate::endpoint::bulk::types::UdpStats;
        use crate::measure::ifstat::InterfaceCounters;
        let sender = EndpointReport {
            udp: Some(UdpStats {
                sent: Some(1000),
                send_errors: 2,
                ..UdpStats::default()
            }),
            interface: Some(InterfaceCounters {
                tx_dropped: 5,
                ..InterfaceCounters::default()
            }),
            counters: crate::measure::netstat::Counters(
                [("Udp.SndbufErrors".to_string(), 3)].into_iter().collect(),
            ),
            ..EndpointReport::default()
        };
        let receiver = EndpointReport {
            udp: Some(UdpStats {
                received: 950,
                lost: Some(50),
                socket_drops: Some(10),
                ..UdpStats::default()
            }),
            ..EndpointReport::default()
        };
        let mut emulator = EmulatorReport::default();
        emulator.model[1].lost = 20;
        emulator.queue_drops[1] = 4;
        emulator.model[0].lost = 999; // the other direction's
        let sites = udp_loss_sites(&sender, &receiver, true, None, Some(&emulator)).unwrap();
        assert_eq!(sites.on_the_link, Some(20));
        assert_eq!(sites.link_queue, Some(4));
        assert_eq!(sites.sender_device, Some(5));
        assert_eq!(sites.receiver_socket, Some(10));
        assert_eq!(sites.refused_at_send, 2);
        assert_eq!(sites.sender_queue, Some(3));
        assert_eq!(sites.unexplained, 50 - 20 - 4 - 5 - 3 - 10);
        assert_eq!(sites.counted_beyond_lost, 0);
        assert_eq!(sites.receiver_stack, None, "no namespace of its own");
        // The receiving side's places, and a count beyond the lost.
        let mut own = receiver.clone();
        own.interface = Some(InterfaceCounters {
            rx_dropped: 1 + 6,
            ..InterfaceCounters::default()
        });
        // SO_RXQ_OVFL's 10 hold 3 checksum failures found as they were
        // read; the namespace's count of a full buffer is 7.
        own.counters = crate::measure::netstat::Counters(
            [("Udp.RcvbufErrors".to_string(), 7)].into_iter().collect(),
        );
        let got = own.udp.as_mut().unwrap();
        got.malformed = 2;
        got.stack_drops = [
            ("Udp.InErrors".to_string(), 3),
            ("Ip.InHdrErrors".into(), 1),
        ]
        .into_iter()
        .collect();
        emulator.device_full[1] = 2;
        emulator.device_gone[1] = 1;
        emulator.left_held[1] = 3;
        emulator.device_refused[1] = 6; // in rx_dropped too, counted once
        emulator.device_full[0] = 100; // the other direction's
        let sites = udp_loss_sites(&sender, &own, true, None, Some(&emulator)).unwrap();
        assert_eq!(sites.receiving_device, Some(2 + 1 + 1));
        assert_eq!(sites.on_the_link, Some(20 + 6));
        assert_eq!(sites.receiver_socket, Some(7));
        assert_eq!(sites.left_on_the_link, Some(3));
        assert_eq!(sites.receiver_stack, Some(4));
        assert_eq!(sites.arrived_malformed, 2);
        assert_eq!(sites.unexplained, 0);
        assert_eq!(
            sites.counted_beyond_lost,
            (20 + 6) + 4 + 5 + 3 + 7 + 4 + 3 + 4 + 2 - 50
        );
        // Without an end marker the losses are unknown: no placing them.
        let mut unsure = receiver.clone();
        unsure.udp.as_mut().unwrap().lost = None;
        assert!(udp_loss_sites(&sender, &unsure, true, None, Some(&emulator)).is_none());
    }

    #[test]
    fn jains_index_is_one_when_fair_and_one_over_n_when_not() {
        assert_eq!(jain_fairness(&[5.0, 5.0, 5.0, 5.0]), Some(1.0));
        assert_eq!(jain_fairness(&[8.0, 0.0, 0.0, 0.0]), Some(0.25));
        // (1+3)^2 / (2 * (1+9)) = 0.8
        assert!((jain_fairness(&[1.0, 3.0]).unwrap() - 0.8).abs() < 1e-12);
        assert_eq!(jain_fairness(&[4.0]), None);
        assert_eq!(jain_fairness(&[0.0, 0.0]), None);
    }

    #[test]
    fn a_real_paths_rate_is_the_slower_interfaces_reported_speed() {
        use crate::measure::ifstat::LinkSpeed;
        let end = |interface: &str, mbit_s| EndpointReport {
            bytes: 1_000_000,
            wall_s: 1.0,
            tcp_info: Some(TcpInfo::default()),
            link_speed: Some(LinkSpeed {
                interface: interface.into(),
                mbit_s,
                driver: Some("e1000e".into()),
            }),
            ..Default::default()
        };
        let (sender, receiver) = (end("eth0", 1000), end("eth1", 10000));
        let flow = flow_evidence(&sender, &receiver, 65536, None, false, None, None).unwrap();
        assert_eq!(flow.path.rate_bps, Some(1_000_000_000));
        assert!(
            flow.path
                .rate_source
                .contains("eth0 1000 Mbit/s, eth1 10000 Mbit/s")
        );
        // Neither end reports one (loopback): no rate, not zero.
        let quiet = EndpointReport {
            link_speed: None,
            ..sender.clone()
        };
        let flow = flow_evidence(&quiet, &quiet, 65536, None, false, None, None).unwrap();
        assert_eq!(flow.path.rate_bps, None);
        // A flow faster than the speed reported: nominal, not the path's.
        let fast = EndpointReport {
            bytes: 2_000_000_000,
            ..receiver.clone()
        };
        let flow = flow_evidence(&sender, &fast, 65536, None, false, None, None).unwrap();
        assert_eq!(flow.path.rate_bps, None);
        // veth's 10000 is nominal: not a rate, however slow the flow.
        let veth = |r: &EndpointReport| EndpointReport {
            link_speed: Some(LinkSpeed {
                interface: "veth0".into(),
                mbit_s: 10000,
                driver: Some("veth".into()),
            }),
            ..r.clone()
        };
        let flow = flow_evidence(
            &veth(&sender),
            &veth(&receiver),
            65536,
            None,
            false,
            None,
            None,
        )
        .unwrap();
        assert_eq!(flow.path.rate_bps, None);
    }

    #[test]
    fn connections_combine_by_adding_and_the_longest_wall_time() {
        let report = |bytes, wall_s, cpu| EndpointReport {
            bytes,
            wall_s,
            usage: ProcessUsage {
                sys_s: cpu,
                ..Default::default()
            },
            tcp_info: Some(TcpInfo {
                data_segs_out: Some((bytes / 1000) as u32),
                ..Default::default()
            }),
            verified: true,
            ..Default::default()
        };
        let flows: Vec<FlowResult> = [(3_000_000u64, 1.0, 0.9), (1_000_000, 2.0, 0.5)]
            .iter()
            .map(|&(b, w, c)| {
                let (s, r) = (report(b, w, c), report(b, w, c * 0.5));
                FlowResult {
                    reverse: false,
                    figures: figures(&s, &r, 1000),
                    sender: s,
                    receiver: r,
                    limits: None,
                }
            })
            .collect();
        let (sender, receiver, together) =
            combined_figures(&flows.iter().collect::<Vec<_>>(), 1000);
        assert_eq!(sender.bytes, 4_000_000);
        assert_eq!(receiver.wall_s, 2.0);
        assert!((sender.usage.cpu_s() - 1.4).abs() < 1e-9);
        assert_eq!(sender.tcp_info.unwrap().data_segs_out, Some(4000));
        assert!(receiver.verified);
        // 4 MB over the longest 2 s: 16 Mbit/s; CPU 1.4 s / 2 s = 70% of one CPU.
        assert!((together.throughput_mbit_s - 16.0).abs() < 1e-9);
        assert!((together.sender_cpu_pct - 70.0).abs() < 1e-9);
        // The busiest single sender ran at 90%: the sender is the limit.
        assert_eq!(together.bottleneck, Bottleneck::Sender);
    }

    #[test]
    fn bottleneck_rule() {
        assert_eq!(bottleneck(0.99, 0.6), Bottleneck::Sender);
        assert_eq!(bottleneck(0.7, 0.95), Bottleneck::Receiver);
        assert_eq!(bottleneck(1.0, 1.02), Bottleneck::Receiver);
        assert_eq!(bottleneck(0.3, 0.2), Bottleneck::Neither);
    }

    #[test]
    fn figures_from_reports() {
        let sender = EndpointReport {
            bytes: 4 << 20,
            wall_s: 2.0,
            usage: ProcessUsage {
                user_s: 0.5,
                sys_s: 1.5,
                ..Default::default()
            },
            tcp_info: Some(TcpInfo {
                data_segs_out: Some(4096),
                ..Default::default()
            }),
            ..Default::default()
        };
        let receiver = EndpointReport {
            bytes: 4 << 20,
            wall_s: 2.0,
            usage: ProcessUsage {
                user_s: 0.2,
                sys_s: 0.4,
                ..Default::default()
            },
            ..Default::default()
        };
        let f = figures(&sender, &receiver, 1024);
        assert!((f.throughput_mb_s - 4194304.0 / 2.0 / 1e6).abs() < 1e-9);
        assert!((f.throughput_mbit_s - 8.0 * f.throughput_mb_s).abs() < 1e-9);
        assert!((f.sender_cpu_pct - 100.0).abs() < 1e-9);
        assert!((f.receiver_cpu_pct - 30.0).abs() < 1e-9);
        assert!((f.sender_us_per_kb - 2e6 / 4096.0).abs() < 1e-9);
        assert_eq!(f.bottleneck, Bottleneck::Sender);
        assert_eq!(f.mean_segment_bytes, Some(1024.0));
        assert!((f.us_per_record - 2e6 / 4096.0).abs() < 1e-9);
    }

    #[test]
    fn empty_reports_give_zeros_not_nan() {
        let f = figures(&EndpointReport::default(), &EndpointReport::default(), 0);
        let json = serde_json::to_string(&f).unwrap();
        assert!(!json.contains("null") || json.contains("\"data_segments\":null"));
        assert_eq!(f.throughput_mb_s, 0.0);
        assert_eq!(f.bottleneck, Bottleneck::Neither);
    }
}
