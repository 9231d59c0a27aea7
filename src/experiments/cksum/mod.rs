//! The Internet checksum (RFC 1071) and copy costs per KB (source 003): every variant, hot and cold, against the machine's limits and 1988's figures.

pub mod analysis;
pub mod bounds;
pub mod cell;
pub mod figures;
pub mod lab;
pub mod options;
pub mod record;
pub mod report;
pub mod role;
