//! `--profile`'s table: where the CPU went by layer over the profiled
//! cells, Berkeley's 1981 system-time split beside it (mapped onto the same
//! layers, saying how), and what no rule classified.

use super::historical;
use super::tables::markdown;
use crate::analysis::layers::merge;
use crate::record::Record;
use crate::record::profile::{Layer, LayerTable};

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
