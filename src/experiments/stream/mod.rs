//! Bulk transfer between two endpoint processes (ttcp-style, sources 003 and 004): send and receive strategies, `-P`, `--reverse`, `--bidir`, `--udp`; against a stock iperf3 server (`--to iperf3:HOST`).

pub mod analysis;
pub mod bounds;
pub mod cell;
pub mod iperf3;
pub mod iperf3_native;
pub mod lab;
pub mod options;
pub mod record;
pub mod report;
pub mod role;
