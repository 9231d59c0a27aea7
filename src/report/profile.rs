//! `--profile`'s table: where the CPU went by layer over the profiled
//! cells, Berkeley's 1981 system-time split beside it (mapped onto the same
//! layers, saying how), and what no rule classified.

use super::historical;
use crate::analysis::layers::{merge, per_packet_us};
use crate::record::Record;
use crate::record::profile::{DataPath, Profiled};
use crate::record::profile::{Layer, LayerTable, ProfileReport};
use crate::report::table::{markdown, num};
use crate::units::format_size;

/// 1981's categories (004: "Ethernet handling 20%, IP 10%, TCP 30%,
/// checksumming 25%, system call handling 15%") and today's layers each
/// one covers: the driver then did the work of today's link layer and its
/// interrupts; "system call handling" then included the socket layer and
/// the copy across the user/kernel boundary.
const MAPPING: [(&str, &[Layer]); 5] = [
    ("ethernet", &[Layer::Link, Layer::Interrupt]),
    ("ip", &[Layer::Ip]),
    ("tcp", &[Layer::Tcp]),
    ("checksum", &[Layer::Checksum]),
    ("syscall", &[Layer::Syscall, Layer::Socket, Layer::Copy]),
];

/// Van Jacobson's 1988 per-packet parts and today's layers in each. His
/// fixed cost (800 µs a packet on a Sun-3/60) was 30% "TCP, IP, ARP and
/// ethernet protocol processing", 55% "device setup, interrupt service and
/// task handling", 15% stalls; copying and checksumming a packet were
/// variable costs beside it (193 + 184 µs for 1408 bytes). Socket layer,
/// system calls, memory and user code he does not name: they are shown
/// apart. Stalls cannot be seen by sampling a clock (no hardware counters):
/// a stalled instruction's time lands on its function's layer.
const PER_PACKET: [(&str, &[Layer]); 6] = [
    ("protocol (TCP, IP)", &[Layer::Tcp, Layer::Ip]),
    (
        "device, interrupt, task (link, softirq, scheduler)",
        &[Layer::Link, Layer::Interrupt, Layer::Scheduler],
    ),
    ("copy + checksum", &[Layer::Copy, Layer::Checksum]),
    (
        "socket, syscall, memory, unclassified",
        &[
            Layer::Socket,
            Layer::Syscall,
            Layer::Memory,
            Layer::Unclassified,
        ],
    ),
    ("user code", &[Layer::Netlab, Layer::OtherUser]),
    // 1988 sent in the clear: a cost he had no row for.
    ("encryption (TLS, QUIC)", &[Layer::Encryption]),
];

/// The profiled runs of one placement and record size.
struct Group<'a> {
    placement: String,
    record: u64,
    variant: String,
    tables: Vec<&'a LayerTable>,
    segments: u64,
    bytes: f64,
    hz: u64,
}

/// The profiled stream runs, grouped by placement and record size.
fn profiled_groups<D: Profiled>(records: &[Record<D>]) -> Vec<Group<'_>> {
    let mut groups: Vec<Group> = Vec::new();
    for r in records {
        let (Some(profile), Some(path)) = (&r.profile, r.data.data_path()) else {
            continue;
        };
        let segments = path.segments;
        if segments == 0 {
            continue;
        }
        let bytes = path.mean_segment_bytes * segments as f64;
        match groups.iter_mut().find(|g| {
            g.placement == r.placement && g.record == path.record && g.variant == path.variant
        }) {
            Some(g) => {
                g.tables.push(&profile.system);
                g.segments += segments;
                g.bytes += bytes;
            }
            None => groups.push(Group {
                placement: r.placement.clone(),
                record: path.record,
                variant: path.variant.clone(),
                tables: vec![&profile.system],
                segments,
                bytes,
                hz: profile.frequency_hz,
            }),
        }
    }
    groups
}

/// The per-packet view of profiled stream cells: the whole host's busy CPU
/// per data segment by part, grouped by placement and record size (their
/// repeats merged), beside Van Jacobson's 1988 Sun-3/60 packet.
pub fn per_packet_text<D: Profiled>(records: &[Record<D>]) -> String {
    let groups = profiled_groups(records);
    if groups.is_empty() {
        return String::new();
    }
    let h = &historical::figures().bsd_speedups;
    let fixed = h
        .per_packet_us
        .get("observed_fixed")
        .copied()
        .unwrap_or(800.0);
    let part =
        |name: &str| fixed * h.fixed_cost_split_pct.get(name).copied().unwrap_or(0.0) / 100.0;
    let variable = h.per_packet_us.get("copy").copied().unwrap_or(0.0)
        + h.per_packet_us.get("checksum").copied().unwrap_or(0.0);
    let mut header = vec!["cell".to_string(), "segment B".to_string()];
    header.extend(PER_PACKET.iter().map(|(name, _)| name.to_string()));
    header.push("busy µs/segment".into());
    let mut rows = vec![{
        let mut row = vec![
            format!("1988 Sun-3/60 sender ({})", h.source),
            h.packet_data_bytes.to_string(),
            format!("{:.0}", part("protocol")),
            format!("{:.0}", part("device_interrupt_task")),
            format!("{variable:.0}"),
            "-".into(),
            "-".into(),
            "none (in the clear)".into(),
        ];
        row.push(format!(
            "{:.0} (+{:.0} stalls)",
            fixed - part("stalls") + variable,
            part("stalls")
        ));
        row
    }];
    let mut protocol_share = Vec::new();
    for Group {
        placement,
        record,
        variant,
        tables,
        segments,
        bytes,
        hz,
    } in &groups
    {
        let table = merge(tables.iter().copied());
        let Some(per) = per_packet_us(&table, *hz, *segments) else {
            continue;
        };
        let sum = |layers: &[Layer]| -> f64 {
            per.iter()
                .filter(|(l, _)| layers.contains(l))
                .map(|(_, us)| us)
                .sum()
        };
        let over = if variant.is_empty() {
            String::new()
        } else {
            format!(", over {variant}")
        };
        let mut row = vec![
            format!("{} records, {placement}{over}", format_size(*record)),
            format!("{:.0}", bytes / *segments as f64),
        ];
        row.extend(PER_PACKET.iter().map(|(_, layers)| num(sum(layers))));
        row.push(num(per.iter().map(|(_, us)| us).sum()));
        rows.push(row);
        let (p, d) = (sum(PER_PACKET[0].1), sum(PER_PACKET[1].1));
        if p + d > 0.0 {
            protocol_share.push(format!(
                "{} records {placement}{over} {:.0}%",
                format_size(*record),
                p * 100.0 / (p + d)
            ));
        }
    }
    let header: Vec<&str> = header.iter().map(String::as_str).collect();
    let mut out = String::from(
        "per packet (Van Jacobson 1988 beside): today's µs are the whole host's busy CPU (both ends, and their ACKs) per data segment the sender's TCP emitted:\n",
    );
    out.push_str(&markdown(&header, &rows));
    let (p, d) = (part("protocol"), part("device_interrupt_task"));
    out.push_str(&format!(
        "protocol's part of the fixed cost (protocol + device/interrupt/task): 1988 {:.0}% (\"protocol processing is negligible\"), today {}. Stalls (1988: {:.0}%) are invisible to clock sampling: a stalled instruction counts in its function's layer.\n",
        p * 100.0 / (p + d),
        if protocol_share.is_empty() { "-".to_string() } else { protocol_share.join(", ") },
        h.fixed_cost_split_pct.get("stalls").copied().unwrap_or(0.0)
    ));
    out
}

/// The profiled records' system tables as one, and how many there were.
fn summed<D: Profiled>(records: &[Record<D>]) -> Option<(LayerTable, usize)> {
    let tables: Vec<&LayerTable> = records
        .iter()
        .filter_map(|r| r.profile.as_ref())
        .map(|p| &p.system)
        .filter(|t| t.samples > 0)
        .collect();
    (!tables.is_empty()).then(|| (merge(tables.iter().copied()), tables.len()))
}

/// Berkeley's 1981 split beside `table`'s busy samples in its five
/// categories ([`MAPPING`]), and what falls outside them today.
fn berkeley_text(table: &LayerTable) -> String {
    let mut out = String::new();
    let busy = table.samples - table.idle;
    let h = &historical::figures().berkeley_vax;
    let within: Vec<(&str, u64)> = MAPPING
        .iter()
        .map(|(name, layers)| {
            let n = table
                .shares
                .iter()
                .filter(|s| layers.contains(&s.layer))
                .map(|s| s.samples)
                .sum();
            (*name, n)
        })
        .collect();
    let total: u64 = within.iter().map(|(_, n)| n).sum();
    if total > 0 {
        let rows: Vec<Vec<String>> = within
            .iter()
            .map(|(name, n)| {
                vec![
                    name.to_string(),
                    h.system_time_split_pct
                        .get(*name)
                        .map_or("-".into(), |p| format!("{p:.0}")),
                    format!("{:.0}", *n as f64 * 100.0 / total as f64),
                ]
            })
            .collect();
        out.push_str(&format!(
            "1981 ({}: system time of a 4 MB transfer in 1 KB records, VAX-11/750) beside today's kernel samples in the same five categories (ethernet = link, drivers and interrupts; syscall = entry/exit, socket layer and the user<->kernel copy):\n",
            h.source
        ));
        out.push_str(&markdown(&["1981 category", "1981 %", "today %"], &rows));
        out.push_str(&format!(
            "outside those categories today: {:.0}% of busy samples (scheduler, memory, user code, unclassified).\n",
            (busy - total) as f64 * 100.0 / busy.max(1) as f64
        ));
    }
    out
}

/// What the shares say, from the records: where checksums were computed
/// (the functions that did it, from the folded stacks), copying against
/// the per-call costs, and how many data segments took TCP's fast path
/// (TcpExt.TCPHPHits at the receivers).
fn reading_text<D: Profiled>(table: &LayerTable, records: &[Record<D>]) -> String {
    let layer = |layer: Layer| table.shares.iter().find(|s| s.layer == layer);
    let percent = |l: Layer| layer(l).map_or(0.0, |s| s.share * 100.0);
    let in_stacks = |function: &str| -> u64 {
        records
            .iter()
            .filter_map(|r| r.profile.as_ref())
            .flat_map(|p| &p.folded)
            .filter(|(stack, _)| stack.split(';').any(|f| f == function))
            .map(|(_, n)| n)
            .sum()
    };
    let mut out = match layer(Layer::Checksum) {
        None => "no checksum samples (1981: 25%): on loopback and veth the kernel marks packets CHECKSUM_PARTIAL or UNNECESSARY and computes none in software (through the TUN emulator, --link-via emulator, it does)".to_string(),
        Some(s) => format!(
            "checksum {:.1} ± {:.1}% ({} samples; 1981: 25%), computed in software: {} samples completing outgoing checksums (skb_checksum_help: the device offers no checksum offload, as the TUN emulator's does not), {} verifying incoming ones (__skb_checksum_complete: the packet arrived unchecked); today's checksum loop is fast enough to be a small share",
            s.share * 100.0,
            s.error * 100.0,
            s.samples,
            in_stacks("skb_checksum_help"),
            in_stacks("__skb_checksum_complete")
        ),
    };
    let (copy, per_call) = (
        percent(Layer::Copy),
        percent(Layer::Syscall) + percent(Layer::Scheduler),
    );
    out.push_str(&format!(
        "; the copy is {copy:.0}% and system calls with wake-ups {per_call:.0}% ({}; large records tip the balance to copying, small ones to the per-call costs).\n",
        if copy > per_call {
            "copying outweighs the per-call costs"
        } else {
            "the per-call costs outweigh copying"
        }
    ));
    let (mut hits, mut segments) = (0, 0);
    for r in records.iter().filter(|r| r.profile.is_some()) {
        if let Some(DataPath {
            segments: sent,
            fast_path_hits,
            ..
        }) = r.data.data_path()
        {
            hits += fast_path_hits;
            segments += sent;
        }
    }
    if segments > 0 {
        out.push_str(&format!(
            "header prediction: {hits} of {segments} data segments ({:.0}%) took the receiver's fast path (TcpExt.TCPHPHits); in 1988 header prediction took protocol processing from 45% to 30% of a packet's fixed cost (003); TCP is {:.0}% of today's busy samples.\n",
            hits as f64 * 100.0 / segments as f64,
            percent(Layer::Tcp)
        ));
    }
    out
}

/// The lab's stream section with its cells profiled: "1981 VAX-11/750 vs
/// today" by layer, and the per-packet view; nothing when no cell was.
pub fn then_and_now<D: Profiled>(records: &[Record<D>]) -> String {
    let Some((table, cells)) = summed(records) else {
        return String::new();
    };
    format!(
        "1981 VAX-11/750 vs today, by layer ({cells} profiled run(s), {} busy samples):\n{}{}{}",
        table.samples - table.idle,
        berkeley_text(&table),
        reading_text(&table, records),
        per_packet_text(records)
    )
}

/// Each busy process (by name, its cells' tables merged): its busy
/// samples and its three largest layers with their intervals.
fn processes_text<D: Profiled>(records: &[Record<D>]) -> String {
    let mut by_name: Vec<(String, Vec<&LayerTable>)> = Vec::new();
    for r in records {
        let Some(profile) = &r.profile else { continue };
        // A stream's endpoints by their role: the record knows their PIDs.
        for p in &profile.processes {
            let name = match r.data.role_of(p.pid) {
                Some(role) => format!("{} ({role})", p.comm),
                None => p.comm.clone(),
            };
            match by_name.iter_mut().find(|(n, _)| *n == name) {
                Some((_, tables)) => tables.push(&p.table),
                None => by_name.push((name, vec![&p.table])),
            }
        }
    }
    if by_name.is_empty() {
        return String::new();
    }
    let mut rows: Vec<(u64, Vec<String>)> = by_name
        .into_iter()
        .map(|(name, tables)| {
            let table = merge(tables);
            let busy = table.samples - table.idle;
            let top: Vec<String> = table
                .shares
                .iter()
                .take(3)
                .map(|s| {
                    format!(
                        "{} {:.0} ± {:.0}%",
                        s.layer.name(),
                        s.share * 100.0,
                        s.error * 100.0
                    )
                })
                .collect();
            (busy, vec![name, busy.to_string(), top.join(", ")])
        })
        .collect();
    rows.sort_by_key(|(busy, _)| std::cmp::Reverse(*busy));
    let rows: Vec<Vec<String>> = rows.into_iter().map(|(_, row)| row).collect();
    format!(
        "by process (each with at least 5% of a cell's busy samples; the endpoints are `netlab`):\n{}",
        markdown(
            &[
                "process",
                "busy samples",
                "largest layers (% of its busy samples)"
            ],
            &rows
        )
    )
}

/// netlab's own most sampled functions over the profiled records, where
/// its symbols named them.
fn netlab_functions_text<D: Profiled>(records: &[Record<D>]) -> String {
    let mut counts: std::collections::BTreeMap<&str, u64> = std::collections::BTreeMap::new();
    for profile in records.iter().filter_map(|r| r.profile.as_ref()) {
        for (name, n) in &profile.netlab_functions {
            *counts.entry(name).or_default() += n;
        }
    }
    if counts.is_empty() {
        return String::new();
    }
    let mut top: Vec<(&str, u64)> = counts.into_iter().collect();
    top.sort_by_key(|t| std::cmp::Reverse(t.1));
    let names: Vec<String> = top
        .iter()
        .take(8)
        .map(|(name, n)| format!("{name} ({n})"))
        .collect();
    format!(
        "netlab's own user-space code, most sampled functions: {}\n",
        names.join(", ")
    )
}

/// The profile section, or nothing when no record was profiled.
pub fn text<D: Profiled>(records: &[Record<D>]) -> String {
    let not_profiled: Vec<&str> = records
        .iter()
        .filter_map(|r| r.profile.as_ref())
        .filter(|p| p.method.starts_with("not profiled"))
        .map(|p| p.method.as_str())
        .collect();
    let Some((table, cells)) = summed(records) else {
        return not_profiled
            .first()
            .map_or(String::new(), |why| format!("profile: {why}\n"));
    };
    let method = records
        .iter()
        .find_map(|r| r.profile.as_ref().map(|p| p.method.clone()))
        .unwrap_or_default();
    let busy = table.samples - table.idle;
    let mut out = format!(
        "where the CPU went, by layer ({cells} profiled cell(s), {} samples, {busy} busy; {method}); share of busy samples, 95% interval from the binomial:\n",
        table.samples
    );
    let rows: Vec<Vec<String>> = table
        .shares
        .iter()
        .map(|s| {
            vec![
                s.layer.name().to_string(),
                s.samples.to_string(),
                format!("{:.1} ± {:.1}", s.share * 100.0, s.error * 100.0),
            ]
        })
        .collect();
    out.push_str(&markdown(&["layer", "samples", "% of busy"], &rows));
    out.push_str(&processes_text(records));
    out.push_str(&netlab_functions_text(records));
    out.push_str(&berkeley_text(&table));
    out.push_str(&reading_text(&table, records));
    out.push_str(&per_packet_text(records));
    if !table.unclassified.is_empty() {
        let names: Vec<String> = table
            .unclassified
            .iter()
            .map(|(n, c)| format!("{n} ({c})"))
            .collect();
        out.push_str(&format!(
            "unclassified leaf functions: {}\n",
            names.join(", ")
        ));
    }
    out
}

/// A profiled cell's flame graph (inferno) from its record's folded
/// stacks, or `None` when it kept none: kernel frames from the root up,
/// each process's user-space time as one `[user]` frame.
pub fn flame_svg(profile: &ProfileReport, title: &str) -> Option<Result<Vec<u8>, String>> {
    if profile.folded.is_empty() {
        return None;
    }
    let lines: Vec<String> = profile
        .folded
        .iter()
        .map(|(stack, count)| format!("{stack} {count}"))
        .collect();
    let mut options = inferno::flamegraph::Options::default();
    options.title = title.to_string();
    options.subtitle = Some(format!(
        "busy samples at {} Hz over {:.2} s on {} CPU(s); idle left out",
        profile.frequency_hz, profile.seconds, profile.cpus
    ));
    options.count_name = "samples".to_string();
    // The same stacks draw the same colours: reports compare across runs.
    options.hash = true;
    options.deterministic = true;
    let mut svg = Vec::new();
    Some(
        inferno::flamegraph::from_lines(&mut options, lines.iter().map(String::as_str), &mut svg)
            .map(|()| svg)
            .map_err(|e| format!("flame graph: {e}")),
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::stream::record::fixture_stream_run;

    fn profiled() -> crate::experiments::stream::record::Record {
        let mut record = fixture_stream_run();
        record.profile = Some(Box::new(ProfileReport {
            method: "test".into(),
            frequency_hz: 999,
            seconds: 1.0,
            cpus: 2,
            folded: vec![
                (
                    "netlab;do_syscall_64;tcp_sendmsg;_copy_from_iter".into(),
                    30,
                ),
                ("swapper;do_softirq;net_rx_action;tcp_v4_rcv".into(), 10),
                ("netlab;[user]".into(), 5),
            ],
            ..ProfileReport::default()
        }));
        record
    }

    #[test]
    fn the_per_packet_view_divides_each_layers_cpu_by_the_segments() {
        let mut record = profiled();
        let crate::experiments::stream::record::StreamData {
            result: Some(result),
            ..
        } = &mut record.data
        else {
            panic!("the fixture is a stream run");
        };
        result.figures.data_segments = Some(1_000);
        result.figures.mean_segment_bytes = Some(1448.0);
        let profile = record.profile.as_mut().unwrap();
        profile.frequency_hz = 1_000;
        let counts = [
            (Layer::Tcp, 400),
            (Layer::Ip, 100),
            (Layer::Link, 250),
            (Layer::Copy, 250),
        ];
        profile.system = LayerTable {
            samples: 1_000,
            idle: 0,
            shares: counts
                .iter()
                .map(|&(layer, samples)| crate::record::profile::LayerShare {
                    layer,
                    samples,
                    share: samples as f64 / 1_000.0,
                    error: 0.0,
                })
                .collect(),
            unclassified: Vec::new(),
        };
        // 1,000 samples at 1 kHz = 1 s of CPU over 1,000 segments: 1,000 µs
        // a segment, TCP and IP 500 of them.
        let text = per_packet_text(&[record]);
        let row = text
            .lines()
            .find(|l| l.contains("records, "))
            .expect("today's row");
        let cells: Vec<&str> = row.split('|').map(str::trim).collect();
        assert_eq!(
            &cells[2..10],
            ["1448", "500", "250", "250", "0", "0", "0", "1000"],
            "{row}"
        );
        assert!(text.contains("1988 35%"), "{text}");
        assert!(text.contains("67%"), "protocol 500 of 750: {text}");
        // Nothing profiled: no view.
        assert!(per_packet_text(&[fixture_stream_run()]).is_empty());
    }

    fn share(layer: Layer, samples: u64, of: u64) -> crate::record::profile::LayerShare {
        crate::record::profile::LayerShare {
            layer,
            samples,
            share: samples as f64 / of as f64,
            error: 0.01,
        }
    }

    #[test]
    fn the_reading_says_where_checksums_were_computed_and_how_many_segments_were_predicted() {
        let mut record = profiled();
        let profile = record.profile.as_mut().unwrap();
        profile.folded = vec![
            (
                "netlab;validate_xmit_skb;skb_checksum_help;csum_partial".into(),
                6,
            ),
            (
                "netlab;tcp_v4_rcv;__skb_checksum_complete;csum_partial".into(),
                4,
            ),
        ];
        let table = LayerTable {
            samples: 100,
            idle: 0,
            shares: vec![share(Layer::Tcp, 90, 100), share(Layer::Checksum, 10, 100)],
            unclassified: Vec::new(),
        };
        if let crate::experiments::stream::record::StreamData {
            result: Some(result),
            ..
        } = &mut record.data
        {
            result.figures.data_segments = Some(200);
            result
                .receiver
                .counters
                .0
                .insert("TcpExt.TCPHPHits".into(), 50);
        }
        let text = reading_text(&table, &[record.clone()]);
        assert!(text.contains("checksum 10.0 ± 1.0% (10 samples"), "{text}");
        assert!(
            text.contains("6 samples completing outgoing checksums"),
            "{text}"
        );
        assert!(text.contains("4 verifying incoming ones"), "{text}");
        assert!(text.contains("50 of 200 data segments (25%)"), "{text}");
        let none = LayerTable {
            shares: vec![share(Layer::Tcp, 100, 100)],
            ..table
        };
        assert!(reading_text(&none, &[record]).starts_with("no checksum samples"));
    }

    #[test]
    fn a_profiled_cell_draws_its_flame_graph_from_the_record_alone() {
        let record = profiled();
        let svg = flame_svg(record.profile.as_ref().unwrap(), "stream 1 KB")
            .expect("stacks kept")
            .expect("drawn");
        let svg = String::from_utf8(svg).unwrap();
        assert!(svg.contains("<svg"), "{svg}");
        for frame in ["tcp_sendmsg", "_copy_from_iter", "net_rx_action", "[user]"] {
            assert!(svg.contains(frame), "{frame} missing");
        }
        // A profile without stacks (an older record) has no graph.
        assert!(flame_svg(&ProfileReport::default(), "none").is_none());
    }

    #[test]
    fn the_report_writes_and_links_one_flame_graph_per_profiled_cell() {
        let dir = tempfile::tempdir().unwrap();
        let loaded = crate::report::html::Loaded {
            records: [fixture_stream_run(), profiled()]
                .map(|r| r.map(crate::experiments::RecordData::Stream))
                .into(),
            skipped: Vec::new(),
        };
        let page = crate::experiments::page::Report;
        let written = crate::report::html::write(&loaded, &page, "r.jsonl", dir.path()).unwrap();
        let flame = dir.path().join("flame-2.svg");
        assert!(written.figures.contains(&flame), "{:?}", written.figures);
        assert!(!dir.path().join("flame-1.svg").exists());
        let html = std::fs::read_to_string(&written.html).unwrap();
        assert!(html.contains("<a href=\"flame-2.svg\">"), "{html}");
    }
}
