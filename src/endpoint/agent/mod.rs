//! What a controller and a remote agent say to each other, and what an agent
//! lets a controller do.
//!
//! A controller holds one [`channel`] per agent for a whole experiment (a
//! *run*). It opens with [`ToAgent::Hello`]; the agent answers
//! [`FromAgent::Welcome`] (its version, host facts and clock), or
//! [`FromAgent::Busy`] / [`FromAgent::Refused`] and closes. Then the
//! controller starts endpoint processes on the agent's host
//! ([`ToAgent::Spawn`]) and drives each with the same typed
//! [`Command`]/[`Reply`] messages as a local one, wrapped with the
//! endpoint's id; the agent checks every command against its [`policy`]
//! before the endpoint sees it. An experiment cannot tell a remote end from
//! a local one except by its facts.
//!
//! Nothing is sent on the channel while a cell measures: the controller
//! sends `Go` and waits; the endpoint's `Done` is the next message.

pub mod channel;
pub mod key;
pub mod policy;

use super::protocol::{Command, Reply};
use crate::measure::host::HostFacts;
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr, UdpSocket};

/// The agent's default port.
pub const DEFAULT_PORT: u16 = 5310;

/// The `experiment` of a Hello that asks an agent for its own probing's
/// summary ([`FromAgent::Fleet`]) instead of a run: it takes no run slot
/// and starts nothing.
pub const FLEET_REPORT: &str = "fleet-report";

/// Controller → agent.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum ToAgent {
    Hello(Hello),
    /// Start `netlab endpoint` for `role`; its `Ready` comes back as an
    /// [`FromAgent::Endpoint`] reply with this `id`.
    Spawn {
        id: u32,
        role: String,
    },
    /// A command for endpoint `id`.
    Endpoint {
        id: u32,
        command: Command,
    },
    /// The agent's source address toward `to` (answered by `Route`).
    Route {
        to: IpAddr,
    },
    /// The run is over: stop everything of it.
    Bye,
}

/// The first message of a run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Hello {
    /// The controller's netlab version; the agent refuses another.
    pub version: String,
    /// The experiment the controller runs (`stream`, `rpc`, ...).
    pub experiment: String,
    /// Who runs it: `user@host`.
    pub controller: String,
    /// The controller's clock (µs since the Unix epoch) when it sent this.
    pub time_us: i64,
}

/// Agent → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum FromAgent {
    Welcome(Box<Welcome>),
    /// Another run holds the agent; nothing of this one started.
    Busy {
        experiment: String,
        controller: String,
        since: String,
    },
    /// The agent will not serve this run (version, `--allow`).
    Refused {
        reason: String,
    },
    /// A reply of endpoint `id`.
    Endpoint {
        id: u32,
        reply: Reply,
    },
    /// Endpoint `id` has ended (`status` says how); its id is free.
    Gone {
        id: u32,
        status: String,
    },
    /// The source address asked for, or why there is none.
    Route {
        from: Result<IpAddr, String>,
    },
    /// The agent ended the run (its `--max-duration` passed).
    Ended {
        reason: String,
    },
    /// Its probing's summary, the answer to a Hello of [`FLEET_REPORT`].
    Fleet(Box<crate::fleet::report::FleetReport>),
}

/// The agent's answer to `Hello`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Welcome {
    pub version: String,
    pub facts: HostFacts,
    /// The agent's clock (µs since the Unix epoch) when it sent this.
    pub time_us: i64,
    /// The limits it will hold the run to, as one line.
    pub limits: String,
    /// The experiments it serves (`--allow`).
    #[serde(default)]
    pub allow: Vec<String>,
    /// Its `--max-duration` (seconds a run) and `--max-bytes` (a cell),
    /// so a controller refuses a run that would cross them before it
    /// starts (older agents: unknown).
    #[serde(default)]
    pub max_duration_s: Option<u64>,
    #[serde(default)]
    pub max_bytes: Option<u64>,
    /// The node it runs on and its labels (a mesh sorts hosts by them).
    #[serde(default)]
    pub identity: crate::record::testbed::Identity,
}

/// The refusal an agent of `agent` gives a controller of `controller`.
pub fn version_mismatch(agent: &str, controller: &str) -> String {
    format!(
        "version mismatch: the agent runs netlab {agent}, the controller netlab {controller}; run the same release on both"
    )
}

/// Locks `mutex` even if a thread panicked holding it: the state of a run
/// (its channel, its endpoints) must stay reachable so the run can still be
/// ended and its processes reaped.
pub fn lock<T>(mutex: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

/// Microseconds since the Unix epoch, now.
pub fn now_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// This host's source address for packets to `to`, as the routing table
/// chooses it (a UDP socket is connected, nothing is sent).
pub fn source_toward(to: IpAddr) -> std::io::Result<IpAddr> {
    let unspecified: SocketAddr = match to {
        IpAddr::V4(_) => "0.0.0.0:0".parse().expect("literal"),
        IpAddr::V6(_) => "[::]:0".parse().expect("literal"),
    };
    let socket = UdpSocket::bind(unspecified)?;
    socket.connect((to, 9))?;
    Ok(socket.local_addr()?.ip())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::control::{emit, parse};

    #[test]
    fn messages_round_trip_through_frames() {
        let messages = [
            ToAgent::Hello(Hello {
                version: "0.1.0".into(),
                experiment: "stream".into(),
                controller: "root@ctl".into(),
                time_us: 1,
            }),
            ToAgent::Spawn {
                id: 3,
                role: "receiver".into(),
            },
            ToAgent::Endpoint {
                id: 3,
                command: Command::Role {
                    role: "stream".into(),
                    request: "Go".into(),
                    params: serde_json::Value::Null,
                },
            },
            ToAgent::Bye,
        ];
        for message in messages {
            let mut frame = Vec::new();
            emit(&message, &mut frame).unwrap();
            assert_eq!(parse::<ToAgent>(&frame).unwrap(), message);
        }
    }

    #[test]
    fn the_source_toward_loopback_is_loopback() {
        assert!(
            source_toward("127.0.0.1".parse().unwrap())
                .unwrap()
                .is_loopback()
        );
    }
}
