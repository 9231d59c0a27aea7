//! A variant of login (source 002): text typed out to a terminal through each relay design and real server, CPU and segments per KB.

pub mod analysis;
pub mod cell;
pub mod figures;
pub mod lab;
pub mod model;
pub mod options;
pub mod record;
pub mod report;

/// The output experiment, as the registry lists it.
pub struct Output;

impl crate::options::experiment::Experiment for Output {
    const NAME: &'static str = "output";
    type Args = options::OutputArgs;
    const AGENT: Option<crate::endpoint::agent::policy::Serve> =
        Some(crate::endpoint::agent::policy::Serve::OnAllow);
    const LAB: Option<crate::controller::lab::LabEntry> = Some(lab::OutputLab::boxed);

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}

impl crate::options::experiment::Recorded for Output {
    type Data = record::OutputData;
    type Section = report::OutputSection;
}
