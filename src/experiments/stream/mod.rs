//! Bulk transfer between two endpoint processes (ttcp-style, sources 003 and 004): send and receive strategies, `-P`, `--reverse`, `--bidir`, `--udp`; against a stock iperf3 server (`--to iperf3:HOST`).

pub mod analysis;
pub mod bounds;
pub mod cell;
pub mod encrypted;
pub mod iperf3;
pub mod iperf3_native;
pub mod lab;
pub mod model;
pub mod multipath;
pub mod options;
pub mod quic;
pub mod record;
pub mod report;
pub mod role;

/// The stream experiment, as the registry lists it.
pub struct Stream;

impl crate::options::experiment::Experiment for Stream {
    const NAME: &'static str = "stream";
    type Args = options::StreamArgs;
    const ROLE: Option<crate::options::experiment::RolePart> =
        Some(crate::options::experiment::RolePart::of::<role::StreamRole>());
    const AGENT: Option<crate::endpoint::agent::policy::Serve> =
        Some(crate::endpoint::agent::policy::Serve::ByDefault);
    const LAB: Option<crate::controller::lab::LabEntry> = Some(lab::StreamLab::boxed);

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}

// Its `Recorded` impl is beside its report section, which shows its
// variants' runs too (`stream_section.rs`): stream names neither variant.
