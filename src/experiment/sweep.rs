//! Sweeps: an experiment run over a grid of sizes, summarised per size with
//! its spread, the knee of the curve and a fitted cost model.
//!
//! The summary is computed from records alone ([`summarize`]), so a report
//! rebuilt later from the JSON Lines file gives the same table as the live run.

use super::stream::{StreamCell, StreamConfig};
use crate::analysis::{
    costmodel::{self, CostModel},
    knee::{self, Knee},
    stats::Spread,
    stream::Bottleneck,
};
use crate::record::{Record, RecordData, SweepContext, now_rfc3339};
use serde::{Deserialize, Serialize};

/// A stream sweep over record sizes.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// Everything but the record size.
    pub base: StreamConfig,
    pub records: Vec<u64>,
    pub repeat: u32,
    /// Fraction of the plateau that defines the knee.
    pub knee_fraction: f64,
}

impl Default for SweepConfig {
    /// `netlab sweep stream`'s defaults: 64 B to 1 MB doubling, 500 ms per
    /// run, 3 runs per size.
    fn default() -> Self {
        SweepConfig {
            // The sizes replace the base's record; the title names the first.
            base: StreamConfig {
                amount: crate::endpoint::protocol::Amount::Seconds(0.5),
                record: 64,
                ..StreamConfig::default()
            },
            records: doubling(64, 1 << 20),
            repeat: 3,
            knee_fraction: crate::analysis::knee::DEFAULT_FRACTION,
        }
    }
}

impl SweepConfig {
    /// The lab's quick profile: 64 B to 1 MB, 0.3 s per run, 3 runs each.
    pub fn quick() -> Self {
        SweepConfig {
            base: StreamConfig {
                amount: crate::endpoint::protocol::Amount::Seconds(0.3),
                record: 64,
                ..StreamConfig::default()
            },
            ..SweepConfig::default()
        }
    }

    /// The lab's full profile: 16 B to 4 MB, 2 s per run, 5 runs each.
    pub fn full() -> Self {
        SweepConfig {
            base: StreamConfig {
                amount: crate::endpoint::protocol::Amount::Seconds(2.0),
                record: 64,
                ..StreamConfig::default()
            },
            records: doubling(16, 4 << 20),
            repeat: 5,
            ..SweepConfig::default()
        }
    }
}

/// `lo, 2 lo, 4 lo, ...` up to `hi`.
pub fn doubling(lo: u64, hi: u64) -> Vec<u64> {
    std::iter::successors(Some(lo), |&s| (s < hi).then_some(s * 2)).collect()
}

/// One record size's runs, summarised.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepPoint {
    pub record: u64,
    pub throughput_mb_s: Spread,
    /// Sender wall time per record, µs.
    pub us_per_record: Spread,
    pub sender_us_per_kb: Spread,
    pub receiver_us_per_kb: Spread,
    pub sender_cpu_pct: Spread,
    pub receiver_cpu_pct: Spread,
    /// Sender data-path system calls per record (median run).
    pub syscalls_per_record: f64,
    /// Mean payload per data segment (median run), when TCP_INFO told.
    pub mean_segment_bytes: Option<f64>,
    /// Bottleneck of the run with the median throughput.
    pub bottleneck: Bottleneck,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SweepSummary {
    pub points: Vec<SweepPoint>,
    pub knee: Option<Knee>,
    /// `time per record (s) = fixed + per_byte × record`.
    pub model: Option<CostModel>,
    /// The knee from the model, with a bootstrap interval over the runs.
    #[serde(default)]
    pub model_knee: Option<knee::ModelKnee>,
    /// Record sizes whose runs failed, with the first reason.
    pub failed: Vec<(u64, String)>,
}

/// Bootstrap resamples for the model knee's interval.
pub const KNEE_RESAMPLES: usize = 500;

/// Summarises stream records by record size (records of other experiments
/// are ignored).
pub fn summarize(records: &[Record], knee_fraction: f64) -> SweepSummary {
    let mut sizes: Vec<u64> = Vec::new();
    let mut failed: Vec<(u64, String)> = Vec::new();
    for record in records {
        let RecordData::Stream { params, result } = &record.data else {
            continue;
        };
        if result.is_none() {
            if !failed.iter().any(|(s, _)| *s == params.record) {
                failed.push((params.record, record.error.clone().unwrap_or_default()));
            }
        } else if !sizes.contains(&params.record) {
            sizes.push(params.record);
        }
    }
    sizes.sort_unstable();
    let points: Vec<SweepPoint> = sizes
        .iter()
        .filter_map(|&size| {
            let runs: Vec<_> = records
                .iter()
                .filter_map(|r| match &r.data {
                    RecordData::Stream {
                        params,
                        result: Some(result),
                    } if params.record == size => Some(result.as_ref()),
                    _ => None,
                })
                .collect();
            let spread = |f: &dyn Fn(&crate::record::StreamResult) -> f64| {
                Spread::of(&runs.iter().map(|r| f(r)).collect::<Vec<_>>())
            };
            let throughput = spread(&|r| r.figures.throughput_mb_s)?;
            let median_run = runs.iter().min_by(|a, b| {
                (a.figures.throughput_mb_s - throughput.median)
                    .abs()
                    .total_cmp(&(b.figures.throughput_mb_s - throughput.median).abs())
            })?;
            let records_sent = (median_run.sender.bytes as f64 / size as f64)
                .ceil()
                .max(1.0);
            Some(SweepPoint {
                record: size,
                throughput_mb_s: throughput,
                us_per_record: spread(&|r| r.figures.us_per_record)?,
                sender_us_per_kb: spread(&|r| r.figures.sender_us_per_kb)?,
                receiver_us_per_kb: spread(&|r| r.figures.receiver_us_per_kb)?,
                sender_cpu_pct: spread(&|r| r.figures.sender_cpu_pct)?,
                receiver_cpu_pct: spread(&|r| r.figures.receiver_cpu_pct)?,
                syscalls_per_record: median_run.sender.syscalls as f64 / records_sent,
                mean_segment_bytes: median_run.figures.mean_segment_bytes,
                bottleneck: median_run.figures.bottleneck,
            })
        })
        .collect();
    let curve: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.record as f64, p.throughput_mb_s.median))
        .collect();
    let times: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.record as f64, p.us_per_record.median * 1e-6))
        .collect();
    // Every run's time per record, by size, for the model knee's interval.
    let runs: Vec<(f64, Vec<f64>)> = points
        .iter()
        .map(|p| {
            let times = records
                .iter()
                .filter_map(|r| match &r.data {
                    RecordData::Stream {
                        params,
                        result: Some(result),
                    } if params.record == p.record => Some(result.figures.us_per_record * 1e-6),
                    _ => None,
                })
                .collect();
            (p.record as f64, times)
        })
        .collect();
    SweepSummary {
        knee: knee::find_knee(&curve, knee_fraction),
        model_knee: knee::model_knee(&runs, knee_fraction, KNEE_RESAMPLES),
        model: costmodel::fit(&times),
        points,
        failed,
    }
}

/// The sweep's cells: every size `repeat` times, sizes in the outer loop
/// so that a sweep that is interrupted has whole sizes.
pub fn cells(config: &SweepConfig) -> Vec<StreamCell> {
    let context = SweepContext {
        id: now_rfc3339(),
        parameter: "record".into(),
    };
    let mut cells = Vec::new();
    for &size in &config.records {
        let point = StreamConfig {
            record: size,
            ..config.base.clone()
        };
        for repeat_index in 0..config.repeat {
            cells.push(StreamCell {
                config: point.clone(),
                repeat_index,
                sweep: Some(context.clone()),
            });
        }
    }
    cells
}
