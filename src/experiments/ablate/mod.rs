//! A variant of stream (sources 003 and 004): what-ifs as a full factorial over socket and link features; Joy's 1981 ladder and Van Jacobson's leave-one-out as presets.

pub mod cell;
pub mod options;
pub mod report;
