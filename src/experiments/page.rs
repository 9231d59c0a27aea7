//! The report page as the registry composes it: the core's page
//! (`report::html`) asks this for its sections, its notable findings and
//! its cells' names; each experiment's section is its own
//! ([`ReportSection`] in its folder's `report.rs`; stream's, which holds
//! its variants', in `stream_section.rs`), looped over here. What joins experiments (Van Jacobson's per-packet
//! budget from the sweep and the checksums, the notable findings) is here.

use super::{RECORDED, Record, RecordData, cksum, records_of, rpc, sweep};
use crate::experiments::stream::record::Record as StreamRecord;
use crate::experiments::sweep::cell::summarize;
use crate::report::figures::Figure;
use crate::report::html::{self, Loaded, Page, ReportSection, Section};
use std::path::Path;

/// The page over every experiment's records.
pub struct Report;

/// Reads a records file for a report: every record this netlab knows.
pub fn load(path: &Path) -> std::io::Result<Loaded<RecordData>> {
    html::load(path, RECORDED)
}

/// Every figure the records allow, in report order.
pub fn figures(records: &[Record]) -> Vec<Figure> {
    Report
        .sections(records)
        .into_iter()
        .flat_map(|s| s.figures)
        .collect()
}

impl Page<RecordData> for Report {
    fn experiments(&self) -> &'static [&'static str] {
        RECORDED
    }

    /// The registry's sections, then what joins experiments: Van
    /// Jacobson's per-packet budget (the sweep's fit, split by the
    /// checksum costs) under the checksum's tables.
    fn sections(&self, records: &[Record]) -> Vec<Section> {
        let mut sections = super::sections(records);
        let streams = records_of(records, RecordData::stream);
        let checksums = records_of(records, RecordData::cksum);
        if let (Some(section), Some(budget)) = (
            sections.iter_mut().find(|s| {
                s.experiment == <cksum::report::CksumSection as ReportSection>::EXPERIMENT
            }),
            packet_budget(&streams, &checksums),
        ) {
            section.tables.push_str(&budget);
        }
        sections
    }

    /// The most notable findings, most striking first (at most three).
    fn notable(&self, records: &[Record]) -> Vec<String> {
        let mut found = Vec::new();
        let rpc = records_of(records, RecordData::rpc);
        for f in rpc::analysis::findings_from_records(&rpc).iter().take(1) {
            let mut s = format!(
                "RPC over {} stalls at {} bytes ({:.0}x what its neighbours predict, {:.1} ms per call)",
                f.column,
                f.size,
                f.ratio,
                f.ms_per_100_calls / 100.0
            );
            if let Some(d) = &f.diagnosis {
                let cause = d.cause.split(". ").next().unwrap_or(&d.cause);
                s.push_str(&format!(": {}", cause.trim_end_matches('.')));
                if let Some((change, before, after)) =
                    d.fixes.iter().min_by(|a, b| a.2.total_cmp(&b.2))
                {
                    s.push_str(&format!(
                        "; fixed by {change} ({before:.2} -> {after:.3} ms per call)"
                    ));
                }
            }
            found.push(s);
        }
        let sections = self.sections(records);
        for section in &sections {
            let sentences: Vec<&str> = section.reading.split_inclusive(". ").collect();
            // The stream sweep's cost by terms says more than its first sentence.
            let pick = if section.experiment == "stream" {
                sentences
                    .iter()
                    .find(|s| s.contains("Priced by"))
                    .or(sentences.first())
            } else {
                sentences.first()
            };
            let mut first_sentence = pick.map_or(String::new(), |s| s.trim().to_string());
            // Single runs say more by what limited them than by their shape.
            if section.experiment == "stream"
                && !first_sentence.contains("Priced by")
                && let Some(limited) = &section.limited
            {
                first_sentence = format!("limited by {limited}");
            }
            match section.experiment {
                "login" | "output" | "stream" if !first_sentence.is_empty() => {
                    found.push(format!("{}: {first_sentence}", section.experiment));
                }
                _ => {}
            }
        }
        found.truncate(3);
        found
    }

    fn cell_name(&self, r: &Record) -> String {
        format!("{} ({})", r.data.cell_name(), r.placement)
    }
}

/// Van Jacobson's per-packet budget for today's host: the stream sweep's
/// fitted cost of one packet-sized record (fixed + per byte), split into
/// copies and checksum by the cksum experiment's per-byte costs, and the
/// packet rate it allows, beside his 1988 Sun-3/60 figures. `None` unless
/// the records hold both a fitted sweep and checksum timings.
pub fn packet_budget(
    streams: &[StreamRecord],
    checksums: &[cksum::record::Record],
) -> Option<String> {
    let sweep = sweep::figures::sweep_records(streams);
    let model = summarize(&sweep, crate::analysis::knee::DEFAULT_FRACTION).model?;
    let h = &crate::report::historical::figures().bsd_speedups;
    let bytes = h.packet_data_bytes as f64;
    let (copy_ns_per_byte, sum_ns_per_byte) =
        cksum::analysis::per_byte_costs(checksums, bytes as usize)?;
    let total_us = (model.fixed + model.per_byte * bytes) * 1e6;
    let fixed_us = model.fixed * 1e6;
    // On loopback a byte is copied twice (into the sender's socket buffer,
    // out of the receiver's) and never checksummed in software.
    let copies_us = 2.0 * copy_ns_per_byte * bytes / 1e3;
    let checksum_us = sum_ns_per_byte * bytes / 1e3;
    let rest_us = (total_us - fixed_us - copies_us).max(0.0);
    let then = |key: &str| h.per_packet_us.get(key).copied().unwrap_or(f64::NAN);
    Some(format!(
        "\nper-packet budget in Van Jacobson's form, {bytes:.0} B of data per packet (today: the stream sweep's fit on this host's placement, the cksum experiment's hot per-byte costs):\n\
         | per packet | today µs | 1988 Sun-3/60 µs |\n\
         |---|---|---|\n\
         | copy (x2 on loopback) | {copies_us:.3} | {:.0} (one copy) |\n\
         | checksum (software, if done: loopback skips it) | {checksum_us:.3} | {:.0} |\n\
         | other per-byte work | {rest_us:.3} | {:.0} (LANCE DMA) |\n\
         | fixed (system calls, protocol, wake-ups) | {fixed_us:.3} | {:.0} (budget) |\n\
         | total | {total_us:.3} | {:.0} observed, {:.0} budget at 10 Mbit/s |\n\
         packets per second the budget allows: today {:.0} ({:.0} MB/s of data), 1988 {:.0} at the 1200 µs budget.\n",
        then("copy"),
        then("checksum"),
        then("lance_dma"),
        then("fixed_budget"),
        then("observed"),
        then("budget_at_10mbit"),
        1e6 / total_us,
        bytes / total_us,
        1e6 / then("budget_at_10mbit"),
    ))
}
