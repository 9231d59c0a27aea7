//! The sweep's figure: throughput against record size, the fitted cost
//! model through it and its knee marked.

use crate::experiments::stream::record::Record;
use crate::experiments::sweep::cell::summarize;
use crate::report::figures::{Figure, Mark, Series, Style, caption};

/// The stream records of size sweeps (not single runs).
pub fn sweep_records(records: &[Record]) -> Vec<Record> {
    records
        .iter()
        .filter(|r| matches!(&r.data, crate::experiments::stream::record::StreamData { params, .. } if params.sweep.is_some()))
        .cloned()
        .collect()
}

/// Throughput vs record size, the fitted cost model drawn through it and
/// the model's knee marked (`netlab sweep stream` records).
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
    if let Some(model) = &summary.model {
        series.push(Series {
            name: format!(
                "model: {:.2} µs + {:.3} ns/B per record",
                model.fixed * 1e6,
                model.per_byte * 1e9
            ),
            style: Style::Model,
            points: measured
                .iter()
                .map(|&(size, _)| (size, size / model.time(size) / 1e6))
                .collect(),
        });
    }
    // The model's knee, which uses every size's runs, where there is one;
    // the threshold knee (which one outlying point can move) otherwise.
    let model_knee = summary.model_knee.as_ref().zip(summary.model.as_ref());
    let marks = match model_knee {
        Some((k, model)) => vec![Mark {
            x: k.size,
            y: k.size / model.time(k.size) / 1e6,
            label: format!(
                "knee (model) {:.0} B, 95% {:.0}-{:.0}",
                k.size, k.low, k.high
            ),
        }],
        None => summary
            .knee
            .iter()
            .map(|k| Mark {
                x: k.size,
                y: k.throughput,
                label: format!("knee {} B ({:.0}% of plateau)", k.size, k.fraction * 100.0),
            })
            .collect(),
    };
    Some(Figure {
        id: "stream-throughput".into(),
        title: "Throughput vs record size (one TCP stream)".into(),
        x_label: "record size (bytes, log)".into(),
        y_label: "throughput (MB/s)".into(),
        log_x: true,
        log_y: false,
        categories: Vec::new(),
        series,
        marks,
        caption: caption(&sweep.iter().collect::<Vec<_>>()),
    })
}
