//! The sweep's table (throughput and costs against record size, the knee,
//! the fitted cost model, the dips, 1988's figures) and its JSON document.

use crate::experiments::stream::record::Record;
use crate::experiments::sweep::cell::{PrecisionReport, SweepSummary};
use crate::report::historical;
use crate::report::table::*;
use crate::units::format_size;
use std::fmt::Write;

/// `netlab sweep stream --json`, with what `--ci` did.
pub fn sweep_doc(
    description: &str,
    summary: &SweepSummary,
    precision: Option<&PrecisionReport>,
    records: &[Record],
) -> serde_json::Value {
    serde_json::json!({
        "experiment": "sweep",
        "target": "stream",
        "description": description,
        "summary": summary,
        "precision": precision,
        "records": records,
    })
}

/// The table of `netlab sweep stream`, with knee, cost model and the 1988 figures.
pub fn sweep_table(title: &str, summary: &SweepSummary, records: &[Record]) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "netlab sweep stream: {title}");
    if let Some(first) = records.first() {
        let _ = writeln!(out, "{}", hosts_text(first, &first.placement));
    }
    let mut table = new_table(&[
        "record",
        "MB/s median (min–max)",
        "µs/record",
        "µs CPU/KB snd",
        "µs CPU/KB rcv",
        "calls/record",
        "B/seg",
        "bottleneck",
    ]);
    for p in &summary.points {
        table.add_row(vec![
            format_size(p.record),
            spread_cell(&p.throughput_mb_s),
            num(p.us_per_record.median),
            num(p.sender_us_per_kb.median),
            num(p.receiver_us_per_kb.median),
            num(p.syscalls_per_record),
            p.mean_segment_bytes.map_or("-".into(), num),
            p.limited_by().to_string(),
        ]);
    }
    let _ = writeln!(out, "{table}");
    for (size, reason) in &summary.failed {
        let _ = writeln!(out, "record {}: failed: {reason}", format_size(*size));
    }
    match &summary.knee {
        Some(k) => {
            let _ = writeln!(
                out,
                "knee: {} records reach {} MB/s, {:.0}% of the plateau of {} MB/s (at {}); the knee is the smallest size within {:.0}% of the best",
                format_size(k.size as u64),
                num(k.throughput),
                100.0 * k.throughput / k.plateau,
                num(k.plateau),
                format_size(k.plateau_size as u64),
                100.0 * (1.0 - k.fraction),
            );
        }
        None => {
            let _ = writeln!(out, "knee: not enough points");
        }
    }
    if let Some(k) = &summary.model_knee {
        let _ = writeln!(
            out,
            "knee from the cost model: {} bytes (95% interval {}–{}, {} bootstrap resamples of the runs): where a record's fixed cost falls to {:.0}% of its time",
            num(k.size),
            num(k.low),
            num(k.high),
            k.resamples,
            100.0 * (1.0 - k.fraction),
        );
    }
    if let Some(m) = &summary.model {
        let _ = writeln!(
            out,
            "cost model: time per record = {} µs + {} ns/byte × size (weighted R² {:.4}, worst point off by {:.0}%); peak {} MB/s; half the peak at {} bytes",
            num(m.fixed * 1e6),
            num(m.per_byte * 1e9),
            m.r_squared,
            100.0 * m.max_relative_residual,
            m.peak_rate().map_or("-".into(), |r| num(r / 1e6)),
            m.half_rate_size().map_or("-".into(), num),
        );
    }
    for dip in &summary.dips {
        let _ = writeln!(
            out,
            "dip at {}: {} MB/s, {:.0}% below its neighbours' {} MB/s (every run below every neighbouring run): {}",
            format_size(dip.record),
            num(dip.median_mb_s),
            dip.shortfall_pct,
            num(dip.expected_mb_s),
            if dip.evidence.is_empty() {
                "nothing the records carry sets it apart (shared CPU, segment size, autocorking, reads per record, sender sleeps): unexplained".to_string()
            } else {
                dip.evidence.join("; ")
            }
        );
    }
    let h = &historical::figures().bsd_speedups;
    let _ = writeln!(
        out,
        "then (1988, {}, {}): stock SunOS 3.5 {} KB/s; copying 1 KB per protocol call (sosend) {} KB/s; best {} KB/s; sender CPU {}%, receiver {}-{}%.",
        h.source,
        h.machine,
        h.stock_sunos35_kbytes_s,
        h.sosend_1k_chunks_kbytes_s,
        h.best_kbytes_s,
        h.cpu_sender_pct,
        h.cpu_receiver_pct.first().copied().unwrap_or(0.0),
        h.cpu_receiver_pct.last().copied().unwrap_or(0.0),
    );
    if let Some(p) = summary.points.iter().find(|p| p.record == 1024) {
        let then = historical::figures().berkeley_vax.user_user_mbaud * 1e6 / 8.0 / 1e3;
        let _ = writeln!(
            out,
            "now at 1 KB records: {} KB/s ({}x Van Jacobson's best, {}x the 1981 VAX's {} KB/s).",
            num(p.throughput_mb_s.median * 1e3),
            num(p.throughput_mb_s.median * 1e3 / h.best_kbytes_s),
            num(p.throughput_mb_s.median * 1e3 / then),
            num(then),
        );
    }
    let _ = writeln!(out, "rule of thumb (1988): {}", h.rule_of_thumb);
    out
}

/// What `--ci` achieved: the target, each size's interval and runs, the
/// time spent and why the runs stopped.
pub fn precision_text(report: &crate::experiments::sweep::cell::PrecisionReport) -> String {
    let missed: Vec<String> = report
        .points
        .iter()
        .filter(|p| !p.met)
        .map(|p| match p.half_width {
            Some(w) => format!(
                "{} (±{:.1}%, {} runs)",
                format_size(p.record),
                w * 100.0,
                p.runs
            ),
            None => format!(
                "{} (too few runs for an interval: {})",
                format_size(p.record),
                p.runs
            ),
        })
        .collect();
    let met = report.points.len() - missed.len();
    let mut text = format!(
        "precision: median throughput within ±{}% at {:.0}% confidence (order statistics) for {met} of {} sizes; {} extra runs in {:.0} s of a {:.0} s budget; stopped: {}\n",
        num(report.half_width * 100.0),
        report.level * 100.0,
        report.points.len(),
        report.extra_runs,
        report.spent_s,
        report.budget_s,
        report.stopped
    );
    if !missed.is_empty() {
        text.push_str(&format!("not within the target: {}\n", missed.join(", ")));
    }
    text
}
