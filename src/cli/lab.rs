//! `netlab lab`: the main job. Runs every landed experiment in its quick
//! profile (or `--full`, or `--smoke`), prints the tables, and writes them with the
//! records under `netlab-out/<timestamp>/`.

use crate::controller::lab::{Profile, Section};
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
    /// Finish a lab that was stopped part-way: DIR is its results
    /// directory. The cells it measured are not measured again, the rest
    /// are, and the tables and report are written from all of them. It
    /// runs in the profile it was started in.
    #[arg(long, value_name = "DIR", conflicts_with = "out_dir")]
    pub resume: Option<PathBuf>,
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

/// The file in a lab's results directory naming its profile, so that
/// `--resume` runs the same plan.
const PROFILE_FILE: &str = "profile";

/// The results directory (a new one, or `--resume`'s) and the profile to
/// run in it: a resumed lab's own, and a flag asking for another refused.
fn directory_and_profile(args: &LabArgs) -> anyhow::Result<(PathBuf, Profile)> {
    let asked = if args.full {
        Profile::Full
    } else if args.smoke {
        Profile::Smoke
    } else {
        Profile::Quick
    };
    let Some(dir) = &args.resume else {
        let dir = crate::lab::report::results_dir(&args.out_dir)?;
        std::fs::write(dir.join(PROFILE_FILE), format!("{}\n", asked.name()))
            .with_context(|| format!("cannot write in {}", dir.display()))?;
        return Ok((dir, asked));
    };
    crate::controller::resume::records_file(dir)?;
    let stored = std::fs::read_to_string(dir.join(PROFILE_FILE)).ok();
    let started = stored.as_deref().map(str::trim).and_then(Profile::named);
    match started {
        Some(started) if (args.full || args.smoke) && started != asked => anyhow::bail!(
            "--resume {}: that lab ran in the {} profile, not {}: leave out --full and --smoke to finish it",
            dir.display(),
            started.name(),
            asked.name()
        ),
        Some(started) => Ok((dir.clone(), started)),
        // A lab of a netlab that did not note its profile: the flags say.
        None => Ok((dir.clone(), asked)),
    }
}

pub fn run(args: LabArgs, out: &mut Output) -> anyhow::Result<()> {
    let (dir, profile) = directory_and_profile(&args)?;
    let mut plan = LabPlan::new(profile);
    plan.calibration = args.calibration.clone();
    let mut printed = String::new();
    // Across a real path: the agents are reached (and authenticated) now.
    if let Some((from, to)) = args.remote.ends("lab")? {
        plan = plan.across_agents(&from, &to);
        printed =
            crate::lab::report::across_header(&from, &to, &HostFacts::gather(), &remote::facts());
        out.text(&printed)?;
    }
    let resumed = args
        .resume
        .as_ref()
        .map(|_| crate::controller::resume::Resumed::read(&dir))
        .transpose()?;
    let mut writer = RecordWriter::append(&dir.join("results.jsonl"))
        .with_context(|| format!("cannot create the records file in {}", dir.display()))?;
    let profiling = args
        .profile
        .then(crate::controller::profile::Profiling::check)
        .transpose()?;
    let mut runner = Runner::new(HostFacts::gather(), Some(&mut writer))
        .fail_fast(args.fail_fast)
        .profiling(profiling)
        .resume(resumed);
    let mut skipped_any = false;
    let ran = lab::run(&plan, &mut runner, &mut |section| {
        skipped_any |= matches!(section, Section::Skipped(_));
        let text = section.text() + "\n";
        out.text(&text)?;
        printed.push_str(&text);
        Ok(())
    });
    if runner.reused() > 0 {
        eprintln!(
            "resumed: {} cell(s) measured before were not measured again",
            runner.reused()
        );
    }
    drop(runner);
    ran.map_err(|e| {
        let e = anyhow::Error::from(e);
        if crate::controller::processes::interrupted() {
            e.context(format!(
                "the lab stopped; netlab lab --resume {} finishes it",
                dir.display()
            ))
        } else {
            e
        }
    })?;
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

#[cfg(test)]
mod tests {
    use super::*;
    use clap::Parser;

    fn args(line: &[&str]) -> LabArgs {
        match crate::cli::Cli::try_parse_from([&["netlab", "lab"], line].concat()) {
            Ok(crate::cli::Cli {
                command: crate::cli::Commands::Lab(args),
            }) => args,
            other => panic!("{line:?}: {other:?}"),
        }
    }

    #[test]
    fn a_resumed_lab_runs_in_the_profile_it_started_in() {
        let out = tempfile::tempdir().unwrap();
        let out_dir = out.path().to_str().unwrap();
        let (dir, profile) =
            directory_and_profile(&args(&["--smoke", "--out-dir", out_dir])).unwrap();
        assert_eq!(profile, Profile::Smoke);
        std::fs::write(dir.join(crate::controller::resume::RESULTS), "").unwrap();
        let resume = dir.to_str().unwrap();
        let (again, profile) = directory_and_profile(&args(&["--resume", resume])).unwrap();
        assert_eq!((again, profile), (dir.clone(), Profile::Smoke));
        let refused = directory_and_profile(&args(&["--full", "--resume", resume])).unwrap_err();
        assert!(
            refused
                .to_string()
                .contains("ran in the smoke profile, not full"),
            "{refused}"
        );
        let missing = directory_and_profile(&args(&["--resume", &format!("{out_dir}/none")]));
        assert!(
            missing
                .unwrap_err()
                .to_string()
                .contains("nothing to resume")
        );
        assert!(
            crate::cli::Cli::try_parse_from([
                "netlab",
                "lab",
                "--resume",
                resume,
                "--out-dir",
                out_dir
            ])
            .is_err()
        );
    }
}
