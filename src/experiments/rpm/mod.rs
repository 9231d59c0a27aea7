//! Responsiveness under working conditions (draft-ietf-ippm-responsiveness-06):
//! RPM from foreign and self probes while load-generating connections
//! saturate the path, the idle and working round trips, the bufferbloat
//! grade, and where the delay built up (the emulator's queue, the
//! sockets' queues).

pub mod analysis;
pub mod cell;
pub mod figures;
pub mod lab;
pub mod options;
pub mod record;
pub mod report;
pub mod split;

/// The rpm experiment, as the registry lists it.
pub struct Rpm;

impl crate::options::experiment::Experiment for Rpm {
    const NAME: &'static str = "rpm";
    type Args = options::RpmArgs;
    const ROLE: Option<crate::options::experiment::RolePart> =
        Some(crate::options::experiment::RolePart::of::<
            crate::endpoint::rpm::role::RpmRole,
        >());
    const AGENT: Option<crate::endpoint::agent::policy::Serve> =
        Some(crate::endpoint::agent::policy::Serve::ByDefault);
    const LAB: Option<crate::controller::lab::LabEntry> = Some(lab::RpmLab::boxed);

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}

impl crate::options::experiment::Recorded for Rpm {
    type Data = record::RpmData;
    type Section = report::RpmSection;
}
