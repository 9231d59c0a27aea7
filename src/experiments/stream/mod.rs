//! Bulk transfer between two endpoint processes (ttcp-style, sources 003 and 004): send and receive strategies, `-P`, `--reverse`, `--bidir`, `--udp`.

pub mod analysis;
pub mod cell;
pub mod lab;
pub mod options;
pub mod record;
pub mod report;
pub mod role;
pub mod spec;
pub mod transfer;
pub mod udp;
