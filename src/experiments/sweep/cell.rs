//! Sweeps: an experiment run over a grid of sizes, summarised per size with
//! its spread, the knee of the curve and a fitted cost model.
//!
//! The summary is computed from records alone ([`summarize`]), so a report
//! rebuilt later from the JSON Lines file gives the same table as the live run.

use crate::analysis::limits::{self, Verdict};
use crate::analysis::{
    costmodel::{self, CostModel},
    costterms::{self, Term, TermIntervals, TermModel, TermPoint},
    knee::{self, Knee},
    stats,
};
use crate::checksum::copy::CopyCost;
use crate::controller::MeasureError;
use crate::controller::runner::{MeasureCell, Runner};
use crate::endpoint::bulk::types::Amount;
use crate::experiments::stream::cell::{StreamCell, StreamConfig};
use crate::experiments::stream::record::Bottleneck;
use crate::experiments::stream::record::Record;
use crate::experiments::stream::record::StreamData;
use crate::experiments::stream::record::SweepContext;
use crate::experiments::sweep::dips;
use crate::record::now_rfc3339;
use crate::record::stats::Spread;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

/// A stream sweep over record sizes.
#[derive(Debug, Clone)]
pub struct SweepConfig {
    /// Everything but the record size.
    pub base: StreamConfig,
    pub records: Vec<u64>,
    pub repeat: u32,
    /// Fraction of the plateau that defines the knee.
    pub knee_fraction: f64,
    /// Run the lever series beside the curve ([`LEVERS`]): what lets the
    /// cost model tell its terms apart.
    pub levers: bool,
}

impl Default for SweepConfig {
    /// `netlab sweep stream`'s defaults: 64 B to 1 MB doubling, 500 ms per
    /// run, 3 runs per size.
    fn default() -> Self {
        SweepConfig {
            // The sizes replace the base's record; the title names the first.
            base: StreamConfig {
                amount: Amount::Seconds(0.5),
                record: 64,
                ..StreamConfig::default()
            },
            records: doubling(64, 1 << 20),
            repeat: 3,
            knee_fraction: crate::analysis::knee::DEFAULT_FRACTION,
            levers: true,
        }
    }
}

impl SweepConfig {
    /// The lab's smoke profile: 64 B to 1 MB, 0.1 s per run, 2 runs each.
    pub fn smoke() -> Self {
        SweepConfig {
            base: StreamConfig {
                amount: Amount::Seconds(0.1),
                record: 64,
                ..StreamConfig::default()
            },
            repeat: 2,
            ..SweepConfig::default()
        }
    }

    /// The lab's quick profile: 64 B to 1 MB, 0.3 s per run, 3 runs each.
    pub fn quick() -> Self {
        SweepConfig {
            base: StreamConfig {
                amount: Amount::Seconds(0.3),
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
                amount: Amount::Seconds(2.0),
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
    /// What limited the run with the median throughput (TCP; older
    /// records: none).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limits: Option<Verdict>,
    /// The counts the cost model prices at this size (median run): the
    /// busier end's system calls, the data segments and both ends' sleeps
    /// per record.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counts: Option<TermPoint>,
    /// The cost model's largest term at this size and its share.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dominant: Option<(Term, f64)>,
}

impl SweepPoint {
    /// What limited it, in words: the verdict's primary factor, or the
    /// older records' CPU rule.
    pub fn limited_by(&self) -> &'static str {
        self.limits
            .as_ref()
            .and_then(|v| v.primary())
            .map_or(self.bottleneck.describe(), |l| l.factor.describe())
    }
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
    /// Sizes slower than both neighbours beyond the runs' spread, and what
    /// the records say about each.
    #[serde(default)]
    pub dips: Vec<dips::Dip>,
    /// Time per record by physical terms: per call, per segment, per
    /// wake-up, per byte ([`costterms`]), fitted to the measured counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub terms: Option<TermModel>,
    /// Each term's 95% interval over resamples of the runs: where two
    /// terms grow together (segments with bytes on loopback), the fit can
    /// trade one for the other and the intervals say by how much.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub term_intervals: Option<TermIntervals>,
    /// Runs of sizes over which one term costs most, in size order.
    #[serde(default)]
    pub regimes: Vec<Regime>,
    /// The terms against independent measurements.
    #[serde(default)]
    pub checks: TermChecks,
    /// The median over the runs of the share of its run that the end which
    /// waited longer was runnable but waiting for a CPU (its schedstat run
    /// delay): at [`limits::CONTENDED`] or more, other work on the host is in every
    /// term, and terms that grow together (calls and wake-ups, segments
    /// and bytes) trade places from run to run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub waited_share: Option<f64>,
    /// The lever series' points, fitted with the curve's (older sweeps:
    /// none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub levers: Vec<LeverPoint>,
}

impl SweepSummary {
    /// Whether the sweep resolved term `i` (in [`costterms::TERMS`]'
    /// order): its 95% interval over the resampled runs lies above zero. A
    /// term whose interval reaches zero is one the fit can trade for
    /// another (terms that grow together) and is never quoted as 0.
    /// Without intervals (older records), a term is taken as fitted.
    pub fn resolved(&self, i: usize) -> bool {
        match &self.term_intervals {
            Some(iv) => iv.low[i] > 0.0,
            None => self.terms.as_ref().is_some_and(|t| t.costs()[i] > 0.0),
        }
    }

    /// Whether every term is resolved.
    pub fn all_resolved(&self) -> bool {
        self.terms.is_some() && (0..4).all(|i| self.resolved(i))
    }

    /// Term `i` in words, `unit` per second (1e6 for µs, 1e9 for ns),
    /// each figure written by `num`: "1.23 (1.10-1.40)", or "not resolved
    /// by this sweep (95% 0-0.40)".
    pub fn term_text(&self, i: usize, unit: f64, num: &dyn Fn(f64) -> String) -> String {
        let Some(t) = &self.terms else {
            return "not fitted".into();
        };
        let value = num(t.costs()[i] * unit);
        let interval = self
            .term_intervals
            .as_ref()
            .map(|iv| format!("{}-{}", num(iv.low[i] * unit), num(iv.high[i] * unit)));
        match (self.resolved(i), interval) {
            (true, Some(iv)) => format!("{value} ({iv})"),
            (true, None) => value,
            (false, Some(iv)) => format!("not resolved by this sweep (95% {iv})"),
            (false, None) => "not resolved by this sweep".into(),
        }
    }
}

/// Sizes `from..=to` whose records' largest cost is `term`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Regime {
    pub term: Term,
    pub from: u64,
    pub to: u64,
}

/// The cost model's terms set against what was measured apart from the
/// curve.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TermChecks {
    /// The 1-byte run, not in the fit: its time per call and its counts
    /// per call (a call with almost no bytes, few segments and sleeps).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub one_byte: Option<TermPoint>,
    /// The 1-byte run's time per call less what the model puts in its
    /// segments, wake-ups and byte, over the per-call term: the estimate
    /// and its 95% interval over the resampled fits (1 agrees).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub per_call_ratio: Option<[f64; 3]>,
    /// A copy's cost on this host, hot and cold.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub copy: Option<CopyCost>,
}

/// The swept parameter of the sweep's 1-byte check run.
pub const CHECK_PARAMETER: &str = "record-check";

/// Whether a record is a sweep's check run rather than a point.
pub fn is_check(record: &Record) -> bool {
    record
        .data
        .params
        .sweep
        .as_ref()
        .is_some_and(|s| s.parameter == CHECK_PARAMETER)
}

/// Bootstrap resamples for the model knee's interval.
pub const KNEE_RESAMPLES: usize = 500;

/// The sizes that measured, in order, and each size's first failure.
fn sizes_and_failures(records: &[Record]) -> (Vec<u64>, Vec<(u64, String)>) {
    let mut sizes: Vec<u64> = Vec::new();
    let mut failed: Vec<(u64, String)> = Vec::new();
    for record in records {
        let StreamData { params, result } = &record.data;
        if result.is_none() {
            if !failed.iter().any(|(s, _)| *s == params.record) {
                failed.push((params.record, record.error.clone().unwrap_or_default()));
            }
        } else if !sizes.contains(&params.record) {
            sizes.push(params.record);
        }
    }
    sizes.sort_unstable();
    (sizes, failed)
}

/// Every run's time per record (s), by size, for the model knee's interval.
fn run_times(records: &[Record], points: &[SweepPoint]) -> Vec<(f64, Vec<f64>)> {
    points
        .iter()
        .map(|p| {
            let times = records
                .iter()
                .filter_map(|r| match &r.data {
                    StreamData {
                        params,
                        result: Some(result),
                    } if params.record == p.record => Some(result.figures.us_per_record * 1e-6),
                    _ => None,
                })
                .collect();
            (p.record as f64, times)
        })
        .collect()
}

/// Every run's own counts, by size, for the terms' intervals.
fn run_counts_by_size(records: &[Record], points: &[SweepPoint]) -> Vec<Vec<TermPoint>> {
    points
        .iter()
        .map(|p| {
            records
                .iter()
                .filter_map(|r| match &r.data {
                    StreamData {
                        params,
                        result: Some(result),
                    } if params.record == p.record => run_counts(result, p.record),
                    _ => None,
                })
                .collect()
        })
        .collect()
}

/// Summarises stream records by record size (records of other experiments
/// are ignored).
pub fn summarize(all: &[Record], knee_fraction: f64) -> SweepSummary {
    let (checks, points): (Vec<Record>, Vec<Record>) = all.iter().cloned().partition(is_check);
    let (levers, points): (Vec<Record>, Vec<Record>) = points.into_iter().partition(is_lever);
    let records = &points[..];
    let (sizes, failed) = sizes_and_failures(records);
    let points: Vec<SweepPoint> = sizes
        .iter()
        .filter_map(|&size| point_of(records, size))
        .collect();
    let curve: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.record as f64, p.throughput_mb_s.median))
        .collect();
    let times: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.record as f64, p.us_per_record.median * 1e-6))
        .collect();
    let runs = run_times(records, &points);
    let model = costmodel::fit(&times);
    let (lever_runs, lever_points) = lever_series(&levers);
    let counted: Vec<TermPoint> = points
        .iter()
        .filter_map(|p| p.counts)
        .chain(lever_points.iter().map(|l| l.counts))
        .collect();
    let terms = costterms::fit(&counted);
    let counted_runs = run_counts_by_size(records, &points);
    let counted_runs: Vec<Vec<TermPoint>> = counted_runs.into_iter().chain(lever_runs).collect();
    let resampled = costterms::bootstrap(&counted_runs, TERM_RESAMPLES);
    let waited_share = waited_share(records);
    let one_byte = checks.iter().find_map(one_byte_counts);
    let mut points = points;
    if let Some(terms) = &terms {
        for point in &mut points {
            let Some(counts) = point.counts else { continue };
            point.dominant = Some(terms.dominant(&counts));
            // A CPU-bound size is bound per call or per byte by the
            // model's split of its record's time, not by a size threshold.
            if let Some(verdict) = &mut point.limits {
                let fixed_share = 1.0 - terms.parts(&counts)[3] / terms.time(&counts).max(1e-15);
                limits::attribute_cpu(verdict, fixed_share, point.record);
            }
        }
    }
    SweepSummary {
        knee: knee::find_knee(&curve, knee_fraction),
        model_knee: knee::model_knee(&runs, knee_fraction, KNEE_RESAMPLES),
        model,
        dips: dips::dips(records),
        regimes: regimes(&points),
        term_intervals: costterms::intervals(&resampled, terms.as_ref()),
        checks: TermChecks {
            per_call_ratio: one_byte
                .and_then(|one| per_call_ratio(terms.as_ref()?, &resampled, &one)),
            one_byte,
            copy: all
                .iter()
                .find_map(|r| r.data.params.sweep.as_ref().and_then(|s| s.copy.clone())),
        },
        terms,
        points,
        levers: lever_points,
        failed,
        waited_share,
    }
}

/// One setting of the lever series, its median run's time and counts per
/// record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LeverPoint {
    /// The setting ([`Lever::name`]).
    pub lever: String,
    pub runs: usize,
    pub counts: TermPoint,
}

/// One record size's runs summarised: each figure's spread, the median
/// run's counts and what limited it.
fn point_of(records: &[Record], size: u64) -> Option<SweepPoint> {
    let runs: Vec<_> = records
        .iter()
        .filter_map(|r| match &r.data {
            StreamData {
                params,
                result: Some(result),
            } if params.record == size => Some(result.as_ref()),
            _ => None,
        })
        .collect();
    let spread = |f: &dyn Fn(&crate::experiments::stream::record::StreamResult) -> f64| {
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
    let us_per_record = spread(&|r| r.figures.us_per_record)?;
    let counts = term_counts(median_run, size, records_sent, us_per_record.median);
    Some(SweepPoint {
        record: size,
        throughput_mb_s: throughput,
        us_per_record,
        sender_us_per_kb: spread(&|r| r.figures.sender_us_per_kb)?,
        receiver_us_per_kb: spread(&|r| r.figures.receiver_us_per_kb)?,
        sender_cpu_pct: spread(&|r| r.figures.sender_cpu_pct)?,
        receiver_cpu_pct: spread(&|r| r.figures.receiver_cpu_pct)?,
        syscalls_per_record: median_run.sender.syscalls as f64 / records_sent,
        mean_segment_bytes: median_run.figures.mean_segment_bytes,
        bottleneck: median_run.figures.bottleneck,
        limits: median_run.limits.clone(),
        counts,
        dominant: None,
    })
}

/// The median over the runs of the share of its run that the end which
/// waited longer was runnable but waiting for a CPU.
fn waited_share(records: &[Record]) -> Option<f64> {
    let waits: Vec<f64> = records
        .iter()
        .filter_map(|r| {
            let result = r.data.result.as_ref()?;
            let share = |end: &crate::endpoint::bulk::types::EndpointReport| {
                end.run_delay_s.map(|d| d / end.wall_s.max(1e-9))
            };
            share(&result.sender)
                .into_iter()
                .chain(share(&result.receiver))
                .reduce(f64::max)
        })
        .collect();
    Spread::of(&waits).map(|w| w.median)
}

/// What the cost model prices at one size, from its median run: the busier
/// end's system calls (the end that bounds a pipeline of two), the data
/// segments, and both ends' sleeps (each a wake-up someone paid for), per
/// record; `None` without the sender's segment count.
fn term_counts(
    run: &crate::experiments::stream::record::StreamResult,
    size: u64,
    records_sent: f64,
    us_per_record: f64,
) -> Option<TermPoint> {
    let segments = run.sender.tcp_info.as_ref()?.data_segs_out? as f64;
    let busier = if run.figures.receiver_cpu_pct > run.figures.sender_cpu_pct {
        &run.receiver
    } else {
        &run.sender
    };
    let sleeps = run.sender.usage.voluntary_cs + run.receiver.usage.voluntary_cs;
    Some(TermPoint {
        size: size as f64,
        time: us_per_record * 1e-6,
        calls: busier.syscalls as f64 / records_sent,
        segments: segments / records_sent,
        wakeups: sleeps as f64 / records_sent,
        bytes: size as f64,
    })
}

/// One run's own counts per record at `size` (its own time, not a median).
fn run_counts(
    result: &crate::experiments::stream::record::StreamResult,
    size: u64,
) -> Option<TermPoint> {
    let sent = (result.sender.bytes as f64 / size as f64).ceil().max(1.0);
    term_counts(result, size, sent, result.figures.us_per_record)
}

/// The lever series' records, by setting: every run's counts (for the
/// terms' intervals) and each setting's median run (for the fit).
fn lever_series(levers: &[Record]) -> (Vec<Vec<TermPoint>>, Vec<LeverPoint>) {
    let mut runs_by_setting = Vec::new();
    let mut points = Vec::new();
    for lever in LEVERS {
        let runs: Vec<TermPoint> = levers
            .iter()
            .filter(|r| {
                r.data
                    .params
                    .sweep
                    .as_ref()
                    .is_some_and(|s| s.parameter == lever.name)
            })
            .filter_map(|r| run_counts(r.data.result.as_ref()?, r.data.params.record))
            .collect();
        let times: Vec<f64> = runs.iter().map(|p| p.time).collect();
        let Some(median) = Spread::of(&times).map(|s| s.median) else {
            continue;
        };
        let Some(counts) = runs
            .iter()
            .min_by(|a, b| (a.time - median).abs().total_cmp(&(b.time - median).abs()))
        else {
            continue;
        };
        points.push(LeverPoint {
            lever: lever.name.to_string(),
            runs: runs.len(),
            counts: TermPoint {
                time: median,
                ..*counts
            },
        });
        runs_by_setting.push(runs);
    }
    (runs_by_setting, points)
}

/// Resamples for the terms' intervals.
pub const TERM_RESAMPLES: usize = 200;

/// The 1-byte run's call net of the model's segments, wake-ups and byte,
/// over the per-call term: by `model`, and the 95% interval over the
/// resampled fits.
fn per_call_ratio(model: &TermModel, resampled: &[TermModel], one: &TermPoint) -> Option<[f64; 3]> {
    let ratio = |m: &TermModel| {
        let parts = m.parts(one);
        (m.per_call > 0.0).then(|| (one.time - parts[1] - parts[2] - parts[3]) / m.per_call)
    };
    let mut ratios: Vec<f64> = resampled.iter().filter_map(ratio).collect();
    let estimate = ratio(model)?;
    if ratios.is_empty() {
        return Some([estimate; 3]);
    }
    ratios.sort_by(f64::total_cmp);
    let at = |q: f64| ratios[((ratios.len() - 1) as f64 * q).round() as usize];
    Some([estimate, at(0.025), at(0.975)])
}

/// The 1-byte check run's time and counts per call.
fn one_byte_counts(record: &Record) -> Option<TermPoint> {
    run_counts(record.data.result.as_ref()?, 1)
}

/// Consecutive sizes with the same largest term.
fn regimes(points: &[SweepPoint]) -> Vec<Regime> {
    let mut regimes: Vec<Regime> = Vec::new();
    for point in points {
        let Some((term, _)) = point.dominant else {
            continue;
        };
        match regimes.last_mut() {
            Some(last) if last.term == term => last.to = point.record,
            _ => regimes.push(Regime {
                term,
                from: point.record,
                to: point.record,
            }),
        }
    }
    regimes
}

/// The record size of the lever series: 64 KB, where bytes weigh and
/// loopback's default segment carries a record in one or two.
pub const LEVER_RECORD: u64 = 64 << 10;

/// One run of the lever series: the curve's 64 KB point with one socket
/// setting changed, so that one or two counts move while the bytes per
/// record stay put. Along the curve every count of a large record grows
/// with its size (segments, wake-ups and the receiver's reads are all
/// bytes over a constant), so a fit to the curve alone can trade per byte
/// for per segment or per wake-up from run to run; these points break
/// that tie (docs/MEASUREMENT.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Lever {
    /// The record's `sweep.parameter`: `lever-mss-2048`.
    pub name: &'static str,
    /// TCP_MAXSEG on both ends: more segments per record.
    pub mss: Option<u32>,
    /// The receiver's read buffer: more or fewer reads per record.
    pub read_buffer: Option<usize>,
    /// SO_RCVLOWAT: fewer wake-ups of the receiver per record.
    pub rcvlowat: Option<u32>,
}

/// The lever series: 2 KB and 8 KB segments (32 and 8 a record, against
/// one or two), 4 KB reads (16 a record against one), and 256 KB of
/// low-water mark with 1 MB reads (a wake-up and a read per four records).
pub const LEVERS: [Lever; 4] = [
    Lever {
        name: "lever-mss-2048",
        mss: Some(2048),
        read_buffer: None,
        rcvlowat: None,
    },
    Lever {
        name: "lever-mss-8192",
        mss: Some(8192),
        read_buffer: None,
        rcvlowat: None,
    },
    Lever {
        name: "lever-read-4096",
        mss: None,
        read_buffer: Some(4096),
        rcvlowat: None,
    },
    Lever {
        name: "lever-rcvlowat-256k",
        mss: None,
        read_buffer: Some(1 << 20),
        rcvlowat: Some(256 << 10),
    },
];

/// Whether a record is a run of the lever series.
pub fn is_lever(record: &Record) -> bool {
    record
        .data
        .params
        .sweep
        .as_ref()
        .is_some_and(|s| s.parameter.starts_with("lever-"))
}

/// The lever series' cells, `config.repeat` runs of each (none with
/// `levers` off, or with a receiver other than read(2), whose reads and
/// low-water mark the series moves).
pub fn lever_cells(config: &SweepConfig, context: &SweepContext) -> Vec<StreamCell> {
    let reads = matches!(
        config.base.recv,
        crate::endpoint::bulk::types::RecvStrategy::Read { .. }
    );
    if !config.levers || !reads {
        return Vec::new();
    }
    let mut cells = Vec::new();
    for lever in LEVERS {
        let mut point = StreamConfig {
            record: LEVER_RECORD,
            ..config.base.clone()
        };
        if let Some(mss) = lever.mss {
            point.options.mss = Some(mss);
        }
        if let Some(buffer) = lever.read_buffer {
            point.recv = crate::endpoint::bulk::types::RecvStrategy::Read { buffer };
        }
        if let Some(lowat) = lever.rcvlowat {
            point.options.rcvlowat = Some(lowat);
        }
        for repeat_index in 0..config.repeat {
            cells.push(StreamCell {
                config: point.clone(),
                repeat_index,
                sweep: Some(SweepContext {
                    parameter: lever.name.into(),
                    ..context.clone()
                }),
                design: None,
            });
        }
    }
    cells
}

/// The sweep's 1-byte run: the per-call term's independent measure (a
/// short timed run, whatever the sweep's amount: a byte count in 1-byte
/// writes would take all day).
pub fn check_cell(config: &SweepConfig, context: &SweepContext) -> StreamCell {
    let seconds = match config.base.amount {
        Amount::Seconds(s) => s.min(0.5),
        Amount::Bytes(_) => 0.3,
    };
    StreamCell {
        config: StreamConfig {
            record: 1,
            amount: Amount::Seconds(seconds),
            ..config.base.clone()
        },
        repeat_index: 0,
        sweep: Some(SweepContext {
            parameter: CHECK_PARAMETER.into(),
            ..context.clone()
        }),
        design: None,
    }
}

/// The sweep's context: its id, and a copy's cost timed now (the kernel's
/// own copy on x86, `rep movsb`; 64 KB hot, and cold from a 64 MB pool).
pub fn context() -> SweepContext {
    SweepContext {
        id: now_rfc3339(),
        parameter: "record".into(),
        copy: Some(crate::checksum::copy::copy_cost(
            "copy-rep-movsb",
            crate::checksum::copy::rep_movsb,
            64 << 10,
            64 << 20,
        )),
    }
}

/// The sweep's cells: every size `repeat` times, sizes in the outer loop
/// so that a sweep that is interrupted has whole sizes.
pub fn cells(config: &SweepConfig, context: &SweepContext) -> Vec<StreamCell> {
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
                design: None,
            });
        }
    }
    cells
}

/// How precisely each size's median throughput is wanted, and how long the
/// whole sweep may take (netperf's `-I`, per point of a curve).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Precision {
    /// The confidence interval's half-width relative to the median (0.05: ±5%).
    pub half_width: f64,
    /// The interval's confidence level (0.95).
    pub level: f64,
    /// The whole sweep's time, first runs included.
    pub budget: Duration,
    /// The most runs of any one size.
    pub max_runs: usize,
}

/// Why a precision target cannot be met.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PrecisionError {
    #[error("--ci {0}: a half-width between 0 and 100 percent of the median")]
    HalfWidth(f64),
    #[error(
        "--budget {budget}: the first {runs} runs alone take at least {estimate_s:.0} s ({sizes} sizes and lever settings x {repeat} runs x {per_run_s} s)"
    )]
    Budget {
        budget: String,
        runs: f64,
        estimate_s: f64,
        sizes: usize,
        repeat: u32,
        per_run_s: f64,
    },
}

impl Precision {
    /// A 95% target of ±`percent`% for `config`'s sweep within `budget`,
    /// refused when out of range or when the sweep's first runs alone would
    /// not fit the budget (timed runs; a run of a byte count has no
    /// estimate).
    pub fn checked(
        percent: f64,
        budget: Duration,
        max_runs: usize,
        config: &SweepConfig,
    ) -> Result<Precision, PrecisionError> {
        if !(percent > 0.0 && percent < 100.0) {
            return Err(PrecisionError::HalfWidth(percent));
        }
        if let Amount::Seconds(per_run_s) = config.base.amount {
            let levers = if config.levers { LEVERS.len() } else { 0 };
            let runs = (config.records.len() + levers) as f64 * f64::from(config.repeat);
            if runs * per_run_s > budget.as_secs_f64() {
                return Err(PrecisionError::Budget {
                    budget: humantime::format_duration(budget).to_string(),
                    runs,
                    estimate_s: runs * per_run_s,
                    sizes: config.records.len() + levers,
                    repeat: config.repeat,
                    per_run_s,
                });
            }
        }
        Ok(Precision {
            half_width: percent / 100.0,
            level: 0.95,
            budget,
            max_runs,
        })
    }
}

/// How precise one size's median came out.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PointPrecision {
    pub record: u64,
    pub runs: usize,
    /// The interval's half-width relative to the median; none with too few runs.
    pub half_width: Option<f64>,
    pub met: bool,
}

/// What [`refine`] did: the target, the time it took, each size's outcome
/// and why it stopped.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PrecisionReport {
    pub half_width: f64,
    pub level: f64,
    pub budget_s: f64,
    pub spent_s: f64,
    pub extra_runs: usize,
    pub points: Vec<PointPrecision>,
    pub stopped: String,
}

/// Each size's precision from the records: the throughput medians' order
/// statistics interval ([`stats::relative_half_width`]).
fn precision_of(records: &[Record], sizes: &[u64], p: &Precision) -> Vec<PointPrecision> {
    sizes
        .iter()
        .map(|&size| {
            let mut runs = 0;
            let mut throughputs = Vec::new();
            // The lever series' 64 KB runs are not the curve's 64 KB point.
            for record in records.iter().filter(|r| !is_lever(r) && !is_check(r)) {
                if let StreamData { params, result } = &record.data
                    && params.record == size
                {
                    runs += 1;
                    if let Some(result) = result {
                        throughputs.push(result.figures.throughput_mb_s);
                    }
                }
            }
            let half_width = stats::relative_half_width(&throughputs, p.level);
            PointPrecision {
                record: size,
                runs,
                half_width,
                met: half_width.is_some_and(|w| w <= p.half_width),
            }
        })
        .collect()
}

/// After the sweep's first runs (`records`, from `cells`, begun at
/// `started`): one more run at a time of the size whose median is least
/// precise, until every size's interval is within the target, a size has
/// `max_runs`, or the next run would overrun the budget (estimated from the
/// runs so far). New records are appended to `records`.
/// A sweep's records, summary and, with a precision target, what the
/// refinement did.
pub struct Swept {
    pub records: Vec<Record>,
    pub summary: SweepSummary,
    pub precision: Option<PrecisionReport>,
}

/// Runs `config`'s sweep: every size `repeat` times, then with `precision`
/// the least precise size again until each is precise enough
/// ([`refine`]).
pub fn run<M: MeasureCell<Cell = StreamCell, Data = StreamData>>(
    runner: &mut Runner,
    measure: &mut M,
    config: &SweepConfig,
    precision: Option<&Precision>,
) -> Result<Swept, MeasureError> {
    let started = Instant::now();
    // A resumed sweep is the same sweep: its id, and the copy cost its
    // model is checked against.
    let context = runner
        .earlier::<SweepContext>("stream", "/params/sweep")
        .map(|earlier| SweepContext {
            parameter: "record".into(),
            ..earlier
        })
        .unwrap_or_else(context);
    let cells = cells(config, &context);
    let mut records = vec![runner.cell(measure, &check_cell(config, &context))?];
    records.extend(runner.grid(measure, &cells)?);
    records.extend(runner.grid(measure, &lever_cells(config, &context))?);
    let precision = precision
        .map(|p| refine(runner, measure, &cells, &mut records, p, started))
        .transpose()?;
    Ok(Swept {
        summary: summarize(&records, config.knee_fraction),
        records,
        precision,
    })
}

pub fn refine<M: MeasureCell<Cell = StreamCell, Data = StreamData>>(
    runner: &mut Runner,
    measure: &mut M,
    cells: &[StreamCell],
    records: &mut Vec<Record>,
    precision: &Precision,
    started: Instant,
) -> Result<PrecisionReport, MeasureError> {
    let mut sizes: Vec<u64> = cells.iter().map(|c| c.config.record).collect();
    sizes.dedup();
    let mut extra_runs = 0;
    let stopped = loop {
        let points = precision_of(records, &sizes, precision);
        let pending = points
            .iter()
            .filter(|p| !p.met && p.runs < precision.max_runs)
            .max_by(|a, b| {
                let width = |p: &PointPrecision| p.half_width.unwrap_or(f64::INFINITY);
                width(a).total_cmp(&width(b))
            });
        let Some(worst) = pending else {
            break if points.iter().all(|p| p.met) {
                "every size within the target".to_string()
            } else {
                format!("the sizes left reached {} runs", precision.max_runs)
            };
        };
        let per_run = started.elapsed().div_f64(records.len().max(1) as f64);
        if started.elapsed() + per_run > precision.budget {
            break format!(
                "the budget: another run (about {:.1} s) would end past {:.0} s",
                per_run.as_secs_f64(),
                precision.budget.as_secs_f64()
            );
        }
        let Some(template) = cells.iter().find(|c| c.config.record == worst.record) else {
            break "no cell for a size (a bug)".to_string();
        };
        let cell = StreamCell {
            repeat_index: worst.runs as u32,
            ..template.clone()
        };
        records.push(runner.cell(measure, &cell)?);
        extra_runs += 1;
    };
    Ok(PrecisionReport {
        half_width: precision.half_width,
        level: precision.level,
        budget_s: precision.budget.as_secs_f64(),
        spent_s: started.elapsed().as_secs_f64(),
        extra_runs,
        points: precision_of(records, &sizes, precision),
        stopped,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::controller::runner::Measured;
    use crate::controller::runner::mock::{Mock, runner};

    /// Runs whose throughput is 100 MB/s, ±1% for 64-byte records and ±30%
    /// for 1 KB ones, alternating.
    fn answer(
        template: Record,
    ) -> impl FnMut(&StreamCell) -> Result<Measured<StreamData>, crate::controller::Interrupted>
    {
        let mut count = 0;
        move |cell: &StreamCell| {
            count += 1;
            let swing = if cell.config.record == 64 { 0.01 } else { 0.3 };
            let sign = if count % 2 == 0 { 1.0 } else { -1.0 };
            let mut data = template.data.clone();
            if let StreamData {
                params,
                result: Some(result),
            } = &mut data
            {
                params.record = cell.config.record;
                result.figures.throughput_mb_s = 100.0 * (1.0 + sign * swing);
            }
            Ok(Measured {
                placement: "loopback".into(),
                data,
                error: None,
            })
        }
    }

    fn sweep() -> SweepConfig {
        SweepConfig {
            records: vec![64, 1024],
            ..SweepConfig::quick()
        }
    }

    /// The sweep's first runs through the mock, then `refine` to ±5% at
    /// 95%, at most 10 runs a size, within `budget`: its report, every
    /// record, and the record sizes of the cells measured, in order, with
    /// their repeat indices.
    fn refined(budget: Duration) -> (PrecisionReport, Vec<Record>, Vec<(u64, u32)>) {
        // The mock's cells need no copy timed (context() times one: 128 MB
        // and a tenth of a second the test does not use).
        let context = SweepContext {
            id: "test".into(),
            parameter: "record".into(),
            copy: None,
        };
        let grid = cells(&sweep(), &context);
        let mut mock = Mock::new(answer(
            crate::experiments::stream::record::fixture_stream_run(),
        ));
        let mut runner = runner();
        let started = Instant::now();
        let mut records = runner.grid(&mut mock, &grid).unwrap();
        let precision = Precision {
            half_width: 0.05,
            level: 0.95,
            budget,
            max_runs: 10,
        };
        let report = refine(
            &mut runner,
            &mut mock,
            &grid,
            &mut records,
            &precision,
            started,
        )
        .unwrap();
        let measured = mock
            .measured
            .iter()
            .map(|c| (c.config.record, c.repeat_index))
            .collect();
        (report, records, measured)
    }

    #[test]
    fn refining_runs_the_least_precise_size_until_it_is_within_the_target_or_capped() {
        let (report, records, measured) = refined(Duration::from_secs(3600));
        // 64 B: three more runs give six, the fewest with a 95% interval,
        // and ±1% meets ±5%. 1 KB: ±30% never does; it stops at 10 runs.
        let runs: Vec<(u64, usize, bool)> = report
            .points
            .iter()
            .map(|p| (p.record, p.runs, p.met))
            .collect();
        assert_eq!(runs, [(64, 6, true), (1024, 10, false)]);
        assert_eq!(report.extra_runs, 3 + 7);
        assert_eq!(records.len(), 16);
        assert_eq!(report.stopped, "the sizes left reached 10 runs");
        assert!(report.points[0].half_width.unwrap() <= 0.0101);
        // The repeat indices go on from the grid's.
        let last: Vec<u32> = measured
            .iter()
            .filter(|(record, _)| *record == 64)
            .map(|(_, index)| *index)
            .collect();
        assert_eq!(last, [0, 1, 2, 3, 4, 5]);
    }

    #[test]
    fn refining_stops_at_the_budget() {
        let (report, _, _) = refined(Duration::ZERO);
        assert_eq!(report.extra_runs, 0);
        assert!(
            report.stopped.starts_with("the budget"),
            "{}",
            report.stopped
        );
        assert!(report.points.iter().all(|p| !p.met && p.runs == 3));
    }
}
