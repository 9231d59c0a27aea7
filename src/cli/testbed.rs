//! `netlab testbed clean`: removes what a killed run left behind.

use super::Output;
use crate::testbed::netns::{self, Runner};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct TestbedArgs {
    #[command(subcommand)]
    pub command: TestbedCommand,
}

#[derive(Debug, Subcommand)]
pub enum TestbedCommand {
    /// Remove netlab's namespaces whose controller is gone, and stray nlb* links.
    Clean {
        /// Also remove namespaces of netlab runs that are still going.
        #[arg(long)]
        all: bool,
        /// Print every ip command.
        #[arg(short, long)]
        verbose: bool,
    },
}

pub fn run(args: TestbedArgs, out: &mut Output) -> anyhow::Result<()> {
    let TestbedCommand::Clean { all, verbose } = args.command;
    let report = netns::clean(Runner { verbose }, all)?;
    if report.removed.is_empty() {
        out.text("nothing to clean\n")?;
    }
    for name in &report.removed {
        out.text(&format!("removed {name}\n"))?;
    }
    for name in &report.kept_live {
        out.text(&format!(
            "kept {name}: its netlab run is still going (--all removes it)\n"
        ))?;
    }
    Ok(())
}
