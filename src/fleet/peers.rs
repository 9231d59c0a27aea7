//! Peer lists for fleets too large for every pair each cycle (#64), as
//! Pingmesh hands them out (Guo et al., SIGCOMM 2015, §3.2: a controller
//! gives each agent the peers it probes, every server of its rack and
//! samples further out). Each cycle an agent probes
//!
//! - every other host of its rack,
//! - a sample of its zone outside its rack,
//! - a sample of the other zones,
//!
//! as many in all as the probe budget gives it ([`peers_within`]). A sample
//! is a window that slides, cycle by cycle, over the candidates in the
//! fleet's seeded order read from the agent's own place on (so each host
//! is in about as many windows a cycle as each agent has), and the window
//! sizes are split
//! so the slowest reaches round soonest: every ordered pair is probed at
//! least once in any [`PeerPlan::coverage_cycles`] consecutive cycles, and
//! no peer twice in one cycle. Each agent starts its cycle at an offset
//! spread over the cycle by its seeded rank, and spaces its probes evenly
//! after it ([`PeerPlan::probe_offsets`]), so that a fleet's probes do not
//! arrive together (Goldpinger's thundering herd).
//!
//! Invariants: a plan depends only on the hosts' names and labels, the
//! budget and the seed, never on the inventory's order (an agent that
//! reads the fleet from DNS, in any order, computes the same lists as the
//! controller); no agent probes itself; no list is longer than the budget.
//! A host with no `rack` label is a rack of its own; one with no `zone`
//! label is in the zone of all such hosts.

use super::HostLabels;
use std::time::Duration;
use thiserror::Error;

#[derive(Debug, Error, PartialEq, Eq)]
pub enum PeerError {
    #[error("a peer list needs at least 2 hosts, not {0}")]
    TooFew(usize),
    #[error("host {0} is named twice")]
    Twice(String),
    #[error(
        "rack {rack:?} has {hosts} hosts: each probes the other {} every cycle, more than the {peers} peers a cycle the budget gives; raise the probe budget or give smaller racks",
        hosts - 1
    )]
    RackTooBig {
        rack: String,
        hosts: usize,
        peers: usize,
    },
    #[error(
        "host {host} probes its {rack} rack peers with the whole budget ({peers} a cycle), leaving none for the {left} hosts beyond its rack: raise the probe budget"
    )]
    NoneBeyondRack {
        host: String,
        rack: usize,
        peers: usize,
        left: usize,
    },
}

/// Peers an agent can probe a cycle: each probe is `probe_calls` calls
/// sent and as many answered, and on average an agent is probed as often
/// as it probes, so `2 x peers x probe_calls` calls a cycle fit in
/// `calls_per_s x every`.
pub fn peers_within(calls_per_s: f64, every: Duration, probe_calls: u32) -> usize {
    let calls = calls_per_s * every.as_secs_f64();
    let per_peer = 2.0 * f64::from(probe_calls.max(1));
    if calls.is_finite() && calls > 0.0 {
        (calls / per_peer).floor() as usize
    } else {
        0
    }
}

/// One agent's candidates beyond its rack, in its seeded order, and how
/// many of each it takes a cycle.
#[derive(Debug, Clone, PartialEq)]
pub struct AgentPeers {
    rack: Vec<u32>,
    zone: Vec<u32>,
    zone_take: usize,
    others: Vec<u32>,
    others_take: usize,
}

impl AgentPeers {
    /// The peers probed in cycle `cycle`: the rack, then the zone's
    /// window, then the other zones'.
    pub fn peers(&self, cycle: u64) -> Vec<u32> {
        self.rack
            .iter()
            .copied()
            .chain(window(&self.zone, self.zone_take, cycle))
            .chain(window(&self.others, self.others_take, cycle))
            .collect()
    }
}

/// How an agent's budget divides, from the sizes alone: its rack peers,
/// then (zone candidates, taken a cycle), (other zones' candidates, taken).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Shares {
    rack: usize,
    zone: (usize, usize),
    others: (usize, usize),
}

impl Shares {
    /// Cycles until both windows have gone round.
    fn cycles(&self) -> u64 {
        let rounds = |(n, take): (usize, usize)| if n == 0 { 1 } else { n.div_ceil(take) };
        rounds(self.zone).max(rounds(self.others)) as u64
    }
}

/// Every agent's peers, cycle by cycle; hosts are indexed in name order.
/// It holds the hosts and their racks' and zones' sizes, O(N): an agent's
/// list is drawn when asked for ([`PeerPlan::agent`]), so a controller of
/// thousands holds no N x N table, and an agent draws only its own.
#[derive(Debug, Clone, PartialEq)]
pub struct PeerPlan {
    hosts: Vec<HostLabels>,
    /// Each host's rack's index in `rack_sizes`.
    rack_of: Vec<u32>,
    rack_sizes: Vec<usize>,
    zone_sizes: std::collections::HashMap<String, usize>,
    peers: usize,
    seed: u64,
}

/// A stable 64-bit mix (splitmix64's finaliser), so that a name's draw is
/// the same in every build and on every host.
fn mix(mut x: u64) -> u64 {
    x = (x ^ (x >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    x ^ (x >> 31)
}

/// `name`'s draw under `seed` (FNV-1a of its bytes, mixed with the seed).
fn draw(seed: u64, name: &str) -> u64 {
    let fnv = name.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ u64::from(b)).wrapping_mul(0x0000_0100_0000_01b3)
    });
    mix(fnv ^ mix(seed))
}

/// Splits `room` probes between `zone` and `others` candidates so that the
/// slower of the two windows goes round in the fewest cycles (ties: more
/// to the zone, whose paths are the closer ones).
fn split(room: usize, zone: usize, others: usize) -> (usize, usize) {
    if room >= zone + others {
        return (zone, others);
    }
    let rounds = |n: usize, take: usize| match (n, take) {
        (0, _) => 0,
        (_, 0) => usize::MAX,
        (n, t) => n.div_ceil(t),
    };
    (0..=room.min(zone))
        .map(|z| (z, (room - z).min(others)))
        .min_by_key(|&(z, o)| (rounds(zone, z).max(rounds(others, o)), std::cmp::Reverse(z)))
        .unwrap_or((0, 0))
}

/// `take` members of `list` from cycle `cycle`'s place: a window that moves
/// on by `take` each cycle, round the list.
fn window(list: &[u32], take: usize, cycle: u64) -> impl Iterator<Item = u32> + '_ {
    let len = list.len().max(1) as u64;
    let start = (cycle % len) * take as u64 % len;
    (0..take.min(list.len())).map(move |i| list[((start + i as u64) % len) as usize])
}

impl PeerPlan {
    /// The lists for `hosts` with `peers` probes an agent a cycle.
    pub fn new(hosts: &[HostLabels], peers: usize, seed: u64) -> Result<PeerPlan, PeerError> {
        if hosts.len() < 2 {
            return Err(PeerError::TooFew(hosts.len()));
        }
        let mut hosts = hosts.to_vec();
        hosts.sort_by(|a, b| a.name.cmp(&b.name));
        if let Some(w) = hosts.windows(2).find(|w| w[0].name == w[1].name) {
            return Err(PeerError::Twice(w[0].name.clone()));
        }
        // A host without a rack is a rack of its own.
        let mut racks: std::collections::HashMap<(&str, &str), u32> =
            std::collections::HashMap::new();
        let mut rack_of = Vec::with_capacity(hosts.len());
        let mut rack_sizes: Vec<usize> = Vec::new();
        let mut zone_sizes: std::collections::HashMap<String, usize> =
            std::collections::HashMap::new();
        for h in &hosts {
            let key = (
                h.zone.as_str(),
                if h.rack.is_empty() {
                    h.name.as_str()
                } else {
                    h.rack.as_str()
                },
            );
            let next = racks.len() as u32;
            let rack = *racks.entry(key).or_insert(next);
            if rack as usize == rack_sizes.len() {
                rack_sizes.push(0);
            }
            rack_sizes[rack as usize] += 1;
            rack_of.push(rack);
            *zone_sizes.entry(h.zone.clone()).or_default() += 1;
        }
        let plan = PeerPlan {
            hosts,
            rack_of,
            rack_sizes,
            zone_sizes,
            peers,
            seed,
        };
        for i in 0..plan.hosts.len() {
            plan.shares(i)?;
        }
        Ok(plan)
    }

    /// Agent `i`'s budget divided, or why it cannot be.
    fn shares(&self, i: usize) -> Result<Shares, PeerError> {
        let host = &self.hosts[i];
        let rack_size = self.rack_sizes[self.rack_of[i] as usize];
        if rack_size > self.peers + 1 {
            return Err(PeerError::RackTooBig {
                rack: host.rack.clone(),
                hosts: rack_size,
                peers: self.peers,
            });
        }
        let rack = rack_size - 1;
        let mut zone = self.zone_sizes[&host.zone] - rack_size;
        let mut others = self.hosts.len() - self.zone_sizes[&host.zone];
        let room = self.peers - rack;
        if room == 0 && zone + others > 0 {
            return Err(PeerError::NoneBeyondRack {
                host: host.name.clone(),
                rack,
                peers: self.peers,
                left: zone + others,
            });
        }
        // A budget of one beyond the rack cannot keep two windows
        // moving: the zone and the other zones take turns in one.
        if room == 1 && zone > 0 {
            zone += others;
            others = 0;
        }
        let (zone_take, others_take) = split(room, zone, others);
        Ok(Shares {
            rack,
            zone: (zone, zone_take),
            others: (others, others_take),
        })
    }

    /// The hosts, in the order the plan indexes them (by name).
    pub fn hosts(&self) -> &[HostLabels] {
        &self.hosts
    }

    /// Agent `i`'s candidates in its seeded order (O(N log N) to draw).
    pub fn agent(&self, i: usize) -> AgentPeers {
        let shares = self.shares(i).expect("checked when the plan was made");
        let host = &self.hosts[i];
        let (mut rack, mut zone, mut others) = (Vec::new(), Vec::new(), Vec::new());
        for (j, other) in self.hosts.iter().enumerate() {
            if j == i {
                continue;
            }
            if self.rack_of[j] == self.rack_of[i] {
                rack.push(j as u32);
            } else if other.zone == host.zone {
                zone.push(j as u32);
            } else {
                others.push(j as u32);
            }
        }
        // One seeded order of the fleet, each agent reading it from its
        // own place on: in any cycle the windows of consecutive agents
        // are consecutive stretches of one ring, so each host falls in
        // about as many windows as each agent has (a shuffle per agent
        // would pile a third more on some hosts).
        let own = draw(self.seed, &host.name);
        let from_me = |h: &u32| draw(self.seed, &self.hosts[*h as usize].name).wrapping_sub(own);
        zone.sort_by_cached_key(|h| (from_me(h), *h));
        others.sort_by_cached_key(|h| (from_me(h), *h));
        if shares.others.0 == 0 {
            zone.append(&mut others);
        }
        AgentPeers {
            rack,
            zone,
            zone_take: shares.zone.1,
            others,
            others_take: shares.others.1,
        }
    }

    /// The peers agent `agent` probes in cycle `cycle`.
    pub fn peers_of(&self, agent: usize, cycle: u64) -> Vec<u32> {
        self.agent(agent).peers(cycle)
    }

    /// Cycles in which every ordered pair is probed at least once, from
    /// any cycle on (from the sizes alone: O(N)).
    pub fn coverage_cycles(&self) -> u64 {
        (0..self.hosts.len())
            .filter_map(|i| self.shares(i).ok())
            .map(|s| s.cycles())
            .max()
            .unwrap_or(1)
    }

    /// Probes an agent sends a cycle: (fewest, most) over the agents.
    pub fn probes_per_agent(&self) -> (usize, usize) {
        (0..self.hosts.len())
            .filter_map(|i| self.shares(i).ok())
            .map(|s| s.rack + s.zone.1 + s.others.1)
            .fold((usize::MAX, 0), |(lo, hi), n| (lo.min(n), hi.max(n)))
    }

    /// The most probes any host is sent in one cycle, over the cycles of
    /// one coverage (the average is what each sends; the windows may
    /// gather a few more on one host). Draws every agent's list once:
    /// O(N² log N) time, O(N x C) memory.
    pub fn most_probed(&self) -> usize {
        let cycles = self.coverage_cycles() as usize;
        let n = self.hosts.len();
        let mut into = vec![0u32; n * cycles];
        for agent in 0..n {
            let peers = self.agent(agent);
            for cycle in 0..cycles {
                for peer in peers.peers(cycle as u64) {
                    into[cycle * n + peer as usize] += 1;
                }
            }
        }
        into.into_iter().max().unwrap_or(0) as usize
    }

    /// When in a cycle of length `every` agent `agent` sends each of its
    /// `count` probes: from its start (its seeded rank among the hosts,
    /// spread over the cycle) every `every / count`, round the cycle.
    pub fn probe_offsets(&self, agent: usize, every: Duration, count: usize) -> Vec<Duration> {
        let key = |h: &HostLabels| (draw(self.seed, &h.name), h.name.clone());
        let own = key(&self.hosts[agent]);
        let rank = self.hosts.iter().filter(|h| key(h) < own).count();
        let n = self.hosts.len() as f64;
        let start = every.as_secs_f64() * rank as f64 / n;
        let gap = every.as_secs_f64() / count.max(1) as f64;
        (0..count)
            .map(|j| Duration::from_secs_f64((start + j as f64 * gap) % every.as_secs_f64()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn host(name: &str, zone: &str, rack: &str) -> HostLabels {
        HostLabels {
            name: name.into(),
            zone: zone.into(),
            rack: rack.into(),
        }
    }

    /// `zones` zones of `racks` racks of `per_rack` hosts.
    fn fleet(zones: usize, racks: usize, per_rack: usize) -> Vec<HostLabels> {
        let mut hosts = Vec::new();
        for z in 0..zones {
            for r in 0..racks {
                for h in 0..per_rack {
                    hosts.push(host(
                        &format!("z{z}r{r}h{h}"),
                        &format!("z{z}"),
                        &format!("z{z}r{r}"),
                    ));
                }
            }
        }
        hosts
    }

    #[test]
    fn the_budget_gives_the_peers_and_nothing_gives_none() {
        // 100 calls/s for 60 s, 20 calls a probe each way: 150 peers.
        assert_eq!(peers_within(100.0, Duration::from_secs(60), 20), 150);
        assert_eq!(peers_within(0.0, Duration::from_secs(60), 20), 0);
        assert_eq!(peers_within(f64::NAN, Duration::from_secs(60), 20), 0);
    }

    #[test]
    fn every_rack_peer_every_cycle_and_the_samples_cover_all_in_c_cycles() {
        let hosts = fleet(3, 4, 5); // 60 hosts, racks of 5
        let plan = PeerPlan::new(&hosts, 12, 7).unwrap();
        let c = plan.coverage_cycles();
        assert!(c > 1, "12 peers cannot cover 59 in one cycle");
        for a in 0..hosts.len() {
            let me = &plan.hosts()[a];
            for cycle in 0..c {
                let peers = plan.peers_of(a, cycle);
                let rack = peers
                    .iter()
                    .filter(|&&p| plan.hosts()[p as usize].rack == me.rack)
                    .count();
                assert_eq!(rack, 4, "{} cycle {cycle}", me.name);
                assert!(peers.len() <= 12);
            }
        }
    }

    #[test]
    fn the_plan_is_the_same_in_any_order_and_another_seed_draws_other_samples() {
        let hosts = fleet(2, 3, 4);
        let mut reversed = hosts.clone();
        reversed.reverse();
        let plan = PeerPlan::new(&hosts, 8, 1).unwrap();
        assert_eq!(plan, PeerPlan::new(&reversed, 8, 1).unwrap());
        let other = PeerPlan::new(&hosts, 8, 2).unwrap();
        assert!((0..hosts.len()).any(|a| plan.peers_of(a, 0) != other.peers_of(a, 0)));
    }

    #[test]
    fn a_rack_the_budget_cannot_hold_and_a_budget_of_the_rack_alone_are_refused() {
        let hosts = fleet(1, 2, 6);
        let e = PeerPlan::new(&hosts, 4, 0).unwrap_err();
        assert!(matches!(e, PeerError::RackTooBig { hosts: 6, .. }), "{e}");
        assert!(e.to_string().contains("raise the probe budget"), "{e}");
        let e = PeerPlan::new(&hosts, 5, 0).unwrap_err();
        assert!(
            matches!(e, PeerError::NoneBeyondRack { left: 6, .. }),
            "{e}"
        );
        assert_eq!(
            PeerPlan::new(&hosts[..1], 5, 0).unwrap_err(),
            PeerError::TooFew(1)
        );
        let twice = vec![host("a", "", ""), host("a", "", "")];
        assert!(matches!(
            PeerPlan::new(&twice, 5, 0),
            Err(PeerError::Twice(_))
        ));
    }

    #[test]
    fn a_fleet_without_labels_is_one_zone_of_racks_of_one() {
        let hosts: Vec<HostLabels> = (0..10).map(|i| host(&format!("h{i}"), "", "")).collect();
        let plan = PeerPlan::new(&hosts, 3, 0).unwrap();
        assert_eq!(plan.coverage_cycles(), 3);
        assert_eq!(plan.probes_per_agent(), (3, 3));
    }

    #[test]
    fn probes_start_spread_over_the_cycle() {
        let hosts = fleet(1, 1, 4);
        let plan = PeerPlan::new(&hosts, 3, 9).unwrap();
        let every = Duration::from_secs(60);
        let mut starts: Vec<Duration> =
            (0..4).map(|a| plan.probe_offsets(a, every, 3)[0]).collect();
        starts.sort();
        assert_eq!(starts, [0, 15, 30, 45].map(Duration::from_secs));
        let own = plan.probe_offsets(0, every, 3);
        assert!(own.iter().all(|&t| t < every));
    }

    proptest! {
        #[test]
        fn every_ordered_pair_is_probed_within_c_cycles_from_any_cycle(
            zones in 1usize..4,
            racks in 1usize..4,
            per_rack in 1usize..5,
            extra in 1usize..8,
            seed in any::<u64>(),
            from in 0u64..50,
        ) {
            let hosts = fleet(zones, racks, per_rack);
            prop_assume!(hosts.len() >= 2);
            let peers = per_rack - 1 + extra;
            let plan = match PeerPlan::new(&hosts, peers, seed) {
                Ok(plan) => plan,
                Err(PeerError::NoneBeyondRack { .. }) => return Ok(()),
                Err(e) => panic!("{e}"),
            };
            let n = hosts.len();
            let c = plan.coverage_cycles();
            let mut seen = vec![vec![false; n]; n];
            for cycle in from..from + c {
                for (a, row) in seen.iter_mut().enumerate() {
                    let list = plan.peers_of(a, cycle);
                    prop_assert!(list.len() <= peers);
                    let mut sorted = list.clone();
                    sorted.sort_unstable();
                    sorted.dedup();
                    prop_assert_eq!(sorted.len(), list.len(), "a peer twice in a cycle");
                    for p in list {
                        prop_assert_ne!(p as usize, a);
                        row[p as usize] = true;
                    }
                }
            }
            for (a, row) in seen.iter().enumerate() {
                for (b, &probed) in row.iter().enumerate() {
                    prop_assert!(a == b || probed, "{a}->{b} not probed in {c} cycles");
                }
            }
        }
    }
}
