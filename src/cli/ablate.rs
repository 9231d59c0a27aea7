//! `netlab ablate stream --factor NAME=V1,V2 [...]`: a full factorial of a
//! stream run's features, its effects and interactions.

use super::Output;
use super::stream::StreamOptions;
use crate::endpoint::protocol::Amount;
use crate::experiment::ablate::{AblatePlan, DesignFactor, Preset};
use crate::experiment::stream::StreamMeasure;
use crate::report;
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
}

impl AblateArgs {
    pub fn json(&self) -> bool {
        let AblateTarget::Stream(a) = &self.target;
        a.common.run.json
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
    #[arg(long, default_value = "1s", value_parser = super::seconds_arg, value_name = "TIME")]
    pub duration: f64,
    /// Record size when it is not a factor.
    #[arg(long, default_value = "128K", value_parser = parse_size, value_name = "SIZE")]
    pub record: u64,
    #[command(flatten)]
    pub common: StreamOptions,
}

/// A run's set-up besides its transfer: endpoints (and a link) started and
/// stopped, measured here at 0.1-0.3 s on loopback and about 1 s on netns.
fn setup_s(netns: bool) -> f64 {
    if netns { 1.0 } else { 0.3 }
}

pub fn run(args: AblateArgs, out: &mut Output) -> anyhow::Result<()> {
    let AblateTarget::Stream(args) = args.target;
    let amount = match args.bytes {
        Some(bytes) => Amount::Bytes(bytes),
        None => Amount::Seconds(args.duration),
    };
    let (base, texts): (_, Vec<String>) = match args.preset {
        Some(preset) => {
            if !crate::testbed::netns::has_net_admin() {
                anyhow::bail!(
                    "--preset runs on two namespaces: it needs CAP_NET_ADMIN (run as root)"
                );
            }
            (
                preset.base(),
                preset.factors().iter().map(|f| f.to_string()).collect(),
            )
        }
        None => (
            args.common.config(amount, args.record)?,
            args.factors.clone(),
        ),
    };
    let factors = texts
        .iter()
        .map(|f| DesignFactor::parse(f))
        .collect::<Result<Vec<_>, _>>()?;
    let seed = match args.seed {
        Some(seed) => seed,
        None => {
            let mut bytes = [0u8; 8];
            getrandom::fill(&mut bytes).context("a random seed")?;
            u64::from_le_bytes(bytes)
        }
    };
    let netns = base.placement.name() == "netns";
    let plan = AblatePlan::new(base, factors, args.reps, seed)?;
    plan.check_budget(args.budget, setup_s(netns))?;
    let title = format!(
        "stream, {}; factors {}; seed {seed}",
        plan.base.describe(),
        plan.factors
            .iter()
            .map(|f| format!("{}={}", f.factor.name, f.factor.levels.join(",")))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let run = &args.common.run;
    let mut writer = run.writer()?;
    let records = run
        .runner(&mut writer)?
        .grid(&mut StreamMeasure, &plan.cells())?;
    let design = plan.design();
    let analysis = crate::experiment::ablate::analyse_records(&design, &records, 0.95);
    let doc = serde_json::json!({
        "experiment": "ablate",
        "target": "stream",
        "description": title,
        "seed": seed,
        "preset": args.preset.and_then(|p| clap::ValueEnum::to_possible_value(&p)).map(|v| v.get_name().to_string()),
        "analysis": analysis.as_ref().ok(),
        "analysis_error": analysis.as_ref().err().map(|e| e.to_string()),
        "records": records,
    });
    run.finish(out, &records, doc, || match &analysis {
        Ok(a) => {
            let mut text = report::ablate::text(&title, &design, &records, a);
            match args.preset {
                Some(Preset::Joy1981) => text.push_str(&report::ablate::joy_ladder(&design, a)),
                Some(Preset::Vj1988) => text.push_str(&report::ablate::leave_one_out(&design, a)),
                None => {}
            }
            text
        }
        Err(e) => format!(
            "netlab ablate: {title}\nno analysis: {e} (a failed run leaves its combination short; see the records)\n"
        ),
    })
}
