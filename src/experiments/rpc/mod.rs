//! The 1989 Sun RPC experiment (source 001): time per call against
//! argument size over TCP and UDP, its cliffs found, bisected to the byte
//! and explained by reruns. Its whole path, in the order a run takes it:
//!
//! | file | what |
//! |---|---|
//! | `options.rs` | `netlab rpc` (and `rpc serve`, `rpc ping`): options into an [`plan::RpcPlan`], run, print |
//! | `plan.rs` | the plan, its grid and searches (diagnosis reruns, `--find-cliffs`) over the runner |
//! | `cell.rs` | one cell: server and client endpoints through the launcher, their reports into a record |
//! | `role.rs` | the endpoint's side: netlab's ONC RPC server and the timed client calls |
//! | `record.rs` | the record's data: parameters and results |
//! | `analysis.rs` | pure functions over the records: cliffs, findings, physical bounds |
//! | `report.rs` | the 1989 table, the figures, the report page's section |
//!
//! The ONC RPC protocol itself (XDR, record marking, the server and client)
//! is the core's (`wire::rpc`, `endpoint::rpc`), as is the 1989 stack model
//! (`model::sunos4`).

pub mod analysis;
pub mod cell;
pub mod lab;
pub mod options;
pub mod plan;
pub mod record;
pub mod report;
pub mod role;

/// The rpc experiment, as the registry lists it.
pub struct Rpc;

impl crate::options::experiment::Experiment for Rpc {
    const NAME: &'static str = "rpc";
    type Args = options::RpcArgs;
    const ROLE: Option<crate::options::experiment::RolePart> =
        Some(crate::options::experiment::RolePart::of::<role::RpcRole>());
    const AGENT: Option<crate::endpoint::agent::policy::Serve> =
        Some(crate::endpoint::agent::policy::Serve::ByDefault);
    const LAB: Option<crate::controller::lab::LabEntry> = Some(lab::RpcLab::boxed);

    fn run(args: Self::Args, out: &mut crate::options::Output) -> anyhow::Result<()> {
        options::run(args, out)
    }

    fn json(args: &Self::Args) -> bool {
        args.json()
    }
}

impl crate::options::experiment::Recorded for Rpc {
    type Data = record::RpcData;
    type Section = report::RpcSection;
}
