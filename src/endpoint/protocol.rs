//! The typed messages of the control channel (framed by [`crate::wire::control`]).
//!
//! An endpoint process announces itself with [`Reply::Ready`]; then every
//! exchange is a [`Command::Role`] request for one of the roles it can play
//! (an experiment's, or the testbed's emulator and capture: see
//! [`crate::endpoint::role`]), answered by one [`Reply::Role`] or
//! [`Reply::Failed`], with [`Reply::Progress`] and [`Reply::Event`]s on the
//! way. Each request is its role's own type, named on the wire and carried
//! here as a JSON value, as is its reply, so this file names no experiment. Connection set-up
//! is its own request, before the one that starts the data path, so it is
//! outside every measured interval.

use serde::{Deserialize, Serialize};
use std::net::IpAddr;

/// Bytes of a run token.
pub const TOKEN_LEN: usize = 16;
/// A run's token: random, made by the controller for one run through agents.
pub type Token = [u8; TOKEN_LEN];

/// How a listener of a run through an agent guards its data port
/// ([`crate::endpoint::guard`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataGuard {
    /// The only address served.
    pub peer: IpAddr,
    /// The first bytes of every data connection.
    pub token: Token,
    /// The ports (inclusive) the listener may take; the agent sets them
    /// from its `--data-ports`.
    #[serde(default)]
    pub ports: Option<(u16, u16)>,
}

/// Controller → endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    /// Request `request` of the role named, its body (`params`) in the
    /// request's own typed form.
    Role {
        role: String,
        request: String,
        params: serde_json::Value,
    },
    /// Go on after an event that awaits it.
    Proceed,
    /// Leave: the controller is done with this endpoint.
    Exit,
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu takes no arguments and only returns a number.
    let cpu = unsafe { libc::sched_getcpu() };
    cpu.max(0) as u32
}

/// Endpoint → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    Ready {
        pid: u32,
        version: String,
    },
    /// Bytes moved so far by the request under way.
    Progress {
        bytes: u64,
    },
    /// One of the role's events, while its request is under way.
    Event(serde_json::Value),
    /// The role's answer to a request.
    Role(serde_json::Value),
    Failed {
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::control::{check, emit, parse};

    #[test]
    fn commands_round_trip_through_frames() {
        let commands = [
            Command::Role {
                role: "example".into(),
                request: "Send".into(),
                params: serde_json::json!({"bytes": 42, "to": "127.0.0.1:5001"}),
            },
            Command::Proceed,
            Command::Exit,
        ];
        for command in commands {
            let mut frame = Vec::new();
            emit(&command, &mut frame).unwrap();
            assert_eq!(check(&frame).unwrap(), Some(frame.len()));
            assert_eq!(parse::<Command>(&frame).unwrap(), command);
        }
    }

    #[test]
    fn exit_is_the_documented_frame() {
        let mut frame = Vec::new();
        emit(&Command::Exit, &mut frame).unwrap();
        assert_eq!(frame, b"\x00\x00\x00\x07\x01\"Exit\"");
    }

    #[test]
    fn replies_round_trip_through_frames() {
        for reply in [
            Reply::Ready {
                pid: 7,
                version: "0.1.0".into(),
            },
            Reply::Progress { bytes: 1 << 20 },
            Reply::Event(serde_json::json!({"Interval": {"bytes": 3}})),
            Reply::Role(serde_json::json!({"Listening": {"addr": "127.0.0.1:5001"}})),
            Reply::Failed {
                message: "port 5001 is in use".into(),
            },
        ] {
            let mut frame = Vec::new();
            emit(&reply, &mut frame).unwrap();
            assert_eq!(parse::<Reply>(&frame).unwrap(), reply);
        }
    }
}
