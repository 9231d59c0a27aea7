//! The sweep's table (throughput and costs against record size, the knee,
//! the fitted cost model, the dips, 1988's figures) and its JSON document.

use crate::analysis::costterms::TermModel;
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
        "sleeps/record",
        "largest cost (model)",
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
            p.counts.map_or("-".into(), |c| num(c.wakeups)),
            p.dominant.map_or("-".into(), |(term, share)| {
                format!("{} ({:.0}%)", term.name(), share * 100.0)
            }),
            p.limited_by().to_string(),
        ]);
    }
    let _ = writeln!(out, "{table}");
    for (size, reason) in &summary.failed {
        let _ = writeln!(out, "record {}: failed: {reason}", format_size(*size));
    }
    terms_text(&mut out, summary);
    knee_text(&mut out, summary);
    if let Some(m) = &summary.model {
        let _ = writeln!(
            out,
            "for comparison, one fixed cost and a slope: {} µs + {} ns/byte × size per record (weighted R² {:.4}, worst point off by {:.0}%; levels off at {} MB/s)",
            num(m.fixed * 1e6),
            num(m.per_byte * 1e9),
            m.r_squared,
            100.0 * m.max_relative_residual,
            m.peak_rate().map_or("-".into(), |r| num(r / 1e6)),
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

/// Where the measured curve's knee is, against Van Jacobson's rule (just
/// to the right of it), or that the curve still rises past the sizes.
fn knee_text(out: &mut String, summary: &SweepSummary) {
    let largest = summary.points.last().map(|p| p.record);
    match &summary.knee {
        Some(k) if Some(k.size as u64) == largest && summary.points.len() > 1 => {
            let _ = writeln!(
                out,
                "knee (measured): none within these sizes: {} records are the best, {} MB/s, and every smaller size is more than {:.0}% below it{}; the curve still rises, so Van Jacobson's \"just to the right of the knee\" lies beyond {}: sweep larger records",
                format_size(k.size as u64),
                num(k.throughput),
                100.0 * (1.0 - k.fraction),
                below_the_knee(summary, k.size as u64),
                format_size(k.size as u64),
            );
        }
        Some(k) => {
            let _ = writeln!(
                out,
                "knee (measured): {} records reach {} MB/s, {:.0}% of the best, {} MB/s (at {}): the smallest size within {:.0}% of the best. Van Jacobson's rule, just to the right of the knee: {} records on this host{}",
                format_size(k.size as u64),
                num(k.throughput),
                100.0 * k.throughput / k.plateau,
                num(k.plateau),
                format_size(k.plateau_size as u64),
                100.0 * (1.0 - k.fraction),
                format_size(k.size as u64),
                below_the_knee(summary, k.size as u64),
            );
            if crate::experiments::sweep::figures::still_rising(&summary.points) {
                let _ = writeln!(
                    out,
                    "but no plateau yet: the largest size's median beats every run of the size before it, so the curve still rises and its knee may lie beyond the sizes measured: sweep larger records"
                );
            }
        }
        None => {
            let _ = writeln!(out, "knee: not enough points");
        }
    }
}

/// The physical cost model, where each term costs most, and its checks.
fn terms_text(out: &mut String, summary: &SweepSummary) {
    let Some(t) = &summary.terms else {
        let _ = writeln!(
            out,
            "cost model by terms: not fitted (fewer than two sizes with their segment counts)"
        );
        return;
    };
    let term = |i: usize| summary.term_text(i, if i == 3 { 1e9 } else { 1e6 }, &num);
    let _ = writeln!(
        out,
        "cost model: time per record = {} µs per call + {} µs per segment + {} µs per wake-up + {} ns per byte, with each size's own counts{} (weighted R² {:.4}, worst point off by {:.0}%; 95% intervals over {} resamples of the runs)",
        term(0),
        term(1),
        term(2),
        term(3),
        if summary.levers.is_empty() {
            String::new()
        } else {
            format!(
                " and {} lever setting{} at {} (segment size, read size, low-water mark)",
                summary.levers.len(),
                if summary.levers.len() == 1 { "" } else { "s" },
                format_size(super::cell::LEVER_RECORD)
            )
        },
        t.r_squared,
        100.0 * t.max_relative_residual,
        summary.term_intervals.as_ref().map_or(0, |iv| iv.resamples),
    );
    if !summary.all_resolved() {
        let unresolved: Vec<&str> = (0..4)
            .filter(|&i| !summary.resolved(i))
            .map(|i| crate::analysis::costterms::TERMS[i].name())
            .collect();
        let _ = writeln!(
            out,
            "not resolved: {}: its 95% interval reaches zero, so the fit can trade it for a term that grows with it; {}",
            unresolved.join(", "),
            if summary.levers.is_empty() {
                "the lever series (left out here) moves one count at a time and separates them"
            } else {
                "more runs (--repeat) narrow the intervals"
            }
        );
    }
    if let Some(waited) = summary
        .waited_share
        .filter(|&w| w >= crate::analysis::limits::CONTENDED)
    {
        let _ = writeln!(
            out,
            "caveat: the ends waited for a CPU a median {:.0}% of each run (other work on this host): every term carries that wait, and terms that grow together (calls and wake-ups, segments and bytes) trade places from run to run; run the sweep on an idle host",
            100.0 * waited
        );
    }
    if !summary.regimes.is_empty() {
        let runs: Vec<String> = summary
            .regimes
            .iter()
            .map(|r| {
                let sizes = if r.from == r.to {
                    format_size(r.from)
                } else {
                    format!("{}-{}", format_size(r.from), format_size(r.to))
                };
                format!("{} at {sizes}", r.term.name())
            })
            .collect();
        let _ = writeln!(
            out,
            "the largest cost by size (the regime changes where it does): {}",
            runs.join("; ")
        );
    }
    per_call_check(out, summary, t);
    per_byte_check(out, summary, t);
}

/// The per-call term against a 1-byte run the fit did not see.
fn per_call_check(out: &mut String, summary: &SweepSummary, t: &TermModel) {
    match (&summary.checks.one_byte, summary.checks.per_call_ratio) {
        (Some(one), Some([ratio, low, high])) => {
            let parts = t.parts(one);
            let net = one.time - parts[1] - parts[2] - parts[3];
            let _ = writeln!(
                out,
                "check, per call: a 1-byte run (not in the fit) took {} µs per call; with its {} segments and {} wake-ups per call the model predicts {} µs; net of those, a call cost {} µs against the per-call term's {} µs ({:.2}x, 95% {:.2}-{:.2}x: {})",
                num(one.time * 1e6),
                num(one.segments),
                num(one.wakeups),
                num(t.time(one) * 1e6),
                num(net * 1e6),
                num(t.per_call * 1e6),
                ratio,
                low,
                high,
                if low <= 1.25 && high >= 0.8 {
                    "agrees"
                } else {
                    "disagrees: the fit moved per-call cost into another term, or a 1-byte call does work larger calls do not"
                }
            );
        }
        (Some(_), None) => {
            let _ = writeln!(out, "check, per call: the fit left the per-call term out");
        }
        (None, _) => {
            let _ = writeln!(out, "check, per call: no 1-byte run recorded");
        }
    }
}

/// The per-byte term against one copy's cost, hot and cold.
fn per_byte_check(out: &mut String, summary: &SweepSummary, t: &TermModel) {
    match &summary.checks.copy {
        Some(_) if !summary.resolved(3) => {
            let _ = writeln!(
                out,
                "check, per byte: not made (the per-byte term is not resolved by this sweep)"
            );
        }
        Some(copy) if t.per_byte > 0.0 => {
            let most = t.per_byte * 1e9 / copy.hot_ns_per_byte.max(1e-6);
            let least = t.per_byte * 1e9 / copy.cold_ns_per_byte.max(1e-6);
            let _ = writeln!(
                out,
                "check, per byte: {} ns against one copy ({}, {}) of {} ns hot, {} ns cold: {:.1} to {:.1} copies' worth ({})",
                num(t.per_byte * 1e9),
                copy.copy,
                format_size(copy.size),
                num(copy.hot_ns_per_byte),
                num(copy.cold_ns_per_byte),
                least,
                most,
                if most >= 1.0 && least <= 2.0 {
                    "a byte is copied once by each end, one end in the way: agrees"
                } else if most < 1.0 {
                    "less than one copy: the fit moved per-byte cost into another term"
                } else {
                    "more than two copies: per-byte work beyond copying"
                }
            );
        }
        Some(_) => {
            let _ = writeln!(out, "check, per byte: the fit left the per-byte term out");
        }
        None => {
            let _ = writeln!(out, "check, per byte: no copy cost recorded with the sweep");
        }
    }
}

/// How much less the size below the knee gave, for the rule's line.
fn below_the_knee(summary: &SweepSummary, knee: u64) -> String {
    let at = summary.points.iter().position(|p| p.record == knee);
    match at {
        Some(i) if i > 0 => {
            let below = &summary.points[i - 1];
            let here = &summary.points[i];
            format!(
                " ({} gives {:.0}% less)",
                format_size(below.record),
                100.0 * (1.0 - below.throughput_mb_s.median / here.throughput_mb_s.median)
            )
        }
        _ => String::new(),
    }
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
