//! A variant of stream (sources 003 and 004): what-ifs as a full factorial over socket and link features; Joy's 1981 ladder and Van Jacobson's leave-one-out as presets. And of rpm: responsiveness's fixes (NOTSENT_LOWAT, buffers, congestion control, the bottleneck's discipline) on the same path (`rpm.rs`).

pub mod cell;
pub mod options;
pub mod report;
pub mod rpm;
