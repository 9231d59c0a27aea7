//! A variant of stream (source 003): the same transfer over a grid of record sizes, the knee, the cost model by terms (per call, segment, wake-up, byte) with its checks, the dips.

pub mod cell;
pub mod dips;
pub mod figures;
pub mod lab;
pub mod options;
pub mod report;
