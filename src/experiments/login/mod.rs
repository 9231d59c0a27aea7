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
