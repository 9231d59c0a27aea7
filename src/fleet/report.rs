//! The summary an agent that probes its own peers gives a controller when
//! asked (over the agent's channel, [`crate::endpoint::agent::ToAgent`]):
//! who it is, how far its probing has gone, its totals and every peer it
//! holds a window of. Its size is bounded by the summaries' `max_peers`,
//! whatever the fleet's size.

use super::HostLabels;
use super::summaries::PeerFigures;
use serde::{Deserialize, Serialize};

/// An agent's probing, as a controller reads it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleetReport {
    /// The agent as its peers name it (`ADDR:PORT`), with its labels.
    pub host: HostLabels,
    /// The cycle's length, seconds.
    pub every_s: f64,
    /// The last cycle it finished (cycles are counted from the Unix
    /// epoch, so every agent numbers them alike), if any.
    pub last_cycle: Option<u64>,
    /// Cycles it has finished since it started.
    pub cycles: u64,
    /// Hosts in its plan (itself included), and its peers a cycle.
    pub hosts: usize,
    pub peers_a_cycle: usize,
    /// Cycles in which its plan probes every ordered pair.
    pub coverage_cycles: u64,
    /// Calls it sent and lost, and calls of others it answered, since it
    /// started.
    pub calls: u64,
    pub lost: u64,
    pub answered: u64,
    /// Every peer it holds a window of.
    pub peers: Vec<PeerFigures>,
    /// Why it is not probing, when it is not (no plan yet, a list it
    /// cannot read).
    pub problem: Option<String>,
}
