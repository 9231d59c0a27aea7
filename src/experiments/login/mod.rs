//! The 1989 remote-login load (source 000): N users typing through each relay design and real server, vmstat-style rows, echo latency, each design's limit.

pub mod analysis;
pub mod cell;
pub mod figures;
pub mod lab;
pub mod load;
pub mod options;
pub mod record;
pub mod report;
pub mod role;
pub mod servers;
