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
        // `--tls` runs and their plain twins: a section of their own.
        let (encrypted, single) = stream::encrypted::split(&single);
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
        if let Some(tls) =
            stream::report::tls_section("netlab stream --tls, beside plain TCP", &encrypted)
        {
            text.push_str(&tls);
        }
        let summary = summarize(&sweep, crate::analysis::knee::DEFAULT_FRACTION);
        let mut reading = String::new();
        if !summary.points.is_empty() {
            text.push_str(&crate::experiments::sweep::report::sweep_table(
                "netlab sweep stream",
                &summary,
                &sweep,
            ));
            reading.push_str(&sweep_reading(&summary));
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

    /// Each cell's throughput over its runs (a run is a record): runs
    /// are one cell when everything they were asked but their index among
    /// the repeats is the same (a sweep's short runs and the lab's longer
    /// ones of one record size are two cells, as are two link profiles).
    fn estimates(records: &[StreamRecord]) -> Vec<crate::report::caveats::Estimated> {
        let mut cells: Vec<(String, String, Vec<f64>)> = Vec::new();
        for r in records {
            let Some(result) = r.data.result.as_ref() else {
                continue;
            };
            let p = &r.data.params;
            // A sweep's id and its copy cost, measured once per sweep, say
            // which sweep ran it, not what was asked.
            let key = serde_json::to_string(&crate::experiments::stream::record::StreamParams {
                repeat_index: 0,
                sweep: p.sweep.as_ref().map(|s| SweepContext {
                    id: String::new(),
                    parameter: s.parameter.clone(),
                    copy: None,
                }),
                ..p.clone()
            })
            .unwrap_or_default();
            let mbit = result.figures.throughput_mbit_s;
            match cells.iter_mut().find(|c| c.0 == key) {
                Some(c) => c.2.push(mbit),
                None => cells.push((key, cell_words(r), vec![mbit])),
            }
        }
        // Cells that differ only in what their words leave out (a link
        // profile, a socket option) are numbered apart.
        let names: Vec<String> = cells.iter().map(|c| c.1.clone()).collect();
        cells
            .into_iter()
            .enumerate()
            .map(|(i, (_, name, runs))| {
                let same = names.iter().filter(|n| **n == name).count();
                let nth = names[..i].iter().filter(|n| **n == name).count() + 1;
                let cell = if same > 1 {
                    format!("{name}, setting {nth} of {same}")
                } else {
                    name
                };
                (cell, runs)
            })
            .filter_map(|(cell, runs)| {
                Some(crate::report::caveats::Estimated {
                    cell,
                    figure: "Mbit/s".into(),
                    spread: crate::record::stats::Spread::of(&runs)?,
                })
            })
            .collect()
    }

    fn links(records: &[StreamRecord]) -> Vec<String> {
        crate::report::html::link_details(records, |d| d.result.as_ref()?.link.as_ref())
    }

    /// The fastest cell by its runs' median (record size and placement,
    /// one stream), with the median's interval and the runs behind it,
    /// beside Van Jacobson's best of 1988 and Joy's of 1981, and the
    /// factor that limited most runs.
    fn headline(records: &[StreamRecord]) -> Option<html::Headline> {
        let mut cells: Vec<((u64, String), Vec<f64>, &StreamRecord)> = Vec::new();
        for r in records {
            let Some(result) = r.data.result.as_ref() else {
                continue;
            };
            if !r.data.params.flows.is_single() {
                continue;
            }
            let key = (r.data.params.record, r.placement.clone());
            match cells.iter_mut().find(|c| c.0 == key) {
                Some(cell) => cell.1.push(result.figures.throughput_mbit_s),
                None => cells.push((key, vec![result.figures.throughput_mbit_s], r)),
            }
        }
        let median = |v: &[f64]| crate::record::stats::Spread::of(v).map_or(0.0, |s| s.median);
        let ((record, _), runs, r) = cells
            .into_iter()
            .max_by(|a, b| median(&a.1).total_cmp(&median(&b.1)))?;
        let figures = &r.data.result.as_ref()?.figures;
        let gbit = |mbit: f64| mbit / 1000.0;
        let spread = match crate::record::stats::median_interval(&runs, 0.95) {
            Some((lo, hi)) => format!(
                ", the median of {} runs (95% {:.2}-{:.2})",
                runs.len(),
                gbit(lo),
                gbit(hi)
            ),
            None if runs.len() > 1 => {
                let s = crate::record::stats::Spread::of(&runs)?;
                format!(
                    ", the median of {} runs (range {:.2}-{:.2}; too few for a 95% interval)",
                    s.n,
                    gbit(s.min),
                    gbit(s.max)
                )
            }
            None => ", one run (no interval)".into(),
        };
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
                "{:.2} Gbit/s{spread}, one TCP stream of {} records ({})",
                gbit(median(&runs)),
                crate::report::table::bytes(record),
                r.placement
            ),
            then: Some(format!(
                "1988: {:.0} KB/s, {} (Van Jacobson); 1981: {} Mbaud, VAX-11/750s (Joy); {}",
                h.bsd_speedups.best_kbytes_s,
                h.bsd_speedups.machine,
                h.berkeley_vax.user_user_mbaud,
                stream::model::summary_line()
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

use crate::experiments::stream::record::SweepContext;

/// A stream cell in words for the report's caveats: its record size,
/// placement, strategies, amount, and whether it had several flows or was
/// a sweep's run.
fn cell_words(r: &StreamRecord) -> String {
    let p = &r.data.params;
    let amount = match (p.bytes, p.duration_s) {
        (Some(bytes), _) => crate::report::table::bytes(bytes),
        (None, Some(s)) => format!("{s} s"),
        (None, None) => String::new(),
    };
    format!(
        "{} ({}, {} / {}, {amount}{}{})",
        <StreamSection as ReportSection>::cell(&r.data),
        r.placement,
        p.send.name(),
        p.recv.name(),
        if p.flows.is_single() {
            ""
        } else {
            ", several flows"
        },
        if p.sweep.is_some() { ", a sweep's" } else { "" }
    )
}

/// What the sweep's curve says: where throughput rises to, its knee (or
/// that there is none within the sizes), the cost by terms where they are
/// resolved, and the bottleneck at the plateau.
fn sweep_reading(summary: &crate::experiments::sweep::cell::SweepSummary) -> String {
    let mut reading = String::new();
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
    if let Some(t) = summary.terms.as_ref().filter(|_| summary.all_resolved()) {
        let regimes: Vec<String> = summary
            .regimes
            .iter()
            .map(|r| format!("{} from {} to {} bytes", r.term.name(), r.from, r.to))
            .collect();
        reading.push_str(&format!(
            "Priced by its calls, segments, wake-ups and bytes ({} µs, {} µs, {} µs and {} ns each, 95% intervals; r² {:.3}), a record's largest cost is {}. ",
            summary.term_text(0, 1e6, &|v| format!("{v:.2}")),
            summary.term_text(1, 1e6, &|v| format!("{v:.2}")),
            summary.term_text(2, 1e6, &|v| format!("{v:.2}")),
            summary.term_text(3, 1e9, &|v| format!("{v:.3}")),
            t.r_squared,
            regimes.join(", ")
        ));
    } else if summary.terms.is_some() {
        let unresolved: Vec<&str> = (0..4)
            .filter(|&i| !summary.resolved(i))
            .map(|i| crate::analysis::costterms::TERMS[i].name())
            .collect();
        reading.push_str(&format!(
            "The cost by terms is not quoted: {} not resolved by this sweep (a 95% interval that reaches zero). ",
            unresolved.join(" and ")
        ));
    }
    reading.push_str(&format!(
        "At the plateau the bottleneck was {}.",
        best.limited_by()
    ));
    reading
}

/// Stream's records, read into the section above.
impl crate::options::experiment::Recorded for stream::Stream {
    type Data = StreamData;
    type Section = StreamSection;
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::stream::record::fixture_stream_run;

    /// Repeats of one cell pool; a sweep's run of the same record size is
    /// a cell of its own, named so.
    #[test]
    fn a_cell_is_everything_a_run_was_asked_but_its_repeat_index() {
        let run = |repeat: u32, sweep: bool, mbit: f64| {
            let mut r = fixture_stream_run();
            r.data.params.repeat_index = repeat;
            r.data.params.sweep = sweep.then(|| SweepContext {
                id: "2026-12-03T10:00:00Z".into(),
                parameter: "record".into(),
                copy: None,
            });
            r.data.result.as_mut().unwrap().figures.throughput_mbit_s = mbit;
            r
        };
        let records = vec![
            run(0, false, 100.0),
            run(1, false, 110.0),
            run(2, false, 90.0),
            run(0, true, 50.0),
            {
                let mut another_sweep = run(0, true, 60.0);
                another_sweep.data.params.sweep.as_mut().unwrap().id = "later".into();
                another_sweep
            },
        ];
        let estimates = <StreamSection as ReportSection>::estimates(&records);
        assert_eq!(estimates.len(), 2, "{estimates:?}");
        assert_eq!(estimates[0].spread.n, 3);
        assert_eq!(estimates[0].spread.median, 100.0);
        assert!(
            !estimates[0].cell.contains("sweep"),
            "{}",
            estimates[0].cell
        );
        assert!(
            estimates[1].cell.ends_with(", a sweep's)"),
            "{}",
            estimates[1].cell
        );
        // Two sweeps' runs of one record size are one cell.
        assert_eq!(estimates[1].spread.n, 2);
    }
}
