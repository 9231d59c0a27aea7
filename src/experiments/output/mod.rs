//! A variant of login (source 002): text typed out to a terminal through each relay design and real server, CPU and segments per KB.

pub mod analysis;
pub mod cell;
pub mod figures;
pub mod lab;
pub mod options;
pub mod record;
pub mod report;
