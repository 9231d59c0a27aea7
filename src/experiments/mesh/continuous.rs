//! `netlab mesh --every PERIOD`: the mesh as a long-running controller,
//! Pingmesh-style. Every cycle probes every ordered pair of agents with a
//! few empty UDP RPC calls (`probe`: round trip and loss), within a probe
//! budget per agent; a TCP throughput pass (`stream`, with the limits
//! verdict) runs on a slower period (`--stream-every`). Each cycle is a
//! mesh run directory of its own under `DIR/cycles/` (manifest and
//! results, as `netlab mesh` writes them), the newest `--keep` kept; and
//! each cycle's figures set the Prometheus metrics ([`super::metrics`])
//! served at `--metrics ADDR:PORT`.
//!
//! Everything a cycle needs is checked before the first one: the probe
//! cycle must fit in `--every`, the probe budget must allow a call a
//! path, the rule file (`--rules`) is written whole, the metrics port is
//! bound. A cycle that fails (fewer than two agents answered) is logged
//! and counted; the next one runs on time. A stop signal (SIGTERM,
//! Ctrl-C) ends the loop after the test in flight: what was measured stays
//! on disk.
//!
//! Budget: each agent takes part in 2 (N - 1) probes a cycle (N agents,
//! as caller and as server), each of `probe_calls` calls, so an agent
//! sees 2 (N - 1) × calls / every probe calls a second; `--probe-rate`
//! bounds that, and `--probe-calls` (if given) must fit under it.

use crate::controller::rounds::Schedule;
use crate::experiments::mesh::inventory::{self, Agent};
use crate::experiments::mesh::metrics::{Cycle, CycleTests, Kind, MeshMetrics, Slo};
use crate::experiments::mesh::record::{MAX_PROBE_CALLS, MeshTest, PassSpec, read_manifest};
use crate::experiments::mesh::rules::RuleSettings;
use crate::experiments::mesh::run::MeshRun;
use crate::fleet::HostLabels;
use anyhow::{Context, bail};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The round trip a probe call is budgeted at when the cycle's length is
/// estimated: a LAN's, generous.
const CALL_BUDGET: Duration = Duration::from_millis(1);
/// A probe test's setup at most, both ends on their agents and the
/// results back: 0.1 s between loopback agents here (20 calls included);
/// a few control round trips more on a real path.
pub const PROBE_OVERHEAD: Duration = Duration::from_millis(250);
/// The fewest calls a probe may make: below this a loss figure means
/// nothing.
pub const MIN_PROBE_CALLS: u32 = 5;

/// What the continuous controller was told.
pub struct Continuous {
    pub agents_spec: String,
    pub key: PathBuf,
    pub dir: PathBuf,
    /// The probe pass (its `probe_calls` still to be set from the budget
    /// when `probe_calls` below is none).
    pub probe: PassSpec,
    pub probe_calls: Option<u32>,
    /// At most this many probe calls a second per agent.
    pub probe_rate: f64,
    /// The throughput pass and how often it runs.
    pub stream: Option<(PassSpec, Duration)>,
    pub every: Duration,
    /// Cycle directories kept on disk.
    pub keep: usize,
    pub metrics: Option<SocketAddr>,
    pub pairs: usize,
    pub slo: Slo,
    pub rules: Option<PathBuf>,
    /// Stop after this many probe cycles (none: until a stop signal).
    pub cycles: Option<u64>,
}

/// How the loop ended.
#[derive(Debug, Default, serde::Serialize)]
pub struct ContinuousSummary {
    pub probe_cycles: u64,
    pub stream_cycles: u64,
    pub failed_cycles: u64,
    pub probe_calls: u32,
    pub cycle_estimate_s: f64,
    pub metrics: Option<SocketAddr>,
    pub dir: PathBuf,
    /// Why it stopped: the cycles asked were done, or a signal.
    pub stopped: String,
}

/// The loop's end in a line, as `netlab mesh --every` prints it.
impl std::fmt::Display for ContinuousSummary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "netlab mesh: continuous: {} probe cycles, {} throughput passes, {} failed; stopped after {}; cycles in {}",
            self.probe_cycles,
            self.stream_cycles,
            self.failed_cycles,
            self.stopped,
            self.dir.join("cycles").display()
        )
    }
}

/// The probe calls a path gets each way, from the budget: each agent is
/// in 2 (N - 1) probes a cycle.
pub fn calls_within(budget_per_s: f64, every: Duration, hosts: usize) -> u32 {
    let probes_per_agent = 2.0 * (hosts.saturating_sub(1).max(1)) as f64;
    (budget_per_s * every.as_secs_f64() / probes_per_agent).floor() as u32
}

/// Probe calls a second each agent sees at `calls` a probe.
pub fn rate_of(calls: u32, every: Duration, hosts: usize) -> f64 {
    2.0 * (hosts.saturating_sub(1)) as f64 * f64::from(calls) / every.as_secs_f64()
}

/// The probe cycle's length at most, before any agent is reached: each
/// step of the plan a test's overhead and its calls at [`CALL_BUDGET`]
/// (both ways under `--bidir`).
pub fn cycle_estimate(spec: &PassSpec, hosts: usize) -> anyhow::Result<Duration> {
    let ids: Vec<u32> = (0..hosts as u32).collect();
    let schedule = Schedule::new(&ids, spec.seed, spec.bidir, spec.mode, spec.max_pairs)?;
    let ways = if spec.bidir { 2 } else { 1 };
    let per_step = PROBE_OVERHEAD + CALL_BUDGET * spec.probe_calls * ways;
    Ok(per_step * schedule.step_count() as u32)
}

impl Continuous {
    /// Checks what can be checked before any traffic, and settles the
    /// probe's calls: the inventory, the budget, the cycle against
    /// `--every`.
    fn plan(&mut self, inventory: &[Agent]) -> anyhow::Result<Duration> {
        let n = inventory.len();
        let calls = match self.probe_calls {
            Some(calls) => {
                let rate = rate_of(calls, self.every, n);
                if rate > self.probe_rate {
                    bail!(
                        "--probe-calls {calls} at --every {}: each of {n} agents would see {rate:.1} probe calls a second, over --probe-rate {}: fewer calls, a longer --every, or a higher --probe-rate",
                        humantime::format_duration(self.every),
                        self.probe_rate
                    );
                }
                calls
            }
            None => {
                let calls = calls_within(self.probe_rate, self.every, n).min(MAX_PROBE_CALLS);
                if calls < MIN_PROBE_CALLS {
                    bail!(
                        "--probe-rate {} at --every {}: {calls} calls a probe over {n} agents, under the {MIN_PROBE_CALLS} a loss figure needs: raise --probe-rate or --every",
                        self.probe_rate,
                        humantime::format_duration(self.every)
                    );
                }
                calls
            }
        };
        self.probe.probe_calls = calls;
        self.probe
            .check()
            .map_err(|why| anyhow::anyhow!("netlab mesh: {why}"))?;
        let cycle = cycle_estimate(&self.probe, n)?;
        if self.every < cycle {
            bail!(
                "--every {}: one probe cycle over {n} agents takes up to {} ({:.0} steps of the plan, each a test's setup of {} ms and {calls} calls): give --every {} or more, or fewer agents a controller",
                humantime::format_duration(self.every),
                humantime::format_duration(Duration::from_secs(cycle.as_secs_f64().ceil() as u64)),
                cycle.as_secs_f64() / (PROBE_OVERHEAD + CALL_BUDGET * calls).as_secs_f64(),
                PROBE_OVERHEAD.as_millis(),
                humantime::format_duration(Duration::from_secs(cycle.as_secs_f64().ceil() as u64))
            );
        }
        Ok(cycle)
    }

    /// Runs cycles until the count asked, or a stop signal.
    pub fn run(mut self, say: &(dyn Fn(&str) + Sync)) -> anyhow::Result<ContinuousSummary> {
        let mut inventory = inventory::parse(&self.agents_spec)?;
        let estimate = self.plan(&inventory)?;
        if let Some(path) = &self.rules {
            crate::experiments::mesh::rules::write(
                path,
                RuleSettings {
                    every: self.every,
                    loss_ratio: self.slo.loss_ratio,
                },
            )?;
        }
        let registry = crate::controller::metrics::SharedRegistry::default();
        let metrics = {
            let mut r = registry
                .lock()
                .map_err(|_| anyhow::anyhow!("the metrics registry"))?;
            MeshMetrics::new(&mut r, self.slo, self.pairs)
        };
        let exposed = Exposed { registry, metrics };
        let server = match self.metrics {
            Some(address) => Some(crate::controller::metrics::serve(
                address,
                exposed.registry.clone(),
            )?),
            None => None,
        };
        let cycles_dir = self.dir.join("cycles");
        std::fs::create_dir_all(&cycles_dir)
            .with_context(|| format!("--out {}: cannot make it", self.dir.display()))?;
        let mut summary = ContinuousSummary {
            probe_calls: self.probe.probe_calls,
            cycle_estimate_s: estimate.as_secs_f64(),
            metrics: server.as_ref().map(|s| s.address()),
            dir: self.dir.clone(),
            ..ContinuousSummary::default()
        };
        say(&format!(
            "netlab mesh: continuous: {} agents probed every {} ({} calls a probe, at most {:.1} a second an agent; a cycle takes up to {:.0} s){}{}",
            inventory.len(),
            humantime::format_duration(self.every),
            self.probe.probe_calls,
            rate_of(self.probe.probe_calls, self.every, inventory.len()),
            estimate.as_secs_f64(),
            self.stream
                .as_ref()
                .map_or(String::new(), |(_, period)| format!(
                    "; throughput every {}",
                    humantime::format_duration(*period)
                )),
            summary.metrics.map_or(String::new(), |a| format!(
                "; metrics at http://{a}/metrics"
            ))
        ));
        let mut next = Instant::now();
        let mut last_stream: Option<Instant> = None;
        // A restarted controller (a Deployment's pod) goes on after the
        // cycles already on disk, never into one of their directories.
        let mut n: u64 = next_cycle(&cycles_dir);
        let first = n;
        summary.stopped = loop {
            if self.cycles.is_some_and(|c| n - first >= c) {
                break format!("{} cycles, as asked", n - first);
            }
            if !sleep_until(next) {
                break "a stop signal".into();
            }
            let started = Instant::now();
            next = started + self.every;
            // A DNS name is asked again each cycle: agents come and go.
            if self.agents_spec.starts_with("dns:") {
                match inventory::parse(&self.agents_spec) {
                    Ok(found) => inventory = found,
                    Err(e) => say(&format!(
                        "netlab mesh: cycle {n}: {e}; probing the {} agents found before",
                        inventory.len()
                    )),
                }
            }
            let probe = self.probe.clone();
            match self.cycle(n, Kind::probe, probe, &inventory, &exposed, say) {
                Ok(()) => summary.probe_cycles += 1,
                Err(e) if crate::controller::processes::interrupted() => {
                    say(&format!(
                        "netlab mesh: cycle {n}: {}",
                        crate::options::describe(&e)
                    ));
                    break "a stop signal".into();
                }
                Err(e) => {
                    summary.failed_cycles += 1;
                    say(&format!(
                        "netlab mesh: cycle {n}: {}",
                        crate::options::describe(&e)
                    ));
                }
            }
            if let Some((spec, period)) = &self.stream
                && last_stream.is_none_or(|t| t.elapsed() >= *period)
            {
                last_stream = Some(Instant::now());
                match self.cycle(n, Kind::stream, spec.clone(), &inventory, &exposed, say) {
                    Ok(()) => summary.stream_cycles += 1,
                    Err(e) if crate::controller::processes::interrupted() => {
                        say(&format!(
                            "netlab mesh: throughput pass {n}: {}",
                            crate::options::describe(&e)
                        ));
                        break "a stop signal".into();
                    }
                    Err(e) => {
                        summary.failed_cycles += 1;
                        say(&format!(
                            "netlab mesh: throughput pass {n}: {}",
                            crate::options::describe(&e)
                        ));
                    }
                }
            }
            let took = started.elapsed();
            if took > self.every {
                say(&format!(
                    "netlab mesh: cycle {n} took {:.1} s, longer than --every {}: the next starts at once (a longer --every, or fewer agents a controller)",
                    took.as_secs_f64(),
                    humantime::format_duration(self.every)
                ));
            }
            if let Err(e) = rotate(&cycles_dir, self.keep) {
                say(&format!(
                    "netlab mesh: rotating {}: {}",
                    cycles_dir.display(),
                    crate::options::describe(&e)
                ));
            }
            n += 1;
        };
        drop(server);
        Ok(summary)
    }

    /// One cycle: a mesh run of `pass` into its own directory, its figures
    /// into the metrics.
    fn cycle(
        &self,
        n: u64,
        kind: Kind,
        pass: PassSpec,
        inventory: &[Agent],
        exposed: &Exposed,
        say: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<()> {
        let started = Instant::now();
        let dir = self.dir.join("cycles").join(format!("{n:08}-{kind:?}"));
        let run = MeshRun {
            agents_spec: self.agents_spec.clone(),
            inventory: inventory.to_vec(),
            pass,
            key: self.key.clone(),
            dir: dir.clone(),
            resume: false,
            keep: false,
        };
        // Each test's line is on disk; only what goes wrong is said.
        let quiet = |line: &str| {
            let routine = line.starts_with("netlab mesh: reaching")
                || (line.starts_with("netlab mesh: ") && line.contains(" tests over "));
            let news = line.contains(": failed:") || line.starts_with("netlab mesh: ");
            if news && !routine {
                say(line);
            }
        };
        // The metrics take each test as the runner keeps it.
        let mut kept = CycleTests::default();
        let outcome = run.run_into(&quiet, Some(&mut kept));
        // The agents as the cycle found them: the manifest is written
        // before any test, even when too few answered.
        let hosts: Vec<(HostLabels, bool)> = match read_manifest(&dir) {
            Ok(manifest) => manifest
                .agents
                .iter()
                .zip(&manifest.inventory)
                .map(|(state, agent)| {
                    let mut labels = state
                        .facts
                        .as_ref()
                        .map(|f| f.identity.labels.clone())
                        .unwrap_or_default();
                    labels.extend(agent.labels.clone());
                    (HostLabels::of(&agent.name, &labels), state.failed.is_none())
                })
                .collect(),
            Err(_) => inventory
                .iter()
                .map(|a| (HostLabels::of(&a.name, &a.labels), false))
                .collect(),
        };
        // A mesh's runner keeps only mesh tests: a line the metrics could
        // not read is news, not noise.
        for why in &kept.unread {
            say(&format!(
                "netlab mesh: cycle {n}: a kept line the metrics could not read: {why}"
            ));
        }
        let results = kept.tests;
        let seconds = started.elapsed().as_secs_f64();
        let metrics = &exposed.metrics;
        {
            // Held while the cycle's figures replace the last one's, so a
            // scrape sees one cycle or the other, never a mix.
            let _scrape = exposed.registry.lock();
            metrics.record(&Cycle {
                kind,
                hosts: &hosts,
                results: &results,
                seconds,
                ended_s: std::time::SystemTime::now()
                    .duration_since(std::time::UNIX_EPOCH)
                    .map_or(0.0, |d| d.as_secs_f64()),
            });
            if kind == Kind::probe {
                let probes = results.iter().filter(|l| l.test == MeshTest::Probe).count();
                metrics.count_probe_calls(probes as u64 * u64::from(self.probe.probe_calls));
            }
        }
        let bad: Vec<String> = results
            .iter()
            .filter(|l| metrics.in_breach(l))
            .map(|l| format!("{}->{}", l.from, l.to))
            .collect();
        let down: Vec<&str> = hosts
            .iter()
            .filter(|(_, up)| !up)
            .map(|(h, _)| h.name.as_str())
            .collect();
        say(&format!(
            "netlab mesh: cycle {n} {kind:?}: {} tests in {seconds:.1} s{}{}",
            results.len(),
            if bad.is_empty() || kind == Kind::stream {
                String::new()
            } else {
                format!("; in breach: {}", bad.join(", "))
            },
            if down.is_empty() {
                String::new()
            } else {
                format!("; not answering: {}", down.join(", "))
            }
        ));
        outcome.map(drop)
    }
}

/// The metrics and the registry a scrape encodes them from.
struct Exposed {
    registry: crate::controller::metrics::SharedRegistry,
    metrics: MeshMetrics,
}

/// Sleeps until `when`, waking for a stop signal: false when one came.
fn sleep_until(when: Instant) -> bool {
    loop {
        if crate::controller::processes::interrupted() {
            return false;
        }
        let now = Instant::now();
        if now >= when {
            return true;
        }
        std::thread::sleep((when - now).min(Duration::from_millis(100)));
    }
}

/// The number after the highest cycle directory in `cycles` (0 when none).
fn next_cycle(cycles: &Path) -> u64 {
    std::fs::read_dir(cycles)
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| {
                    let name = e.file_name().into_string().ok()?;
                    name.split('-').next()?.parse::<u64>().ok()
                })
                .max()
                .map_or(0, |n| n + 1)
        })
        .unwrap_or(0)
}

/// Removes the oldest cycle directories beyond the newest `keep`.
pub fn rotate(cycles: &Path, keep: usize) -> anyhow::Result<()> {
    let mut names: Vec<PathBuf> = std::fs::read_dir(cycles)?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir())
        .collect();
    // Zero-padded cycle numbers: the names sort by age.
    names.sort();
    let excess = names.len().saturating_sub(keep);
    for old in &names[..excess] {
        std::fs::remove_dir_all(old).with_context(|| format!("removing {}", old.display()))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe_spec() -> PassSpec {
        PassSpec::new(vec![MeshTest::Probe], 1.0)
    }

    #[test]
    fn the_budget_sets_the_calls_and_the_rate_follows_from_them() {
        // 10 calls a second an agent, 4 agents, every 30 s: 300 calls over
        // 6 probes an agent a cycle.
        let calls = calls_within(10.0, Duration::from_secs(30), 4);
        assert_eq!(calls, 50);
        assert!((rate_of(calls, Duration::from_secs(30), 4) - 10.0).abs() < 1e-9);
    }

    #[test]
    fn a_cycle_shorter_than_the_plan_is_refused_with_the_length_it_needs() {
        let mut c = Continuous {
            agents_spec: String::new(),
            key: PathBuf::new(),
            dir: PathBuf::new(),
            probe: probe_spec(),
            probe_calls: None,
            probe_rate: 10.0,
            stream: None,
            every: Duration::from_secs(2),
            keep: 3,
            metrics: None,
            pairs: 5,
            slo: Slo {
                loss_ratio: 0.01,
                rtt_s: None,
            },
            rules: None,
            cycles: None,
        };
        let agents: Vec<Agent> =
            inventory::parse("127.0.0.1:1,127.0.0.2:1,127.0.0.3:1,127.0.0.4:1").unwrap();
        // 2 s over 4 agents: too few calls for the budget first.
        let error = c.plan(&agents).unwrap_err().to_string();
        assert!(error.contains("--probe-rate"), "{error}");
        c.probe_rate = 100.0;
        c.every = Duration::from_secs(1);
        let error = c.plan(&agents).unwrap_err().to_string();
        assert!(
            error.contains("--every 1s: one probe cycle over 4 agents"),
            "{error}"
        );
        c.every = Duration::from_secs(60);
        let cycle = c.plan(&agents).unwrap();
        assert!(cycle <= Duration::from_secs(60));
        // Calls asked over the budget are refused, naming the rate.
        c.probe_calls = Some(10_000);
        let error = c.plan(&agents).unwrap_err().to_string();
        assert!(error.contains("over --probe-rate"), "{error}");
    }

    #[test]
    fn rotation_keeps_the_newest() {
        let dir = tempfile::tempdir().unwrap();
        for n in 0..5 {
            std::fs::create_dir(dir.path().join(format!("{n:08}-probe"))).unwrap();
        }
        assert_eq!(next_cycle(dir.path()), 5);
        rotate(dir.path(), 2).unwrap();
        assert_eq!(next_cycle(dir.path()), 5);
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        left.sort();
        assert_eq!(left, ["00000003-probe", "00000004-probe"]);
    }
}
