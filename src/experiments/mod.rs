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

use crate::endpoint::role::{RoleEntry, RoleTable};

/// Every role an endpoint process can play: the testbed's helpers, then
/// each experiment's.
pub static ROLES: RoleTable = &[
    RoleEntry::of::<crate::endpoint::testbed::EmulatorRole>(),
    RoleEntry::of::<crate::endpoint::testbed::CaptureRole>(),
    RoleEntry::of::<stream::role::StreamRole>(),
    RoleEntry::of::<rpc::role::RpcRole>(),
    RoleEntry::of::<cksum::role::CksumRole>(),
    RoleEntry::of::<login::role::LoginRole>(),
];
