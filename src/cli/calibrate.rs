//! `netlab calibrate [--out FILE] [--json]`: this host's CPU per small TCP
//! packet, measured long (400 batches, the two ends on two CPUs) with the 95%
//! interval of its median, and the budgets of the 1989-class hosts it
//! gives; with `--out`, stored for `--calibration FILE` so that a series
//! of runs emulates one host.

use crate::measure::host::HostFacts;
use crate::options::Output;
use crate::testbed::calibration::{self, Calibrated};
use crate::testbed::cgroup::HostPreset;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct CalibrateArgs {
    /// Store the calibration here (JSON), for `--calibration FILE`.
    #[arg(long, value_name = "FILE")]
    pub out: Option<PathBuf>,
    /// Batches of 500 one-byte round trips: more for a narrower interval
    /// (about 40 ms each here).
    #[arg(long, default_value_t = 400, value_parser = clap::value_parser!(u32).range(6..=100_000))]
    pub batches: u32,
    /// Print one JSON document instead of the lines.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: CalibrateArgs, out: &mut Output) -> anyhow::Result<()> {
    let facts = HostFacts::gather();
    let stored =
        calibration::measure_to_store(&facts, crate::record::now_rfc3339(), args.batches as usize)?;
    if let Some(path) = &args.out {
        calibration::save(&stored, path).with_context(|| {
            format!(
                "the calibration was measured but not stored in {}",
                path.display()
            )
        })?;
    }
    let source = match &args.out {
        Some(path) => format!("stored in {}", path.display()),
        None => "not stored (--out FILE)".into(),
    };
    let calibrated = Calibrated::of(stored.cost.clone(), source);
    let presets: Vec<(HostPreset, f64, Option<[f64; 2]>)> = HostPreset::ALL
        .into_iter()
        .map(|p| {
            (
                p,
                p.percent(calibrated.cost.us_per_packet),
                calibrated
                    .interval_us
                    .map(|[lo, hi]| [p.percent(lo), p.percent(hi)]),
            )
        })
        .collect();
    if args.json {
        out.json(&serde_json::json!({
            "calibration": stored,
            "interval_us": calibrated.interval_us,
            "source": calibrated.source,
            "budgets": presets.iter().map(|(p, pct, iv)| serde_json::json!({
                "preset": p.name(),
                "percent": pct,
                "interval_pct": iv,
            })).collect::<Vec<_>>(),
        }))?;
        return Ok(());
    }
    let cost = &calibrated.cost;
    let mut text = format!(
        "this host's CPU per small TCP packet: {:.2} µs, the median of {} batches of 1-byte round trips between {} (95% interval {}; batches {:.2}-{:.2} µs)\n",
        cost.us_per_packet,
        cost.batches_us.len(),
        cost.cpus
            .map_or("unpinned threads".to_string(), |[a, b]| format!(
                "CPUs {a} and {b}"
            )),
        calibrated
            .interval_us
            .map_or("-".to_string(), |[lo, hi]| format!("{lo:.2}-{hi:.2} µs")),
        cost.min_us,
        cost.max_us,
    );
    for (preset, percent, interval) in &presets {
        text.push_str(&format!(
            "  --host-cpu {}: {percent:.2}% of one CPU{}\n",
            preset.name(),
            interval.map_or(String::new(), |[lo, hi]| format!(" ({lo:.2}-{hi:.2}%)"))
        ));
    }
    text.push_str(&format!("{}\n", calibrated.source));
    out.text(&text)?;
    Ok(())
}
