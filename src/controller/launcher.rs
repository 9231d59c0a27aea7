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
//! | remote | `--from` | `--to` | the `--to` host's address |
//!
//! On a remote placement an end is this host (`local`) or an agent
//! ([`super::remote`]): the same endpoint, the same messages, over an
//! authenticated connection instead of a pipe. Its listeners are guarded:
//! they serve only the other end's address, and only connections that
//! begin with the run's token.
//! Helpers that belong to the testbed (the wire emulator, in the root
//! namespace; the capture, on side A) start through [`Launcher::helper`].

use super::processes::{ControlError, EndpointProcess};
use super::remote::{self, AgentLink};
use crate::endpoint::agent::source_toward;
use crate::endpoint::protocol::{DataGuard, Token};
use crate::testbed::netns::{ADDR_B, Testbed};
use std::fs::File;
use std::net::{IpAddr, Ipv4Addr};
use std::path::PathBuf;
use std::sync::Arc;

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

#[derive(Clone)]
enum Place {
    Loopback,
    Netns {
        namespaces: [PathBuf; 2],
        interfaces: [String; 2],
    },
    Remote {
        /// Each end's agent (`None`: this host) and address.
        agents: [Option<Arc<AgentLink>>; 2],
        addresses: [IpAddr; 2],
        token: Token,
    },
}

impl std::fmt::Debug for Place {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Place::Loopback => f.write_str("Loopback"),
            Place::Netns { namespaces, .. } => write!(f, "Netns({namespaces:?})"),
            Place::Remote { addresses, .. } => write!(f, "Remote({addresses:?})"),
        }
    }
}

impl Launcher {
    /// Both ends on this host, over 127.0.0.1.
    pub fn loopback() -> Launcher {
        Launcher {
            place: Place::Loopback,
        }
    }

    /// `from` and `to` each `local` or an agent's name. The `to` end
    /// listens on the address the controller reaches its agent at; the
    /// `from` end's address is its host's route toward that.
    pub fn remote(from: &str, to: &str) -> Result<Launcher, ControlError> {
        let agent = |name: &str| -> Result<Option<Arc<AgentLink>>, ControlError> {
            (name != "local").then(|| remote::link(name)).transpose()
        };
        let (from_agent, to_agent) = (agent(from)?, agent(to)?);
        let to_address = match (&to_agent, &from_agent) {
            (Some(to), _) => to.addr().ip(),
            // The controller's own address as the `from` agent sees it.
            (None, Some(from)) => from.local_addr().ip(),
            (None, None) => IpAddr::V4(Ipv4Addr::LOCALHOST),
        };
        let from_address = match &from_agent {
            Some(from) => from.route(to_address)?,
            None => source_toward(to_address).map_err(|e| ControlError::Agent {
                agent: to.to_string(),
                message: format!("no route from this host to {to_address}: {e}"),
            })?,
        };
        let mut token = Token::default();
        getrandom::fill(&mut token).map_err(|e| ControlError::Agent {
            agent: to.to_string(),
            message: format!("cannot make a run token: {e}"),
        })?;
        Ok(Launcher {
            place: Place::Remote {
                agents: [from_agent, to_agent],
                addresses: [from_address, to_address],
                token,
            },
        })
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
        if let Place::Remote { agents, .. } = &self.place
            && let Some(agent) = &agents[end.side()]
        {
            return agent.spawn(role);
        }
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
        if let Place::Remote { agents, .. } = &self.place
            && let Some(agent) = &agents[end.side()]
        {
            return agent.spawn(role);
        }
        EndpointProcess::spawn_in(role, self.netns(end).as_deref(), Some(log))
    }

    /// A testbed helper in the controller's own namespace (the emulator
    /// enters the namespaces it needs itself).
    pub fn helper(role: &'static str) -> Result<EndpointProcess, ControlError> {
        EndpointProcess::spawn_in(role, None, None)
    }

    /// The address `end` listens on, as the other end reaches it.
    pub fn address(&self, end: End) -> IpAddr {
        match (&self.place, end) {
            (Place::Loopback, _) => Ipv4Addr::LOCALHOST.into(),
            (Place::Netns { .. }, End::To) => ADDR_B.into(),
            (Place::Netns { .. }, End::From) => crate::testbed::netns::ADDR_A.into(),
            (Place::Remote { addresses, .. }, end) => addresses[end.side()],
        }
    }

    /// The guard of `end`'s listeners: a remote run's listeners serve only
    /// the other end, with the run's token. `None` on this host's own
    /// loopback and namespaces.
    pub fn guard(&self, end: End) -> Option<DataGuard> {
        match &self.place {
            Place::Remote {
                addresses, token, ..
            } => Some(DataGuard {
                peer: addresses[1 - end.side()],
                token: *token,
                ports: None,
            }),
            _ => None,
        }
    }

    /// A guard for `end`'s listener even on this host, and the token its
    /// peer presents: for a listener that strangers on this host can load
    /// as well as other hosts (rpm's probe server on 127.0.0.1, whose
    /// figures a stranger's downloads would change). Through agents, the
    /// run's own guard and token; here, a fresh token and the other end's
    /// address. The token is sent after the timed handshake, so nothing
    /// measured changes.
    pub fn guard_here_too(&self, end: End) -> Result<(DataGuard, Token), ControlError> {
        if let (Some(guard), Some(token)) = (self.guard(end), self.token()) {
            return Ok((guard, token));
        }
        let mut token = Token::default();
        getrandom::fill(&mut token).map_err(|e| ControlError::Spawn {
            role: "guard",
            source: std::io::Error::other(format!("cannot make a run token: {e}")),
        })?;
        let peer = self.address(match end {
            End::To => End::From,
            End::From => End::To,
        });
        Ok((
            DataGuard {
                peer,
                token,
                ports: None,
            },
            token,
        ))
    }

    /// The token a connecting end sends first (remote runs only).
    pub fn token(&self) -> Option<Token> {
        match &self.place {
            Place::Remote { token, .. } => Some(*token),
            _ => None,
        }
    }

    /// The agent running `end` (`None`: this host).
    pub fn agent(&self, end: End) -> Option<&str> {
        match &self.place {
            Place::Remote { agents, .. } => agents[end.side()].as_deref().map(AgentLink::name),
            _ => None,
        }
    }

    /// Whether both ends run on one host (and share its CPUs).
    pub fn same_host(&self) -> bool {
        match &self.place {
            Place::Loopback | Place::Netns { .. } => true,
            Place::Remote { agents, .. } => match agents {
                [None, None] => true,
                [Some(a), Some(b)] => a.name() == b.name(),
                _ => false,
            },
        }
    }

    /// The namespace of `end` (`None`: the controller's own), for work the
    /// controller does there on a thread of its own.
    pub fn netns(&self, end: End) -> Option<PathBuf> {
        match &self.place {
            Place::Loopback | Place::Remote { .. } => None,
            Place::Netns { namespaces, .. } => Some(namespaces[end.side()].clone()),
        }
    }

    /// The interface `end` reaches the other end through (`lo` on loopback).
    pub fn interface(&self, end: End) -> Option<String> {
        match &self.place {
            Place::Loopback | Place::Remote { .. } => None,
            Place::Netns { interfaces, .. } => Some(interfaces[end.side()].clone()),
        }
    }
}
