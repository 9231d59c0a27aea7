//! `netlab testbed clean`: removes what a killed run left behind
//! (namespaces, links, and the test users of sshd cells).

use crate::controller::{helpers::Bed, processes::wait_for_interrupt};
use crate::options::Output;
use crate::options::placement::PlacementArgs;
use crate::record::testbed::Placement;
use crate::report;
use crate::testbed::netns::{self, Runner};
use clap::{Args, Subcommand};

#[derive(Debug, Args)]
pub struct TestbedArgs {
    #[command(subcommand)]
    pub command: TestbedCommand,
}

#[derive(Debug, Subcommand)]
pub enum TestbedCommand {
    /// Build two namespaces and a link (as --placement netns would) and keep
    /// them until Ctrl-C, for running other tools across the link with
    /// `ip netns exec`.
    Up {
        #[command(flatten)]
        place: Box<PlacementArgs>,
    },
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
    let (all, verbose) = match args.command {
        TestbedCommand::Up { mut place } => {
            if place.remote.from.is_some() || place.remote.to.is_some() {
                anyhow::bail!(
                    "testbed up builds namespaces on this host: --from/--to do not apply"
                );
            }
            place.placement = crate::options::placement::PlacementKind::Netns;
            return up(&place.placement("stream")?, out);
        }
        TestbedCommand::Clean { all, verbose } => (all, verbose),
    };
    let report = netns::clean(Runner { verbose }, all)?;
    // Test users of sshd cells whose netlab process is gone.
    let mut users = crate::endpoint::login::programs::remove_stale_ssh_users();
    // Scratch directories of endpoints stopped before they could remove them.
    users.extend(
        crate::testbed::scratch::remove_stale()
            .into_iter()
            .map(|dir| format!("removed scratch directory {dir}")),
    );
    // CPU budgets (--host-cpu) of netlab processes that are gone.
    let budgets = crate::testbed::cgroup::remove_stale();
    out.text(&report::testbed::clean_text(&report, &users, &budgets))?;
    Ok(())
}

fn up(placement: &Placement, out: &mut Output) -> anyhow::Result<()> {
    let bed = Bed::create(placement)?.expect("a netns placement builds a testbed");
    out.text(&report::testbed::up_text(bed.testbed.facts()))?;
    wait_for_interrupt();
    let outcome = bed.finish()?;
    if let Some(e) = &outcome.emulator {
        out.text(&report::testbed::emulator_line(e))?;
    }
    out.text("down\n")?;
    Ok(())
}
