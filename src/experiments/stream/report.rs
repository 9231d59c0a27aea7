//! The tables netlab prints, in the shape of the source documents where
//! they had one, each followed by the historical figures beside today's.
//! Functions here take records (or summaries computed from records) and
//! return text; they print nothing themselves.

use crate::experiments::stream::record::Record;
use crate::experiments::stream::record::StreamData;
use crate::experiments::stream::record::StreamResult;
use crate::record::stats::Spread;
use crate::report::historical;
use crate::report::table::*;
use crate::units::format_size;
use std::fmt::Write;

/// The verdict that heads a stream table: the median run's, with how many
/// runs share its primary factor (`None` for records without one: UDP,
/// older records).
fn verdict_line(runs: &[(&Record, &StreamResult)]) -> Option<String> {
    let mut judged: Vec<&StreamResult> = runs
        .iter()
        .map(|(_, r)| *r)
        .filter(|r| r.limits.as_ref().is_some_and(|v| v.primary().is_some()))
        .collect();
    judged.sort_by(|a, b| {
        a.figures
            .throughput_mbit_s
            .total_cmp(&b.figures.throughput_mbit_s)
    });
    let median = judged.get(judged.len() / 2)?.limits.as_ref()?;
    let factor = median.primary()?.factor;
    let agreeing = judged
        .iter()
        .filter(|r| {
            r.limits
                .as_ref()
                .and_then(|v| v.primary())
                .is_some_and(|l| l.factor == factor)
        })
        .count();
    let runs_note = if judged.len() > 1 {
        format!(" [{agreeing} of {} runs]", judged.len())
    } else {
        String::new()
    };
    Some(format!("{}{runs_note}", median.headline()))
}

fn stream_results(records: &[Record]) -> Vec<(&Record, &StreamResult)> {
    records
        .iter()
        .filter_map(|r| match &r.data {
            StreamData {
                result: Some(result),
                ..
            } => Some((r, result.as_ref())),
            _ => None,
        })
        .collect()
}

/// The table of `netlab stream`: one row per run, then min/median/max.
/// `netlab stream --json`: the run's description, its summary and records.
pub fn stream_doc(description: &str, records: &[Record]) -> serde_json::Value {
    let mut doc = serde_json::json!({
        "experiment": "stream",
        "description": description,
        "summary": crate::experiments::stream::analysis::summary_json(records),
        "records": records,
    });
    if let Some(beside) = crate::experiments::stream::encrypted::compare(records) {
        doc["tls_beside_plain"] = serde_json::json!(beside);
    }
    if let Some(transports) = crate::experiments::stream::quic::transports(records) {
        doc["transports"] = serde_json::json!(transports);
    }
    doc
}

/// One run's row of [`stream_table`], numbered `run`.
fn run_row(run: usize, r: &StreamResult) -> Vec<String> {
    let f = &r.figures;
    vec![
        run.to_string(),
        num(f.throughput_mb_s),
        num(f.throughput_mbit_s),
        num(f.sender_cpu_pct),
        num(f.receiver_cpu_pct),
        num(f.sender_us_per_kb),
        num(f.receiver_us_per_kb),
        r.sender.syscalls.to_string(),
        r.receiver.syscalls.to_string(),
        format!(
            "{}/{}",
            r.sender.usage.voluntary_cs, r.sender.usage.involuntary_cs
        ),
        format!(
            "{}/{}",
            r.receiver.usage.voluntary_cs, r.receiver.usage.involuntary_cs
        ),
        f.data_segments.map_or("-".into(), |n| n.to_string()),
        f.mean_segment_bytes.map_or("-".into(), num),
        match (r.sender.cpus, r.receiver.cpus) {
            (Some((_, s)), Some((_, r))) => format!("{s}/{r}"),
            _ => "-".into(),
        },
        r.limits
            .as_ref()
            .and_then(|v| v.primary())
            .map_or(f.bottleneck.describe(), |l| l.factor.describe())
            .to_string(),
    ]
}

pub fn stream_table(title: &str, records: &[Record]) -> String {
    let mut out = String::new();
    let runs = stream_results(records);
    let _ = writeln!(out, "netlab stream: {title}");
    if let Some((first, _)) = runs.first() {
        let _ = writeln!(out, "{}", hosts_text(first, &first.placement));
    }
    if let Some(line) = verdict_line(&runs) {
        let _ = writeln!(out, "{line}");
    }
    let mut table = new_table(&[
        "run",
        "MB/s",
        "Mbit/s",
        "CPU% snd",
        "CPU% rcv",
        "µs/KB snd",
        "µs/KB rcv",
        "calls snd",
        "calls rcv",
        "cs vol/inv snd",
        "cs vol/inv rcv",
        "segs",
        "B/seg",
        "core snd/rcv",
        "bottleneck",
    ]);
    for (i, (_, r)) in runs.iter().enumerate() {
        table.add_row(run_row(i + 1, r));
    }
    if runs.len() > 1 {
        let col = |f: &dyn Fn(&StreamResult) -> f64| {
            Spread::of(&runs.iter().map(|(_, r)| f(r)).collect::<Vec<_>>())
        };
        for (label, pick) in [
            ("min", (|s: &Spread| s.min) as fn(&Spread) -> f64),
            ("median", |s: &Spread| s.median),
            ("max", |s: &Spread| s.max),
        ] {
            let cell =
                |f: &dyn Fn(&StreamResult) -> f64| col(f).map_or("-".into(), |s| num(pick(&s)));
            table.add_row(vec![
                label.to_string(),
                cell(&|r| r.figures.throughput_mb_s),
                cell(&|r| r.figures.throughput_mbit_s),
                cell(&|r| r.figures.sender_cpu_pct),
                cell(&|r| r.figures.receiver_cpu_pct),
                cell(&|r| r.figures.sender_us_per_kb),
                cell(&|r| r.figures.receiver_us_per_kb),
                cell(&|r| r.sender.syscalls as f64),
                cell(&|r| r.receiver.syscalls as f64),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
    }
    let _ = writeln!(out, "{table}");
    if let Some((run, last)) = runs.last() {
        // On one host's loopback both ends share a namespace.
        out.push_str(&last_run_lines(last, run.placement == "loopback"));
    }
    if let Some((_, last)) = runs.last() {
        out.push_str(&netns_lines(last));
    }
    for r in records.iter().filter(|r| r.error.is_some()) {
        let _ = writeln!(out, "failed run: {}", r.error.as_deref().unwrap_or(""));
    }
    out
}

/// The last run's machine (/proc/stat), the sender's TCP_INFO, and the
/// kernel's counters from the end that counts each; `shared` when both
/// ends were in one namespace, so that each count holds both.
fn last_run_lines(last: &StreamResult, shared: bool) -> String {
    let mut out = String::new();
    let s = &last.system;
    let _ = writeln!(
        out,
        "system (last run, /proc/stat): us {:.0}% sy {:.0}% id {:.0}% irq {:.0}% softirq {:.0}% steal {:.0}%; busiest CPU {} at {:.0}%; {:.0} cs/s{}",
        s.user_pct,
        s.system_pct,
        s.idle_pct,
        s.irq_pct,
        s.softirq_pct,
        s.steal_pct,
        s.busiest_cpu,
        s.busiest_cpu_pct,
        s.context_switches_per_s,
        if s.ticks < 100 {
            format!(
                " (only {} clock ticks: too short a run for these percentages to mean much)",
                s.ticks
            )
        } else {
            String::new()
        }
    );
    let subflows = last.sender.mptcp.as_ref().map_or(0, |m| m.subflows.len());
    if let Some(t) = &last.sender.tcp_info {
        let _ = writeln!(
            out,
            "TCP_INFO (sender, last run{}): rtt {} µs ± {}, cwnd {} segs, mss {}, retransmits {}, delivery rate {}",
            if subflows > 1 {
                ", the first of its MPTCP subflows"
            } else {
                ""
            },
            t.rtt_us,
            t.rttvar_us,
            t.snd_cwnd,
            t.snd_mss,
            t.total_retrans,
            t.delivery_rate_bps.map_or("-".into(), |r| format!(
                "{} Mbit/s",
                num(r as f64 * 8.0 / 1e6)
            ))
        );
    }
    out.push_str(&super::multipath::mptcp_text(last).unwrap_or_default());
    // Each counter from the end whose kernel counts it; on one host's
    // loopback both ends share a namespace, and each count holds both.
    use crate::measure::netstat::counted_at_sender;
    let at_sender = last.sender.counters.short_pairs(counted_at_sender);
    let at_receiver = last
        .receiver
        .counters
        .short_pairs(|k| !counted_at_sender(k));
    let _ = writeln!(
        out,
        "kernel counters, change over the last run{}: at the sender {}; at the receiver {}",
        if shared {
            " (one namespace for both ends: each count is both ends' traffic)"
        } else {
            " (each read in the namespace of the end that counts it)"
        },
        at_sender.join(" "),
        at_receiver.join(" ")
    );
    out
}

/// The link, interface counters, wire view and emulator of a netns run.
pub fn netns_lines(result: &StreamResult) -> String {
    let mut out = String::new();
    if let Some(link) = &result.link {
        let _ = writeln!(
            out,
            "link: {}; built with {}{}",
            link.profile.describe(),
            link.detail,
            link.note
                .as_ref()
                .map_or(String::new(), |n| format!(" ({n})"))
        );
    }
    for (side, report) in [("sender", &result.sender), ("receiver", &result.receiver)] {
        if let Some(i) = &report.interface {
            let _ = writeln!(
                out,
                "net pkts ({side}'s {}): in {} ({} B), out {} ({} B), dropped in/out {}/{}",
                i.name,
                i.rx_packets,
                i.rx_bytes,
                i.tx_packets,
                i.tx_bytes,
                i.rx_dropped,
                i.tx_dropped
            );
        }
    }
    if let Some(c) = &result.capture {
        for (label, d) in [("A->B", &c.wire.outgoing), ("B->A", &c.wire.incoming)] {
            let _ = writeln!(
                out,
                "wire {label}: {} frames, {} B, mean {} B; gaps p50 {} µs p99 {} µs max {} µs; {} bursts (mean {} frames, longest {}); idle {} of {} ms",
                d.packets,
                d.bytes,
                num(d.mean_size),
                num(d.gap_us_p50),
                num(d.gap_us_p99),
                num(d.gap_us_max),
                d.bursts,
                num(d.mean_burst_packets),
                d.longest_burst_packets,
                num(d.idle_ms),
                num(d.span_ms),
            );
        }
        let _ = writeln!(
            out,
            "capture: {} frames ({}), {} dropped by the kernel{}{}",
            c.captured,
            c.link_type,
            c.kernel_drops,
            if c.truncated {
                ", analysis truncated"
            } else {
                ""
            },
            c.pcap
                .as_ref()
                .map_or(String::new(), |p| format!(", pcap {}", p.display()))
        );
    }
    if let Some(e) = &result.emulator {
        let _ = writeln!(
            out,
            "emulator: forwarded {}/{} packets (A->B/B->A), lost {}/{}, queue drops {}/{}; its own delay p50 {} µs p99 {} µs; CPU {} s over {} s",
            e.forwarded_packets[0],
            e.forwarded_packets[1],
            e.lost_packets[0],
            e.lost_packets[1],
            e.queue_drops[0],
            e.queue_drops[1],
            num(e.overhead_us_p50),
            num(e.overhead_us_p99),
            num(e.usage.cpu_s()),
            num(e.wall_s),
        );
        if e.device_refused.iter().any(|&n| n > 0) {
            let _ = writeln!(
                out,
                "emulator: {}/{} corrupted packets refused by the receiving device (a damaged IP version: dropped, as a NIC drops a frame it cannot parse)",
                e.device_refused[0], e.device_refused[1]
            );
        }
        let _ = write!(out, "{}", emulator_model_text(e));
    }
    out
}

/// What the emulator's link model did beyond loss and tail drop, a line
/// per direction that saw anything (nothing for a plain link).
pub fn emulator_model_text(e: &crate::record::testbed::EmulatorReport) -> String {
    let mut out = String::new();
    for (dir, name) in [(0, "A->B"), (1, "B->A")] {
        let m = &e.model[dir];
        let mut parts = Vec::new();
        for (count, what) in [
            (m.duplicated, "duplicated"),
            (m.corrupted, "corrupted"),
            (m.reordered, "sent ahead (reordered)"),
            (m.rx_gap_drops, "dropped by the slow receiver"),
            (m.tx_service_waits, "waited for the driver's service"),
        ] {
            if count > 0 {
                parts.push(format!("{count} {what}"));
            }
        }
        if m.back_to_back + m.tx_service_waits > 0 {
            parts.push(format!(
                "wire busy {} ms, {} frames queued behind another, gap between queued frames on the wire min {} µs p50 {} µs",
                num(m.wire_busy_ms),
                m.back_to_back,
                num(m.wire_gap_us_min),
                num(m.wire_gap_us_p50)
            ));
        } else if m.wire_busy_ms > 0.0 {
            parts.push(format!(
                "wire busy {} ms, no frame queued",
                num(m.wire_busy_ms)
            ));
        }
        if !parts.is_empty() {
            let _ = writeln!(
                out,
                "link model {name} ({} packets): {}",
                m.packets,
                parts.join(", ")
            );
        }
    }
    out
}

/// `--udp`: what each run's receiver counted, one row a run.
pub fn udp_text(records: &[Record]) -> Option<String> {
    let rows: Vec<Vec<String>> = stream_results(records)
        .iter()
        .enumerate()
        .filter_map(|(i, (_, r))| {
            let got = r.receiver.udp.as_ref()?;
            let sender = r.sender.udp.as_ref();
            let latency = got.latency.as_ref().map_or("- (clocks apart)".into(), |l| {
                format!("{} / {} / {}", num(l.p50_us), num(l.p99_us), num(l.max_us))
            });
            Some(vec![
                (i + 1).to_string(),
                sender
                    .and_then(|s| s.sent)
                    .map_or("-".into(), |n| n.to_string()),
                got.received.to_string(),
                match (got.lost, got.lost_pct) {
                    (Some(n), Some(pct)) => format!("{n} ({pct:.3}%)"),
                    _ => "? (no end marker)".into(),
                },
                got.duplicates.to_string(),
                got.reordered.to_string(),
                format!("{:.4}", got.jitter_ms),
                latency,
                sender.map_or(0, |s| s.send_errors).to_string(),
            ])
        })
        .collect();
    if rows.is_empty() {
        return None;
    }
    let notes: Vec<String> = stream_results(records)
        .iter()
        .enumerate()
        .filter_map(|(i, (_, r))| {
            let got = r.receiver.udp.as_ref()?;
            let mut parts = Vec::new();
            if got.after_end > 0 {
                parts.push(format!(
                    "{} arrived after the end marker (they overtook it on the path; counted as received)",
                    got.after_end
                ));
            }
            if let Some(sites) = &r.udp_loss {
                parts.push(loss_sites_text(sites));
            } else if let Some(drops) = got.socket_drops.filter(|&n| n > 0) {
                parts.push(format!(
                    "{drops} of the lost were dropped by the receiving socket's full buffer \
                     (SO_RXQ_OVFL): loss at the receiver, not on the path"
                ));
            }
            (!parts.is_empty()).then(|| format!("run {}: {}\n", i + 1, parts.join("; ")))
        })
        .collect();
    let mut text = "UDP datagrams (jitter: RFC 3550's interarrival estimator, as iperf3 reports it; latency one-way, on one host's clock):\n".to_string();
    text.push_str(&markdown(
        &[
            "run",
            "sent",
            "received",
            "lost",
            "dup",
            "reordered",
            "jitter, ms",
            "latency p50/p99/max, µs",
            "send errors",
        ],
        &rows,
    ));
    text.extend(notes);
    Some(text)
}

/// Where a UDP run's datagrams were lost, site by site, and its jitter's cause.
fn loss_sites_text(sites: &crate::endpoint::bulk::types::UdpLossSites) -> String {
    let mut found: Vec<String> = [
        (
            Some(sites.refused_at_send),
            "refused by the sender's kernel (ENOBUFS)",
        ),
        (
            sites.sender_device,
            "dropped by the sender's device (tx_dropped)",
        ),
        (
            sites.sender_queue,
            "dropped below the sender's socket, at its qdisc or device queue (Udp.SndbufErrors)",
        ),
        (sites.link_queue, "at the full queue in front of the link"),
        (sites.on_the_link, "by the link's own loss"),
        (
            sites.left_on_the_link,
            "still held by the emulated link when it stopped",
        ),
        (
            sites.receiving_device,
            "not taken by the receiving device (no room, down, or its rx_dropped)",
        ),
        (
            sites.receiver_stack,
            "dropped by the receiver's IP or UDP layer (corrupted header or checksum, no socket)",
        ),
        (
            sites.receiver_socket,
            "by the receiving socket's full buffer (SO_RXQ_OVFL)",
        ),
        (
            Some(sites.arrived_malformed),
            "arrived malformed (not as sent)",
        ),
    ]
    .into_iter()
    .filter_map(|(n, site)| n.filter(|&n| n > 0).map(|n| format!("{n} {site}")))
    .collect();
    if sites.unexplained > 0 {
        found.push(format!(
            "{} where no counter here saw them (beyond the hosts)",
            sites.unexplained
        ));
    }
    if sites.counted_beyond_lost > 0 {
        found.push(format!(
            "and {} more drops at those places than datagrams lost (end markers or other traffic)",
            sites.counted_beyond_lost
        ));
    }
    let losses = if sites.lost == 0 {
        "nothing lost".to_string()
    } else if found.is_empty() {
        format!("{} lost, where no counter here saw them", sites.lost)
    } else {
        format!("{} lost: {}", sites.lost, found.join(", "))
    };
    format!("{losses}; jitter from {}", sites.jitter_cause)
}

/// What `--confidence` reached, in a line.
pub fn confidence_text(c: &crate::experiments::stream::cell::Confident) -> String {
    let asked = format!(
        "{}% confidence, ±{}% wanted",
        c.asked.level_pct,
        c.asked.width_pct / 2.0
    );
    match (c.mean_mbit_s, c.half_width_mbit_s, c.half_width_pct) {
        (Some(mean), Some(half), Some(pct)) => format!(
            "confidence ({asked}): mean {} ± {} Mbit/s (±{pct:.2}%) after {} runs ({} measured): {}\n",
            num(mean),
            num(half),
            c.runs,
            c.measured,
            if c.reached {
                "reached".to_string()
            } else {
                format!(
                    "NOT reached within {} runs; the run-to-run spread is wider than asked (more runs, longer runs, or a quieter host)",
                    c.asked.max_runs
                )
            }
        ),
        _ => format!(
            "confidence ({asked}): NOT reached: {} of {} runs measured, too few for an interval\n",
            c.measured, c.runs
        ),
    }
}

/// The last run's intervals (`--interval`), each connection's in turn:
/// throughput of the bytes acknowledged, retransmits, cwnd, RTT, the
/// kernel's delivery rate at each interval's end (and whether its sample
/// was application-limited), and the sender's time in the interval by the
/// chrono accounting, its largest part first.
pub fn intervals_text(records: &[Record]) -> Option<String> {
    let (_, last) = stream_results(records).into_iter().last()?;
    let senders: Vec<&crate::endpoint::bulk::types::EndpointReport> = if last.flows.is_empty() {
        vec![&last.sender]
    } else {
        last.flows.iter().map(|f| &f.sender).collect()
    };
    if senders.iter().all(|s| s.intervals.is_empty()) {
        return None;
    }
    let mut rows = Vec::new();
    for (c, sender) in senders.iter().enumerate() {
        for i in &sender.intervals {
            rows.push(vec![
                (c + 1).to_string(),
                format!("{:.2}-{:.2}", i.start_s, i.end_s),
                format!("{:.1}", i.bytes as f64 / 1e6),
                num(i.mbit_s),
                i.retransmits.to_string(),
                i.cwnd.to_string(),
                i.rtt_us.to_string(),
                format!(
                    "{}{}",
                    i.delivery_rate_mbit_s.map_or("-".into(), num),
                    if i.app_limited == Some(true) {
                        " (app-limited)"
                    } else {
                        ""
                    }
                ),
                i.chrono.map_or("-".into(), |c| {
                    format!(
                        "{} (busy {:.0}%, rwnd {:.0}%, sndbuf {:.0}%)",
                        c.dominant(),
                        100.0 * c.busy,
                        100.0 * c.rwnd_limited,
                        100.0 * c.sndbuf_limited
                    )
                }),
            ]);
        }
    }
    let mut text = "intervals of the last run (each sender's TCP_INFO at the interval's end; bytes acknowledged by the peer):\n".to_string();
    text.push_str(&markdown(
        &[
            "conn",
            "interval, s",
            "acked, MB",
            "Mbit/s",
            "retrans",
            "cwnd, segs",
            "RTT, µs",
            "delivery rate, Mbit/s",
            "sender's time (chrono)",
        ],
        &rows,
    ));
    let acked: u64 = senders
        .iter()
        .flat_map(|s| &s.intervals)
        .map(|i| i.bytes)
        .sum();
    let sent: u64 = senders.iter().map(|s| s.bytes).sum();
    let _ = writeln!(
        text,
        "the intervals add up to {acked} bytes acknowledged of {sent} sent (each connection's FIN takes one sequence number)"
    );
    Some(text)
}

/// The last run's connections one by one (`-P`, `--reverse`, `--bidir`):
/// each one's throughput, CPU and whether every byte was verified; each
/// direction's sum over the longest connection's time, and Jain's index.
/// None for a run of one forward connection.
pub fn flows_text(records: &[Record]) -> Option<String> {
    let (_, last) = stream_results(records).into_iter().last()?;
    if last.flows.is_empty() {
        return None;
    }
    let rows: Vec<Vec<String>> = last
        .flows
        .iter()
        .enumerate()
        .map(|(i, f)| {
            vec![
                (i + 1).to_string(),
                if f.reverse {
                    "--to sends"
                } else {
                    "--from sends"
                }
                .into(),
                num(f.figures.throughput_mbit_s),
                format!("{:.1}", f.figures.sender_cpu_pct),
                format!("{:.1}", f.figures.receiver_cpu_pct),
                format_size(f.receiver.bytes),
                if f.receiver.verified { "yes" } else { "no" }.into(),
            ]
        })
        .collect();
    let mut text = format!("connections of the last run ({}):\n", last.flows.len());
    text.push_str(&markdown(
        &[
            "conn",
            "direction",
            "Mbit/s",
            "CPU% snd",
            "CPU% rcv",
            "received",
            "verified",
        ],
        &rows,
    ));
    let main_reverse = last.flows.iter().all(|f| f.reverse);
    let _ = writeln!(
        text,
        "{} sum: {} Mbit/s (bytes of every connection over the longest one's time){}",
        if main_reverse {
            "--to -> --from"
        } else {
            "--from -> --to"
        },
        num(last.figures.throughput_mbit_s),
        last.fairness
            .map(|j| format!("; Jain's fairness index {j:.3} (1 = equal shares)"))
            .unwrap_or_default()
    );
    if let Some(reverse) = &last.reverse {
        let _ = writeln!(
            text,
            "--to -> --from sum: {} Mbit/s; both ways together {} Mbit/s",
            num(reverse.throughput_mbit_s),
            num(reverse.throughput_mbit_s + last.figures.throughput_mbit_s)
        );
    }
    Some(text)
}

/// What the zero-copy paths did over the runs, summed: MSG_ZEROCOPY sends
/// the kernel copied after all, and the bytes zero-copy receive mapped
/// against those it copied (payload not in whole, page-aligned pages).
/// None when no run used either.
pub fn zero_copy_text(records: &[Record]) -> Option<String> {
    let results = stream_results(records);
    let mut text = String::new();
    let sends: Vec<_> = results
        .iter()
        .filter_map(|(_, r)| r.sender.zerocopy.as_ref())
        .collect();
    if !sends.is_empty() {
        let completed: u64 = sends.iter().map(|z| z.completed).sum();
        let copied: u64 = sends.iter().map(|z| z.copied).sum();
        let _ = writeln!(
            text,
            "MSG_ZEROCOPY: {copied} of {completed} sends copied by the kernel after all{}",
            if copied == completed && completed > 0 {
                " (every one: the path could not keep the sender's pages)"
            } else {
                ""
            }
        );
    }
    let receives: Vec<_> = results
        .iter()
        .filter_map(|(_, r)| r.receiver.zerocopy_receive.as_ref())
        .collect();
    if !receives.is_empty() {
        let total = crate::endpoint::bulk::types::ZerocopyReceiveStats {
            mapped: receives.iter().map(|z| z.mapped).sum(),
            copied: receives.iter().map(|z| z.copied).sum(),
            calls: receives.iter().map(|z| z.calls).sum(),
            unavailable: receives.iter().find_map(|z| z.unavailable.clone()),
        };
        let _ = writeln!(
            text,
            "zero-copy receive: {:.1}% of the bytes mapped ({} mapped, {} copied{}) in {} calls",
            total.mapped_pct(),
            format_size(total.mapped),
            format_size(total.copied),
            if total.mapped_pct() < 50.0 {
                ": only whole, page-aligned pages of payload map; segments of a page (--mss 4108 on loopback, MTU 4148 on netns) from a sender whose pages they are (MSG_ZEROCOPY) do"
            } else {
                ""
            },
            total.calls
        );
        if let Some(why) = &total.unavailable {
            let _ = writeln!(
                text,
                "zero-copy receive unavailable, every byte read: {why}"
            );
        }
    }
    (!text.is_empty()).then_some(text)
}

/// The 1981 comparison line for a 4 MB transfer in 1024-byte records.
pub fn berkeley_then_now(records: &[Record]) -> Option<String> {
    let h = &historical::figures().berkeley_vax;
    // Runs of the transfer, or of several in a row (the lab's loopback
    // runs), with how many transfers each moved.
    let runs: Vec<(&StreamResult, u64)> = records
        .iter()
        .filter_map(|r| match &r.data {
            StreamData {
                params,
                result: Some(result),
            } if params.record == h.record_bytes => params
                .bytes
                .filter(|&b| b >= h.transfer_bytes && b % h.transfer_bytes == 0)
                .map(|b| (result.as_ref(), b / h.transfer_bytes)),
            _ => None,
        })
        .collect();
    let transfers = runs.iter().map(|r| r.1).max()?;
    let now = Spread::of(
        &runs
            .iter()
            .map(|r| r.0.figures.throughput_mbit_s)
            .collect::<Vec<_>>(),
    )?;
    let seconds = Spread::of(
        &runs
            .iter()
            .map(|(r, n)| r.receiver.wall_s / *n as f64)
            .collect::<Vec<_>>(),
    )?;
    Some(format!(
        "then (1981, {src}): 4 MB in 1024-byte records, VAX-11/750 -> 11/780 over a {link} Mbit/s Ethernet: {secs} s, {then} Mbit/s user to user; sender {cpu}, receiver {idle}% idle; system time split {split}.\n\
{model}\n\
now: the same transfer in {now_s} ms{each}, {now_rate} Mbit/s (median of {n}): {factor}x the 1981 rate.",
        src = h.source,
        link = h.link_mbaud,
        secs = h.seconds,
        then = h.user_user_mbaud,
        cpu = h.sender_cpu,
        idle = h.receiver_idle_pct,
        split = h
            .system_time_split_pct
            .iter()
            .map(|(k, v)| format!("{k} {v}%"))
            .collect::<Vec<_>>()
            .join(", "),
        now_s = num(seconds.median * 1e3),
        now_rate = num(now.median),
        n = now.n,
        each = if transfers > 1 {
            format!(" (each run moved it {transfers} times over, timed whole)")
        } else {
            String::new()
        },
        factor = num(now.median / h.user_user_mbaud),
        model = model_1981_line(),
    ))
}

/// The 1981 model's prediction of the same row, and how much of 004 it
/// reproduces.
fn model_1981_line() -> String {
    use crate::model::bsd41;
    let costs = bsd41::Costs::vax750();
    let row = bsd41::predict_1981(&costs, &bsd41::Inputs::default());
    let shares = row.sender.shares_pct();
    format!(
        "model (netlab stream --stack bsd41, costs cited or fitted to this row): {:.1} s, {:.2} Mbit/s; sender {:.0}% busy, receiver {:.0}% idle; checksum {:.0}% of the system time (predicted; Ethernet, IP, TCP and system calls are fitted); it {}.",
        bsd41::transfer_seconds(&row),
        row.mbaud,
        100.0 * row.sender_busy,
        100.0 * (1.0 - row.receiver_busy),
        shares[3],
        super::model::reproduction()
    )
}

/// 1988's "sound barrier" (003): runs over a link whose interface holds a
/// limited number of frames (`--tx-queue`), each beside the model's
/// prediction (the one-packet driver's `packet / (frame time + service)`,
/// or the wire's own limit with a deeper queue) and Van Jacobson's
/// 550 KB/s; `None` without such runs.
pub fn barrier_text(records: &[Record]) -> Option<String> {
    use crate::testbed::impair::one_packet_driver_bytes_per_s;
    let h = &historical::figures().bsd_speedups;
    let mut rows = Vec::new();
    for record in records {
        let StreamData {
            result: Some(result),
            ..
        } = &record.data
        else {
            continue;
        };
        let Some(link) = &result.link else { continue };
        let profile = &link.profile;
        let (Some(queue), Some(rate)) = (profile.impair.tx_queue, profile.rate_bps) else {
            continue;
        };
        let mss = f64::from(result.sender.mss.unwrap_or(1448));
        let ip_len = profile.mtu as usize;
        let service = profile.impair.tx_service_us;
        // With one frame held the driver sets the pace; deeper, the wire.
        let ip_per_s = one_packet_driver_bytes_per_s(
            ip_len,
            rate,
            profile.impair.framing,
            if queue == 1 { service } else { 0 },
        );
        let model_kb_s = ip_per_s / ip_len as f64 * mss / 1024.0;
        let kb_s = result.figures.throughput_mbit_s * 1e6 / 8.0 / 1024.0;
        rows.push(vec![
            queue.to_string(),
            format!("{service} µs"),
            format!("{kb_s:.0}"),
            format!("{model_kb_s:.0}"),
            format!("{:+.1}%", (kb_s / model_kb_s - 1.0) * 100.0),
            if queue == 1 {
                format!("{:.0}", h.sound_barrier_kbytes_s)
            } else {
                format!("{:.0} (his best, after all his changes)", h.best_kbytes_s)
            },
        ]);
    }
    if rows.is_empty() {
        return None;
    }
    let mut text = String::from(
        "1988's sound barrier (003): the interface holds --tx-queue frames; with one, each hand-over waits out the driver's service\n",
    );
    text.push_str(&markdown(
        &[
            "frames queued",
            "service",
            "KB/s now",
            "KB/s model",
            "now vs model",
            "KB/s 1988",
        ],
        &rows,
    ));
    text.push_str(&format!(
        "then: Sun's if_le.c queued one packet to the LANCE at a time and throughput stuck at {:.0} KB/s \"no matter what\"; queueing any number, the barrier went. Now the model (frame time + service, per packet) predicts the one-packet driver's rate; {:.0} KB/s of {}-byte packets needs {:.0} µs of service a packet (docs/EXPERIMENTS.md: more than interrupt service alone).\n",
        h.sound_barrier_kbytes_s,
        h.sound_barrier_kbytes_s,
        h.packet_data_bytes,
        crate::testbed::impair::service_for_throughput(
            h.packet_data_bytes as usize + 40,
            10_000_000,
            Some(crate::record::testbed::Framing::Ethernet),
            h.sound_barrier_kbytes_s * 1024.0 * (h.packet_data_bytes + 40) as f64 / h.packet_data_bytes as f64,
        )
    ));
    Some(text)
}

/// A `--tls` run's tables and comparison: its TLS runs, their plain twins,
/// and the two compared; None without both.
pub fn tls_section(title: &str, records: &[Record]) -> Option<String> {
    if let Some(transports) = crate::experiments::stream::quic::transports_text(records) {
        let (quic, _): (Vec<Record>, Vec<Record>) = records
            .iter()
            .cloned()
            .partition(|r| r.data.params.quic.is_some());
        let mut text = stream_table(title, &quic);
        text.push_str(&transports);
        if let Some(beside) = crate::experiments::stream::encrypted::compare(records) {
            text.push_str(&crate::experiments::stream::encrypted::tls_text(&beside));
        }
        return Some(text);
    }
    let beside = crate::experiments::stream::encrypted::compare(records)?;
    let (tls, plain): (Vec<Record>, Vec<Record>) = records
        .iter()
        .cloned()
        .partition(|r| r.data.params.tls.is_some());
    let mut text = stream_table(title, &tls);
    text.push_str(&stream_table(
        "the same stream without TLS, run beside it",
        &plain,
    ));
    text.push_str(&crate::experiments::stream::encrypted::tls_text(&beside));
    Some(text)
}

/// A stream table with the 1981 figures beside it; a `--tls` run's
/// encrypted runs, their plain twins, and the two compared.
pub fn stream_section(title: &str, records: &[Record]) -> String {
    if let Some(text) = tls_section(title, records) {
        return text;
    }
    let mut text = stream_table(title, records);
    if let Some(lines) = udp_text(records) {
        text.push_str(&lines);
    }
    if let Some(lines) = intervals_text(records) {
        text.push_str(&lines);
    }
    if let Some(lines) = flows_text(records) {
        text.push_str(&lines);
    }
    if let Some(lines) = zero_copy_text(records) {
        text.push_str(&lines);
    }
    if let Some(line) = berkeley_then_now(records) {
        text.push_str(&line);
        text.push('\n');
    }
    text
}
