//! One module per experiment: its configuration, its orchestration of
//! endpoint processes, and the records it produces.

pub mod bed;
pub mod cksum;
pub mod endpoints;
pub mod rpc;
pub mod stream;
pub mod sweep;
