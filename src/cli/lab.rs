//! `netlab lab`: the main job. Runs every landed experiment in its quick
//! profile (or `--full`, or `--smoke`), prints the tables, and writes them with the
//! records under `netlab-out/<timestamp>/`.

use crate::controller::lab::Section;
use crate::controller::remote;
use crate::controller::runner::Runner;
use crate::lab::{self, LabPlan};
use crate::measure::host::HostFacts;
use crate::options::Output;
use crate::record::RecordWriter;
use crate::report;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct LabArgs {
    /// The source documents' full repetition counts and longer runs.
    #[arg(long, conflicts_with = "smoke")]
    pub full: bool,
    /// Every cell of the quick profile with fewer repetitions and shorter
    /// windows, about a minute and a half on 2 cores: checks that this host
    /// runs everything; its figures are rough.
    #[arg(long)]
    pub smoke: bool,
    /// Directory under which a timestamped results directory is created.
    #[arg(long, default_value = "netlab-out", value_name = "DIR")]
    pub out_dir: PathBuf,
    /// Stop at the first failed cell (it is recorded); by default a failed
    /// cell is recorded with its reason and the lab goes on.
    #[arg(long)]
    pub fail_fast: bool,
    /// Profile every cell's CPU by layer (see `netlab stream --profile`).
    #[arg(long)]
    pub profile: bool,
    /// A calibration of this host's CPU per small TCP packet stored by
    /// `netlab calibrate --out FILE`: the 1989-class host of the login
    /// limits is then the same host in every lab run (by default it is
    /// measured at the start of the limits).
    #[arg(long, value_name = "FILE")]
    pub calibration: Option<PathBuf>,
    /// Run the lab across a real path: --to AGENT (and --from AGENT, this
    /// host by default).
    #[command(flatten)]
    pub remote: crate::options::placement::RemoteArgs,
}

pub fn run(args: LabArgs, out: &mut Output) -> anyhow::Result<()> {
    let mut plan = if args.full {
        LabPlan::full()
    } else if args.smoke {
        LabPlan::smoke()
    } else {
        LabPlan::quick()
    };
    plan.calibration = args.calibration.clone();
    let mut printed = String::new();
    // Across a real path: the agents are reached (and authenticated) now.
    if let Some((from, to)) = args.remote.ends("lab")? {
        plan = plan.across_agents(&from, &to);
        printed =
            crate::lab::report::across_header(&from, &to, &HostFacts::gather(), &remote::facts());
        out.text(&printed)?;
    }
    let dir = crate::lab::report::results_dir(&args.out_dir)?;
    let mut writer = RecordWriter::append(&dir.join("results.jsonl"))
        .with_context(|| format!("cannot create the records file in {}", dir.display()))?;
    let profiling = args
        .profile
        .then(crate::controller::profile::Profiling::check)
        .transpose()?;
    let mut runner = Runner::new(HostFacts::gather(), Some(&mut writer))
        .fail_fast(args.fail_fast)
        .profiling(profiling);
    let mut skipped_any = false;
    lab::run(&plan, &mut runner, &mut |section| {
        skipped_any |= matches!(section, Section::Skipped(_));
        let text = section.text() + "\n";
        out.text(&text)?;
        printed.push_str(&text);
        Ok(())
    })?;
    drop(runner);
    // What was skipped, by capability: the doctor's short form.
    if skipped_any && let Some(line) = report::doctor::short(&crate::controller::doctor::examine())
    {
        out.text(&line)?;
        printed.push_str(&line);
    }
    let finished = crate::lab::report::finish(&dir, &printed)?;
    for e in &finished.figure_errors {
        eprintln!("figure not drawn: {e}");
    }
    out.text(&finished.text)?;
    Ok(())
}
