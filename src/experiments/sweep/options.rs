//! `netlab sweep stream`: throughput vs record size, with the knee and a
//! cost model by terms (per call, segment, wake-up and byte), with its checks.

use crate::endpoint::bulk::types::Amount;
use crate::experiments::stream::cell::StreamMeasure;
use crate::experiments::stream::options::StreamOptions;
use crate::experiments::sweep::cell::{self as sweep, Precision, SweepConfig};
use crate::options::Output;
use crate::options::run::RunOutcome;
use crate::units::{format_size, parse_size, parse_size_list};
use anyhow::{Context, bail};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct SweepArgs {
    #[command(subcommand)]
    pub target: SweepTarget,
}

impl SweepArgs {
    pub fn json(&self) -> bool {
        match &self.target {
            SweepTarget::Stream(a) => a.common.run.json,
        }
    }
}

#[derive(Debug, Subcommand)]
pub enum SweepTarget {
    /// Sweep the bulk transfer over record sizes.
    Stream(SweepStreamArgs),
}

#[derive(Debug, Args)]
pub struct SweepStreamArgs {
    /// Record sizes: a geometric range LO..HI (doubling; LO..HI*4 for another
    /// factor) or a list 64,1K,4000.
    #[arg(long, default_value = "64..1M", value_name = "SIZES")]
    pub record: String,
    /// Bytes per run instead of a timed run.
    #[arg(long, value_parser = parse_size, conflicts_with = "duration", value_name = "SIZE")]
    pub bytes: Option<u64>,
    /// Sending time per run.
    #[arg(long, default_value = "500ms", value_parser = crate::options::seconds_arg, value_name = "TIME")]
    pub duration: f64,
    /// Runs per size (min/median/max are reported).
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=1000))]
    pub repeat: u32,
    /// Fraction of the plateau that defines the knee.
    #[arg(long, default_value_t = crate::analysis::knee::DEFAULT_FRACTION)]
    pub knee_fraction: f64,
    /// After the --repeat runs, run the least precise size again until
    /// every size's median throughput has a 95% confidence interval within
    /// ±PERCENT of it (order statistics: at least 6 runs), within --budget.
    #[arg(long, value_name = "PERCENT", allow_negative_numbers = true)]
    pub ci: Option<f64>,
    /// The whole sweep's time with --ci.
    #[arg(long, default_value = "2m", value_parser = humantime::parse_duration, value_name = "TIME")]
    pub budget: std::time::Duration,
    /// Leave out the lever series (64 KB records with 2 KB and 8 KB
    /// segments, 4 KB reads, a 256 KB low-water mark: --repeat runs each),
    /// which let the cost model tell its terms apart.
    #[arg(long)]
    pub no_levers: bool,
    /// The most runs of one size with --ci.
    #[arg(long, default_value_t = 20, value_parser = clap::value_parser!(u32).range(6..=1000))]
    pub max_runs: u32,
    #[command(flatten)]
    pub common: StreamOptions,
}

impl SweepStreamArgs {
    /// The validated sweep.
    pub fn config(&self) -> anyhow::Result<SweepConfig> {
        let records = parse_size_list(&self.record).context("--record")?;
        if !(self.knee_fraction > 0.0 && self.knee_fraction < 1.0) {
            bail!(
                "--knee-fraction must be between 0 and 1, not {}",
                self.knee_fraction
            );
        }
        let amount = match self.bytes {
            Some(bytes) => Amount::Bytes(bytes),
            None => Amount::Seconds(self.duration),
        };
        for &record in &records {
            self.common
                .config(amount, record)
                .with_context(|| format!("record size {}", format_size(record)))?;
        }
        Ok(SweepConfig {
            base: self.common.config(amount, records[0])?,
            records,
            repeat: self.repeat,
            knee_fraction: self.knee_fraction,
            levers: !self.no_levers,
        })
    }
}

pub fn run(args: SweepArgs, out: &mut Output) -> anyhow::Result<()> {
    let SweepTarget::Stream(args) = args.target;
    let config = args.config()?;
    let precision = args
        .ci
        .map(|percent| Precision::checked(percent, args.budget, args.max_runs as usize, &config))
        .transpose()?;
    args.common.run.measure(out, |runner| {
        let sweep::Swept {
            records,
            summary,
            precision: refined,
        } = sweep::run(
            runner,
            &mut StreamMeasure::default(),
            &config,
            precision.as_ref(),
        )?;
        let title = format!(
            "record sizes {}; each point {}",
            args.record,
            config.base.describe()
        );
        let doc = crate::experiments::sweep::report::sweep_doc(
            &title,
            &summary,
            refined.as_ref(),
            &records,
        );
        let mut text = crate::experiments::sweep::report::sweep_table(&title, &summary, &records);
        if let Some(refined) = &refined {
            text.push_str(&crate::experiments::sweep::report::precision_text(refined));
        }
        Ok(RunOutcome::grid(records, doc, text))
    })
}
