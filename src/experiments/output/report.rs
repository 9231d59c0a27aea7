//! The 1987 terminal-output table: throughput, CPU and segments per KB per
//! server, the 1987 telnet figures beside.

use crate::experiments::output::record::{OutputData, Record};
use crate::report::historical;
use crate::report::html::{Parts, ReportSection};
use crate::report::table::{markdown, num};

/// The terminal-output cells: throughput, CPU and segments per KB per
/// server, the 1987 telnet figures beside.
/// `netlab output`'s text: what was typed, how paced, then
/// [`output_table`].
pub fn output_text(size: u64, baud: Option<u32>, records: &[Record]) -> String {
    format!(
        "netlab output: {} of text typed through each server ({})\n{}",
        crate::units::format_size(size),
        baud.map_or("unpaced".to_string(), |b| format!("paced to {b} baud")),
        output_table(records)
    )
}

pub fn output_table(records: &[Record]) -> String {
    let mut rows = Vec::new();
    for record in records {
        let OutputData { params, result } = &record.data;
        let mut row = vec![
            params.relay.name().to_string(),
            params.protocol.name().to_string(),
            params.placement.name().to_string(),
        ];
        match result {
            Some(r) => row.extend([
                num(r.kbytes_per_s),
                num(r.server_cpu_us_per_kb),
                num(r.client_cpu_us_per_kb),
                num(r.segments_per_kb),
                num(r.mean_segment_bytes),
                format!("{:.0}", r.server_cpu_pct),
            ]),
            None => {
                crate::report::table::failed_row(&mut row, 5, record.error.as_deref());
            }
        }
        rows.push(row);
    }
    let mut text = markdown(
        &[
            "server",
            "proto",
            "place",
            "KB/s",
            "server µs/KB",
            "client µs/KB",
            "segs/KB",
            "mean seg B",
            "server cpu %",
        ],
        &rows,
    );
    let then = &historical::figures().terminal_output;
    text.push_str(&format!(
        "1987 ({}): {}: telnet server host {}% CPU for at most {} KB/s of terminal output, ~{}-byte packets; DECnet SET HOST and LAT left it at least {}% idle.\n",
        then.source,
        then.what,
        then.telnet.remote_cpu_pct,
        then.telnet.terminal_kbytes_s_max,
        then.telnet.avg_packet_bytes,
        then.lat_direct.remote_idle_pct_min
    ));
    let (telnet, lat) = super::model::loads();
    text.push_str(&format!(
        "model (netlab output --stack vms44, kernel costs cited, user costs fitted to 1987's shares): telnet host {:.0}% CPU at {:.0} chars/s, {:.0}% of it kernel; LAT leaves it {:.0}% idle; it {}.\n",
        100.0 * telnet.busy(),
        telnet.chars_per_s,
        100.0 * telnet.kernel / telnet.busy(),
        100.0 * (1.0 - lat.busy()),
        super::model::reproduction()
    ));
    text
}

/// The output section of the report page.
pub struct OutputSection;

impl ReportSection for OutputSection {
    type Data = OutputData;
    const EXPERIMENT: &'static str = "output";

    fn parts(records: &[Record]) -> Parts {
        let text = crate::experiments::output::report::output_table(records);
        let cells: Vec<(String, &crate::experiments::output::record::OutputResult)> = records
            .iter()
            .filter_map(|r| match &r.data {
                OutputData {
                    params,
                    result: Some(res),
                } => Some((
                    format!("{} {}", params.relay.name(), params.protocol.name()),
                    res.as_ref(),
                )),
                _ => None,
            })
            .collect();
        let mut reading = String::new();
        let fastest = cells
            .iter()
            .max_by(|a, b| a.1.kbytes_per_s.total_cmp(&b.1.kbytes_per_s));
        let cheapest = cells.iter().min_by(|a, b| {
            a.1.server_cpu_us_per_kb
                .total_cmp(&b.1.server_cpu_us_per_kb)
        });
        if let (Some(f), Some(c)) = (fastest, cheapest) {
            let segment = cells
                .iter()
                .map(|c| c.1.mean_segment_bytes)
                .fold(f64::INFINITY, f64::min);
            reading = format!(
                "The fastest path was {} at {:.0} KB/s of terminal output; the cheapest server per KB {} at {:.1} µs/KB, where 1987's telnet host spent a whole VAX on under 1 KB/s. The smallest mean segment was {:.0} bytes, against 1987's ~100.",
                f.0, f.1.kbytes_per_s, c.0, c.1.server_cpu_us_per_kb, segment
            );
            if let Some(limit) = Self::limited(records) {
                reading.push_str(&format!(" {}.", capitalized(&limit)));
            }
        }
        (
            "output: typing files to a terminal through a remote login (1987)".into(),
            text,
            reading,
            crate::experiments::output::figures::output_figures(records),
        )
    }

    fn cell(data: &OutputData) -> String {
        format!(
            "output {} {}",
            data.params.relay.name(),
            data.params.protocol.name()
        )
    }

    fn links(records: &[Record]) -> Vec<String> {
        crate::report::html::link_details(records, |d| d.result.as_ref()?.link.as_ref())
    }

    /// The fastest and slowest typing, beside 1987's VAX at 9600 baud, and
    /// what bounded the slowest.
    fn headline(records: &[Record]) -> Option<crate::report::html::Headline> {
        let rates: Vec<f64> = records
            .iter()
            .filter_map(|r| r.data.result.as_deref())
            .map(|r| r.kbytes_per_s)
            .collect();
        let fastest = rates.iter().copied().fold(0.0, f64::max);
        let slowest = rates.iter().copied().fold(f64::INFINITY, f64::min);
        if rates.is_empty() {
            return None;
        }
        let t = &crate::report::historical::figures().terminal_output.telnet;
        let limited = Self::limited(records).unwrap_or_default();
        let limit = limited
            .split_once(", bound by ")
            .map_or(limited.clone(), |(_, why)| format!("the slowest: {why}"));
        Some(crate::report::html::Headline {
            now: format!(
                "{slowest:.0} to {fastest:.0} KB/s of text typed, by server (one run a cell: no interval)"
            ),
            then: Some(format!(
                "1987: at most {} KB/s to a 9600-baud terminal, the remote VAX-11/750 at {}% CPU; the 1987 model (netlab output --stack vms44) {}",
                t.terminal_kbytes_s_max,
                t.remote_cpu_pct,
                crate::experiments::output::model::reproduction()
            )),
            limit,
        })
    }

    /// The slowest cell's limit: its serial line (`--baud`) when it ran
    /// at the line's rate, a saturated end's CPU, or else what it waited
    /// on ([`crate::experiments::output::analysis::waited_on`]).
    fn limited(records: &[Record]) -> Option<String> {
        let slowest = records
            .iter()
            .filter_map(|r| r.data.result.as_deref())
            .min_by(|a, b| a.kbytes_per_s.total_cmp(&b.kbytes_per_s))?;
        let p = &slowest.params;
        let cell = format!(
            "the slowest cell ({} over {}) typed {:.0} KB/s",
            p.relay.name(),
            p.protocol.name(),
            slowest.kbytes_per_s
        );
        // 8N1: ten bits a byte on the line.
        let line_kb_s = p.baud.map(|b| f64::from(b) / 10.0 / 1024.0);
        let client_pct = slowest.client_cpu_us_per_kb * slowest.kbytes_per_s / 1e4;
        let why = match line_kb_s {
            Some(line) if slowest.kbytes_per_s >= OUTPUT_AT_BOUND * line => format!(
                "the {}-baud line itself ({line:.2} KB/s), as in 1987",
                p.baud.unwrap_or(0)
            ),
            _ if slowest.server_cpu_pct >= 100.0 * OUTPUT_AT_BOUND => format!(
                "the server's CPU ({:.0}% of one CPU, {:.1} µs per KB)",
                slowest.server_cpu_pct, slowest.server_cpu_us_per_kb
            ),
            _ if client_pct >= 100.0 * OUTPUT_AT_BOUND => format!(
                "the terminal's CPU ({client_pct:.0}% of one CPU, {:.1} µs per KB)",
                slowest.client_cpu_us_per_kb
            ),
            _ => {
                let waited = crate::experiments::output::analysis::waited_on(slowest);
                format!(
                    "neither end's CPU (server {:.0}%, terminal {client_pct:.0}%): {}",
                    slowest.server_cpu_pct,
                    match waited.strip_prefix("undecided") {
                        Some(why) => format!("what it waited on is undecided{why}"),
                        None => format!("it waited on {waited}"),
                    }
                )
            }
        };
        Some(format!("{cell}, bound by {why}"))
    }
}

/// A cell within this fraction of a bound (its line's rate, a full CPU)
/// is at it.
const OUTPUT_AT_BOUND: f64 = 0.85;

fn capitalized(text: &str) -> String {
    let mut chars = text.chars();
    chars
        .next()
        .map_or(String::new(), |c| c.to_uppercase().chain(chars).collect())
}
