//! The 1989 remote-login load (source 000): N users typing through each relay design and real server, vmstat-style rows, echo latency, each design's limit, and the 1989 host as a model (`--stack sunos35`).

pub mod analysis;
pub mod bounds;
pub mod cell;
pub mod figures;
pub mod lab;
pub mod load;
pub mod model;
pub mod options;
pub mod record;
pub mod report;
pub mod role;
pub mod servers;

/// The login experiment, as the registry lists it.
pub struct Login;

impl crate::options::experiment::Experiment for Login {
    const NAME: &'static str = "login";
    type Args = options::LoginArgs;
    const ROLE: Option<crate::options::experiment::RolePart> =
        Some(crate::options::experiment::RolePart::of::<role::LoginRole>());
    const AGENT: Option<crate::endpoint::agent::policy::Serve> =
        Some(crate::endpoint::agent::policy::Serve::OnAllow);
    const LAB: Option<crate::controller::lab::LabEntry> = Some(lab::LoginLab::boxed);

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}

impl crate::options::experiment::Recorded for Login {
    type Data = record::LoginData;
    type Section = report::LoginSection;
}
