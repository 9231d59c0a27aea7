//! Pure functions over measurements: no I/O, no clocks, unit-tested on
//! synthetic inputs with known answers.

pub mod capture;
pub mod cliff;
pub mod costmodel;
pub mod costterms;
pub mod diagnosis;
pub mod factorial;
pub mod knee;
pub mod layers;
pub mod limits;
pub mod responsiveness;
pub mod split;
pub mod stats;
