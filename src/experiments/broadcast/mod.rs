//! The Ethernet etiquette of 1990 (source 003): the broadcast storm that
//! Suns with the 0's broadcast and forwarding on made of one datagram to
//! the all-1's broadcast, why today's Linux does not, and the four fixes
//! the document gives, each a factor of the run.
//!
//! - `model`: the 1990 host's rules, read from the BSD sources, no I/O;
//! - `wire`: the 1990 hosts at run time on TAP devices, one shared 10
//!   Mbit/s transmit clock, the run's bounds (its endpoint role);
//! - `cell`: one run: the segment built, the hosts started, the counts taken;
//! - `record`, `report`, `lab`, `options`: as every experiment's.

pub mod cell;
pub mod lab;
pub mod model;
pub mod options;
pub mod record;
pub mod report;
pub mod wire;

/// The broadcast experiment, as the registry lists it.
pub struct Broadcast;

impl crate::options::experiment::Experiment for Broadcast {
    const NAME: &'static str = "broadcast";
    type Args = options::BroadcastArgs;
    const ROLE: Option<crate::options::experiment::RolePart> =
        Some(crate::options::experiment::RolePart::of::<wire::ModelRole>());
    const LAB: Option<crate::controller::lab::LabEntry> = Some(lab::BroadcastLab::boxed);

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}

impl crate::options::experiment::Recorded for Broadcast {
    type Data = record::BroadcastData;
    type Section = report::BroadcastSection;
}
