//! `netlab doctor [--json]`: what this host can and cannot do for netlab.

use crate::controller::doctor;
use crate::options::Output;
use crate::report;
use clap::Args;

#[derive(Debug, Args)]
pub struct DoctorArgs {
    /// Print one JSON document instead of the lines.
    #[arg(long)]
    pub json: bool,
}

pub fn run(args: DoctorArgs, out: &mut Output) -> anyhow::Result<()> {
    let found = doctor::examine();
    if args.json {
        out.json(&report::doctor::doc(&found))?;
    } else {
        out.text(&report::doctor::text(&found))?;
    }
    Ok(())
}
