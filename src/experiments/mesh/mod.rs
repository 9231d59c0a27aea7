//! `netlab mesh`: every pair of N hosts' agents measured, in rounds of
//! disjoint pairs so that no two tests share a host (#33). So far: the
//! inventory (`--agents`: a list, a file with labels, or a DNS name) and
//! the schedule, printed by `netlab mesh plan` without sending traffic.

pub mod inventory;
pub mod options;
pub mod schedule;
