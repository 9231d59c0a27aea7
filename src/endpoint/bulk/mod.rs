//! The bulk data paths (ttcp-style): a TCP sender that hands records to
//! the kernel with one of several strategies and a receiver that drains
//! and verifies them ([`sender`] over [`schedule`] and the write
//! strategies, [`receiver`] over the read strategies, [`zerocopy`] for
//! both, and what both share in [`socket`]), UDP's paced datagrams and the
//! receiver that counts their losses by site ([`udp`]), what each end is
//! asked ([`spec`]) and what both report ([`types`]). The stream
//! experiment runs them, and through its cells the sweep, the ablations
//! and the mesh.

pub mod quic;
mod read;
pub mod receiver;
pub mod schedule;
pub mod sender;
pub mod socket;
pub mod spec;
#[cfg(test)]
mod tests;
pub mod tls;
pub mod types;
pub mod udp;
mod write;
pub mod zerocopy;
