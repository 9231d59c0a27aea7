//! The Internet checksum (RFC 1071) and copy costs per KB (source 003): every variant, hot and cold, against the machine's limits and 1988's figures; beside them today's per-byte cost, the AEADs of TLS and QUIC sealing and opening, with `openssl speed` as their yardstick (#65).

pub mod analysis;
pub mod baseline;
pub mod bounds;
pub mod cell;
pub mod figures;
pub mod lab;
pub mod options;
pub mod record;
pub mod report;
pub mod role;

/// The cksum experiment, as the registry lists it.
pub struct Cksum;

impl crate::options::experiment::Experiment for Cksum {
    const NAME: &'static str = "cksum";
    type Args = options::CksumArgs;
    const ROLE: Option<crate::options::experiment::RolePart> =
        Some(crate::options::experiment::RolePart::of::<role::CksumRole>());
    const AGENT: Option<crate::endpoint::agent::policy::Serve> =
        Some(crate::endpoint::agent::policy::Serve::ByDefault);
    const LAB: Option<crate::controller::lab::LabEntry> = Some(lab::CksumLab::boxed);

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}

impl crate::options::experiment::Recorded for Cksum {
    type Data = record::CksumData;
    type Section = report::CksumSection;
}
