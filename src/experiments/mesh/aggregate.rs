//! Findings from the summaries a sampled fleet's agents keep (#64, point
//! 3): hosts and racks named from aggregates, never from an N x N matrix.
//!
//! Every agent's report holds, per peer, its calls, losses and median
//! round trip over a window and in its last probe. Each (agent, peer)
//! whose last probe was in the last [`FRESH`] cycles is one directed
//! path, as that probe saw it: a fault is judged on the cycles since it
//! began, not diluted by the window before it. The explanations are found greedily, the most certain
//! first, and each explains away the paths it accounts for, so that one
//! lossy host does not make its healthy peers look lossy too:
//!
//! - **a host** whose paths, in and out and inside its own rack alike,
//!   lose more than the fleet's (a one-sided binomial test against the
//!   fleet's median loss, at least [`LOSS_FLOOR`], Bonferroni-corrected
//!   over the candidates), or are slow (at least [`SLOW_SHARE`] of them
//!   slower than [`SLOW_FACTOR`] x the fleet's median round trip, and at
//!   least [`SLOW_MARGIN_US`] more);
//! - **a rack's uplink**: the paths crossing the rack's edge lose or are
//!   slow so, while the paths inside the rack do not.
//!
//! A host in trouble inside its rack is a host; a rack whose every host
//! is fine inside and in trouble outside is its shared link. Invariant:
//! a fleet whose paths all behave alike gives no finding, and no finding
//! names a host or rack that none of the troubled paths touches.

use crate::fleet::HostLabels;
use crate::fleet::report::FleetReport;
use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};
use std::collections::{BTreeMap, HashMap};

/// Cycles a path's last probe counts for: the last two.
pub const FRESH: u64 = 2;
/// The least loss ratio the test assumes for a healthy path.
pub const LOSS_FLOOR: f64 = 0.001;
/// The family-wise false-finding rate of one cycle's tests.
pub const ALPHA: f64 = 1e-3;
/// A path is slow past this many times the fleet's median round trip...
pub const SLOW_FACTOR: f64 = 3.0;
/// ... and this much more, µs.
pub const SLOW_MARGIN_US: u32 = 500;
/// A host or rack edge is slow when this share of its paths is.
pub const SLOW_SHARE: f64 = 0.8;

/// One directed path's figures, as the agent at its start held them.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    pub from: usize,
    pub to: usize,
    pub calls: u64,
    pub lost: u64,
    pub p50_us: Option<u32>,
}

/// What a finding names.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Subject {
    Host {
        host: String,
        zone: String,
        rack: String,
    },
    Rack {
        zone: String,
        rack: String,
    },
}

/// What is wrong with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trouble {
    /// Its paths lost `lost` of `calls` (the fleet's median ratio beside).
    Loss {
        calls: u64,
        lost: u64,
        fleet_ratio: f64,
        p_value: f64,
    },
    /// `slow` of its `paths` were slow; their median round trip, and the
    /// fleet's.
    Slow {
        paths: usize,
        slow: usize,
        p50_us: u32,
        fleet_p50_us: u32,
    },
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    pub subject: Subject,
    pub trouble: Trouble,
    /// Paths it explains.
    pub paths: usize,
}

impl std::fmt::Display for Finding {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match &self.subject {
            Subject::Host { host, zone, rack } => {
                write!(f, "host {host} (zone {zone:?}, rack {rack:?})")?
            }
            Subject::Rack { zone, rack } => {
                write!(f, "rack {rack:?} of zone {zone:?}, its link out")?
            }
        }
        match &self.trouble {
            Trouble::Loss {
                calls,
                lost,
                fleet_ratio,
                p_value,
            } => write!(
                f,
                ": lost {lost} of {calls} calls ({:.2}%, the fleet's median path {:.2}%; p = {p_value:.1e})",
                100.0 * *lost as f64 / (*calls).max(1) as f64,
                100.0 * fleet_ratio
            ),
            Trouble::Slow {
                paths,
                slow,
                p50_us,
                fleet_p50_us,
            } => write!(
                f,
                ": {slow} of {paths} paths slow, median round trip {:.2} ms against the fleet's {:.2} ms",
                f64::from(*p50_us) / 1000.0,
                f64::from(*fleet_p50_us) / 1000.0
            ),
        }
    }
}

/// The fleet as the reports show it: its hosts (reporting agents and the
/// peers they name) and its paths.
#[derive(Debug, Default)]
pub struct Fleet {
    pub hosts: Vec<HostLabels>,
    pub paths: Vec<Path>,
}

impl Fleet {
    pub fn of(reports: &[FleetReport]) -> Fleet {
        let mut index: HashMap<String, usize> = HashMap::new();
        let mut hosts: Vec<HostLabels> = Vec::new();
        let mut at = |h: HostLabels, hosts: &mut Vec<HostLabels>| -> usize {
            *index.entry(h.name.clone()).or_insert_with(|| {
                hosts.push(h);
                hosts.len() - 1
            })
        };
        let mut paths = Vec::new();
        let newest = reports
            .iter()
            .filter_map(|r| r.last_cycle)
            .max()
            .unwrap_or(0);
        for r in reports {
            let from = at(r.host.clone(), &mut hosts);
            // Each path as its last probe saw it, if that was in the last
            // FRESH cycles: a fault shows in the cycles after it began.
            for p in r.peers.iter().filter(|p| p.last.cycle + FRESH > newest) {
                let to = at(
                    HostLabels {
                        name: p.peer.clone(),
                        zone: p.zone.clone(),
                        rack: p.rack.clone(),
                    },
                    &mut hosts,
                );
                if p.last.calls > 0 && from != to {
                    paths.push(Path {
                        from,
                        to,
                        calls: u64::from(p.last.calls),
                        lost: u64::from(p.last.lost.min(p.last.calls)),
                        p50_us: p.last.rtt_p50_us,
                    });
                }
            }
        }
        Fleet { hosts, paths }
    }

    fn rack_key(&self, h: usize) -> (&str, &str) {
        let host = &self.hosts[h];
        let rack = if host.rack.is_empty() {
            host.name.as_str()
        } else {
            host.rack.as_str()
        };
        (host.zone.as_str(), rack)
    }

    fn same_rack(&self, p: &Path) -> bool {
        self.rack_key(p.from) == self.rack_key(p.to)
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    if v.is_empty() {
        return 0.0;
    }
    v.sort_by(f64::total_cmp);
    crate::measure::median_of_sorted(&v).unwrap_or(0.0)
}

/// P(X >= k) for X ~ Binomial(n, p).
fn upper_tail(k: u64, n: u64, p: f64) -> f64 {
    if k == 0 {
        return 1.0;
    }
    Binomial::new(p.clamp(1e-12, 1.0), n).map_or(1.0, |b| b.sf(k - 1))
}

/// A candidate: the paths it would explain, split into those inside
/// (its rack's, for a host) and those beyond.
struct Candidate {
    subject: Subject,
    inside: Vec<usize>,
    beyond: Vec<usize>,
    /// A host must be in trouble inside its rack too; a rack's edge only
    /// beyond it, with its inside clean.
    host: bool,
}

fn candidates(fleet: &Fleet, live: &[bool]) -> Vec<Candidate> {
    let mut by_host: BTreeMap<usize, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    let mut by_rack: BTreeMap<(String, String), (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for (i, p) in fleet.paths.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let inside = fleet.same_rack(p);
        for h in [p.from, p.to] {
            let e = by_host.entry(h).or_default();
            if inside { e.0.push(i) } else { e.1.push(i) }
        }
        if inside {
            let (z, r) = fleet.rack_key(p.from);
            by_rack.entry((z.into(), r.into())).or_default().0.push(i);
        } else {
            for h in [p.from, p.to] {
                let (z, r) = fleet.rack_key(h);
                by_rack.entry((z.into(), r.into())).or_default().1.push(i);
            }
        }
    }
    let mut out: Vec<Candidate> = by_host
        .into_iter()
        .map(|(h, (inside, beyond))| {
            let host = &fleet.hosts[h];
            Candidate {
                subject: Subject::Host {
                    host: host.name.clone(),
                    zone: host.zone.clone(),
                    rack: host.rack.clone(),
                },
                inside,
                beyond,
                host: true,
            }
        })
        .collect();
    // A rack of one host is that host.
    out.extend(
        by_rack
            .into_iter()
            .filter(|(_, (inside, _))| !inside.is_empty())
            .map(|((zone, rack), (inside, beyond))| Candidate {
                subject: Subject::Rack { zone, rack },
                inside,
                beyond,
                host: false,
            }),
    );
    out
}

/// The findings of one set of reports: loss first, then slowness over
/// the paths loss did not explain.
pub fn findings(fleet: &Fleet) -> Vec<Finding> {
    let mut live = vec![true; fleet.paths.len()];
    let mut found = loss_findings(fleet, &mut live);
    found.extend(slow_findings(fleet, &mut live));
    found
}

fn loss_findings(fleet: &Fleet, live: &mut [bool]) -> Vec<Finding> {
    let mut found = Vec::new();
    let sum = |paths: &[usize]| {
        paths.iter().fold((0u64, 0u64), |(c, l), &i| {
            (c + fleet.paths[i].calls, l + fleet.paths[i].lost)
        })
    };
    // Loss: the fleet's median path, the floor under it.
    let fleet_ratio = median(
        fleet
            .paths
            .iter()
            .map(|p| p.lost as f64 / p.calls as f64)
            .collect(),
    );
    let base = fleet_ratio.max(LOSS_FLOOR);
    for _ in 0..32 {
        let cands = candidates(fleet, live);
        let alpha = ALPHA / cands.len().max(1) as f64;
        let lossy = |paths: &[usize]| {
            let (calls, lost) = sum(paths);
            (calls, lost, upper_tail(lost, calls, base))
        };
        let best = cands
            .iter()
            .filter_map(|c| {
                let (ic, il, ip) = lossy(&c.inside);
                let (bc, bl, bp) = lossy(&c.beyond);
                let all = [c.inside.as_slice(), c.beyond.as_slice()].concat();
                let (calls, lost, p) = lossy(&all);
                let ratio = |l: u64, n: u64| l as f64 / n.max(1) as f64;
                let elevated = p < alpha && ratio(lost, calls) >= 3.0 * base;
                let fits = if c.host {
                    // Inside its rack too, when it has rack peers.
                    c.inside.is_empty() || ip < 0.05 || ratio(il, ic) >= 0.5 * ratio(bl, bc)
                } else {
                    bp < alpha && ratio(il, ic) < 0.25 * ratio(bl, bc) && ip > 0.01
                };
                let (p, rank) = if c.host {
                    (p, ratio(lost, calls))
                } else {
                    (bp, ratio(bl, bc))
                };
                (elevated && fits).then_some((p, rank, c, calls, lost, all))
            })
            // Significance is the gate; the most concentrated loss goes
            // first (p-values of large samples all underflow to 0, and a
            // rack next to a lossy one must not explain its paths away).
            .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.total_cmp(&a.0)));
        let Some((p, _, c, calls, lost, all)) = best else {
            break;
        };
        let explained = if c.host { all } else { c.beyond.clone() };
        let (calls, lost) = if c.host {
            (calls, lost)
        } else {
            sum(&c.beyond)
        };
        for &i in &explained {
            live[i] = false;
        }
        found.push(Finding {
            subject: c.subject.clone(),
            trouble: Trouble::Loss {
                calls,
                lost,
                fleet_ratio,
                p_value: p,
            },
            paths: explained.len(),
        });
    }
    found
}

fn slow_findings(fleet: &Fleet, live: &mut [bool]) -> Vec<Finding> {
    let mut found = Vec::new();
    let fleet_p50 = median(
        fleet
            .paths
            .iter()
            .filter_map(|p| p.p50_us.map(f64::from))
            .collect(),
    ) as u32;
    let threshold = (f64::from(fleet_p50) * SLOW_FACTOR).max(f64::from(fleet_p50 + SLOW_MARGIN_US));
    let slow = |i: &usize| {
        fleet.paths[*i]
            .p50_us
            .is_some_and(|v| f64::from(v) > threshold)
    };
    let share = |paths: &[usize]| {
        let measured: Vec<&usize> = paths
            .iter()
            .filter(|i| fleet.paths[**i].p50_us.is_some())
            .collect();
        let n = measured.iter().filter(|i| slow(i)).count();
        (n, measured.len())
    };
    for _ in 0..32 {
        let cands = candidates(fleet, live);
        let best = cands
            .iter()
            .filter_map(|c| {
                let (is, im) = share(&c.inside);
                let (bs, bm) = share(&c.beyond);
                let frac = |s: usize, m: usize| if m == 0 { 0.0 } else { s as f64 / m as f64 };
                let ok = if c.host {
                    bm >= 2 && frac(bs, bm) >= SLOW_SHARE && (im == 0 || frac(is, im) >= SLOW_SHARE)
                } else {
                    bm >= 2 && frac(bs, bm) >= SLOW_SHARE && frac(is, im) <= 1.0 - SLOW_SHARE
                };
                ok.then(|| (bs + if c.host { is } else { 0 }, c))
            })
            .max_by_key(|(n, _)| *n);
        let Some((_, c)) = best else {
            break;
        };
        let explained: Vec<usize> = if c.host {
            [c.inside.as_slice(), c.beyond.as_slice()].concat()
        } else {
            c.beyond.clone()
        };
        let (n_slow, measured) = share(&explained);
        let p50 = median(
            explained
                .iter()
                .filter(|i| slow(i))
                .filter_map(|&i| fleet.paths[i].p50_us.map(f64::from))
                .collect(),
        ) as u32;
        for &i in &explained {
            live[i] = false;
        }
        found.push(Finding {
            subject: c.subject.clone(),
            trouble: Trouble::Slow {
                paths: measured,
                slow: n_slow,
                p50_us: p50,
                fleet_p50_us: fleet_p50,
            },
            paths: explained.len(),
        });
    }
    found
}

/// A rack's paths, inside it and across its edge, as one line of a
/// cycle's record: how a reader sees a rack's link beside its hosts.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RackLine {
    pub zone: String,
    pub rack: String,
    pub inside_paths: usize,
    pub inside_p50_us: Option<u32>,
    pub beyond_paths: usize,
    pub beyond_p50_us: Option<u32>,
    pub beyond_calls: u64,
    pub beyond_lost: u64,
}

/// Every rack's line (racks of more than one host), O(paths).
pub fn racks(fleet: &Fleet) -> Vec<RackLine> {
    #[derive(Default)]
    struct Acc {
        inside: Vec<f64>,
        inside_paths: usize,
        beyond: Vec<f64>,
        beyond_paths: usize,
        calls: u64,
        lost: u64,
    }
    let mut acc: BTreeMap<(String, String), Acc> = BTreeMap::new();
    for p in &fleet.paths {
        let rtt = p.p50_us.map(f64::from);
        if fleet.same_rack(p) {
            let (z, r) = fleet.rack_key(p.from);
            let a = acc.entry((z.into(), r.into())).or_default();
            a.inside_paths += 1;
            a.inside.extend(rtt);
        } else {
            for h in [p.from, p.to] {
                let (z, r) = fleet.rack_key(h);
                let a = acc.entry((z.into(), r.into())).or_default();
                a.beyond_paths += 1;
                a.beyond.extend(rtt);
                a.calls += p.calls;
                a.lost += p.lost;
            }
        }
    }
    let med = |v: Vec<f64>| (!v.is_empty()).then(|| median(v) as u32);
    acc.into_iter()
        .filter(|(_, a)| a.inside_paths > 0)
        .map(|((zone, rack), a)| RackLine {
            zone,
            rack,
            inside_paths: a.inside_paths,
            inside_p50_us: med(a.inside),
            beyond_paths: a.beyond_paths,
            beyond_p50_us: med(a.beyond),
            beyond_calls: a.calls,
            beyond_lost: a.lost,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fleet::summaries::{LastProbe, PeerFigures};

    /// 40 hosts, 8 racks of 5, 2 zones; every host probes every other;
    /// `loss(from, to)` and `rtt(from, to)` say each path's figures.
    fn reports(
        loss: impl Fn(usize, usize) -> f64,
        rtt: impl Fn(usize, usize) -> u32,
    ) -> Vec<FleetReport> {
        let host = |i: usize| HostLabels {
            name: format!("10.0.0.{i}:5310"),
            zone: format!("z{}", i / 20),
            rack: format!("r{}", i / 5),
        };
        (0..40)
            .map(|i| FleetReport {
                host: host(i),
                every_s: 60.0,
                last_cycle: Some(1),
                cycles: 2,
                hosts: 40,
                peers_a_cycle: 39,
                coverage_cycles: 1,
                calls: 0,
                lost: 0,
                answered: 0,
                problem: None,
                peers: (0..40)
                    .filter(|&j| j != i)
                    .map(|j| {
                        let calls = 40u64;
                        let h = host(j);
                        // A deterministic share, so the tests cannot flake.
                        let lost = (loss(i, j) * calls as f64
                            + ((i * 7 + j * 13) % 10) as f64 / 10.0)
                            .floor() as u64;
                        PeerFigures {
                            peer: h.name,
                            zone: h.zone,
                            rack: h.rack,
                            probes: 2,
                            calls,
                            lost,
                            loss_ratio: lost as f64 / calls as f64,
                            rtt_p50_us: Some(rtt(i, j)),
                            rtt_p99_us: Some(rtt(i, j) * 2),
                            last: LastProbe {
                                cycle: 1,
                                calls: calls as u32,
                                lost: lost as u32,
                                rtt_p50_us: Some(rtt(i, j)),
                            },
                        }
                    })
                    .collect(),
            })
            .collect()
    }

    fn names(found: &[Finding]) -> Vec<String> {
        found
            .iter()
            .map(|f| match &f.subject {
                Subject::Host { host, .. } => host.clone(),
                Subject::Rack { rack, .. } => rack.clone(),
            })
            .collect()
    }

    #[test]
    fn a_healthy_fleet_gives_no_finding() {
        let r = reports(|_, _| 0.0, |i, j| 40 + ((i + j) % 7) as u32 * 5);
        assert!(findings(&Fleet::of(&r)).is_empty());
    }

    #[test]
    fn a_lossy_host_and_a_slow_rack_are_named_and_nothing_else() {
        let lossy = 7; // rack r1
        let slow_rack = |i: usize| i / 5 == 5;
        let r = reports(
            |i, j| if i == lossy || j == lossy { 0.04 } else { 0.0 },
            |i, j| {
                if slow_rack(i) != slow_rack(j) {
                    9000
                } else {
                    50
                }
            },
        );
        let found = findings(&Fleet::of(&r));
        assert_eq!(names(&found), ["10.0.0.7:5310", "r5"], "{found:#?}");
        assert!(matches!(found[0].trouble, Trouble::Loss { .. }));
        assert!(matches!(found[1].trouble, Trouble::Slow { .. }));
    }

    #[test]
    fn a_lossy_rack_link_is_the_rack_and_a_slow_host_is_the_host() {
        let r = reports(
            |i, j| {
                if (i / 5 == 2) != (j / 5 == 2) {
                    0.05
                } else {
                    0.0
                }
            },
            |i, j| if i == 33 || j == 33 { 5000 } else { 60 },
        );
        let found = findings(&Fleet::of(&r));
        assert_eq!(names(&found), ["r2", "10.0.0.33:5310"], "{found:#?}");
    }
}
