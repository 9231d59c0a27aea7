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
//!   lose more than the rest of the fleet's paths (at least
//!   [`LOSS_EFFECT`] times, and by a one-sided binomial test against the
//!   rest's loss ratio, at least [`LOSS_FLOOR`], Bonferroni-corrected over
//!   the candidates, with the worst pair of hosts left out, so that one
//!   bad path is not its ends), or are slow (at least [`SLOW_SHARE`] of them
//!   slower than [`SLOW_FACTOR`] x the fleet's median round trip, and at
//!   least [`SLOW_MARGIN_US`] more);
//! - **a rack's uplink**: the paths crossing the rack's edge lose or are
//!   slow so, while the paths inside the rack do not;
//! - **a zone's link out**, the same one level up: the paths crossing the
//!   zone's edge, with the paths inside the zone clean (with two zones
//!   the two links are one edge, and the finding says so);
//! - **a pair of hosts**: what no host, rack or zone explains, tested per
//!   pair (both directions) against the loss left on the unexplained
//!   paths, Bonferroni-corrected over the pairs, on the last probe and
//!   on the agents' window alike; slow only both ways, and when the last
//!   probe and a window of two probes or more agree, and only while each end's other paths are clean (a
//!   rack's fault shows first on a few of its paths, and those are the
//!   rack's). At most [`MAX_PAIRS`] a cycle, the worst first.
//!
//! A host in trouble inside its rack is a host; a rack whose every host
//! is fine inside and in trouble outside is its shared link. On ties the
//! narrower subject is named (a zone of one rack is that rack). Invariant:
//! a fleet whose paths all behave alike gives no finding, and no finding
//! names a host, rack, zone or pair that none of the troubled paths
//! touches.

use crate::fleet::HostLabels;
use crate::fleet::report::FleetReport;
use serde::{Deserialize, Serialize};
use statrs::distribution::{Binomial, DiscreteCDF};
use std::collections::{BTreeMap, HashMap};

/// Cycles a path's last probe counts for: the last two.
pub const FRESH: u64 = 2;
/// The least loss ratio the test assumes for a healthy path.
pub const LOSS_FLOOR: f64 = 0.001;
/// A subject's loss must be this many times the rest of the fleet's.
pub const LOSS_EFFECT: f64 = 3.0;
/// The family-wise false-finding rate of one cycle's tests.
pub const ALPHA: f64 = 1e-3;
/// A path is slow past this many times the fleet's median round trip...
pub const SLOW_FACTOR: f64 = 3.0;
/// ... and this much more, µs.
pub const SLOW_MARGIN_US: u32 = 500;
/// A host or rack edge is slow when this share of its paths is.
pub const SLOW_SHARE: f64 = 0.8;
/// Pair findings a cycle, at most: past them the trouble is wider than
/// pairs, and the host, rack and zone lines show it.
pub const MAX_PAIRS: usize = 16;

/// One directed path's figures, as the agent at its start held them.
#[derive(Debug, Clone, PartialEq)]
pub struct Path {
    pub from: usize,
    pub to: usize,
    pub calls: u64,
    pub lost: u64,
    pub p50_us: Option<u32>,
    /// The agent's window for this peer (the last probe among them).
    pub window_calls: u64,
    pub window_lost: u64,
    pub window_p50_us: Option<u32>,
    /// Probes in that window.
    pub window_probes: usize,
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
    /// A zone's link to the others; `other` is the only other zone, when
    /// there are two (then the two links are one edge, either side).
    Zone {
        zone: String,
        other: Option<String>,
    },
    /// Two hosts, both directions of their path; `a` sorts before `b`.
    Pair {
        a: String,
        b: String,
    },
}

impl Subject {
    /// Narrower subjects win ties: a host before its rack before its zone.
    fn narrowness(&self) -> u8 {
        match self {
            Subject::Pair { .. } => 3,
            Subject::Host { .. } => 2,
            Subject::Rack { .. } => 1,
            Subject::Zone { .. } => 0,
        }
    }
}

/// What is wrong with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Trouble {
    /// Its paths lost `lost` of `calls`; `fleet_ratio` is the loss on the
    /// rest of the fleet's paths (at least [`LOSS_FLOOR`]), its baseline.
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
            Subject::Zone { zone, other: None } => {
                write!(f, "zone {zone:?}, its link to the other zones")?
            }
            Subject::Zone {
                zone,
                other: Some(other),
            } => write!(
                f,
                "the link between zones {zone:?} and {other:?} (either zone's side)"
            )?,
            Subject::Pair { a, b } => write!(f, "the path between {a} and {b}")?,
        }
        match &self.trouble {
            Trouble::Loss {
                calls,
                lost,
                fleet_ratio,
                p_value,
            } => write!(
                f,
                ": lost {lost} of {calls} calls ({:.2}%, the rest of the fleet {:.2}%; p = {p_value:.1e})",
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
                        window_calls: p.calls,
                        window_lost: p.lost.min(p.calls),
                        window_p50_us: p.rtt_p50_us,
                        window_probes: p.probes,
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

    fn zone(&self, h: usize) -> &str {
        &self.hosts[h].zone
    }

    /// The zones the fleet's paths join, when there are two or more.
    fn zones(&self) -> Vec<&str> {
        let zones: std::collections::BTreeSet<&str> =
            self.hosts.iter().map(|h| h.zone.as_str()).collect();
        if zones.len() < 2 {
            Vec::new()
        } else {
            zones.into_iter().collect()
        }
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
    out.extend(zone_candidates(fleet, live));
    out
}

/// Each zone's edge, as a candidate like a rack's: paths inside the zone
/// and paths across its edge.
fn zone_candidates(fleet: &Fleet, live: &[bool]) -> Vec<Candidate> {
    let zones = fleet.zones();
    if zones.is_empty() {
        return Vec::new();
    }
    let mut by_zone: BTreeMap<&str, (Vec<usize>, Vec<usize>)> = BTreeMap::new();
    for (i, p) in fleet.paths.iter().enumerate() {
        if !live[i] {
            continue;
        }
        let (from, to) = (fleet.zone(p.from), fleet.zone(p.to));
        if from == to {
            by_zone.entry(from).or_default().0.push(i);
        } else {
            by_zone.entry(from).or_default().1.push(i);
            by_zone.entry(to).or_default().1.push(i);
        }
    }
    if let [a, b] = zones[..] {
        // Two zones have one edge: one candidate, its inside both zones'.
        let (mut inside, mut beyond) = (Vec::new(), Vec::new());
        for (zone, (i, e)) in by_zone {
            inside.extend(i);
            if zone == a {
                beyond = e;
            }
        }
        return vec![Candidate {
            subject: Subject::Zone {
                zone: a.to_string(),
                other: Some(b.to_string()),
            },
            inside,
            beyond,
            host: false,
        }];
    }
    by_zone
        .into_iter()
        .filter(|(_, (inside, _))| !inside.is_empty())
        .map(|(zone, (inside, beyond))| Candidate {
            subject: Subject::Zone {
                zone: zone.to_string(),
                other: None,
            },
            inside,
            beyond,
            host: false,
        })
        .collect()
}

/// The live paths grouped by the pair of hosts at their ends.
fn pairs(fleet: &Fleet, live: &[bool]) -> BTreeMap<(usize, usize), Vec<usize>> {
    let mut out: BTreeMap<(usize, usize), Vec<usize>> = BTreeMap::new();
    for (i, p) in fleet.paths.iter().enumerate() {
        if live[i] {
            out.entry((p.from.min(p.to), p.from.max(p.to)))
                .or_default()
                .push(i);
        }
    }
    out
}

/// `paths` less those of the pair of hosts that lost the most on them.
fn without_worst_pair(fleet: &Fleet, paths: &[usize]) -> Vec<usize> {
    let key = |i: usize| {
        let p = &fleet.paths[i];
        (p.from.min(p.to), p.from.max(p.to))
    };
    let mut lost: HashMap<(usize, usize), u64> = HashMap::new();
    for &i in paths {
        *lost.entry(key(i)).or_default() += fleet.paths[i].lost;
    }
    let worst = lost
        .into_iter()
        .max_by_key(|&(pair, l)| (l, std::cmp::Reverse(pair)))
        .map(|(pair, _)| pair);
    paths
        .iter()
        .copied()
        .filter(|&i| Some(key(i)) != worst)
        .collect()
}

/// Each host's live paths: what a pair's ends do with the rest of the
/// fleet, so that a pair is named only when it alone is in trouble (the
/// first cycles of a rack's or a host's fault are the wider subject's,
/// before enough of its paths show it).
fn ends(fleet: &Fleet, live: &[bool]) -> HashMap<usize, Vec<usize>> {
    let mut out: HashMap<usize, Vec<usize>> = HashMap::new();
    for (i, p) in fleet.paths.iter().enumerate() {
        if live[i] {
            out.entry(p.from).or_default().push(i);
            out.entry(p.to).or_default().push(i);
        }
    }
    out
}

/// The live paths of `host` other than those of `pair`.
fn others<'a>(
    fleet: &'a Fleet,
    ends: &'a HashMap<usize, Vec<usize>>,
    host: usize,
    (a, b): (usize, usize),
) -> impl Iterator<Item = &'a Path> {
    ends.get(&host)
        .into_iter()
        .flatten()
        .map(|&i| &fleet.paths[i])
        .filter(move |p| (p.from.min(p.to), p.from.max(p.to)) != (a, b))
}

/// A pair by its hosts' names in order, so that a pair is named alike
/// whichever of its ends the reports met first.
fn pair_subject(fleet: &Fleet, (a, b): (usize, usize)) -> Subject {
    let (a, b) = (&fleet.hosts[a].name, &fleet.hosts[b].name);
    let (a, b) = if a <= b { (a, b) } else { (b, a) };
    Subject::Pair {
        a: a.clone(),
        b: b.clone(),
    }
}

/// Pairs whose loss the wider subjects left unexplained: each pair's both
/// directions against the loss on all the unexplained paths, on the last
/// probe and on the window (a fault's first cycles show in the one, a
/// path that loses a little but always in the other).
fn lossy_pairs(fleet: &Fleet, live: &mut [bool]) -> Vec<Finding> {
    let groups = pairs(fleet, live);
    let (calls, lost) = groups.values().flatten().fold((0u64, 0u64), |(c, l), &i| {
        (c + fleet.paths[i].calls, l + fleet.paths[i].lost)
    });
    let base = (lost as f64 / calls.max(1) as f64).max(LOSS_FLOOR);
    let alpha = ALPHA / (2 * groups.len()).max(1) as f64;
    let ends = ends(fleet, live);
    // (loss ratio, p, pair, calls, lost)
    type Lossy = (f64, f64, (usize, usize), u64, u64);
    let mut lossy: Vec<Lossy> = groups
        .iter()
        .filter_map(|(&pair, paths)| {
            let sum = |f: fn(&Path) -> (u64, u64)| {
                paths.iter().fold((0u64, 0u64), |(c, l), &i| {
                    let (pc, pl) = f(&fleet.paths[i]);
                    (c + pc, l + pl)
                })
            };
            let last = sum(|p| (p.calls, p.lost));
            let window = sum(|p| (p.window_calls, p.window_lost));
            let test = |(c, l): (u64, u64)| {
                let ratio = l as f64 / c.max(1) as f64;
                (upper_tail(l, c, base), ratio, c, l)
            };
            let (p, ratio, c, l) = [test(last), test(window)]
                .into_iter()
                .filter(|(p, ratio, ..)| *p < alpha && *ratio >= LOSS_EFFECT * base)
                .min_by(|a, b| a.0.total_cmp(&b.0))?;
            // Each end's other paths clean: otherwise the end is the fault.
            let clean = |h: usize| {
                let (c, l) = others(fleet, &ends, h, pair)
                    .fold((0, 0), |(c, l), p| (c + p.calls, l + p.lost));
                upper_tail(l, c, base) > 0.01
            };
            (clean(pair.0) && clean(pair.1)).then_some((ratio, p, pair, c, l))
        })
        .collect();
    lossy.sort_by(|a, b| b.0.total_cmp(&a.0).then(a.1.total_cmp(&b.1)));
    lossy
        .into_iter()
        .take(MAX_PAIRS)
        .map(|(_, p, pair, calls, lost)| {
            let paths = &groups[&pair];
            for &i in paths {
                live[i] = false;
            }
            Finding {
                subject: pair_subject(fleet, pair),
                trouble: Trouble::Loss {
                    calls,
                    lost,
                    fleet_ratio: base,
                    p_value: p,
                },
                paths: paths.len(),
            }
        })
        .collect()
}

/// Pairs slow both ways, on the last probe and over a window of at least
/// two probes alike (one slow probe is a busy host; a window of them is
/// the path).
fn slow_pairs(fleet: &Fleet, live: &mut [bool], threshold: f64, fleet_p50: u32) -> Vec<Finding> {
    let groups = pairs(fleet, live);
    let ends = ends(fleet, live);
    let above = |v: Option<u32>| v.map(|v| f64::from(v) > threshold);
    let mut slow: Vec<(u32, (usize, usize), usize)> = groups
        .iter()
        .filter_map(|(&pair, paths)| {
            let measured: Vec<&Path> = paths
                .iter()
                .map(|&i| &fleet.paths[i])
                .filter(|p| p.p50_us.is_some())
                .collect();
            // Both ways, each over at least two probes: a single probe
            // from a CPU-starved agent is as slow as a slow path.
            let all_slow = measured.len() == 2
                && measured.iter().all(|p| {
                    above(p.p50_us) == Some(true)
                        && above(p.window_p50_us) == Some(true)
                        && p.window_probes >= 2
                });
            // Each end's other paths mostly fast: otherwise the end, or
            // the link it sits behind, is the fault.
            let fast = |h: usize| {
                let (n, slow) = others(fleet, &ends, h, pair)
                    .filter_map(|p| above(p.p50_us))
                    .fold((0usize, 0usize), |(n, s), slow| {
                        (n + 1, s + usize::from(slow))
                    });
                slow as f64 <= (1.0 - SLOW_SHARE) * n as f64
            };
            (all_slow && fast(pair.0) && fast(pair.1)).then(|| {
                let p50 = median(
                    measured
                        .iter()
                        .filter_map(|p| p.p50_us.map(f64::from))
                        .collect(),
                );
                (p50 as u32, pair, measured.len())
            })
        })
        .collect();
    slow.sort_by_key(|s| std::cmp::Reverse(s.0));
    slow.into_iter()
        .take(MAX_PAIRS)
        .map(|(p50, pair, measured)| {
            let paths = &groups[&pair];
            for &i in paths {
                live[i] = false;
            }
            Finding {
                subject: pair_subject(fleet, pair),
                trouble: Trouble::Slow {
                    paths: measured,
                    slow: measured,
                    p50_us: p50,
                    fleet_p50_us: fleet_p50,
                },
                paths: paths.len(),
            }
        })
        .collect()
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
    let ratio = |l: u64, n: u64| l as f64 / n.max(1) as f64;
    for _ in 0..32 {
        let cands = candidates(fleet, live);
        let alpha = ALPHA / cands.len().max(1) as f64;
        let live_paths: Vec<usize> = (0..fleet.paths.len()).filter(|&i| live[i]).collect();
        let (total_calls, total_lost) = sum(&live_paths);
        let best = cands
            .iter()
            .filter_map(|c| {
                let all = [c.inside.as_slice(), c.beyond.as_slice()].concat();
                let explained = if c.host { &all } else { &c.beyond };
                // Against the rest of the fleet: loss the whole fleet shares
                // is no host's and no link's.
                let (ec, el) = sum(explained);
                let base = ratio(total_lost - el, total_calls - ec).max(LOSS_FLOOR);
                let lossy = |paths: &[usize]| {
                    let (calls, lost) = sum(paths);
                    (calls, lost, upper_tail(lost, calls, base))
                };
                let (ic, il, ip) = lossy(&c.inside);
                let (bc, bl, bp) = lossy(&c.beyond);
                let (calls, lost, p) = lossy(&all);
                let elevated = p < alpha && ratio(lost, calls) >= LOSS_EFFECT * base;
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
                // Leave the worst pair out: loss on one path is that path,
                // not the host or the link the path crosses.
                let (rc, rl, rp) = lossy(&without_worst_pair(fleet, explained));
                let spread = rp < alpha && ratio(rl, rc) >= LOSS_EFFECT * base;
                (elevated && fits && spread).then_some((p, rank, base, c))
            })
            // Significance is the gate; the most concentrated loss goes
            // first (p-values of large samples all underflow to 0, and a
            // rack next to a lossy one must not explain its paths away).
            .max_by(|a, b| {
                a.1.total_cmp(&b.1)
                    .then(b.0.total_cmp(&a.0))
                    .then(a.3.subject.narrowness().cmp(&b.3.subject.narrowness()))
            });
        let Some((p, _, base, c)) = best else {
            break;
        };
        // Only the chosen candidate's paths are gathered.
        let explained = if c.host {
            [c.inside.as_slice(), c.beyond.as_slice()].concat()
        } else {
            c.beyond.clone()
        };
        let (calls, lost) = sum(&explained);
        for &i in &explained {
            live[i] = false;
        }
        found.push(Finding {
            subject: c.subject.clone(),
            trouble: Trouble::Loss {
                calls,
                lost,
                fleet_ratio: base,
                p_value: p,
            },
            paths: explained.len(),
        });
    }
    found.extend(lossy_pairs(fleet, live));
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
            .max_by_key(|(n, c)| (*n, c.subject.narrowness()));
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
    found.extend(slow_pairs(fleet, live, threshold, fleet_p50));
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
        reports_in(2, loss, rtt)
    }

    /// As [`reports`], the 40 hosts in `zones` zones of whole racks.
    fn reports_in(
        zones: usize,
        loss: impl Fn(usize, usize) -> f64,
        rtt: impl Fn(usize, usize) -> u32,
    ) -> Vec<FleetReport> {
        let host = |i: usize| HostLabels {
            name: format!("10.0.0.{i}:5310"),
            zone: format!("z{}", i / (40 / zones)),
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
                Subject::Zone { zone, .. } => zone.clone(),
                Subject::Pair { a, b } => format!("{a}-{b}"),
            })
            .collect()
    }

    #[test]
    fn loss_everywhere_alike_is_no_finding_about_any_pair() {
        // 1% on every path: each loses 0 or 1 of its 40 calls, so the
        // fleet's median path is 0 and only the pooled loss says 1%.
        let r = reports(|_, _| 0.01, |_, _| 50);
        let fleet = Fleet::of(&r);
        let lost: u64 = fleet.paths.iter().map(|p| p.lost).sum();
        assert!(lost > 100, "the dither gave {lost} losses");
        assert!(findings(&fleet).is_empty(), "{:#?}", findings(&fleet));
    }

    #[test]
    fn a_lossy_zone_link_is_the_zone_and_with_two_zones_says_either_side() {
        let r = reports(|i, j| if i / 20 != j / 20 { 0.05 } else { 0.0 }, |_, _| 50);
        let found = findings(&Fleet::of(&r));
        assert_eq!(names(&found), ["z0"], "{found:#?}");
        assert_eq!(
            found[0].subject,
            Subject::Zone {
                zone: "z0".into(),
                other: Some("z1".into())
            }
        );
        assert_eq!(found[0].paths, 2 * 20 * 20);

        // Four zones of ten: the one whose link loses is named alone.
        let r = reports_in(
            4,
            |i, j| {
                if (i / 10 == 2) != (j / 10 == 2) {
                    0.05
                } else {
                    0.0
                }
            },
            |_, _| 50,
        );
        let found = findings(&Fleet::of(&r));
        assert_eq!(names(&found), ["z2"], "{found:#?}");
        assert!(found[0].to_string().contains("to the other zones"));
    }

    #[test]
    fn a_slow_zone_link_is_the_zone_and_not_its_racks() {
        let r = reports_in(
            4,
            |_, _| 0.0,
            |i, j| {
                if (i / 10 == 1) != (j / 10 == 1) {
                    4000
                } else {
                    60
                }
            },
        );
        let found = findings(&Fleet::of(&r));
        assert_eq!(names(&found), ["z1"], "{found:#?}");
        assert!(matches!(found[0].trouble, Trouble::Slow { .. }));
    }

    #[test]
    fn a_rack_fault_showing_on_half_its_paths_is_no_pair() {
        // A shaped rack's first cycle: half its paths out are slow, too
        // few for the rack, and no pair of them is its own.
        let edge = |i: usize, j: usize| (i / 5 == 5) != (j / 5 == 5) && (i + j).is_multiple_of(2);
        let r = reports(|_, _| 0.0, |i, j| if edge(i, j) { 9000 } else { 50 });
        let found = findings(&Fleet::of(&r));
        assert!(
            found
                .iter()
                .all(|f| !matches!(f.subject, Subject::Pair { .. })),
            "{found:#?}"
        );
    }

    #[test]
    fn one_lossy_path_is_the_pair_not_either_host() {
        let pair = |i: usize, j: usize| (i, j) == (3, 28) || (i, j) == (28, 3);
        let r = reports(
            |i, j| if pair(i, j) { 0.3 } else { 0.0 },
            |i, j| {
                if (i, j) == (11, 36) || (i, j) == (36, 11) {
                    7000
                } else {
                    50
                }
            },
        );
        let found = findings(&Fleet::of(&r));
        assert_eq!(
            names(&found),
            [
                "10.0.0.28:5310-10.0.0.3:5310",
                "10.0.0.11:5310-10.0.0.36:5310"
            ],
            "{found:#?}"
        );
        assert!(matches!(found[0].trouble, Trouble::Loss { .. }));
        assert!(matches!(found[1].trouble, Trouble::Slow { .. }));
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
