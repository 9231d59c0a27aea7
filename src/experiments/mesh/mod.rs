//! `netlab mesh`: every pair of N hosts' agents measured, in rounds of
//! disjoint pairs so that no two tests share a host (#33): the inventory
//! (`--agents`: a list, a file with labels, or a DNS name), the schedule
//! (printed by `netlab mesh plan` without sending traffic), the measuring
//! run with its run directory (manifest, `results.jsonl`, resume), and the
//! matrices a figure each, what they show in words and `report.html`.

pub mod aggregate;
pub mod analysis;
pub mod continuous;
pub mod inventory;
pub mod lab;
pub mod manifests;
pub mod matrix;
pub mod metrics;
pub mod options;
pub mod peer_lists;
pub mod record;
pub mod report;
pub mod rules;
pub mod run;
pub mod section;
pub mod watch;

/// The mesh experiment, as the registry lists it.
pub struct Mesh;

impl crate::options::experiment::Experiment for Mesh {
    const NAME: &'static str = "mesh";
    type Args = options::MeshArgs;
    const AGENT: Option<crate::endpoint::agent::policy::Serve> =
        Some(crate::endpoint::agent::policy::Serve::As(&[
            "stream", "rpc", "rpm",
        ]));

    const LAB: Option<crate::controller::lab::LabEntry> = Some(lab::MeshLab::boxed);

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}

impl crate::options::experiment::Recorded for Mesh {
    type Data = record::PairTest;
    type Section = section::MeshSection;
}
