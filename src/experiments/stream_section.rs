//! stream's report section with its variants' (the sweep's table and
//! figure, ablate's designs): it names three experiments, so it sits
//! beside the registry rather than in stream's folder.

use super::{stream, sweep};
use crate::experiments::stream::record::{Record as StreamRecord, StreamData};
use crate::experiments::sweep::cell::summarize;
use crate::report::figures::Figure;
use crate::report::html::{self, Parts, ReportSection};

/// stream's section, with its variants': single runs, the sweep's table and
/// figure, ablate's designs.
pub struct StreamSection;

impl ReportSection for StreamSection {
    type Data = StreamData;
    const EXPERIMENT: &'static str = "stream";

    fn parts(records: &[StreamRecord]) -> Parts {
        let (designed, records): (Vec<StreamRecord>, Vec<StreamRecord>) = records
            .iter()
            .cloned()
            .partition(|r| matches!(&r.data, StreamData { params, .. } if params.design.is_some()));
        let records = &records[..];
        let (sweep, single): (Vec<StreamRecord>, Vec<StreamRecord>) = records
            .iter()
            .cloned()
            .partition(|r| matches!(&r.data, StreamData { params, .. } if params.sweep.is_some()));
        let mut text = String::new();
        // Factorial designs (`netlab ablate`): their analysis and one
        // interaction plot per pair of factors.
        let (design_text, design_reading, design_figures) =
            crate::experiments::ablate::report::designs(&designed);
        text.push_str(&design_text);
        if !single.is_empty() {
            text.push_str(&stream::report::stream_table("netlab stream", &single));
            if let Some(line) = stream::report::berkeley_then_now(&single) {
                text.push_str(&line);
                text.push('\n');
            }
            if let Some(barrier) = stream::report::barrier_text(&single) {
                text.push_str(&barrier);
            }
        }
        let summary = summarize(&sweep, crate::analysis::knee::DEFAULT_FRACTION);
        let mut reading = String::new();
        if !summary.points.is_empty() {
            text.push_str(&crate::experiments::sweep::report::sweep_table(
                "netlab sweep stream",
                &summary,
                &sweep,
            ));
            let first = &summary.points[0];
            let best = summary
                .points
                .iter()
                .max_by(|a, b| {
                    a.throughput_mb_s
                        .median
                        .total_cmp(&b.throughput_mb_s.median)
                })
                .expect("not empty");
            reading.push_str(&format!(
                "Throughput rises from {:.0} MB/s with {}-byte records to {:.0} MB/s with {}-byte records. ",
                first.throughput_mb_s.median, first.record, best.throughput_mb_s.median, best.record
            ));
            let largest = summary.points.last().map(|p| p.record as f64);
            if let Some(k) = summary.knee.as_ref().filter(|k| Some(k.size) == largest) {
                reading.push_str(&format!(
                    "No knee within these sizes: only the largest, {} bytes, is within {:.0}% of the best; the curve still rises. ",
                    k.size,
                    (1.0 - k.fraction) * 100.0
                ));
            } else if let Some(k) = summary
                .knee
                .as_ref()
                .filter(|_| sweep::figures::still_rising(&summary.points))
            {
                reading.push_str(&format!(
                    "No plateau within these sizes: {} bytes is within {:.0}% of the best, but the largest size beats every run of the one before it, so the curve still rises and its knee lies beyond the sizes measured. ",
                    k.size,
                    (1.0 - k.fraction) * 100.0
                ));
            } else if let Some(k) = &summary.knee {
                reading.push_str(&format!(
                    "The knee, the smallest size within {:.0}% of the best, is {} bytes: Van Jacobson's \"just to the right of the knee\" on this host. ",
                    (1.0 - k.fraction) * 100.0,
                    k.size
                ));
            }
            if let Some(t) = &summary.terms {
                let regimes: Vec<String> = summary
                    .regimes
                    .iter()
                    .map(|r| format!("{} from {} to {} bytes", r.term.name(), r.from, r.to))
                    .collect();
                reading.push_str(&format!(
                    "Priced by its calls, segments, wake-ups and bytes ({:.2} µs, {:.2} µs, {:.2} µs and {:.3} ns each; r² {:.3}), a record's largest cost is {}. ",
                    t.per_call * 1e6,
                    t.per_segment * 1e6,
                    t.per_wakeup * 1e6,
                    t.per_byte * 1e9,
                    t.r_squared,
                    regimes.join(", ")
                ));
            }
            reading.push_str(&format!(
                "At the plateau the bottleneck was {}.",
                best.limited_by()
            ));
        } else if !single.is_empty() {
            reading.push_str(
                "Single runs only (no size sweep): the table gives each run's throughput and CPU.",
            );
        }
        reading.push_str(&design_reading);
        let mut figures: Vec<Figure> = sweep::figures::stream_throughput(records)
            .into_iter()
            .collect();
        figures.extend(design_figures);
        (
            "stream: bulk transfer, throughput vs record size (1981, 1988)".into(),
            text,
            reading,
            figures,
        )
    }

    fn cell(data: &StreamData) -> String {
        format!("stream {} B records", data.params.record)
    }

    fn links(records: &[StreamRecord]) -> Vec<String> {
        crate::report::html::link_details(records, |d| d.result.as_ref()?.link.as_ref())
    }

    /// The fastest transfer, beside Van Jacobson's best of 1988 and Joy's
    /// of 1981, and the factor that limited most runs.
    fn headline(records: &[StreamRecord]) -> Option<html::Headline> {
        let best = records
            .iter()
            .filter_map(|r| Some((r.data.params.record, &r.data.result.as_ref()?.figures, r)))
            .max_by(|a, b| a.1.throughput_mbit_s.total_cmp(&b.1.throughput_mbit_s))?;
        let (record, figures, r) = best;
        let h = crate::report::historical::figures();
        let mut counts: Vec<(crate::analysis::limits::Factor, usize)> = Vec::new();
        let mut judged = 0;
        for verdict in records
            .iter()
            .filter_map(|r| r.data.result.as_ref()?.limits.as_ref())
        {
            let Some(primary) = verdict.primary() else {
                continue;
            };
            judged += 1;
            match counts.iter_mut().find(|(f, _)| *f == primary.factor) {
                Some((_, n)) => *n += 1,
                None => counts.push((primary.factor, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        let limit = match counts.first() {
            Some((factor, n)) => format!("{} ({n} of {judged} runs)", factor.describe()),
            None => format!(
                "{} (CPU accounting; no limits verdict recorded)",
                figures.bottleneck.describe()
            ),
        };
        Some(html::Headline {
            now: format!(
                "{:.2} Gbit/s, one TCP stream of {} records ({})",
                figures.throughput_mbit_s / 1000.0,
                crate::report::table::bytes(record),
                r.placement
            ),
            then: Some(format!(
                "1988: {:.0} KB/s, {} (Van Jacobson); 1981: {} Mbaud, VAX-11/750s (Joy)",
                h.bsd_speedups.best_kbytes_s,
                h.bsd_speedups.machine,
                h.berkeley_vax.user_user_mbaud
            )),
            limit,
        })
    }

    /// How often each factor limited a run, most often first, and the
    /// verdict of a run the most common one limited.
    fn limited(records: &[StreamRecord]) -> Option<String> {
        let verdicts: Vec<&crate::analysis::limits::Verdict> = records
            .iter()
            .filter_map(|r| r.data.result.as_ref()?.limits.as_ref())
            .filter(|v| v.primary().is_some())
            .collect();
        let mut counts: Vec<(crate::analysis::limits::Factor, usize)> = Vec::new();
        for verdict in &verdicts {
            let factor = verdict.primary()?.factor;
            match counts.iter_mut().find(|(f, _)| *f == factor) {
                Some((_, n)) => *n += 1,
                None => counts.push((factor, 1)),
            }
        }
        counts.sort_by_key(|c| std::cmp::Reverse(c.1));
        let (most, _) = counts.first()?;
        let example = verdicts
            .iter()
            .find(|v| v.primary().is_some_and(|l| l.factor == *most))?;
        let tally: Vec<String> = counts
            .iter()
            .map(|(f, n)| format!("{} in {n} of {} runs", f.describe(), verdicts.len()))
            .collect();
        Some(format!(
            "{}; for example, {}",
            tally.join(", "),
            example.headline()
        ))
    }
}
