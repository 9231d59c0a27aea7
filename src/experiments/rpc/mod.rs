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
