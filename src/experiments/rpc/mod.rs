//! The 1989 Sun RPC experiment (source 001): time per call against argument size over TCP and UDP, its cliffs found, bisected to the byte and explained by reruns.

pub mod analysis;
pub mod bounds;
pub mod cell;
pub mod commands;
pub mod figures;
pub mod options;
pub mod record;
pub mod report;
pub mod role;
pub mod search;
