//! `netlab rpc --find-cliffs`: maps, to the byte, the argument sizes at which
//! TCP calls stall on each placement, as the 1989 document's 4045-4952 and
//! 8090-8960 ranges did.
//!
//! A coarse pass probes every 500 bytes of the range, every power of two and
//! every multiple of the path's MSS (and one byte either side), plus a few
//! small sizes below the range that anchor the model of a fast call; the cliff
//! detector classifies each probe; then every boundary between a fast and a
//! slow probe is bisected down to adjacent sizes. A probe is a short cell
//! (5 calls, judged by its median call), recorded like any other with
//! purpose `find-cliffs`.

use super::Output;
use super::rpc_experiment::{RpcExperimentArgs, RpcPlan};
use crate::analysis::cliff::{DEFAULT_FACTOR, MIN_STALL_MS, find_cliffs};
use crate::analysis::costmodel::CostModel;
use crate::endpoint::rpc::Proto;
use crate::experiment::rpc::{RpcParams, measure_cell};
use crate::experiment::stream::MeasureError;
use crate::measure::host::HostFacts;
use crate::record::{RecordData, RecordWriter};
use crate::report::{historical, progress::Progress};
use crate::testbed::Placement;
use anyhow::bail;
use serde::Serialize;
use std::collections::BTreeMap;

const PROBE_CALLS: u32 = 5;

#[derive(Debug, Clone, Serialize)]
pub struct StallRange {
    pub placement: String,
    pub from: usize,
    pub to: usize,
    /// Whether the range runs to the end of the probed range.
    pub open_ended: bool,
    pub ms_per_call: f64,
}

struct Prober<'a> {
    base: RpcParams,
    host: &'a HostFacts,
    writer: &'a mut RecordWriter,
    times: BTreeMap<usize, f64>,
    bar: Progress,
}

impl Prober<'_> {
    fn probe(&mut self, size: usize) -> anyhow::Result<f64> {
        if let Some(&t) = self.times.get(&size) {
            return Ok(t);
        }
        let cell = RpcParams {
            size,
            ..self.base.clone()
        };
        self.bar.set_message(format!("{} {size} B", cell.column()));
        let record = match measure_cell(&cell, self.host, Some(self.writer)) {
            Ok(record) => record,
            Err(MeasureError::Interrupted) => bail!(super::Interrupted {
                saved: self.times.len()
            }),
            Err(e) => return Err(e.into()),
        };
        self.bar.inc(1);
        let ms = match &record.data {
            RecordData::Rpc {
                result: Some(r), ..
            } => r.client.rep_seconds.iter().sum::<f64>() * 1e3 / f64::from(PROBE_CALLS),
            _ => bail!(
                "probe at {size} bytes failed: {}",
                record.error.unwrap_or_default()
            ),
        };
        self.times.insert(size, ms);
        Ok(ms)
    }
}

fn slow(model: &CostModel, size: usize, ms: f64) -> bool {
    let predicted = model.time(size as f64).max(f64::MIN_POSITIVE);
    ms / predicted >= DEFAULT_FACTOR && ms - predicted >= MIN_STALL_MS
}

/// Sizes below the range that anchor the model of the fast regime.
const ANCHORS: [usize; 5] = [0, 256, 512, 1024, 2048];

fn coarse_sizes(lo: usize, hi: usize, mss: usize) -> Vec<usize> {
    let mut sizes: Vec<usize> = (lo..=hi).step_by(500).collect();
    sizes.push(hi);
    sizes.extend(ANCHORS.iter().filter(|&&a| a < lo));
    let mut p = 1usize;
    while p <= hi {
        if p >= lo {
            sizes.push(p);
        }
        p *= 2;
    }
    let mut m = mss;
    while m <= hi {
        for s in [m - 1, m, m + 1] {
            if (lo..=hi).contains(&s) {
                sizes.push(s);
            }
        }
        m += mss;
    }
    sizes.sort_unstable();
    sizes.dedup();
    sizes
}

pub fn run(
    args: &RpcExperimentArgs,
    plan: &RpcPlan,
    host: &HostFacts,
    writer: &mut RecordWriter,
    out: &mut Output,
) -> anyhow::Result<()> {
    let (lo, hi) = match args.cliff_range.split_once("..") {
        Some((a, b)) => (a.trim().parse::<usize>()?, b.trim().parse::<usize>()?),
        None => bail!("--cliff-range must be LO..HI, e.g. 0..12000"),
    };
    if lo >= hi || hi > 60_000 {
        bail!("--cliff-range {lo}..{hi}: need LO < HI <= 60000");
    }
    let mut ranges = Vec::new();
    for placement in &plan.placements {
        let mss = match placement {
            Placement::Loopback => 65483,
            Placement::Netns { link, .. } => link.mtu as usize - 52,
        };
        let base = RpcParams {
            size: 0,
            proto: Proto::Tcp,
            strategy: plan.strategy,
            client: plan.client.clone(),
            server: plan.server.clone(),
            calls: PROBE_CALLS,
            reps: 1,
            placement: placement.clone(),
            purpose: "find-cliffs".into(),
            capture_timeline: false,
        };
        let column = base.column();
        let coarse = coarse_sizes(lo, hi, mss);
        let mut prober = Prober {
            base,
            host,
            writer: &mut *writer,
            times: BTreeMap::new(),
            bar: Progress::new(coarse.len() as u64 + 60, false, true),
        };
        for &size in &coarse {
            prober.probe(size)?;
        }
        let points: Vec<(f64, f64)> = prober.times.iter().map(|(&s, &t)| (s as f64, t)).collect();
        let (_, model) = find_cliffs(&points, DEFAULT_FACTOR);
        let Some(model) = model else {
            bail!("too few probes to model {column}");
        };
        // Bisect every boundary between neighbours of different kinds.
        for pair in coarse.windows(2) {
            let (a, b) = (pair[0], pair[1]);
            let (ta, tb) = (prober.times[&a], prober.times[&b]);
            let (sa, sb) = (slow(&model, a, ta), slow(&model, b, tb));
            if sa == sb {
                continue;
            }
            let (mut fast_side, mut slow_side) = if sa { (b, a) } else { (a, b) };
            while fast_side.abs_diff(slow_side) > 1 {
                let mid = (fast_side + slow_side) / 2;
                let t = prober.probe(mid)?;
                if slow(&model, mid, t) {
                    slow_side = mid;
                } else {
                    fast_side = mid;
                }
            }
        }
        prober.bar.finish();
        // Collect maximal runs of slow sizes among all probes.
        let mut run: Option<(usize, usize, Vec<f64>)> = None;
        let probes: Vec<(usize, f64)> = prober
            .times
            .iter()
            .filter(|(s, _)| (lo..=hi).contains(*s))
            .map(|(&s, &t)| (s, t))
            .collect();
        for (size, t) in probes {
            if slow(&model, size, t) {
                let r = run.get_or_insert((size, size, Vec::new()));
                r.1 = size;
                r.2.push(t);
            } else if let Some((from, to, ts)) = run.take() {
                ranges.push(StallRange {
                    placement: column.clone(),
                    from,
                    to,
                    open_ended: false,
                    ms_per_call: ts.iter().sum::<f64>() / ts.len() as f64,
                });
            }
        }
        if let Some((from, to, ts)) = run.take() {
            ranges.push(StallRange {
                placement: column.clone(),
                from,
                to,
                open_ended: to == hi,
                ms_per_call: ts.iter().sum::<f64>() / ts.len() as f64,
            });
        }
    }
    let h = &historical::figures().rpc_size_sweep;
    if args.json {
        out.json(&serde_json::json!({
            "experiment": "rpc-find-cliffs",
            "strategy": plan.strategy.name(),
            "range": [lo, hi],
            "stall_ranges": ranges,
            "historical_slow_ranges": h.slow_ranges_bytes,
        }))?;
    } else {
        out.text(&format!(
            "netlab rpc --find-cliffs: TCP, {} strategy, argument sizes {lo}..{hi}, {PROBE_CALLS} calls per probe\n",
            plan.strategy.name()
        ))?;
        for placement in &plan.placements {
            let column = format!(
                "TCP {}",
                if matches!(placement, Placement::Loopback) {
                    "local"
                } else {
                    "remote"
                }
            );
            if !ranges.iter().any(|r| r.placement == column) {
                out.text(&format!("{column}: no stalls (every probe's median call within 3x, or 1 ms, of the model)\n"))?;
            }
        }
        for r in &ranges {
            out.text(&format!(
                "{}: calls stall from {} to {} bytes{} ({:.1} ms per call)\n",
                r.placement,
                r.from,
                r.to,
                if r.open_ended { " and beyond" } else { "" },
                r.ms_per_call
            ))?;
        }
        out.text(&format!(
            "1989 (Sun-3/60, SunOS 4.0.1): TCP slow from {:?} bytes\n",
            h.slow_ranges_bytes
        ))?;
    }
    Ok(())
}
