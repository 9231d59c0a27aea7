//! The one way an experiment starts its endpoint processes.
//!
//! A cell has two ends: [`End::From`] sends, calls or types; [`End::To`]
//! receives or serves (and runs cksum). The launcher knows where each end
//! lives for the cell's placement and starts `netlab endpoint` there, driven
//! over the framed control channel ([`EndpointProcess`]):
//!
//! | placement | `From` | `To` | the address `To` listens on |
//! |---|---|---|---|
//! | loopback | this host | this host | 127.0.0.1 |
//! | netns | namespace A | namespace B | B's address on the link |
//!
//! A remote agent will be a third placement: the same endpoint, the same
//! messages, over an authenticated TCP connection instead of a pipe.
//! Helpers that belong to the testbed (the wire emulator, in the root
//! namespace; the capture, on side A) start through [`Launcher::helper`].

use super::bed::Bed;
use super::endpoints::{ControlError, EndpointProcess};
use crate::testbed::netns::{ADDR_B, Testbed};
use std::fs::File;
use std::net::Ipv4Addr;
use std::path::PathBuf;

/// An end of a cell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum End {
    /// The sending, calling or typing end (side A of a testbed).
    From,
    /// The receiving or serving end (side B of a testbed).
    To,
}

impl End {
    fn side(self) -> usize {
        match self {
            End::From => 0,
            End::To => 1,
        }
    }
}

/// Starts endpoint processes where a cell's placement puts its ends.
#[derive(Debug, Clone)]
pub struct Launcher {
    place: Place,
}

#[derive(Debug, Clone)]
enum Place {
    Loopback,
    Netns {
        namespaces: [PathBuf; 2],
        interfaces: [String; 2],
    },
}

impl Launcher {
    /// Both ends on this host, over 127.0.0.1.
    pub fn loopback() -> Launcher {
        Launcher {
            place: Place::Loopback,
        }
    }

    /// The ends of a netns bed (or loopback when there is none).
    pub fn for_bed(bed: Option<&Bed>) -> Launcher {
        match bed {
            None => Launcher::loopback(),
            Some(bed) => Launcher::for_testbed(&bed.testbed),
        }
    }

    pub fn for_testbed(testbed: &Testbed) -> Launcher {
        Launcher {
            place: Place::Netns {
                namespaces: [testbed.netns_path(0), testbed.netns_path(1)],
                interfaces: [0, 1].map(|side| testbed.interface(side).to_string()),
            },
        }
    }

    /// Starts `netlab endpoint` for `role` at `end`.
    pub fn spawn(&self, role: &'static str, end: End) -> Result<EndpointProcess, ControlError> {
        EndpointProcess::spawn_in(role, self.netns(end).as_deref(), None)
    }

    /// As [`Launcher::spawn`], with the endpoint's diagnostics (stderr) in
    /// `log` rather than on the controller's terminal (a login server's
    /// account of each session's end).
    pub fn spawn_logged(
        &self,
        role: &'static str,
        end: End,
        log: File,
    ) -> Result<EndpointProcess, ControlError> {
        EndpointProcess::spawn_in(role, self.netns(end).as_deref(), Some(log))
    }

    /// A testbed helper in the controller's own namespace (the emulator
    /// enters the namespaces it needs itself).
    pub fn helper(role: &'static str) -> Result<EndpointProcess, ControlError> {
        EndpointProcess::spawn_in(role, None, None)
    }

    /// The address `end` listens on, as the other end reaches it.
    pub fn address(&self, end: End) -> Ipv4Addr {
        match (&self.place, end) {
            (Place::Loopback, _) => Ipv4Addr::LOCALHOST,
            (Place::Netns { .. }, End::To) => ADDR_B,
            (Place::Netns { .. }, End::From) => crate::testbed::netns::ADDR_A,
        }
    }

    /// The namespace of `end` (`None`: the controller's own), for work the
    /// controller does there on a thread of its own.
    pub fn netns(&self, end: End) -> Option<PathBuf> {
        match &self.place {
            Place::Loopback => None,
            Place::Netns { namespaces, .. } => Some(namespaces[end.side()].clone()),
        }
    }

    /// The interface `end` reaches the other end through (`lo` on loopback).
    pub fn interface(&self, end: End) -> Option<String> {
        match &self.place {
            Place::Loopback => None,
            Place::Netns { interfaces, .. } => Some(interfaces[end.side()].clone()),
        }
    }
}
