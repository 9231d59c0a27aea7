//! Probing a fleet too large for every pair each cycle (#64): each agent
//! probes its own peer list and keeps summaries; a controller reads the
//! summaries, never the pairs.
//!
//! - [`hosts`]: a file of hosts and their labels, one a line.
//! - [`peers`]: the lists, rack, zone and further out, from a probe
//!   budget and a shared seed; every ordered pair within C cycles.
//! - [`summaries`]: what an agent keeps of its peers, in fixed memory.
//! - [`prober`]: the agent's prober and answerer, one thread and one UDP
//!   socket on the agent's port ([`crate::wire::probe`] datagrams).
//! - [`metrics`]: its Prometheus series, of bounded cardinality.
//! - [`report`]: the summary an agent gives a controller.
//!
//! This layer names no experiment: `netlab agent serve --probe-peers`
//! runs the prober, and the mesh's sampled mode (`netlab mesh watch`)
//! reads the reports.

pub mod hosts;
pub mod metrics;
pub mod peers;
pub mod prober;
pub mod report;
pub mod summaries;

use std::collections::BTreeMap;

/// A host as the fleet's lists and series label it.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct HostLabels {
    pub name: String,
    pub zone: String,
    pub rack: String,
}

impl HostLabels {
    pub fn of(name: &str, labels: &BTreeMap<String, String>) -> HostLabels {
        HostLabels {
            name: name.to_string(),
            zone: labels.get("zone").cloned().unwrap_or_default(),
            rack: labels.get("rack").cloned().unwrap_or_default(),
        }
    }
}
