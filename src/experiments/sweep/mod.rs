//! A variant of stream (source 003): the same transfer over a grid of record sizes, the knee, the cost model by terms (per call, segment, wake-up, byte) with its checks, the dips.

pub mod cell;
pub mod dips;
pub mod figures;
pub mod lab;
pub mod options;
pub mod report;

/// The sweep experiment, as the registry lists it.
pub struct Sweep;

impl crate::options::experiment::Experiment for Sweep {
    const NAME: &'static str = "sweep";
    type Args = options::SweepArgs;
    const AGENT: Option<crate::endpoint::agent::policy::Serve> =
        Some(crate::endpoint::agent::policy::Serve::As(&["stream"]));
    const LAB: Option<crate::controller::lab::LabEntry> = Some(lab::SweepLab::boxed);

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}
