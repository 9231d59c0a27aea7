//! An agent's own Prometheus metrics (`netlab agent serve --metrics
//! ADDR:PORT`): the runs it served by experiment, the peers it refused by
//! reason (a closed set: each refusal site's cause maps to one), and the
//! bytes its endpoints read and wrote.
//!
//! The bytes are each endpoint's `rchar` and `wchar` from `/proc/PID/io`,
//! read as it leaves: every `read(2)`/`write(2)`-family call's bytes,
//! sockets, pipes and files alike (its control channel is a few KB of
//! them). An endpoint killed before it could be read is not counted.

use prometheus_client::encoding::{EncodeLabelSet, EncodeLabelValue};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::registry::Registry;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ExperimentLabels {
    experiment: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ReasonLabels {
    reason: Reason,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct DirectionLabels {
    direction: Direction,
}

#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
enum Direction {
    read,
    written,
}

/// Why a peer was refused, as a label: one value a refusal site.
#[derive(Clone, Copy, Debug, Hash, PartialEq, Eq, EncodeLabelValue)]
#[allow(non_camel_case_types)]
pub enum Reason {
    /// Its first message did not verify, or was of the wrong length:
    /// another key, or not a netlab controller.
    key_differs,
    replayed,
    /// No whole first message in time, or it closed part-way.
    handshake_incomplete,
    /// Ended to make room, or too many handshakes at once.
    handshake_room,
    /// Authenticated, but no Hello (or not a Hello) followed.
    no_hello,
    /// Its Hello was refused (another version, an experiment not allowed).
    hello_refused,
    /// Every `--max-runs` slot was held.
    busy,
    other,
}

impl Reason {
    /// The label for a refusal site's fixed cause text.
    pub fn of(cause: &str) -> Reason {
        match cause {
            "its first handshake message does not verify"
            | "a first handshake message of the wrong length" => Reason::key_differs,
            "a replayed first handshake message" => Reason::replayed,
            "no whole first handshake message in time"
            | "closed the connection in the handshake"
            | "lost in the handshake" => Reason::handshake_incomplete,
            "ended unauthenticated to make room for a newer connection"
            | "too many authenticated handshakes at once" => Reason::handshake_room,
            "its first message was not Hello" | "no Hello" => Reason::no_hello,
            "its Hello was refused" => Reason::hello_refused,
            "busy" => Reason::busy,
            _ => Reason::other,
        }
    }
}

/// The agent's counters, registered in its own registry.
pub struct AgentMetrics {
    pub registry: crate::controller::metrics::SharedRegistry,
    runs: Family<ExperimentLabels, Counter>,
    refusals: Family<ReasonLabels, Counter>,
    bytes: Family<DirectionLabels, Counter>,
    endpoints: Counter,
}

impl Default for AgentMetrics {
    fn default() -> Self {
        let mut registry = Registry::default();
        let m = AgentMetrics {
            registry: Default::default(),
            runs: Family::default(),
            refusals: Family::default(),
            bytes: Family::default(),
            endpoints: Counter::default(),
        };
        registry.register(
            "netlab_agent_runs",
            "Runs the agent served (a controller's Hello admitted), by experiment",
            m.runs.clone(),
        );
        registry.register(
            "netlab_agent_refusals",
            "Peers the agent refused, by reason",
            m.refusals.clone(),
        );
        registry.register(
            "netlab_agent_endpoint_io_bytes",
            "Bytes the agent's endpoints read and wrote (rchar and wchar of /proc/PID/io: sockets, pipes and files)",
            m.bytes.clone(),
        );
        registry.register(
            "netlab_agent_endpoints",
            "Endpoint processes the agent started",
            m.endpoints.clone(),
        );
        AgentMetrics {
            registry: std::sync::Arc::new(std::sync::Mutex::new(registry)),
            ..m
        }
    }
}

impl AgentMetrics {
    pub fn run(&self, experiment: &str) {
        self.runs
            .get_or_create(&ExperimentLabels {
                experiment: experiment.to_string(),
            })
            .inc();
    }

    pub fn refused(&self, cause: &str) {
        self.refusals
            .get_or_create(&ReasonLabels {
                reason: Reason::of(cause),
            })
            .inc();
    }

    pub fn endpoint_started(&self) {
        self.endpoints.inc();
    }

    /// Adds endpoint `pid`'s bytes, read from `/proc/PID/io` now.
    pub fn endpoint_io(&self, pid: u32) {
        let Ok(text) = std::fs::read_to_string(format!("/proc/{pid}/io")) else {
            return;
        };
        let (read, written) = parse_io(&text);
        self.bytes
            .get_or_create(&DirectionLabels {
                direction: Direction::read,
            })
            .inc_by(read);
        self.bytes
            .get_or_create(&DirectionLabels {
                direction: Direction::written,
            })
            .inc_by(written);
    }
}

/// `rchar` and `wchar` of a `/proc/PID/io`.
fn parse_io(text: &str) -> (u64, u64) {
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    (field("rchar:"), field("wchar:"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_refusal_site_has_a_reason_of_its_own_and_the_rest_are_other() {
        assert_eq!(
            Reason::of("its first handshake message does not verify"),
            Reason::key_differs
        );
        assert_eq!(Reason::of("busy"), Reason::busy);
        assert_eq!(Reason::of("something new"), Reason::other);
    }

    #[test]
    fn the_counters_read_as_prometheus_names_them() {
        let m = AgentMetrics::default();
        m.run("stream");
        m.refused("a replayed first handshake message");
        m.endpoint_io(std::process::id());
        let text = crate::export::openmetrics::OpenMetrics(&m.registry.lock().unwrap()).text();
        assert!(
            text.contains("netlab_agent_runs_total{experiment=\"stream\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("netlab_agent_refusals_total{reason=\"replayed\"} 1"),
            "{text}"
        );
        assert!(
            text.contains("netlab_agent_endpoint_io_bytes_total{direction=\"read\"}"),
            "{text}"
        );
        assert_eq!(parse_io("rchar: 10\nwchar: 20\nsyscr: 1\n"), (10, 20));
    }
}
