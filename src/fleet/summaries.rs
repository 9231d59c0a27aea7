//! What an agent that probes its own peer list keeps of it (#64, point 2):
//! per peer, the round trips and the calls sent and lost of its last
//! `window` probes, in a fixed memory bound; and the worst K peers, the
//! only ones it serves a series each for (its round trips per pair of
//! zones go to a Prometheus histogram, [`super::metrics`]), so its
//! metrics' cardinality is K + zones, not N.
//!
//! Invariants: at most `max_peers` peers are held (a new peer past that
//! replaces the one probed longest ago), each with at most `window`
//! probes of at most [`MAX_CALLS`] round trips each, so the memory is
//! bounded by `max_peers x window x MAX_CALLS x 4` bytes whatever the peers
//! send; a probe's figures are never NaN (a lost call has no round trip).

use super::HostLabels;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, VecDeque};

/// Round trips kept from one probe (its calls' answered ones, at most).
pub const MAX_CALLS: usize = 64;

/// One probe of a peer: the calls it sent, how many were lost, and the
/// answered ones' round trips (µs).
#[derive(Debug, Clone, PartialEq)]
pub struct Probe {
    /// The cycle it was sent in.
    pub cycle: u64,
    pub calls: u32,
    pub lost: u32,
    pub rtts_us: Vec<u32>,
}

#[derive(Debug, Default)]
struct PeerWindow {
    zone: String,
    rack: String,
    probes: VecDeque<Probe>,
    /// The summaries' clock when it was last probed.
    last: u64,
}

/// A peer's figures over its window.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PeerFigures {
    pub peer: String,
    pub zone: String,
    pub rack: String,
    pub probes: usize,
    pub calls: u64,
    pub lost: u64,
    pub loss_ratio: f64,
    pub rtt_p50_us: Option<u32>,
    pub rtt_p99_us: Option<u32>,
    /// The last probe alone: what changed in the last cycles shows here
    /// first (the window's figures lag it by up to `window` probes).
    pub last: LastProbe,
}

/// One probe's figures.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LastProbe {
    pub cycle: u64,
    pub calls: u32,
    pub lost: u32,
    pub rtt_p50_us: Option<u32>,
}

/// An agent's summaries of its peers.
#[derive(Debug)]
pub struct Summaries {
    window: usize,
    max_peers: usize,
    peers: HashMap<String, PeerWindow>,
    clock: u64,
}

impl Summaries {
    /// An agent keeping `window` probes of at most `max_peers` peers
    /// (each at least 1).
    pub fn new(window: usize, max_peers: usize) -> Summaries {
        Summaries {
            window: window.max(1),
            max_peers: max_peers.max(1),
            peers: HashMap::new(),
            clock: 0,
        }
    }

    /// Keeps one probe of `peer`: its round trips beyond [`MAX_CALLS`]
    /// are dropped, its loss kept whole.
    pub fn record(&mut self, peer: &HostLabels, mut probe: Probe) {
        self.clock += 1;
        probe.rtts_us.truncate(MAX_CALLS);
        probe.lost = probe.lost.min(probe.calls);
        let HostLabels {
            name: peer,
            zone,
            rack,
        } = peer;
        if !self.peers.contains_key(peer) && self.peers.len() >= self.max_peers {
            let oldest = self
                .peers
                .iter()
                .min_by_key(|(name, w)| (w.last, name.as_str()))
                .map(|(name, _)| name.clone());
            if let Some(oldest) = oldest {
                self.peers.remove(&oldest);
            }
        }
        let window = self.peers.entry(peer.to_string()).or_default();
        window.zone.clone_from(zone);
        window.rack.clone_from(rack);
        window.last = self.clock;
        window.probes.push_back(probe);
        while window.probes.len() > self.window {
            window.probes.pop_front();
        }
    }

    /// Every peer held, with its figures over its window.
    pub fn figures(&self) -> Vec<PeerFigures> {
        self.peers
            .iter()
            .map(|(peer, w)| {
                let calls: u64 = w.probes.iter().map(|p| u64::from(p.calls)).sum();
                let lost: u64 = w.probes.iter().map(|p| u64::from(p.lost)).sum();
                let mut rtts: Vec<u32> = w
                    .probes
                    .iter()
                    .flat_map(|p| p.rtts_us.iter().copied())
                    .collect();
                rtts.sort_unstable();
                // The nearest rank: the smallest with at least q of them at or below it.
                let rank = |q: f64| {
                    (!rtts.is_empty()).then(|| {
                        rtts[((q * rtts.len() as f64).ceil() as usize).clamp(1, rtts.len()) - 1]
                    })
                };
                PeerFigures {
                    peer: peer.clone(),
                    zone: w.zone.clone(),
                    rack: w.rack.clone(),
                    probes: w.probes.len(),
                    calls,
                    lost,
                    loss_ratio: if calls == 0 {
                        0.0
                    } else {
                        lost as f64 / calls as f64
                    },
                    rtt_p50_us: rank(0.5),
                    rtt_p99_us: rank(0.99),
                    last: w.probes.back().map_or(
                        LastProbe {
                            cycle: 0,
                            calls: 0,
                            lost: 0,
                            rtt_p50_us: None,
                        },
                        |p| {
                            let mut rtts = p.rtts_us.clone();
                            rtts.sort_unstable();
                            LastProbe {
                                cycle: p.cycle,
                                calls: p.calls,
                                lost: p.lost,
                                rtt_p50_us: (!rtts.is_empty()).then(|| rtts[(rtts.len() - 1) / 2]),
                            }
                        },
                    ),
                }
            })
            .collect()
    }

    /// The `k` worst peers: most lost first, then slowest at the 99th
    /// percentile, then by name.
    pub fn worst(&self, k: usize) -> Vec<PeerFigures> {
        let mut all = self.figures();
        all.sort_by(|a, b| {
            b.loss_ratio
                .total_cmp(&a.loss_ratio)
                .then(b.rtt_p99_us.cmp(&a.rtt_p99_us))
                .then(a.peer.cmp(&b.peer))
        });
        all.truncate(k);
        all
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn peer(name: &str, zone: &str) -> HostLabels {
        HostLabels {
            name: name.into(),
            zone: zone.into(),
            rack: String::new(),
        }
    }

    fn probe(calls: u32, lost: u32, rtt: u32) -> Probe {
        Probe {
            cycle: 0,
            calls,
            lost,
            rtts_us: vec![rtt; (calls - lost) as usize],
        }
    }

    #[test]
    fn a_peers_figures_are_its_last_window_of_probes() {
        let mut s = Summaries::new(3, 10);
        s.record(&peer("p", "b"), probe(20, 10, 5000));
        for _ in 0..3 {
            s.record(&peer("p", "b"), probe(20, 0, 100));
        }
        let f = &s.figures()[0];
        assert_eq!((f.probes, f.loss_ratio), (3, 0.0));
        assert_eq!((f.rtt_p50_us, f.rtt_p99_us), (Some(100), Some(100)));
        let all_lost = {
            let mut s = Summaries::new(3, 10);
            s.record(&peer("q", "b"), probe(20, 20, 0));
            s.figures()[0].clone()
        };
        assert_eq!((all_lost.loss_ratio, all_lost.rtt_p50_us), (1.0, None));
    }

    #[test]
    fn the_worst_are_the_lossiest_then_the_slowest() {
        let mut s = Summaries::new(4, 10);
        s.record(&peer("slow", "a"), probe(20, 0, 9000));
        s.record(&peer("lossy", "b"), probe(20, 4, 100));
        s.record(&peer("fine", "b"), probe(20, 0, 100));
        let worst: Vec<String> = s.worst(2).into_iter().map(|f| f.peer).collect();
        assert_eq!(worst, ["lossy", "slow"]);
    }

    proptest! {
        #[test]
        fn memory_stays_within_its_bound_whatever_is_recorded(
            probes in proptest::collection::vec((0u8..40, 0u32..500, 0u32..500, any::<u32>()), 1..400),
        ) {
            let (window, max_peers) = (5, 8);
            let mut s = Summaries::new(window, max_peers);
            for (peer, calls, lost, rtt) in probes {
                s.record(&HostLabels { name: format!("p{peer}"), zone: format!("z{}", peer % 3), rack: String::new() }, Probe {
                    cycle: 0,
                    calls,
                    lost,
                    rtts_us: vec![rtt; (calls % 100) as usize],
                });
            }
            prop_assert!(s.peers.len() <= max_peers);
            for w in s.peers.values() {
                prop_assert!(w.probes.len() <= window);
                prop_assert!(w.probes.iter().all(|p| p.rtts_us.len() <= MAX_CALLS && p.lost <= p.calls));
            }
            for f in s.figures() {
                prop_assert!((0.0..=1.0).contains(&f.loss_ratio));
                prop_assert!(f.rtt_p50_us <= f.rtt_p99_us);
            }
        }
    }
}
