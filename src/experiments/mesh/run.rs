//! A mesh's measuring run: for each pass (`--passes`, one by default, each
//! its own run on the agents), every agent reached and authenticated at
//! once, the pass planned over those that answered, each round's pairs run on
//! their own threads (no host in two tests at a time, in `host` mode), and
//! each finished test appended to `results.jsonl` and flushed to disk
//! before the next one of its pair starts.
//!
//! Invariants:
//! - every ordered pair (unordered with `--bidir`) is measured at most once
//!   a pass, and a line names its pass: a pair whose tests are all finished is never planned again,
//!   after a lost agent (the survivors are planned anew, the finished pairs
//!   skipped) or in a `--resume`d run;
//! - an agent that fails its handshake or is lost mid-run takes no further
//!   part; each of its tests not yet finished is a `failed` line naming why;
//! - a test that failed is recorded once, and not retried in this run (a
//!   `--resume` retries it: only measured tests count as finished there).

use crate::analysis::limits::Verdict;
use crate::controller::errors::{Interrupted, MeasureError};
use crate::controller::processes::ControlError;
use crate::controller::remote::{self, AgentLink};
use crate::controller::resume::{CellKey, Resumed};
use crate::controller::rounds::{Pair, Schedule, Walker, walk};
use crate::controller::runner::together::MeasureTogether;
use crate::controller::runner::{Measured, Runner};
use crate::controller::sink::Sink;
use crate::endpoint::agent::key::Key;
use crate::endpoint::bulk::types::{Amount, EndpointReport, UdpPace};
use crate::endpoint::rpm::types::Direction as RpmDirection;
use crate::experiments::mesh::inventory::Agent;
use crate::experiments::mesh::record::{
    AgentState, MANIFEST, Manifest, MeshTest, PLACEMENT, PairFigures, PairTest, PassSpec, RESULTS,
    cell_key, read_manifest, upgrade,
};
use crate::experiments::rpc::record::{Purpose, RpcParams};
use crate::experiments::rpm::record::RpmParams;
use crate::experiments::stream::cell::{StreamConfig, run_once};
use crate::experiments::stream::record::{Direction, Flows, StreamResult};
use crate::measure::host::HostFacts;
use crate::record::testbed::Placement;
use crate::record::{RecordWriter, now_rfc3339};
use anyhow::{Context, bail};
use std::collections::{BTreeMap, HashSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Agents reached at once while the run starts.
const HANDSHAKES_AT_ONCE: usize = 64;
/// How long an agent busy with another run is asked again before the pass
/// goes on without it: an agent ends a vanished controller's run within
/// its endpoints' cleanup grace (3 s) once it sees the connection close.
const BUSY_WAIT: Duration = Duration::from_secs(15);
/// A test's time beyond its own length (setting up both ends, the
/// records), for the estimate checked against the agents' limits: an
/// upper bound (0.04 s between loopback agents here, scripts/bench-mesh;
/// a few control round trips on a real path).
pub const TEST_OVERHEAD: Duration = Duration::from_secs(1);
/// A probe call's first wait for its reply, ms: four control round trips
/// within these bounds.
const PROBE_TIMEOUT_MS: (u64, u64) = (10, 500);
/// Repetitions of the rtt test's calls (their spread is the noise).
const RTT_REPS: u32 = 5;

/// What a run was told.
pub struct MeshRun {
    pub agents_spec: String,
    pub inventory: Vec<Agent>,
    pub pass: PassSpec,
    pub key: PathBuf,
    pub dir: PathBuf,
    pub resume: bool,
    /// Whether [`Summary::records`] gathers the run's records (the lab's
    /// section reads them; a fleet's run leaves them on disk alone).
    pub keep: bool,
}

/// How a run ended.
#[derive(Debug, Default)]
pub struct Summary {
    pub measured: usize,
    pub failed: usize,
    /// Tests a resumed run found finished and did not measure again.
    pub skipped: usize,
    /// Agents that took no part or were lost, with why.
    pub lost: Vec<(String, String)>,
    pub seconds: f64,
    /// The cells' own time: each step's longest pair (its tests one after
    /// another, endpoints set up and finished on the agents), summed over
    /// the steps. The rest of `seconds` is the controller's own: reaching
    /// the agents, planning, starting threads, writing results.
    pub cell_s: f64,
    /// The controller's CPU time (all its threads) over the run.
    pub controller_cpu_s: f64,
    /// The records of this run's tests, measured, failed or reused, when
    /// the run keeps them ([`MeshRun::keep`]).
    pub records: Vec<crate::record::Record<PairTest>>,
}

/// Where a test sits in the run: its pass, its round, and how many pairs
/// ran in its step.
#[derive(Debug, Clone, Copy)]
struct At {
    pass: usize,
    round: usize,
    alongside: usize,
}

/// One agent as the pass knows it: its labels (the inventory's over its
/// own) for every line it is in.
struct Host {
    name: String,
    labels: BTreeMap<String, String>,
}

/// A pass walked on the runner's schedule ([`walk`]): each step run and
/// written, the lost agents said and their pairs failed.
struct PassWalk<'a, 'w> {
    run: &'a MeshRun,
    runner: &'a mut Runner<'w>,
    hosts: &'a mut [Host],
    summary: &'a mut Summary,
    why_lost: Vec<(String, String)>,
    pass: usize,
    say: &'a (dyn Fn(&str) + Sync),
}

impl Walker for PassWalk<'_, '_> {
    type Error = anyhow::Error;

    fn planned(&mut self, schedule: &Schedule) {
        let spec = &self.run.pass;
        (self.say)(&format!(
            "netlab mesh: {} tests over {} agents in {} rounds ({} mode{})",
            schedule.tests(),
            schedule.hosts().count(),
            schedule.rounds(),
            spec.mode.name(),
            if spec.bidir {
                ", both ways at once"
            } else {
                ""
            }
        ));
    }

    fn step(&mut self, round: usize, pairs: &[Pair]) -> anyhow::Result<Vec<u32>> {
        let at = At {
            pass: self.pass,
            round,
            alongside: pairs.len(),
        };
        let (newly_lost, cell_s) =
            self.run
                .run_step(self.runner, self.summary, self.hosts, at, pairs, self.say)?;
        self.summary.cell_s += cell_s;
        let mut gone = Vec::new();
        for (host, why) in newly_lost {
            let name = self.hosts[host as usize].name.clone();
            (self.say)(&format!(
                "netlab mesh: lost {name}: {why}; planning the rest without it"
            ));
            if !self.summary.lost.iter().any(|(n, _)| n == &name) {
                self.summary.lost.push((name.clone(), why.clone()));
            }
            self.why_lost.push((name, why));
            gone.push(host);
        }
        Ok(gone)
    }

    fn lost(&mut self, _gone: &[u32], lost: &[u32], orphans: &[Pair]) -> anyhow::Result<()> {
        self.run.fail_all(
            self.runner,
            self.summary,
            self.hosts,
            self.pass,
            orphans,
            lost,
            &self.why_lost,
        )
    }
}

/// A step's pair-tests as the runner measures them: a lane a pair, its
/// tests in order; a cell's records are its directions' lines.
struct PairTests<'a> {
    run: &'a MeshRun,
    hosts: &'a [Host],
    at: At,
    say: &'a (dyn Fn(&str) + Sync),
}

impl MeasureTogether for PairTests<'_> {
    type Cell = (Pair, MeshTest);
    type Data = PairTest;

    fn keys(&self, &(pair, test): &(Pair, MeshTest)) -> Vec<CellKey> {
        self.run.keys(self.hosts, pair, test, self.at.pass)
    }

    fn measure(
        &self,
        &(pair, test): &(Pair, MeshTest),
    ) -> Result<Vec<Measured<PairTest>>, Interrupted> {
        self.run.run_test(self.hosts, self.at, pair, test, self.say)
    }
}

impl MeshRun {
    /// Runs the pass (or what is left of it) and says how it went; results
    /// are on disk as they come, whatever this returns.
    pub fn run(self, say: &(dyn Fn(&str) + Sync)) -> anyhow::Result<Summary> {
        self.run_into(say, None)
    }

    /// As [`MeshRun::run`], `sink` told the run's events after the
    /// results file (the continuous mode's metrics).
    pub fn run_into(
        self,
        say: &(dyn Fn(&str) + Sync),
        sink: Option<&mut dyn Sink>,
    ) -> anyhow::Result<Summary> {
        let (manifest, resumed, mut writer) = self.open_dir()?;
        let finished = resumed.as_ref().map_or(0, Resumed::found);
        // The tests are the runner's cells: it keeps each record the
        // moment its test ends, and a resumed run's measured ones.
        let mut runner = Runner::new(HostFacts::gather(), Some(&mut writer))
            .progress(false)
            .resume(resumed);
        if let Some(sink) = sink {
            runner.add_sink(sink);
        }
        self.run_on(&mut runner, manifest, finished, say)
    }

    /// Runs the passes on `runner` (the run's own over its directory, or
    /// the lab's), writing `manifest` (with the agents' accounts of
    /// themselves) into the run's directory at the first pass run;
    /// `finished` tests were found measured already.
    pub fn run_on(
        &self,
        runner: &mut Runner,
        manifest: Manifest,
        finished: usize,
        say: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<Summary> {
        let started = Instant::now();
        let usage = crate::measure::rusage::ProcessUsage::now();
        remote::configure(Key::load(&self.key)?, "mesh");
        let mut summary = Summary {
            skipped: finished,
            ..Summary::default()
        };
        if summary.skipped > 0 {
            say(&format!(
                "netlab mesh: resuming: {} tests finished already are not measured again",
                summary.skipped
            ));
        }
        let mut hosts: Vec<Host> = self
            .inventory
            .iter()
            .map(|agent| Host {
                name: agent.name.clone(),
                labels: agent.labels.clone(),
            })
            .collect();
        let mut manifest = Some(manifest);
        for pass in 0..self.pass.passes {
            if self.pass_measured(runner, pass) {
                continue;
            }
            self.stop_if_interrupted(&summary)?;
            if self.pass.passes > 1 {
                say(&format!(
                    "netlab mesh: pass {} of {}",
                    pass + 1,
                    self.pass.passes
                ));
            }
            // Each pass is its own run on the agents.
            remote::close_all();
            let outcome = self.run_pass(pass, runner, &mut hosts, &mut manifest, &mut summary, say);
            remote::close_all();
            outcome?;
        }
        summary.seconds = started.elapsed().as_secs_f64();
        summary.controller_cpu_s = crate::measure::rusage::ProcessUsage::now()
            .since(&usage)
            .cpu_s();
        Ok(summary)
    }

    /// Ends the run when the user asked to stop (Ctrl-C, SIGTERM): the
    /// tests in flight were not written (a `--resume` measures them), and
    /// what was measured stays.
    fn stop_if_interrupted(&self, summary: &Summary) -> anyhow::Result<()> {
        if !crate::controller::processes::interrupted() {
            return Ok(());
        }
        Err(self.stopped(summary.measured))
    }

    /// The error of a run the user stopped, `saved` tests kept.
    fn stopped(&self, saved: usize) -> anyhow::Error {
        anyhow::Error::new(crate::controller::MeasureError::Interrupted { saved }).context(format!(
            "the mesh stopped; --resume {} finishes it",
            self.dir.display()
        ))
    }

    /// The keys of `pair`'s tests of `pass`, one a direction, in the order
    /// the tests run.
    fn keys(&self, hosts: &[Host], pair: Pair, test: MeshTest, pass: usize) -> Vec<CellKey> {
        self.directions(pair)
            .into_iter()
            .map(|d| {
                cell_key(
                    &hosts[d.from as usize].name,
                    &hosts[d.to as usize].name,
                    test,
                    pass,
                )
            })
            .collect()
    }

    /// Whether every pair-test of `pass` is measured already (a resumed
    /// run skips it without reaching the agents).
    fn pass_measured(&self, runner: &Runner, pass: usize) -> bool {
        let names = self.inventory.iter().map(|a| a.name.as_str());
        names.clone().all(|from| {
            names.clone().filter(|&to| to != from).all(|to| {
                self.pass
                    .tests
                    .iter()
                    .all(|&test| runner.done(&cell_key(from, to, test, pass)))
            })
        })
    }

    /// One pass: every agent reached and authenticated, the pairs planned
    /// over those that answered (less those finished in this pass), each
    /// step run and written; an agent lost midway is planned around. The
    /// manifest is written (with the agents' accounts of themselves) at
    /// the first pass this invocation runs.
    fn run_pass(
        &self,
        pass: usize,
        runner: &mut Runner,
        hosts: &mut [Host],
        manifest: &mut Option<Manifest>,
        summary: &mut Summary,
        say: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<()> {
        say(&format!(
            "netlab mesh: reaching {} agents",
            self.inventory.len()
        ));
        let reached = reach_all(&self.inventory);
        let (states, mut lost, why_lost) = self.account(&reached, hosts, summary, say);
        if let Some(manifest) = manifest.take() {
            write_manifest(
                &self.dir,
                &Manifest {
                    agents: states,
                    ..manifest
                },
            )?;
        }
        let live = self.inventory.len() - lost.len();
        if live < 2 {
            let why: Vec<String> = why_lost
                .iter()
                .map(|(name, why)| format!("{name}: {why}"))
                .collect();
            bail!(
                "only {live} of {} agents answered{}, and a mesh needs two:\n  {}",
                self.inventory.len(),
                if self.pass.passes > 1 {
                    format!(" for pass {}", pass + 1)
                } else {
                    String::new()
                },
                why.join("\n  ")
            );
        }
        let ids: Vec<u32> = (0..self.inventory.len() as u32).collect();
        let spec = &self.pass;
        // Each pass its own order of pairs (and so its own neighbours).
        let seed = spec.seed.wrapping_add(pass as u64);
        let whole = Schedule::new(&ids, seed, spec.bidir, spec.mode, spec.max_pairs)?;
        self.check_limits(&whole, &reached)?;
        let mut done = self.finished_pairs(runner, hosts, pass);
        let orphans = whole.orphaned(&lost, &done);
        self.fail_all(runner, summary, hosts, pass, &orphans, &lost, &why_lost)?;
        let schedule = whole.remaining(&lost, &done)?;
        if spec.mode == crate::controller::rounds::Mode::Stress {
            say(
                "netlab mesh: stress: every pair of a round starts at once and they share the network on purpose (a bisection test); a cell is not its path's own figure",
            );
        }
        let mut walker = PassWalk {
            run: self,
            runner,
            hosts,
            summary,
            why_lost,
            pass,
            say,
        };
        walk(schedule, &mut done, &mut lost, &mut walker)
    }

    /// Each agent's state as reached: its facts and labels (into `hosts`)
    /// or why it was lost (said, and counted in `summary` once); and the
    /// lost ones' indices and reasons.
    fn account(
        &self,
        reached: &[Result<Arc<AgentLink>, String>],
        hosts: &mut [Host],
        summary: &mut Summary,
        say: &(dyn Fn(&str) + Sync),
    ) -> (Vec<AgentState>, Vec<u32>, Vec<(String, String)>) {
        let mut states = Vec::new();
        let mut lost: Vec<u32> = Vec::new();
        let mut why_lost: Vec<(String, String)> = Vec::new();
        for (i, (agent, outcome)) in self.inventory.iter().zip(reached).enumerate() {
            match outcome {
                Ok(link) => {
                    let facts = link.facts();
                    let mut labels = facts.identity.labels.clone();
                    if let Some(node) = &facts.identity.node {
                        labels.insert("node".into(), node.clone());
                    }
                    labels.extend(agent.labels.clone());
                    hosts[i].labels = labels;
                    states.push(AgentState {
                        name: agent.name.clone(),
                        facts: Some(facts),
                        failed: None,
                    });
                }
                Err(why) => {
                    say(&format!("netlab mesh: {}: {why}", agent.name));
                    if !summary.lost.iter().any(|(name, _)| name == &agent.name) {
                        summary.lost.push((agent.name.clone(), why.clone()));
                    }
                    why_lost.push((agent.name.clone(), why.clone()));
                    lost.push(i as u32);
                    states.push(AgentState {
                        name: agent.name.clone(),
                        facts: None,
                        failed: Some(why.clone()),
                    });
                }
            }
        }
        (states, lost, why_lost)
    }

    /// Pairs whose every test of `pass` is finished: not planned again.
    fn finished_pairs(&self, runner: &Runner, hosts: &[Host], pass: usize) -> HashSet<Pair> {
        let n = hosts.len() as u32;
        (0..n)
            .flat_map(|from| (0..n).map(move |to| Pair { from, to }))
            .filter(|pair| pair.from != pair.to)
            .filter(|pair| {
                let (from, to) = (
                    &hosts[pair.from as usize].name,
                    &hosts[pair.to as usize].name,
                );
                self.pass
                    .tests
                    .iter()
                    .all(|&test| runner.done(&cell_key(from, to, test, pass)))
            })
            .collect()
    }

    /// Makes the run directory (a new run) or reads what it holds
    /// (`--resume`: its manifest, and its records for the runner), and
    /// opens its records file.
    fn open_dir(&self) -> anyhow::Result<(Manifest, Option<Resumed>, RecordWriter)> {
        let results_path = self.dir.join(RESULTS);
        let mut resumed = None;
        let manifest = if self.resume {
            let manifest = read_manifest(&self.dir)?;
            if results_path.exists() {
                let read = Resumed::read_upgrading(&results_path, &upgrade)?;
                for why in crate::record::files::skipped_summary(read.unreadable(), 5) {
                    eprintln!(
                        "netlab mesh: {}: {why}: skipped (measured again)",
                        results_path.display()
                    );
                }
                resumed = Some(read);
            }
            manifest
        } else {
            if results_path.exists() {
                bail!(
                    "{} holds a mesh run already: give --resume {} to finish it, or another --out",
                    self.dir.display(),
                    self.dir.display()
                );
            }
            crate::record::files::make_out_dir(&self.dir, "--out").map_err(anyhow::Error::msg)?;
            self.manifest()?
        };
        // The records' writer, each line synced: a line torn by a killed
        // controller or a full disk is ended first (and skipped on reading).
        let writer = RecordWriter::append(&results_path)
            .with_context(|| format!("opening {}", results_path.display()))?
            .durable();
        Ok((manifest, resumed, writer))
    }

    /// A new run's manifest: what it was told and its plan's size (the
    /// agents' accounts are added as they answer).
    pub fn manifest(&self) -> anyhow::Result<Manifest> {
        let ids: Vec<u32> = (0..self.inventory.len() as u32).collect();
        let pass = &self.pass;
        let schedule = Schedule::new(&ids, pass.seed, pass.bidir, pass.mode, pass.max_pairs)?;
        Ok(Manifest {
            experiment: "mesh".into(),
            netlab_version: env!("CARGO_PKG_VERSION").into(),
            started: now_rfc3339(),
            controller: remote::controller_name(),
            agents_spec: self.agents_spec.clone(),
            inventory: self.inventory.clone(),
            pass: self.pass.clone(),
            rounds: schedule.rounds(),
            steps: schedule.step_count(),
            agents: Vec::new(),
        })
    }

    /// Refuses, before any traffic, a pass that an agent would end part-way:
    /// an agent serves the whole pass as one run, so the pass must fit in
    /// every agent's `--max-duration`.
    fn check_limits(
        &self,
        schedule: &Schedule,
        reached: &[Result<Arc<AgentLink>, String>],
    ) -> anyhow::Result<()> {
        let per_step = (Duration::from_secs_f64(self.pass.duration_s) + TEST_OVERHEAD)
            * self.pass.tests.len() as u32;
        let pass = per_step * schedule.step_count() as u32;
        for link in reached.iter().flatten() {
            let facts = link.facts();
            if let Some(limit) = link.max_duration_s()
                && pass.as_secs() > limit
            {
                bail!(
                    "the pass takes about {} and agent {} ends a run after {limit} s (its --max-duration): raise --max-duration on the agents, or run fewer or shorter tests (--tests, --duration)",
                    humantime::format_duration(Duration::from_secs(pass.as_secs())),
                    facts.agent
                );
            }
        }
        let descriptors = crate::measure::limits::Needs {
            what: format!("a mesh controller of {} agents", self.inventory.len()),
            ptys: 0,
            descriptors_per_process: 64 + 2 * self.inventory.len() as u64,
            // A reader thread an agent, a thread a pair at once.
            processes: 2 * self.inventory.len() as u64,
            ephemeral_ports: 0,
        };
        crate::measure::limits::refuse_or_prepare(descriptors)?;
        Ok(())
    }

    /// Writes a failed line for each test of `pairs` not finished yet.
    #[allow(clippy::too_many_arguments)]
    fn fail_all(
        &self,
        runner: &mut Runner,
        summary: &mut Summary,
        hosts: &[Host],
        pass: usize,
        pairs: &[Pair],
        lost: &[u32],
        why: &[(String, String)],
    ) -> anyhow::Result<()> {
        let reason = |pair: &Pair| {
            let gone = if lost.contains(&pair.from) {
                pair.from
            } else {
                pair.to
            };
            let name = &hosts[gone as usize].name;
            let said = why
                .iter()
                .find(|(n, _)| n == name)
                .map_or("lost", |(_, w)| w.as_str());
            format!("agent {name} takes no part: {said}")
        };
        for pair in pairs {
            for direction in self.directions(*pair) {
                for &test in &self.pass.tests {
                    let at = At {
                        pass,
                        round: 0,
                        alongside: 0,
                    };
                    let line = self.line(hosts, direction, test, at, now_rfc3339());
                    let why = reason(pair);
                    let decided = Measured {
                        placement: PLACEMENT.into(),
                        data: PairTest {
                            failed: Some(why.clone()),
                            ..line
                        },
                        error: Some(why),
                    };
                    let key = decided.data.cell_key();
                    if let Some(record) =
                        runner.decided(key, decided).map_err(|e| self.not_kept(e))?
                    {
                        summary.failed += 1;
                        if self.keep {
                            summary.records.push(record);
                        }
                    }
                }
            }
        }
        Ok(())
    }

    /// "round R" (or "pass P round R" when there are several), for the
    /// progress lines.
    fn place(&self, at: At) -> String {
        if self.pass.passes > 1 {
            format!("pass {} round {}", at.pass + 1, at.round + 1)
        } else {
            format!("round {}", at.round + 1)
        }
    }

    /// The directions a pair's test measures: one, or both with `--bidir`.
    fn directions(&self, pair: Pair) -> Vec<Pair> {
        if self.pass.bidir {
            vec![
                pair,
                Pair {
                    from: pair.to,
                    to: pair.from,
                },
            ]
        } else {
            vec![pair]
        }
    }

    fn line(
        &self,
        hosts: &[Host],
        direction: Pair,
        test: MeshTest,
        at: At,
        started: String,
    ) -> PairTest {
        let (from, to) = (
            &hosts[direction.from as usize],
            &hosts[direction.to as usize],
        );
        PairTest {
            test,
            from: from.name.clone(),
            to: to.name.clone(),
            from_labels: from.labels.clone(),
            to_labels: to.labels.clone(),
            round: at.round,
            alongside: at.alongside,
            pass: at.pass,
            bidir: self.pass.bidir,
            started,
            seconds: 0.0,
            failed: None,
            figures: PairFigures::default(),
            detail: None,
        }
    }

    /// Runs one step's pairs at once on the runner, each on its own
    /// thread, its tests one after another; returns the hosts lost
    /// meanwhile, with why, and the step's cell time (its longest pair's
    /// tests).
    fn run_step(
        &self,
        runner: &mut Runner,
        summary: &mut Summary,
        hosts: &[Host],
        at: At,
        step: &[Pair],
        say: &(dyn Fn(&str) + Sync),
    ) -> anyhow::Result<(Vec<(u32, String)>, f64)> {
        self.stop_if_interrupted(summary)?;
        let lanes: Vec<Vec<(Pair, MeshTest)>> = step
            .iter()
            .map(|&pair| self.pass.tests.iter().map(|&test| (pair, test)).collect())
            .collect();
        let tests = PairTests {
            run: self,
            hosts,
            at,
            say,
        };
        let records = runner.round(&tests, &lanes).map_err(|e| self.not_kept(e))?;
        let directions = if self.pass.bidir { 2.0 } else { 1.0 };
        let mut longest = 0.0f64;
        let mut troubled: Vec<u32> = Vec::new();
        for (pair, lane) in step.iter().zip(&records) {
            let mut seconds = 0.0;
            for record in &lane.measured {
                // Both directions of a test share its time.
                seconds += record.data.seconds / directions;
                if record.error.is_some() {
                    summary.failed += 1;
                    troubled.extend(pair.hosts());
                } else {
                    summary.measured += 1;
                }
            }
            longest = longest.max(seconds);
        }
        if self.keep {
            summary.records.extend(
                records
                    .into_iter()
                    .flat_map(|lane| lane.reused.into_iter().chain(lane.measured)),
            );
        }
        // A host in a failed test is lost when it cannot be reached again.
        troubled.sort_unstable();
        troubled.dedup();
        let lost = troubled
            .into_iter()
            .filter_map(|host| match remote::link(&hosts[host as usize].name) {
                Ok(_) => None,
                Err(e) => Some((host, agent_message(e))),
            })
            .collect();
        Ok((lost, longest))
    }

    /// Why the runner stopped the run, as the mesh says it: the user's
    /// stop, or a record that could not be written (a full disk).
    fn not_kept(&self, error: MeasureError) -> anyhow::Error {
        match error {
            MeasureError::Interrupted { saved } => self.stopped(saved),
            other => anyhow::Error::new(other).context(format!(
                "the run stops here (what was written stays, and --resume {} finishes it)",
                self.dir.display()
            )),
        }
    }

    /// Runs `test` of `pair`: each direction's line, failed or not, as
    /// the runner keeps it.
    fn run_test(
        &self,
        hosts: &[Host],
        at: At,
        pair: Pair,
        test: MeshTest,
        say: &(dyn Fn(&str) + Sync),
    ) -> Result<Vec<Measured<PairTest>>, Interrupted> {
        let lines: Vec<PairTest> = self
            .directions(pair)
            .iter()
            .map(|d| self.line(hosts, *d, test, at, now_rfc3339()))
            .collect();
        let (from, to) = (
            &hosts[pair.from as usize].name,
            &hosts[pair.to as usize].name,
        );
        let start = Instant::now();
        let measured = match test {
            MeshTest::Stream => self
                .stream(from, to, None)
                .map(|r| stream_figures(&r, false)),
            MeshTest::Loss => {
                let pace = UdpPace {
                    rate_bps: self.pass.loss_rate_bps,
                    length: self.pass.loss_length,
                };
                self.stream(from, to, Some(pace))
                    .map(|r| stream_figures(&r, true))
            }
            MeshTest::Rtt => self.rtt(from, to),
            MeshTest::Rpm => self.rpm(from, to),
            MeshTest::Probe => self.probe(from, to),
        };
        let seconds = start.elapsed().as_secs_f64();
        let kept = |line: PairTest, error: Option<String>| Measured {
            placement: PLACEMENT.into(),
            data: line,
            error,
        };
        match measured {
            Ok(by_direction) => Ok(lines
                .into_iter()
                .zip(by_direction)
                .map(|(line, (figures, detail))| {
                    say(&format!(
                        "{}: {} -> {} {}: {}",
                        self.place(at),
                        line.from,
                        line.to,
                        test.name(),
                        figures.brief()
                    ));
                    let line = PairTest {
                        seconds,
                        figures,
                        detail,
                        ..line
                    };
                    kept(line, None)
                })
                .collect()),
            // Stopped by the user, not failed: left for a --resume.
            Err(_) if crate::controller::processes::interrupted() => Err(Interrupted),
            Err(why) => {
                say(&format!(
                    "{}: {from} -> {to} {}: failed: {why}",
                    self.place(at),
                    test.name()
                ));
                Ok(lines
                    .into_iter()
                    .map(|line| {
                        let line = PairTest {
                            seconds,
                            failed: Some(why.clone()),
                            ..line
                        };
                        kept(line, Some(why.clone()))
                    })
                    .collect())
            }
        }
    }

    /// A TCP stream (or with `udp`, paced datagrams) from `from` to `to`
    /// for the test's length, both ways at once with `--bidir`.
    fn stream(&self, from: &str, to: &str, udp: Option<UdpPace>) -> Result<StreamResult, String> {
        let config = StreamConfig {
            amount: Amount::Seconds(self.pass.duration_s),
            placement: Placement::Remote {
                from: from.to_string(),
                to: to.to_string(),
            },
            flows: Flows {
                parallel: 1,
                direction: if self.pass.bidir {
                    Direction::Both
                } else {
                    Direction::Forward
                },
            },
            udp,
            ..StreamConfig::default()
        };
        config.validate().map_err(|e| e.to_string())?;
        run_once(&config, &mut |_, _| {}).map_err(|e| e.to_string())
    }

    /// RPC ping-pong: TCP calls with no argument, `from` calling `to`
    /// (and then `to` calling `from` with `--bidir`). The calls per
    /// repetition fill the test's length at the round trip the control
    /// channels showed.
    fn rtt(
        &self,
        from: &str,
        to: &str,
    ) -> Result<Vec<(PairFigures, Option<serde_json::Value>)>, String> {
        self.each_way(from, to, |caller, server| {
            let rtt_us = control_rtt_us(caller, server).unwrap_or(1000).max(20);
            let per_rep = self.pass.duration_s * 1e6 / f64::from(RTT_REPS);
            let calls = (per_rep / rtt_us as f64).clamp(100.0, 200_000.0) as u32;
            let result = run_calls(&RpcParams {
                reps: RTT_REPS,
                ..empty_calls(caller, server, crate::endpoint::rpc::Proto::Tcp, calls)
            })?;
            let figures = PairFigures {
                rtt_p50_us: Some(result.client.latency_us_p50),
                rtt_p99_us: Some(result.client.latency_us_p99),
                ..PairFigures::default()
            };
            Ok((figures, serde_json::to_value(&result).ok()))
        })
    }

    /// A Pingmesh-style probe: `probe_calls` empty RPC calls over UDP, one
    /// at a time (each retransmitted after four control round trips, 10 to
    /// 500 ms, doubling, five tries):
    /// the round trip's median and 99th percentile, and the share of
    /// attempts that came back too late or not at all (a request or its
    /// reply lost). A call that failed five tries fails the probe: the
    /// path is reported failed, which is worse than any loss figure.
    fn probe(
        &self,
        from: &str,
        to: &str,
    ) -> Result<Vec<(PairFigures, Option<serde_json::Value>)>, String> {
        self.each_way(from, to, |caller, server| {
            // A call not answered within four control round trips (at
            // least 10 ms, at most the client's 500 ms) is sent again and
            // counted lost: a lossy path's probe takes milliseconds, not
            // seconds, and a reply that late is a probe's loss anyway.
            let rtt_us = control_rtt_us(caller, server).unwrap_or(125_000);
            let timeout_ms = (4 * rtt_us / 1000).clamp(PROBE_TIMEOUT_MS.0, PROBE_TIMEOUT_MS.1);
            let mut params = empty_calls(
                caller,
                server,
                crate::endpoint::rpc::Proto::Udp,
                self.pass.probe_calls,
            );
            params.client.udp_timeout_ms = Some(timeout_ms as u32);
            let result = run_calls(&params)?;
            let retransmitted = result.client.udp_retransmissions;
            let attempts = u64::from(self.pass.probe_calls) + retransmitted;
            let figures = PairFigures {
                rtt_p50_us: Some(result.client.latency_us_p50),
                rtt_p99_us: Some(result.client.latency_us_p99),
                loss_pct: Some(100.0 * retransmitted as f64 / attempts.max(1) as f64),
                ..PairFigures::default()
            };
            // A probe runs all the time: its line keeps what the figures
            // rest on (a few hundred bytes), not the whole RPC cell.
            let c = &result.client;
            let detail = serde_json::json!({
                "calls": self.pass.probe_calls,
                "retransmissions": retransmitted,
                "timeout_ms": timeout_ms,
                "latency_us": {
                    "min": c.latency_us_min,
                    "p50": c.latency_us_p50,
                    "p90": c.latency_us_p90,
                    "p99": c.latency_us_p99,
                    "max": c.latency_us_max,
                },
                "seconds": c.rep_seconds.iter().sum::<f64>(),
            });
            Ok((figures, Some(detail)))
        })
    }

    /// `measure` from `from` to `to`, then (with `--bidir`) the other
    /// way: each direction's figures, forward first.
    fn each_way(
        &self,
        from: &str,
        to: &str,
        mut measure: impl FnMut(&str, &str) -> Result<(PairFigures, Option<serde_json::Value>), String>,
    ) -> Result<Vec<(PairFigures, Option<serde_json::Value>)>, String> {
        let mut ends = vec![(from, to)];
        if self.pass.bidir {
            ends.push((to, from));
        }
        ends.into_iter().map(|(a, b)| measure(a, b)).collect()
    }

    /// Responsiveness under load: `from` measures, loading the path
    /// towards `to` (upload, so that a matrix row is still the sending
    /// host), and with `--bidir` then the other way.
    fn rpm(
        &self,
        from: &str,
        to: &str,
    ) -> Result<Vec<(PairFigures, Option<serde_json::Value>)>, String> {
        self.each_way(from, to, |sender, receiver| {
            let params = RpmParams {
                placement: Placement::Remote {
                    from: sender.to_string(),
                    to: receiver.to_string(),
                },
                direction: RpmDirection::Up,
                max_connections: 16,
                probe_rate: 100,
                max_duration_s: rpm_seconds(self.pass.duration_s),
                idle_probes: 10,
                sockets: Default::default(),
                label: None,
                design: None,
                irtt: false,
            };
            let result =
                crate::experiments::rpm::cell::run_cell(&params).map_err(|e| e.to_string())?;
            let s = &result.summary;
            if s.rpm.is_none() {
                // No probe of each kind finished in the window: no figure,
                // and the cell says why rather than showing a blank.
                return Err(format!(
                    "{sender} -> {receiver}: no RPM: {}",
                    if s.notes.is_empty() {
                        "too few probes finished under load".to_string()
                    } else {
                        s.notes.join("; ")
                    }
                ));
            }
            let figures = PairFigures {
                rpm: s.rpm,
                working_ms: s.working_ms,
                idle_ms: s.idle_ms,
                grade: s.grade.clone(),
                verdict: Some(format!(
                    "grade {}, {} ({} confidence{}){}",
                    s.grade.as_deref().unwrap_or("-"),
                    s.tier.as_deref().unwrap_or("no tier"),
                    s.confidence,
                    if s.is_final { "" } else { ", not final" },
                    result
                        .split
                        .as_ref()
                        .map(|split| format!("; {}", split.verdict))
                        .unwrap_or_default()
                )),
                ..PairFigures::default()
            };
            Ok((figures, serde_json::to_value(&result).ok()))
        })
    }
}

/// `calls` empty RPC calls over `proto` from `caller`'s agent to
/// `server`'s, one repetition, the rest as the rpc experiment's defaults:
/// the rtt test's and the probe's cell.
fn empty_calls(
    caller: &str,
    server: &str,
    proto: crate::endpoint::rpc::Proto,
    calls: u32,
) -> RpcParams {
    RpcParams {
        size: 0,
        proto,
        strategy: crate::endpoint::rpc::client::Strategy::Writev,
        client: Default::default(),
        server: Default::default(),
        calls,
        reps: 1,
        placement: Placement::Remote {
            from: caller.to_string(),
            to: server.to_string(),
        },
        purpose: Purpose::Measure,
        capture_timeline: false,
    }
}

/// Runs an rpc cell between two agents; its error in words.
fn run_calls(params: &RpcParams) -> Result<crate::experiments::rpc::record::RpcResult, String> {
    crate::experiments::rpc::cell::run_cell(params).map_err(|e| e.to_string())
}

/// The longer of the two agents' control round trips (µs), as their
/// handshakes measured them: none when neither link is up.
fn control_rtt_us(a: &str, b: &str) -> Option<u64> {
    [a, b]
        .iter()
        .filter_map(|name| remote::link(name).ok())
        .map(|link| link.facts().control_rtt_us)
        .max()
}

/// What an rpm pair test's load may take at most: the test's length, within
/// what `netlab rpm --duration` takes (2 s to 60 s). A short one may end
/// before the path saturates, and then says so (Low confidence).
pub fn rpm_seconds(duration_s: f64) -> f64 {
    duration_s.clamp(2.0, 60.0)
}

/// One direction's figures from its two ends' reports: loss and jitter
/// for datagrams, or TCP's retransmissions, RTT and the limits verdict.
fn direction_figures(
    sender: &EndpointReport,
    receiver: &EndpointReport,
    throughput_mbit_s: f64,
    limits: Option<&Verdict>,
    udp: bool,
) -> PairFigures {
    if udp {
        let got = receiver.udp.as_ref();
        return PairFigures {
            loss_pct: got.and_then(|u| u.lost_pct),
            jitter_ms: got.map(|u| u.jitter_ms),
            throughput_mbit_s: Some(throughput_mbit_s),
            ..PairFigures::default()
        };
    }
    let info = sender.tcp_info.as_ref();
    PairFigures {
        throughput_mbit_s: Some(throughput_mbit_s),
        retransmits: info.map(|i| u64::from(i.total_retrans)),
        tcp_rtt_ms: info.map(|i| f64::from(i.rtt_us) / 1000.0),
        retransmitted_pct: info
            .and_then(|i| i.retransmitted_share())
            .map(|share| 100.0 * share),
        ..PairFigures::default()
    }
    .judged(limits)
}

/// Each direction's figures of a stream result, forward first.
fn stream_figures(
    result: &StreamResult,
    udp: bool,
) -> Vec<(PairFigures, Option<serde_json::Value>)> {
    let detail = serde_json::to_value(result).ok();
    let mut flows: Vec<_> = result.flows.iter().collect();
    flows.sort_by_key(|f| f.reverse);
    let figures: Vec<PairFigures> = if flows.is_empty() {
        // One connection forward: the result's own figures.
        vec![direction_figures(
            &result.sender,
            &result.receiver,
            result.figures.throughput_mbit_s,
            result.limits.as_ref(),
            udp,
        )]
    } else {
        flows
            .into_iter()
            .map(|f| {
                direction_figures(
                    &f.sender,
                    &f.receiver,
                    f.figures.throughput_mbit_s,
                    f.limits.as_ref(),
                    udp,
                )
            })
            .collect()
    };
    figures.into_iter().map(|f| (f, detail.clone())).collect()
}

/// An agent error's message without the agent's name (the line has it).
fn agent_message(error: ControlError) -> String {
    match error {
        ControlError::Agent { message, .. } => message,
        other => other.to_string(),
    }
}

/// Reaches one agent; one that is busy with another run (a controller
/// killed a moment ago whose run the agent is still ending, or another
/// controller's short test) is asked again for up to [`BUSY_WAIT`].
fn reach(agent: &Agent) -> Result<Arc<AgentLink>, String> {
    let give_up = Instant::now() + BUSY_WAIT;
    loop {
        match remote::link(&agent.name).map_err(agent_message) {
            Err(why) if why.starts_with("busy:") && Instant::now() < give_up => {
                std::thread::sleep(Duration::from_millis(500));
            }
            other => return other,
        }
    }
}

/// Reaches every agent of `inventory`, [`HANDSHAKES_AT_ONCE`] at a time.
fn reach_all(inventory: &[Agent]) -> Vec<Result<Arc<AgentLink>, String>> {
    let mut reached: Vec<Result<Arc<AgentLink>, String>> = Vec::with_capacity(inventory.len());
    for chunk in inventory.chunks(HANDSHAKES_AT_ONCE) {
        let batch: Vec<Result<Arc<AgentLink>, String>> = std::thread::scope(|scope| {
            let handles: Vec<_> = chunk
                .iter()
                .map(|agent| scope.spawn(move || reach(agent)))
                .collect();
            handles
                .into_iter()
                .map(|h| {
                    h.join()
                        .unwrap_or_else(|_| Err("the handshake panicked".into()))
                })
                .collect()
        });
        reached.extend(batch);
    }
    reached
}

fn write_manifest(dir: &Path, manifest: &Manifest) -> anyhow::Result<()> {
    let path = dir.join(MANIFEST);
    let partial = dir.join(format!("{MANIFEST}.partial"));
    std::fs::write(&partial, serde_json::to_vec_pretty(manifest)?)
        .with_context(|| format!("writing {}", partial.display()))?;
    std::fs::rename(&partial, &path).with_context(|| format!("writing {}", path.display()))?;
    Ok(())
}
