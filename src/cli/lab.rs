//! `netlab lab`: the main job. Runs every landed experiment in its quick
//! profile (or `--full`), prints the tables, and writes them with the
//! records under `netlab-out/<timestamp>/`.

use super::Output;
use crate::experiment::lab::{self, LabPlan};
use crate::experiment::remote;
use crate::experiment::runner::Runner;
use crate::measure::host::HostFacts;
use crate::record::RecordWriter;
use crate::report;
use anyhow::Context;
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct LabArgs {
    /// The source documents' full repetition counts and longer runs.
    #[arg(long)]
    pub full: bool,
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
    /// Run the lab across a real path: --to AGENT (and --from AGENT, this
    /// host by default).
    #[command(flatten)]
    pub remote: super::placement::RemoteArgs,
}

pub fn run(args: LabArgs, out: &mut Output) -> anyhow::Result<()> {
    let mut plan = if args.full {
        LabPlan::full()
    } else {
        LabPlan::quick()
    };
    // Across a real path: the agents are reached (and authenticated) now.
    let mut header = String::new();
    if let Some((from, to)) = args.remote.ends("lab")? {
        let agents = remote::facts();
        let serves = |end: &str, experiment: &str| {
            end == "local"
                || agents
                    .iter()
                    .any(|a| a.agent == end && a.allow.iter().any(|e| e == experiment))
        };
        plan = plan.across(&from, &to, &serves);
        header = format!(
            "netlab lab across hosts: from {from} to {to}\n{}\n",
            report::tables::controller_line(&HostFacts::gather())
        );
        for agent in &agents {
            header.push_str(&report::tables::agent_line(agent));
            header.push('\n');
        }
        header.push('\n');
        out.text(&header)?;
    }
    let stamp = humantime::format_rfc3339_seconds(std::time::SystemTime::now())
        .to_string()
        .replace(':', "");
    let dir = args.out_dir.join(&stamp);
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let records_path = dir.join("results.jsonl");
    let mut writer = RecordWriter::append(&records_path)
        .with_context(|| format!("cannot create the records file in {}", dir.display()))?;
    let profiling = args
        .profile
        .then(crate::experiment::profile::Profiling::check)
        .transpose()?;
    let mut runner = Runner::new(HostFacts::gather(), Some(&mut writer))
        .fail_fast(args.fail_fast)
        .profiling(profiling);
    let mut printed = header;
    lab::run(&plan, &mut runner, &mut |section| -> anyhow::Result<()> {
        let text = report::lab::text(&section);
        out.text(&text)?;
        out.text("\n")?;
        printed.push_str(&text);
        printed.push('\n');
        Ok(())
    })?;
    drop(runner);

    let tables_path = dir.join("tables.txt");
    std::fs::write(&tables_path, &printed)
        .with_context(|| format!("cannot write {}", tables_path.display()))?;
    out.text(&format!(
        "lab results: {} (records: {})\n",
        dir.display(),
        records_path.display()
    ))?;
    // The report, from the records alone, beside them.
    let loaded = report::html::load(&records_path)
        .with_context(|| format!("cannot read back {}", records_path.display()))?;
    // With --profile: where the CPU went over the whole lab, by layer.
    let profile = report::profile::text(&loaded.records);
    if !profile.is_empty() {
        out.text(&profile)?;
        std::fs::OpenOptions::new()
            .append(true)
            .open(&tables_path)
            .and_then(|mut f| std::io::Write::write_all(&mut f, profile.as_bytes()))
            .with_context(|| format!("cannot write {}", tables_path.display()))?;
    }
    let written = report::html::write(&loaded, "results.jsonl", &dir)
        .with_context(|| format!("cannot write the report into {}", dir.display()))?;
    for e in &written.figure_errors {
        eprintln!("figure not drawn: {e}");
    }
    out.text(&format!(
        "report: {} ({} figures)\n",
        written.html.display(),
        written.figures.len()
    ))?;
    out.text("most notable:\n")?;
    for (i, finding) in written.notable.iter().enumerate() {
        out.text(&format!("{}. {finding}\n", i + 1))?;
    }
    Ok(())
}
