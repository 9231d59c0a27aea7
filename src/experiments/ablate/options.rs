//! `netlab ablate stream --factor NAME=V1,V2 [...]`: a full factorial of a
//! stream run's features, its effects and interactions.

use crate::endpoint::bulk::types::Amount;
use crate::experiments::ablate::cell::{
    AblatePlan, DesignFactor, Preset, analyse_records, fresh_seed,
};
use crate::experiments::stream::cell::StreamMeasure;
use crate::experiments::stream::options::StreamOptions;
use crate::options::Output;
use crate::options::run::RunOutcome;
use crate::units::parse_size;
use anyhow::Context;
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct AblateArgs {
    #[command(subcommand)]
    pub target: AblateTarget,
}

#[derive(Debug, Subcommand)]
pub enum AblateTarget {
    /// Factors of a bulk transfer.
    Stream(AblateStreamArgs),
    /// Responsiveness's fixes on the same path: notsent-lowat, sndbuf,
    /// rcvbuf, cc, and on a netns link the bottleneck's discipline.
    Rpm(crate::experiments::ablate::rpm::AblateRpmArgs),
}

impl AblateArgs {
    pub fn json(&self) -> bool {
        match &self.target {
            AblateTarget::Stream(a) => a.common.run.json,
            AblateTarget::Rpm(a) => a.rpm.run.json,
        }
    }
}

#[derive(Debug, Args)]
pub struct AblateStreamArgs {
    /// A factor and its levels, the first the baseline (repeatable):
    /// record, send, recv, nodelay, sndbuf, rcvbuf, cc; on --placement
    /// netns also mtu and link (veth or emulator).
    #[arg(
        long = "factor",
        value_name = "NAME=V1,V2",
        required_unless_present = "preset",
        conflicts_with = "preset"
    )]
    pub factors: Vec<String>,
    /// A source's what-if instead of --factor (on two namespaces; needs
    /// root): joy1981 (Bill Joy's ladder, each step added and alone) or
    /// vj1988 (1 KB protocol calls against whole writes, leave-one-out
    /// against the factorial).
    #[arg(long, value_enum)]
    pub preset: Option<Preset>,
    /// Runs of each combination, each in its own randomised block.
    #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(1..=100))]
    pub reps: u32,
    /// Refuse a design whose runs would take longer than this.
    #[arg(long, default_value = "10m", value_parser = humantime::parse_duration, value_name = "TIME")]
    pub budget: std::time::Duration,
    /// Seed of the random order (default: a fresh one, recorded).
    #[arg(long)]
    pub seed: Option<u64>,
    /// Bytes per run instead of a timed run.
    #[arg(long, value_parser = parse_size, conflicts_with = "duration", value_name = "SIZE")]
    pub bytes: Option<u64>,
    /// Sending time per run.
    #[arg(long, default_value = "1s", value_parser = crate::options::seconds_arg, value_name = "TIME")]
    pub duration: f64,
    /// Record size when it is not a factor.
    #[arg(long, default_value = "128K", value_parser = parse_size, value_name = "SIZE")]
    pub record: u64,
    #[command(flatten)]
    pub common: StreamOptions,
}

pub fn run(args: AblateArgs, out: &mut Output) -> anyhow::Result<()> {
    let args = match args.target {
        AblateTarget::Stream(args) => args,
        AblateTarget::Rpm(args) => return crate::experiments::ablate::rpm::run(args, out),
    };
    let amount = match args.bytes {
        Some(bytes) => Amount::Bytes(bytes),
        None => Amount::Seconds(args.duration),
    };
    let (base, texts): (_, Vec<String>) = match args.preset {
        Some(preset) => (
            preset.base()?,
            preset.factors().iter().map(|f| f.to_string()).collect(),
        ),
        None => (
            args.common.config(amount, args.record)?,
            args.factors.clone(),
        ),
    };
    let factors = texts
        .iter()
        .map(|f| DesignFactor::parse(f))
        .collect::<Result<Vec<_>, _>>()?;
    // A resumed design runs in its own order, under its own id.
    let earlier = args
        .common
        .run
        .earlier::<crate::experiments::stream::record::DesignContext>("stream", "/params/design")?
        .filter(|e| args.seed.is_none_or(|seed| seed == e.seed));
    let seed = match (args.seed, &earlier) {
        (Some(seed), _) => seed,
        (None, Some(earlier)) => earlier.seed,
        (None, None) => fresh_seed().context("a random seed")?,
    };
    let plan = AblatePlan::new(base, factors, args.reps, seed)?;
    plan.check_budget(args.budget)?;
    let cells = match earlier {
        Some(earlier) => plan.cells_in(earlier.id),
        None => plan.cells(),
    };
    args.common.run.measure(out, |runner| {
        let records = runner.grid(&mut StreamMeasure::default(), &cells)?;
        let design = plan.design();
        let analysis = analyse_records(&design, &records, 0.95);
        let doc = crate::experiments::ablate::report::doc(&plan, args.preset, &analysis, &records);
        let text =
            crate::experiments::ablate::report::full_text(&plan, args.preset, &analysis, &records);
        Ok(RunOutcome::grid(records, doc, text))
    })
}
