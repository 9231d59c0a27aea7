//! The sweep's figure: throughput against record size, the cost model by
//! terms through it, and the measured curve's knee marked.

use crate::experiments::stream::record::Record;
use crate::experiments::sweep::cell::summarize;
use crate::report::figures::{Figure, Mark, Series, Style, caption};

/// Whether a sweep's curve still rises at its largest size: its median
/// beats every run of the size before it (more than the sweep's own
/// noise), so no plateau, and no knee, lies within the sizes measured.
pub fn still_rising(points: &[crate::experiments::sweep::cell::SweepPoint]) -> bool {
    match points {
        [.., before, last] => last.throughput_mb_s.median > before.throughput_mb_s.max,
        _ => false,
    }
}

/// The stream records of size sweeps (not single runs).
pub fn sweep_records(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| matches!(&r.data, crate::experiments::stream::record::StreamData { params, .. } if params.sweep.is_some()))
        .cloned()
        .collect()
}

/// Throughput vs record size, the cost model by terms drawn through it and
/// the measured knee marked (`netlab sweep stream` records).
pub fn stream_throughput(records: &[Record]) -> Option<Figure> {
    let sweep = sweep_records(records);
    let summary = summarize(&sweep, crate::analysis::knee::DEFAULT_FRACTION);
    if summary.points.is_empty() {
        return None;
    }
    let measured: Vec<(f64, f64)> = summary
        .points
        .iter()
        .map(|p| (p.record as f64, p.throughput_mb_s.median))
        .collect();
    let mut series = vec![Series {
        name: "measured (median of runs)".into(),
        style: Style::Measured,
        points: measured.clone(),
    }];
    if let Some(terms) = &summary.terms {
        // The model at each size's own counts of calls, segments and
        // wake-ups: the curve it explains, point by point.
        series.push(Series {
            name: {
                let term = |i: usize, unit: f64, digits: usize, per: &str| {
                    if summary.resolved(i) {
                        format!("{:.digits$} {per}", terms.costs()[i] * unit)
                    } else {
                        format!("? {per} (not resolved)")
                    }
                };
                format!(
                    "model: {} + {} + {} + {}",
                    term(0, 1e6, 2, "µs/call"),
                    term(1, 1e6, 2, "µs/segment"),
                    term(2, 1e6, 2, "µs/wake-up"),
                    term(3, 1e9, 3, "ns/B")
                )
            },
            style: Style::Model,
            points: summary
                .points
                .iter()
                .filter_map(|p| {
                    let counts = p.counts?;
                    Some((counts.size, counts.size / terms.time(&counts) / 1e6))
                })
                .collect(),
        });
    }
    // The knee where the measured curve has it, and Van Jacobson's size;
    // but a curve still rising at its largest size has no plateau yet,
    // and its mark says so rather than call a bend what is not one.
    let still_rising = still_rising(&summary.points);
    let marks = summary
        .knee
        .iter()
        .map(|k| Mark {
            x: k.size,
            y: k.throughput,
            label: if still_rising && k.plateau_size >= measured.last().map_or(0.0, |p| p.0) {
                format!(
                    "{:.0}% of the best at {} B; no plateau yet: throughput still rises {:.0}% at the largest size, so the knee lies beyond the sizes measured",
                    k.fraction * 100.0,
                    k.size,
                    100.0 * (measured[measured.len() - 1].1 / measured[measured.len() - 2].1 - 1.0)
                )
            } else {
                format!(
                    "knee {} B ({:.0}% of the best): just right of it, per VJ",
                    k.size,
                    k.fraction * 100.0
                )
            },
        })
        .collect();
    Some(Figure {
        id: "stream-throughput".into(),
        title: "Throughput vs record size (one TCP stream)".into(),
        x_label: "record size (bytes, log)".into(),
        y_label: "throughput (bytes per second)".into(),
        log_x: true,
        log_y: false,
        x_unit: crate::report::figures::Unit::Bytes,
        y_unit: crate::report::figures::Unit::Si {
            scale: 1e6,
            symbol: "B/s".into(),
        },
        categories: Vec::new(),
        series,
        marks,
        caption: caption(&sweep.iter().collect::<Vec<_>>()),
    })
}
