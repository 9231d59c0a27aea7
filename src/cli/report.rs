//! `netlab report RESULTS.jsonl [-o DIR] [--csv]`: the report of a records
//! file (see [`crate::report::html`]), and with `--csv` one CSV file per
//! experiment ([`crate::export::csv`]).

use crate::options::Output;
use crate::report::html;
use anyhow::{Context, bail};
use clap::Args;
use std::path::PathBuf;

#[derive(Debug, Args)]
pub struct ReportArgs {
    /// A records file (JSON Lines) written by any netlab experiment or the lab.
    pub records: PathBuf,
    /// Where report.html and the figures go (default: beside the records).
    #[arg(short = 'o', long, value_name = "DIR")]
    pub out_dir: Option<PathBuf>,
    /// Also write one CSV per experiment (EXPERIMENT.csv) into the directory.
    #[arg(long)]
    pub csv: bool,
}

pub fn run(args: ReportArgs, out: &mut Output) -> anyhow::Result<()> {
    if crate::record::files::is_stdin(&args.records) {
        bail!(
            "netlab report reads a records file, not standard input: the report links to its raw records, so save them to a file first"
        );
    }
    // The reader's errors name the file already.
    let loaded = crate::experiments::page::load(&args.records)?;
    let dir = args.out_dir.unwrap_or_else(|| html::beside(&args.records));
    crate::record::files::make_out_dir(&dir, "--out-dir").map_err(anyhow::Error::msg)?;
    let link = html::records_link(&args.records, &dir);
    let written = html::write(&loaded, &crate::experiments::page::Report, &link, &dir)
        .with_context(|| format!("cannot write the report into {}", dir.display()))?;
    for skipped in &written.skipped {
        eprintln!("skipped {skipped}");
    }
    for e in &written.figure_errors {
        eprintln!("figure not drawn: {e}");
    }
    if args.csv {
        for path in
            crate::export::csv::write_csv(&loaded.records, crate::experiments::RECORDED, &dir)?
        {
            out.text(&format!("csv: {}\n", path.display()))?;
        }
    }
    out.text(&written.summary_text(""))?;
    if loaded.records.is_empty() {
        bail!(
            "{} holds no record this netlab can report ({} line(s) skipped); the report says so",
            args.records.display(),
            loaded.skipped.len()
        );
    }
    Ok(())
}
