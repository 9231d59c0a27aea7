//! `netlab mesh`: every pair of N hosts' agents measured, in rounds of
//! disjoint pairs so that no two tests share a host (#33): the inventory
//! (`--agents`: a list, a file with labels, or a DNS name), the schedule
//! (printed by `netlab mesh plan` without sending traffic), the measuring
//! run with its run directory (manifest, `results.jsonl`, resume), and the
//! matrices a figure each, what they show in words and `report.html`.

pub mod analysis;
pub mod continuous;
pub mod inventory;
pub mod manifests;
pub mod matrix;
pub mod metrics;
pub mod options;
pub mod record;
pub mod report;
pub mod rules;
pub mod run;
pub mod schedule;
