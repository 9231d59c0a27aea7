//! The runner's schedule of pairs: which pairs of N hosts are measured
//! when, every ordered pair once a pass, in rounds of disjoint pairs, so
//! that no host is in two tests at once (`host` mode); and [`walk`], the
//! one loop that runs a pass step by step and replans it when hosts are
//! lost. `netlab mesh` runs its passes through it; it names no experiment.
//!
//! The rounds come from the circle method (round-robin tournaments): with
//! the hosts padded to an even count `m` (a "bye" for an odd N), one host
//! stays fixed and the others turn one place a round on a circle; each
//! round pairs the circle's opposite places, so `m - 1` rounds of `m / 2`
//! pairs meet every unordered pair exactly once. Measuring each direction
//! on its own takes a second lap with every pair turned round: `2 (m - 1)`
//! rounds, the fewest possible, since a host has `2 (N - 1)` ordered
//! tests and takes part in at most one a round. With `bidir` a pair's two
//! directions run at once and one lap does.
//!
//! Invariants (checked by the tests for N = 2 to 2,000 and 10,000):
//! - every ordered pair (both directions with `bidir`) exactly once a pass;
//! - no host twice in a round; `host` mode never splits that guarantee,
//!   and `--max-pairs` only divides a round into steps;
//! - the same hosts and seed give the same plan (the seed shuffles the
//!   order the hosts take on the circle, so repeated passes meet in other
//!   rounds);
//! - a plan is a function of the round's number, computed on demand: the
//!   10,000-host plan (2 x 10^8 ordered pairs) is never held whole.
//!
//! When hosts fail mid-pass, [`Schedule::remaining`] plans what is left
//! over the survivors (the same method over fewer hosts, minus the pairs
//! already measured) and [`Schedule::orphaned`] lists the cells the lost
//! hosts take with them; [`walk`] does both after each step that lost a
//! host, so that a pass goes on over whoever is left.

use std::collections::HashSet;
use thiserror::Error;

/// One test: `from` sends to `to` (and, with `bidir`, `to` to `from` at
/// the same time). Hosts are indices into the mesh's inventory.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Pair {
    pub from: u32,
    pub to: u32,
}

impl Pair {
    /// The same two hosts, whichever sends.
    pub fn hosts(&self) -> [u32; 2] {
        [self.from, self.to]
    }
}

/// How tests may overlap.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// The pairs of a round run at once (at most `--max-pairs`), no host
    /// in two tests at a time.
    Host,
    /// One pair at a time.
    Strict,
    /// Every pair of a round started together: a bisection test whose
    /// cells share the network on purpose.
    Stress,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Host => "host",
            Mode::Strict => "strict",
            Mode::Stress => "stress",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum ScheduleError {
    #[error("a mesh needs at least two hosts, not {0}")]
    TooFew(usize),
    #[error("--max-pairs 0: at least one pair must run")]
    NoPairs,
    #[error(
        "--max-pairs {0} with --mode stress: stress starts every pair of a round at once; use --mode host to cap them"
    )]
    CappedStress(usize),
}

/// A pass's plan over hosts `0 .. n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Schedule {
    /// The hosts in their places on the circle (a shuffle of the live
    /// hosts); `None` is the bye of an odd count.
    circle: Vec<Option<u32>>,
    pub bidir: bool,
    pub mode: Mode,
    /// Pairs run at once at most (None: a whole round).
    pub max_pairs: Option<usize>,
    /// Pairs measured already: skipped (a resumed or rescheduled pass).
    done: HashSet<Pair>,
}

impl Schedule {
    /// Plans a pass over `hosts` (inventory indices), shuffled by `seed`.
    pub fn new(
        hosts: &[u32],
        seed: u64,
        bidir: bool,
        mode: Mode,
        max_pairs: Option<usize>,
    ) -> Result<Schedule, ScheduleError> {
        if hosts.len() < 2 {
            return Err(ScheduleError::TooFew(hosts.len()));
        }
        match (mode, max_pairs) {
            (_, Some(0)) => return Err(ScheduleError::NoPairs),
            (Mode::Stress, Some(cap)) => return Err(ScheduleError::CappedStress(cap)),
            _ => {}
        }
        let mut order = hosts.to_vec();
        order.sort_unstable();
        order.dedup();
        fastrand::Rng::with_seed(seed).shuffle(&mut order);
        let mut circle: Vec<Option<u32>> = order.into_iter().map(Some).collect();
        if circle.len() % 2 == 1 {
            circle.push(None);
        }
        Ok(Schedule {
            circle,
            bidir,
            mode,
            max_pairs,
            done: HashSet::new(),
        })
    }

    /// The hosts planned for.
    pub fn hosts(&self) -> impl Iterator<Item = u32> + '_ {
        self.circle.iter().flatten().copied()
    }

    /// Rounds in a pass: `m - 1`, twice without `bidir` (`m` the host
    /// count made even).
    pub fn rounds(&self) -> usize {
        let lap = self.circle.len() - 1;
        if self.bidir { lap } else { 2 * lap }
    }

    /// Tests in a pass (less those done): ordered pairs, or unordered ones
    /// with `bidir`.
    pub fn tests(&self) -> usize {
        let n = self.hosts().count();
        // With `bidir` the done pairs are held both ways round.
        if self.bidir {
            n * (n - 1) / 2 - self.done.len() / 2
        } else {
            n * (n - 1) - self.done.len()
        }
    }

    /// Round `r`'s pairs (those not done) into `pairs`, reusing it.
    pub fn round_into(&self, r: usize, pairs: &mut Vec<Pair>) {
        pairs.clear();
        let m = self.circle.len();
        let lap = m - 1;
        let (turn, reversed) = (r % lap, r >= lap);
        // Place 0 stays; place i > 0 holds circle[1 + (i - 1 + turn) % lap].
        let at = |place: usize| {
            if place == 0 {
                self.circle[0]
            } else {
                self.circle[1 + (place - 1 + turn) % lap]
            }
        };
        for i in 0..m / 2 {
            let (Some(a), Some(b)) = (at(i), at(m - 1 - i)) else {
                continue;
            };
            // Who sends: a turning host sends from the odd places and
            // moves one place a round, so it sends every other round (as
            // Berger's tables give home and away); the fixed host
            // alternates by round. Each host sends about half its tests a
            // lap, and the second lap turns every pair round.
            let forward = if i == 0 { turn % 2 == 0 } else { i % 2 == 1 };
            let pair = if forward != reversed {
                Pair { from: a, to: b }
            } else {
                Pair { from: b, to: a }
            };
            if !self.done.contains(&pair) {
                pairs.push(pair);
            }
        }
    }

    /// Round `r`'s pairs.
    pub fn round(&self, r: usize) -> Vec<Pair> {
        let mut pairs = Vec::with_capacity(self.circle.len() / 2);
        self.round_into(r, &mut pairs);
        pairs
    }

    /// A round's pairs in the steps that run at once: the whole round
    /// (`stress`, or `host` uncapped), `--max-pairs` at a time, or one by
    /// one (`strict`).
    pub fn steps<'a>(&self, pairs: &'a [Pair]) -> std::slice::Chunks<'a, Pair> {
        let at_once = match self.mode {
            Mode::Strict => 1,
            Mode::Stress => pairs.len(),
            Mode::Host => self.max_pairs.unwrap_or(pairs.len()),
        };
        pairs.chunks(at_once.max(1))
    }

    /// Steps in a pass: what its time is counted in.
    pub fn step_count(&self) -> usize {
        let mut pairs = Vec::new();
        (0..self.rounds())
            .map(|r| {
                self.round_into(r, &mut pairs);
                self.steps(&pairs).len()
            })
            .sum()
    }

    /// The plan for what is left of this pass once `lost` hosts are gone
    /// and `done` pairs measured: the same method over the survivors (fewer
    /// rounds), skipping what is done. Errs when fewer than two survive.
    pub fn remaining(&self, lost: &[u32], done: &HashSet<Pair>) -> Result<Schedule, ScheduleError> {
        let survivors: Vec<u32> = self.hosts().filter(|h| !lost.contains(h)).collect();
        let mut next = Schedule {
            circle: Vec::new(),
            ..self.clone()
        };
        // Keep the survivors' order on the circle: deterministic, and no
        // new draws from the seed.
        next.circle = survivors.into_iter().map(Some).collect();
        if next.circle.len() < 2 {
            return Err(ScheduleError::TooFew(next.circle.len()));
        }
        if next.circle.len() % 2 == 1 {
            next.circle.push(None);
        }
        next.done = done
            .iter()
            .filter(|p| !p.hosts().iter().any(|h| lost.contains(h)))
            .copied()
            .collect();
        if self.bidir {
            // A bidir test is one unordered pair, whichever way it ran.
            let turned: Vec<Pair> = next
                .done
                .iter()
                .map(|p| Pair {
                    from: p.to,
                    to: p.from,
                })
                .collect();
            next.done.extend(turned);
        }
        Ok(next)
    }

    /// The tests of this pass that `lost` hosts take with them: every pair
    /// with a lost host not in `done`, in order. Only the lost hosts' pairs
    /// are looked at: O(N) a lost host, not N².
    pub fn orphaned(&self, lost: &[u32], done: &HashSet<Pair>) -> Vec<Pair> {
        let hosts: Vec<u32> = self.hosts().collect();
        let mut orphans = std::collections::BTreeSet::new();
        for &l in lost.iter().filter(|l| hosts.contains(l)) {
            for &h in hosts.iter().filter(|&&h| h != l) {
                for pair in [Pair { from: l, to: h }, Pair { from: h, to: l }] {
                    let turned = Pair {
                        from: pair.to,
                        to: pair.from,
                    };
                    let counted = !self.bidir || pair.from < pair.to;
                    let measured = done.contains(&pair)
                        || (self.bidir && done.contains(&turned))
                        || self.done.contains(&pair);
                    if counted && !measured {
                        orphans.insert(pair);
                    }
                }
            }
        }
        orphans.into_iter().collect()
    }
}

/// What [`walk`] runs a pass through: the steps' measurements and what is
/// done with the pairs a lost host takes with it.
pub trait Walker {
    type Error;
    /// The plan (the whole pass, or what is left after a loss) is about to
    /// run: said to the person watching.
    fn planned(&mut self, schedule: &Schedule);
    /// Measures one step's pairs (disjoint in `host` and `strict` mode)
    /// of round `round`, and says which hosts it lost. An error ends the
    /// walk (the user stopped it; nothing more can be kept).
    fn step(&mut self, round: usize, pairs: &[Pair]) -> Result<Vec<u32>, Self::Error>;
    /// `gone` were lost in the last step (`lost` is every host lost so
    /// far): `orphans` are their pairs not measured, never to be.
    fn lost(&mut self, gone: &[u32], lost: &[u32], orphans: &[Pair]) -> Result<(), Self::Error>;
}

/// Runs `schedule` step by step through `walker`: each step's pairs are
/// done once it returns; after a step that lost hosts, their unmeasured
/// pairs are handed to [`Walker::lost`] and the rest of the pass is planned
/// anew over the survivors, less `done`. Ends when every pair is done, or
/// when fewer than two hosts are left (their pairs then all orphaned).
/// `done` and `lost` carry what the pass held before (a resumed or
/// replanned pass) and are left as it ended.
pub fn walk<W: Walker>(
    mut schedule: Schedule,
    done: &mut HashSet<Pair>,
    lost: &mut Vec<u32>,
    walker: &mut W,
) -> Result<(), W::Error> {
    'pass: loop {
        walker.planned(&schedule);
        for r in 0..schedule.rounds() {
            let pairs = schedule.round(r);
            for step in schedule.steps(&pairs) {
                let gone = walker.step(r, step)?;
                done.extend(step.iter().copied());
                if gone.is_empty() {
                    continue;
                }
                lost.extend(gone.iter().copied());
                let orphans = schedule.orphaned(&gone, done);
                walker.lost(&gone, lost, &orphans)?;
                match schedule.remaining(lost, done) {
                    Ok(next) => schedule = next,
                    Err(_) => break 'pass,
                }
                continue 'pass;
            }
        }
        break;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn all(n: u32) -> Vec<u32> {
        (0..n).collect()
    }

    /// Checks a pass: every test once, each round disjoint, the rounds'
    /// count the method's. Returns how many tests it saw.
    fn check_pass(s: &Schedule, n: usize) -> usize {
        let mut seen = vec![false; n * n];
        let mut in_round = vec![usize::MAX; n];
        let mut pairs = Vec::new();
        let mut count = 0;
        for r in 0..s.rounds() {
            s.round_into(r, &mut pairs);
            for p in &pairs {
                let (a, b) = (p.from as usize, p.to as usize);
                assert_ne!(a, b);
                for h in [a, b] {
                    assert_ne!(in_round[h], r, "host {h} twice in round {r} (n = {n})");
                    in_round[h] = r;
                }
                let key = if s.bidir {
                    a.min(b) * n + a.max(b)
                } else {
                    a * n + b
                };
                assert!(!seen[key], "{p:?} twice (n = {n})");
                seen[key] = true;
                count += 1;
            }
        }
        count
    }

    #[test]
    fn every_ordered_pair_once_in_the_fewest_disjoint_rounds() {
        let sizes = (2..=64).chain([65, 100, 127, 128, 257, 1000, 1999, 2000]);
        for n in sizes {
            for bidir in [false, true] {
                let s = Schedule::new(&all(n), 7, bidir, Mode::Host, None).unwrap();
                let lap = if n % 2 == 0 { n - 1 } else { n } as usize;
                assert_eq!(s.rounds(), if bidir { lap } else { 2 * lap }, "n = {n}");
                let want = (n * (n - 1)) as usize / if bidir { 2 } else { 1 };
                assert_eq!(check_pass(&s, n as usize), want, "n = {n}, bidir {bidir}");
                assert_eq!(s.tests(), want);
            }
        }
    }

    #[test]
    fn each_host_sends_about_half_its_tests_a_lap() {
        for n in [4u32, 9, 10, 33, 100] {
            let s = Schedule::new(&all(n), 3, false, Mode::Host, None).unwrap();
            let lap = s.rounds() / 2;
            let mut sends = vec![0usize; n as usize];
            for r in 0..lap {
                for p in s.round(r) {
                    sends[p.from as usize] += 1;
                }
            }
            // n - 1 tests each a lap: about half of them sent.
            let half = (n as usize - 1) as f64 / 2.0;
            for (h, &k) in sends.iter().enumerate() {
                assert!(
                    (k as f64 - half).abs() <= 1.0,
                    "n = {n}: host {h} sent {k} of {}: {sends:?}",
                    n - 1
                );
            }
        }
    }

    #[test]
    fn caps_divide_rounds_into_steps_and_modes_say_how() {
        let n = 12;
        let host = Schedule::new(&all(n), 1, false, Mode::Host, Some(4)).unwrap();
        let round = host.round(0);
        assert_eq!(round.len(), 6);
        let steps: Vec<usize> = host.steps(&round).map(<[Pair]>::len).collect();
        assert_eq!(steps, [4, 2]);
        assert_eq!(host.step_count(), host.rounds() * 2);
        let strict = Schedule::new(&all(n), 1, false, Mode::Strict, None).unwrap();
        assert_eq!(strict.step_count(), strict.tests());
        let stress = Schedule::new(&all(n), 1, false, Mode::Stress, None).unwrap();
        assert_eq!(stress.step_count(), stress.rounds());
        assert_eq!(
            Schedule::new(&all(n), 1, false, Mode::Stress, Some(3)),
            Err(ScheduleError::CappedStress(3))
        );
        assert_eq!(
            Schedule::new(&all(n), 1, false, Mode::Host, Some(0)),
            Err(ScheduleError::NoPairs)
        );
        assert_eq!(
            Schedule::new(&[4], 1, false, Mode::Host, None),
            Err(ScheduleError::TooFew(1))
        );
    }

    #[test]
    fn the_same_hosts_and_seed_give_the_same_plan_and_another_seed_another() {
        let a = Schedule::new(&all(50), 42, false, Mode::Host, None).unwrap();
        let b = Schedule::new(&all(50), 42, false, Mode::Host, None).unwrap();
        let c = Schedule::new(&all(50), 43, false, Mode::Host, None).unwrap();
        let rounds = |s: &Schedule| (0..s.rounds()).map(|r| s.round(r)).collect::<Vec<_>>();
        assert_eq!(rounds(&a), rounds(&b));
        assert_ne!(rounds(&a), rounds(&c));
        // The inventory's order does not matter, only its hosts.
        let mut shuffled = all(50);
        shuffled.reverse();
        let d = Schedule::new(&shuffled, 42, false, Mode::Host, None).unwrap();
        assert_eq!(rounds(&a), rounds(&d));
    }

    #[test]
    fn hosts_lost_mid_pass_leave_a_plan_over_the_survivors_and_their_cells_failed() {
        for (n, bidir, lost, after) in [
            (9u32, false, vec![3u32], 5usize),
            (10, true, vec![0, 7], 2),
            (2000, false, vec![1999], 100),
            (64, false, vec![5, 6, 7], 0),
        ] {
            let s = Schedule::new(&all(n), 11, bidir, Mode::Host, None).unwrap();
            // The first `after` rounds ran; then the hosts were lost.
            let done: HashSet<Pair> = (0..after).flat_map(|r| s.round(r)).collect();
            let next = s.remaining(&lost, &done).unwrap();
            let survivors = (n as usize) - lost.len();
            let lap = if survivors.is_multiple_of(2) {
                survivors - 1
            } else {
                survivors
            };
            assert_eq!(next.rounds(), if bidir { lap } else { 2 * lap });
            let mut measured: HashSet<Pair> = done.clone();
            let mut pairs = Vec::new();
            for r in 0..next.rounds() {
                next.round_into(r, &mut pairs);
                let mut busy = HashSet::new();
                for p in &pairs {
                    assert!(!lost.contains(&p.from) && !lost.contains(&p.to), "{p:?}");
                    assert!(busy.insert(p.from) && busy.insert(p.to), "disjoint");
                    assert!(measured.insert(*p), "{p:?} measured twice");
                }
            }
            let orphans = s.orphaned(&lost, &done);
            for p in &orphans {
                assert!(measured.insert(*p), "{p:?} both orphaned and measured");
            }
            let want = (n * (n - 1)) as usize / if bidir { 2 } else { 1 };
            assert_eq!(
                measured.len(),
                want,
                "n = {n}: measured + orphaned = the pass"
            );
        }
        let s = Schedule::new(&all(3), 0, false, Mode::Host, None).unwrap();
        assert_eq!(
            s.remaining(&[0, 1], &HashSet::new()),
            Err(ScheduleError::TooFew(1))
        );
    }

    #[test]
    fn ten_thousand_hosts_are_planned_without_holding_the_plan() {
        let s = Schedule::new(&all(10_000), 5, false, Mode::Host, Some(64)).unwrap();
        assert_eq!(s.rounds(), 2 * 9_999);
        assert_eq!(s.tests(), 10_000 * 9_999);
        // Every round full (no bye), 5,000 pairs in steps of 64.
        let mut pairs = Vec::new();
        for r in [0, 1, 9_998, 9_999, 19_997] {
            s.round_into(r, &mut pairs);
            assert_eq!(pairs.len(), 5_000);
        }
        assert_eq!(s.step_count(), 2 * 9_999 * 5_000usize.div_ceil(64));
    }

    /// A walker that measures every pair and loses `victim` at its first
    /// step after `after` steps.
    struct Losing {
        victim: u32,
        after: usize,
        steps: usize,
        measured: Vec<Pair>,
        /// The lost host's pair in the step that lost it: the step's own
        /// failure (a mesh writes it failed), done like the others.
        failed: Vec<Pair>,
        orphaned: Vec<Pair>,
        plans: usize,
    }

    impl Walker for Losing {
        type Error = ();
        fn planned(&mut self, _: &Schedule) {
            self.plans += 1;
        }
        fn step(&mut self, _: usize, pairs: &[Pair]) -> Result<Vec<u32>, ()> {
            self.steps += 1;
            let mut seen = HashSet::new();
            for p in pairs {
                assert!(
                    seen.insert(p.from) && seen.insert(p.to),
                    "a host twice in a step"
                );
            }
            if self.steps > self.after && pairs.iter().any(|p| p.hosts().contains(&self.victim)) {
                self.after = usize::MAX;
                let (failed, measured): (Vec<Pair>, Vec<Pair>) =
                    pairs.iter().partition(|p| p.hosts().contains(&self.victim));
                self.measured.extend(measured);
                self.failed.extend(failed);
                return Ok(vec![self.victim]);
            }
            self.measured.extend(pairs);
            Ok(Vec::new())
        }
        fn lost(&mut self, gone: &[u32], lost: &[u32], orphans: &[Pair]) -> Result<(), ()> {
            assert_eq!(gone, [self.victim]);
            assert!(lost.contains(&self.victim));
            assert!(orphans.iter().all(|p| p.hosts().contains(&self.victim)));
            self.orphaned.extend(orphans);
            Ok(())
        }
    }

    #[test]
    fn a_walk_replans_over_the_survivors_and_every_pair_is_measured_or_orphaned() {
        for n in [3u32, 6, 9] {
            let schedule = Schedule::new(&all(n), 7, false, Mode::Host, None).unwrap();
            let mut walker = Losing {
                victim: 2,
                after: 3,
                steps: 0,
                measured: Vec::new(),
                failed: Vec::new(),
                orphaned: Vec::new(),
                plans: 0,
            };
            let (mut done, mut lost) = (HashSet::new(), Vec::new());
            walk(schedule, &mut done, &mut lost, &mut walker).unwrap();
            assert_eq!(lost, [2]);
            assert_eq!(walker.plans, 2, "planned once, and again after the loss");
            let measured: HashSet<Pair> = walker.measured.iter().copied().collect();
            assert_eq!(
                measured.len(),
                walker.measured.len(),
                "no pair measured twice"
            );
            let survivors = (n - 1) as usize;
            for from in 0..n {
                for to in (0..n).filter(|&t| t != from) {
                    let pair = Pair { from, to };
                    let ends = [
                        measured.contains(&pair),
                        walker.failed.contains(&pair),
                        walker.orphaned.contains(&pair),
                    ];
                    assert_eq!(
                        ends.iter().filter(|&&e| e).count(),
                        1,
                        "n={n}: {pair:?} measured, failed in its step or orphaned, once: {ends:?}"
                    );
                    if from != 2 && to != 2 {
                        assert!(ends[0], "n={n}: {pair:?} between survivors never measured");
                    }
                }
            }
            assert!(measured.len() >= survivors * (survivors - 1));
            assert_eq!(walker.failed.len(), 1);
        }
    }
}
