//! The experiments, each in its own folder over the shared core: its plan
//! and cell, its endpoint role, its record data, its analysis and its
//! report section. This file is the registry: the one place that names
//! every experiment.

pub mod ablate;
pub mod cksum;
pub mod login;
pub mod output;
pub mod rpc;
pub mod stream;
pub mod sweep;
