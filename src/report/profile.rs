//! `--profile`'s table: where the CPU went by layer over the profiled
//! cells, Berkeley's 1981 system-time split beside it (mapped onto the same
//! layers, saying how), and what no rule classified.

use super::historical;
use super::tables::markdown;
use crate::analysis::layers::merge;
use crate::record::Record;
use crate::record::profile::{Layer, LayerTable, ProfileReport};

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

/// The profiled records' system tables as one, and how many there were.
fn summed(records: &[Record]) -> Option<(LayerTable, usize)> {
    let tables: Vec<&LayerTable> = records
        .iter()
        .filter_map(|r| r.profile.as_ref())
        .map(|p| &p.system)
        .filter(|t| t.samples > 0)
        .collect();
    (!tables.is_empty()).then(|| (merge(tables.iter().copied()), tables.len()))
}

/// The profile section, or nothing when no record was profiled.
pub fn text(records: &[Record]) -> String {
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
    // 1981 beside: today's shares within the five categories it had.
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
    use crate::record::fixture_stream_run;

    fn profiled() -> Record {
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
            records: vec![fixture_stream_run(), profiled()],
            skipped: Vec::new(),
        };
        let written = crate::report::html::write(&loaded, "r.jsonl", dir.path()).unwrap();
        let flame = dir.path().join("flame-2.svg");
        assert!(written.figures.contains(&flame), "{:?}", written.figures);
        assert!(!dir.path().join("flame-1.svg").exists());
        let html = std::fs::read_to_string(&written.html).unwrap();
        assert!(html.contains("<a href=\"flame-2.svg\">"), "{html}");
    }
}
