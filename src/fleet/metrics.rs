//! An agent's probing as Prometheus series, of bounded cardinality: a
//! few counters and gauges without labels, one round-trip histogram per
//! pair of zones (this agent's, the peer's), and a loss ratio and a 99th
//! percentile for each of its worst K peers only, replaced whole at each
//! cycle's end. So an agent serves at most `2K + 22 x zones + 8` series,
//! whatever the fleet's size (Prometheus' cost is per series).

use super::HostLabels;
use super::summaries::PeerFigures;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::sync::atomic::AtomicU64;

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ZonePair {
    zone: String,
    peer_zone: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct WorstPeer {
    peer: String,
    peer_zone: String,
    peer_rack: String,
}

/// The round trips' histogram buckets, seconds: powers of two from 16 µs
/// to about 16 s.
pub fn buckets() -> impl Iterator<Item = f64> {
    (0..21).map(|i| 16e-6 * f64::from(1u32 << i))
}

/// The series, cheap to clone (each is shared).
#[derive(Clone, Debug)]
pub struct FleetMetrics {
    pub calls: Counter,
    pub lost: Counter,
    pub answered: Counter,
    pub cycles: Counter,
    pub hosts: Gauge,
    pub peers_a_cycle: Gauge,
    pub coverage_cycles: Gauge,
    rtt: Family<ZonePair, Histogram>,
    worst_loss: Family<WorstPeer, Gauge<f64, AtomicU64>>,
    worst_p99: Family<WorstPeer, Gauge<f64, AtomicU64>>,
}

impl Default for FleetMetrics {
    fn default() -> Self {
        FleetMetrics {
            calls: Counter::default(),
            lost: Counter::default(),
            answered: Counter::default(),
            cycles: Counter::default(),
            hosts: Gauge::default(),
            peers_a_cycle: Gauge::default(),
            coverage_cycles: Gauge::default(),
            rtt: Family::new_with_constructor(|| Histogram::new(buckets())),
            worst_loss: Family::default(),
            worst_p99: Family::default(),
        }
    }
}

impl FleetMetrics {
    /// Registers every series in `registry`.
    pub fn register(&self, registry: &mut Registry) {
        registry.register(
            "netlab_fleet_probe_calls",
            "Probe calls this agent sent its peers",
            self.calls.clone(),
        );
        registry.register(
            "netlab_fleet_probe_lost",
            "Probe calls this agent sent that no answer came back for in time",
            self.lost.clone(),
        );
        registry.register(
            "netlab_fleet_probe_answered",
            "Probe calls of peers this agent answered",
            self.answered.clone(),
        );
        registry.register(
            "netlab_fleet_cycles",
            "Probe cycles this agent finished",
            self.cycles.clone(),
        );
        registry.register(
            "netlab_fleet_hosts",
            "Hosts in this agent's peer plan, itself included",
            self.hosts.clone(),
        );
        registry.register(
            "netlab_fleet_peers_a_cycle",
            "Peers this agent probes a cycle",
            self.peers_a_cycle.clone(),
        );
        registry.register(
            "netlab_fleet_coverage_cycles",
            "Cycles in which the plan probes every ordered pair",
            self.coverage_cycles.clone(),
        );
        registry.register(
            "netlab_fleet_rtt_seconds",
            "Probe round trips, by this agent's zone and the peer's",
            self.rtt.clone(),
        );
        registry.register(
            "netlab_fleet_worst_peer_loss_ratio",
            "Loss over the window of each of this agent's worst K peers",
            self.worst_loss.clone(),
        );
        registry.register(
            "netlab_fleet_worst_peer_rtt_p99_seconds",
            "The 99th percentile round trip over the window of each of this agent's worst K peers",
            self.worst_p99.clone(),
        );
    }

    /// One answered call's round trip (µs) from `me` to `peer`.
    pub fn round_trip(&self, me: &HostLabels, peer: &HostLabels, rtt_us: u32) {
        self.rtt
            .get_or_create(&ZonePair {
                zone: me.zone.clone(),
                peer_zone: peer.zone.clone(),
            })
            .observe(f64::from(rtt_us) * 1e-6);
    }

    /// Replaces the worst peers' series with `worst`'s.
    pub fn set_worst(&self, worst: &[PeerFigures]) {
        self.worst_loss.clear();
        self.worst_p99.clear();
        for f in worst {
            let labels = WorstPeer {
                peer: f.peer.clone(),
                peer_zone: f.zone.clone(),
                peer_rack: f.rack.clone(),
            };
            self.worst_loss.get_or_create(&labels).set(f.loss_ratio);
            if let Some(p99) = f.rtt_p99_us {
                self.worst_p99
                    .get_or_create(&labels)
                    .set(f64::from(p99) * 1e-6);
            }
        }
    }
}
