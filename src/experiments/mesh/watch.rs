//! `netlab mesh watch`: the controller of a sampled fleet (#64, point 3).
//! The agents probe their own peer lists (`netlab agent serve
//! --probe-peers`); each cycle this reads every agent's summary with a
//! fixed pool of threads (one handshake and one answer each, no link kept
//! open), names hosts and racks from the aggregates
//! ([`super::aggregate`]), and writes one line a cycle: its findings, the
//! hosts in trouble and their paths, never a line per pair.
//!
//! Invariants: threads are the pool's, whatever the fleet's size; memory
//! is the fleet's reports of one cycle (bounded per agent by its
//! summaries) and a bit per ordered pair for coverage (only up to
//! [`COVERAGE_MAX`] hosts). If it stops, the agents go on probing.

use crate::controller::remote::{read_fleet, resolve};
use crate::endpoint::agent::key::Key;
use crate::experiments::mesh::aggregate::{self, Finding, Fleet};
use crate::experiments::mesh::inventory;
use crate::fleet::report::FleetReport;
use crate::options::Output;
use crate::record::RecordWriter;
use anyhow::{Context, bail};
use clap::Args;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use serde::Serialize;
use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

#[derive(Debug, Args)]
pub struct WatchArgs {
    /// The agents: a list, a file (`HOST[:PORT] zone=Z rack=R` a line; up
    /// to 20,000) or `dns:NAME`.
    #[arg(long)]
    pub agents: String,
    /// The key the agents hold.
    #[arg(long, value_name = "FILE", env = "NETLAB_KEY_FILE")]
    pub key: PathBuf,
    /// The agents' probe cycle (their `--probe-every`).
    #[arg(long, default_value = "60s", value_parser = humantime::parse_duration, value_name = "PERIOD")]
    pub every: Duration,
    /// Cycles to read, then stop (0: until interrupted).
    #[arg(long, default_value_t = 0)]
    pub cycles: u64,
    /// Threads reading the agents' summaries.
    #[arg(long, default_value_t = 16, value_parser = clap::value_parser!(u32).range(1..=64))]
    pub pool: u32,
    /// Serve the fleet's aggregates (cycles, agents answering, loss,
    /// coverage, the findings, the controller's own cost) at
    /// http://ADDR:PORT/metrics.
    #[arg(long, value_name = "ADDR:PORT")]
    pub metrics: Option<SocketAddr>,
    /// A throughput pass this often, over a sample of the agents drawn
    /// anew each pass (`--stream-sample`): every pair of them in rounds
    /// of disjoint pairs (`netlab mesh`'s own pass, stream tests of
    /// `--stream-duration`), each pass a run directory under
    /// OUT/throughput/ that `netlab mesh report` reads, a line each in
    /// OUT/throughput.jsonl. It runs beside the probe cycles, never in them.
    #[arg(long, value_parser = humantime::parse_duration, value_name = "PERIOD", requires = "out")]
    pub stream_every: Option<Duration>,
    /// Agents in each throughput pass.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(2..=64))]
    pub stream_sample: u32,
    /// Each throughput test's length.
    #[arg(long, default_value = "10s", value_parser = humantime::parse_duration, value_name = "TIME")]
    pub stream_duration: Duration,
    /// A directory (it must exist) for `watch.jsonl`, a line a cycle.
    #[arg(long)]
    pub out: Option<PathBuf>,
    #[arg(long)]
    pub json: bool,
}

/// The most hosts whose ordered pairs' coverage is tracked (a bit each:
/// 2 MB at this size).
pub const COVERAGE_MAX: usize = 4096;
/// The most paths of the hosts in trouble a line keeps.
const MAX_PATHS: usize = 200;

/// One cycle, as `watch.jsonl` keeps it.
#[derive(Debug, Serialize)]
pub struct CycleLine {
    pub cycle: u64,
    pub time: String,
    pub agents: usize,
    pub answered: usize,
    /// Agents that gave no summary, and why (at most 20 named).
    pub unanswered: Vec<(String, String)>,
    pub unanswered_count: usize,
    pub paths: usize,
    pub calls: u64,
    pub lost: u64,
    /// Ordered pairs probed so far, of all, and the cycles it took.
    pub covered: Option<(u64, u64)>,
    pub covered_in: Option<u64>,
    pub findings: Vec<Finding>,
    /// The hosts the findings name: their own figures out and in.
    pub hosts: Vec<HostLine>,
    /// The paths of the hosts and racks in trouble (at most 200).
    pub trouble_paths: Vec<PathLine>,
    /// Every rack's paths inside it and across its edge.
    pub racks: Vec<aggregate::RackLine>,
    pub controller: ControllerCost,
}

#[derive(Debug, Serialize)]
pub struct HostLine {
    pub host: String,
    pub out_calls: u64,
    pub out_lost: u64,
    pub in_calls: u64,
    pub in_lost: u64,
}

#[derive(Debug, Serialize)]
pub struct PathLine {
    pub from: String,
    pub to: String,
    pub calls: u64,
    pub lost: u64,
    pub p50_us: Option<u32>,
}

/// What the controller spent on the cycle.
#[derive(Debug, Serialize, Clone, Copy)]
pub struct ControllerCost {
    pub gather_s: f64,
    pub cpu_s: f64,
    pub rss_kb: u64,
    /// Threads at the cycle's end, and the pool's while it read.
    pub threads: u64,
    pub pool_threads: usize,
}

fn agents(spec: &str) -> anyhow::Result<Vec<SocketAddr>> {
    let path = std::path::Path::new(spec);
    if !spec.starts_with("dns:") && path.is_file() {
        let text = crate::record::files::read_text(
            path,
            crate::record::files::MAX_SMALL_FILE,
            "an inventory",
        )?;
        let entries = crate::fleet::hosts::entries_up_to(&text, crate::fleet::prober::MAX_HOSTS)
            .map_err(|e| anyhow::anyhow!("--agents {spec}: {e}"))?;
        let addrs = entries
            .into_iter()
            .map(|(line, (name, _))| {
                resolve(&name).map_err(|e| anyhow::anyhow!("--agents {spec} line {line}: {e}"))
            })
            .collect::<anyhow::Result<Vec<_>>>()?;
        if addrs.len() < 2 {
            bail!("--agents {spec}: a fleet needs at least two agents");
        }
        return Ok(addrs);
    }
    Ok(inventory::parse(spec)?
        .into_iter()
        .map(|a| a.addr)
        .collect())
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, prometheus_client::encoding::EncodeLabelSet)]
struct FindingLabels {
    trouble: String,
    host: String,
    /// A pair finding's other host.
    peer: String,
    zone: String,
    rack: String,
}

/// The controller's series: a handful, and one a finding (at most 64).
#[derive(Default)]
struct WatchMetrics {
    cycles: Counter,
    agents: Gauge,
    answered: Gauge,
    paths: Gauge,
    calls: Gauge,
    lost: Gauge,
    covered: Gauge,
    read_seconds: Gauge<f64, AtomicU64>,
    cpu_seconds: Gauge<f64, AtomicU64>,
    findings: Family<FindingLabels, Gauge>,
}

impl WatchMetrics {
    fn registry(&self) -> prometheus_client::registry::Registry {
        let mut r = prometheus_client::registry::Registry::default();
        r.register(
            "netlab_fleet_watch_cycles",
            "Cycles the controller has read",
            self.cycles.clone(),
        );
        r.register(
            "netlab_fleet_watch_agents",
            "Agents in the fleet",
            self.agents.clone(),
        );
        r.register(
            "netlab_fleet_watch_agents_answered",
            "Agents that gave their summary in the last cycle",
            self.answered.clone(),
        );
        r.register(
            "netlab_fleet_watch_paths",
            "Directed paths probed in the last two cycles",
            self.paths.clone(),
        );
        r.register(
            "netlab_fleet_watch_calls",
            "Probe calls on those paths' last probes",
            self.calls.clone(),
        );
        r.register(
            "netlab_fleet_watch_lost",
            "Probe calls lost on those paths' last probes",
            self.lost.clone(),
        );
        r.register(
            "netlab_fleet_watch_pairs_covered",
            "Ordered pairs probed since the controller started",
            self.covered.clone(),
        );
        r.register(
            "netlab_fleet_watch_read_seconds",
            "Time to read every agent's summary in the last cycle",
            self.read_seconds.clone(),
        );
        r.register(
            "netlab_fleet_watch_cpu_seconds",
            "The controller's CPU time in the last cycle",
            self.cpu_seconds.clone(),
        );
        r.register(
            "netlab_fleet_watch_finding",
            "A host or rack named in the last cycle (1), by what is wrong",
            self.findings.clone(),
        );
        r
    }

    fn set(&self, line: &CycleLine) {
        self.cycles.inc();
        self.agents.set(line.agents as i64);
        self.answered.set(line.answered as i64);
        self.paths.set(line.paths as i64);
        self.calls.set(line.calls as i64);
        self.lost.set(line.lost as i64);
        self.covered.set(line.covered.map_or(0, |c| c.0) as i64);
        self.read_seconds.set(line.controller.gather_s);
        self.cpu_seconds.set(line.controller.cpu_s);
        self.findings.clear();
        for f in line.findings.iter().take(64) {
            let trouble = match f.trouble {
                aggregate::Trouble::Loss { .. } => "loss",
                aggregate::Trouble::Slow { .. } => "slow",
            };
            let none = String::new;
            let (host, peer, zone, rack) = match &f.subject {
                aggregate::Subject::Host { host, zone, rack } => {
                    (host.clone(), none(), zone.clone(), rack.clone())
                }
                aggregate::Subject::Rack { zone, rack } => {
                    (none(), none(), zone.clone(), rack.clone())
                }
                aggregate::Subject::Zone { zone, .. } => (none(), none(), zone.clone(), none()),
                aggregate::Subject::Pair { a, b } => (a.clone(), b.clone(), none(), none()),
            };
            self.findings
                .get_or_create(&FindingLabels {
                    trouble: trouble.into(),
                    host,
                    peer,
                    zone,
                    rack,
                })
                .set(1);
        }
    }
}

/// The process's CPU seconds, resident KB and threads.
fn own_cost() -> (f64, u64, u64) {
    let cpu = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .map(|u| {
            let t = |tv: nix::sys::time::TimeVal| tv.tv_sec() as f64 + tv.tv_usec() as f64 * 1e-6;
            t(u.user_time()) + t(u.system_time())
        })
        .unwrap_or(0.0);
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    (cpu, field("VmRSS:"), field("Threads:"))
}

/// `watch.jsonl` in `--out`, when given.
fn open_record(args: &WatchArgs) -> anyhow::Result<Option<RecordWriter>> {
    Ok(match &args.out {
        Some(dir) => {
            if !dir.is_dir() {
                bail!(
                    "--out {}: not a directory (netlab does not create it)",
                    dir.display()
                );
            }
            Some(
                RecordWriter::append(&dir.join("watch.jsonl"))
                    .with_context(|| format!("--out {}", dir.display()))?
                    .durable(),
            )
        }
        None => None,
    })
}

/// The throughput passes' thread, when `--stream-every` asks for them.
fn start_throughput(
    args: &WatchArgs,
    addrs: &[SocketAddr],
    stop: &std::sync::Arc<std::sync::atomic::AtomicBool>,
    finished: &std::sync::Arc<std::sync::atomic::AtomicBool>,
) -> anyhow::Result<Option<std::thread::JoinHandle<()>>> {
    Ok(match (args.stream_every, &args.out) {
        (Some(every), Some(dir)) => {
            use crate::experiments::mesh::record::{MAX_TEST_S, MIN_TEST_S};
            if !(MIN_TEST_S..=MAX_TEST_S).contains(&args.stream_duration.as_secs_f64()) {
                bail!(
                    "--stream-duration {:?}: give {MIN_TEST_S} s to a day",
                    args.stream_duration
                );
            }
            let passes = Throughput {
                agents_spec: args.agents.clone(),
                addrs: addrs.to_vec(),
                key: args.key.clone(),
                dir: dir.clone(),
                every,
                sample: (args.stream_sample as usize).min(addrs.len()),
                duration: args.stream_duration,
            };
            let (stop, finished) = (stop.clone(), finished.clone());
            Some(std::thread::spawn(move || passes.run(&stop, &finished)))
        }
        _ => None,
    })
}

thread_local! {
    /// The threads the last [`gather`] on this thread read with.
    static POOL: std::cell::Cell<usize> = const { std::cell::Cell::new(0) };
}

/// Every agent's summary, read by `pool` threads.
pub fn gather(
    addrs: &[SocketAddr],
    key: &Key,
    pool: usize,
    within: Duration,
) -> Vec<Result<FleetReport, String>> {
    let threads = pool.min(addrs.len()).max(1);
    POOL.with(|p| p.set(threads));
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<Result<FleetReport, String>>>> =
        Mutex::new((0..addrs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(addr) = addrs.get(i) else {
                        break;
                    };
                    let got = read_fleet(*addr, key, within);
                    results.lock().unwrap_or_else(|p| p.into_inner())[i] = Some(got);
                }
            });
        }
    });
    results
        .into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.unwrap_or_else(|| Err("not read".into())))
        .collect()
}

/// Ordered pairs seen probed, a bit each.
struct Coverage {
    index: HashMap<String, usize>,
    bits: Vec<u64>,
    seen: u64,
}

impl Coverage {
    fn new(addrs: &[SocketAddr]) -> Option<Coverage> {
        let n = addrs.len();
        (n <= COVERAGE_MAX).then(|| Coverage {
            index: addrs
                .iter()
                .enumerate()
                .map(|(i, a)| (a.to_string(), i))
                .collect(),
            bits: vec![0; (n * n).div_ceil(64)],
            seen: 0,
        })
    }

    fn add(&mut self, reports: &[FleetReport]) {
        let n = self.index.len();
        for r in reports {
            let Some(&from) = self.index.get(&r.host.name) else {
                continue;
            };
            for p in &r.peers {
                if let Some(&to) = self.index.get(&p.peer)
                    && to != from
                {
                    let bit = from * n + to;
                    if self.bits[bit / 64] & (1 << (bit % 64)) == 0 {
                        self.bits[bit / 64] |= 1 << (bit % 64);
                        self.seen += 1;
                    }
                }
            }
        }
    }

    fn all(&self) -> u64 {
        let n = self.index.len() as u64;
        n * (n - 1)
    }
}

pub fn run(args: &WatchArgs, out: &mut Output) -> anyhow::Result<()> {
    if args.every < Duration::from_secs(1) {
        bail!("--every {:?}: at least 1 s", args.every);
    }
    let key = Key::load(&args.key)?;
    let addrs = agents(&args.agents)?;
    let mut writer = open_record(args)?;
    let metrics = WatchMetrics::default();
    let _server = match args.metrics {
        Some(address) => {
            let registry = std::sync::Arc::new(Mutex::new(metrics.registry()));
            let server = crate::controller::metrics::serve(address, registry)?;
            out.text(&format!("metrics at http://{}/metrics\n", server.address()))?;
            Some(server)
        }
        None => None,
    };
    let stop = crate::controller::processes::interrupt_flag();
    let finished = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let throughput = start_throughput(args, &addrs, &stop, &finished)?;
    let mut coverage = Coverage::new(&addrs);
    let mut first_cycle = None;
    let mut covered_in = None;
    let mut done = 0u64;
    let every_us = args.every.as_micros().max(1);
    // Read a cycle once its last probes have closed: after the agents'
    // timeout (1 s by default), at most a quarter of the cycle.
    let settle = (args.every / 4).min(Duration::from_secs(3));
    out.text(&format!(
        "watching {} agents, a cycle every {:?}, {} threads reading\n",
        addrs.len(),
        args.every,
        args.pool
    ))?;
    while !stop.load(Ordering::Relaxed) && (args.cycles == 0 || done < args.cycles) {
        let now_us = SystemTime::now().duration_since(UNIX_EPOCH)?.as_micros();
        let into = Duration::from_micros((now_us % every_us) as u64);
        if into < settle {
            std::thread::sleep((settle - into).min(Duration::from_millis(200)));
            continue;
        }
        let cycle = (now_us / every_us) as u64;
        let (cpu0, ..) = own_cost();
        let started = Instant::now();
        let results = gather(&addrs, &key, args.pool as usize, args.every / 2);
        let gather_s = started.elapsed().as_secs_f64();
        let mut reports = Vec::new();
        let mut unanswered = Vec::new();
        for (addr, r) in addrs.iter().zip(results) {
            match r {
                Ok(report) => reports.push(report),
                Err(e) => unanswered.push((addr.to_string(), e)),
            }
        }
        let fleet = Fleet::of(&reports);
        let findings = aggregate::findings(&fleet);
        if let Some(c) = coverage.as_mut() {
            c.add(&reports);
            first_cycle.get_or_insert(cycle);
            if covered_in.is_none() && c.seen == c.all() {
                covered_in = Some(cycle - first_cycle.unwrap_or(cycle) + 1);
            }
        }
        let line = cycle_line(
            cycle,
            &addrs,
            &reports,
            unanswered,
            &fleet,
            findings,
            coverage.as_ref().map(|c| (c.seen, c.all())),
            covered_in,
            (gather_s, cpu0),
        );
        metrics.set(&line);
        say(&line, args.json, out)?;
        if let Some(w) = writer.as_mut() {
            w.write_line(&line)?;
        }
        done += 1;
        // Sleep into the next cycle.
        let now_us = SystemTime::now().duration_since(UNIX_EPOCH)?.as_micros();
        let left = every_us - now_us % every_us;
        let mut wait = Duration::from_micros(left as u64);
        while wait > Duration::ZERO && !stop.load(Ordering::Relaxed) {
            let step = wait.min(Duration::from_millis(200));
            std::thread::sleep(step);
            wait -= step;
        }
    }
    finished.store(true, Ordering::Relaxed);
    if let Some(t) = throughput {
        let _ = t.join();
    }
    Ok(())
}

/// The slower throughput passes over sampled agents.
struct Throughput {
    agents_spec: String,
    addrs: Vec<SocketAddr>,
    key: PathBuf,
    dir: PathBuf,
    every: Duration,
    sample: usize,
    duration: Duration,
}

/// One throughput pass, as `throughput.jsonl` keeps it.
#[derive(Debug, Serialize)]
struct PassLine {
    pass: u64,
    time: String,
    agents: Vec<String>,
    dir: String,
    measured: usize,
    failed: usize,
    lost: Vec<(String, String)>,
    seconds: f64,
    error: Option<String>,
}

impl Throughput {
    /// Pass after pass, `every` apart, until `stop` or `done`.
    fn run(&self, stop: &std::sync::atomic::AtomicBool, done: &std::sync::atomic::AtomicBool) {
        let mut writer = RecordWriter::append(&self.dir.join("throughput.jsonl")).ok();
        let mut pass = 0u64;
        loop {
            let until = Instant::now() + self.every;
            while Instant::now() < until {
                if stop.load(Ordering::Relaxed) || done.load(Ordering::Relaxed) {
                    return;
                }
                std::thread::sleep(Duration::from_millis(200));
            }
            pass += 1;
            // A new sample each pass: every agent in turn, in a seeded order.
            let mut order: Vec<usize> = (0..self.addrs.len()).collect();
            fastrand::Rng::with_seed(pass).shuffle(&mut order);
            let inventory: Vec<inventory::Agent> = order[..self.sample]
                .iter()
                .map(|&i| inventory::Agent {
                    name: self.addrs[i].to_string(),
                    addr: self.addrs[i],
                    labels: Default::default(),
                })
                .collect();
            let dir = self.dir.join("throughput").join(format!("{pass:06}"));
            let started = Instant::now();
            let run = crate::experiments::mesh::run::MeshRun {
                agents_spec: self.agents_spec.clone(),
                inventory: inventory.clone(),
                pass: crate::experiments::mesh::record::PassSpec {
                    tests: vec![crate::experiments::mesh::record::MeshTest::Stream],
                    duration_s: self.duration.as_secs_f64(),
                    mode: crate::controller::rounds::Mode::Host,
                    max_pairs: None,
                    bidir: false,
                    seed: pass,
                    // `netlab mesh`'s defaults (no loss test runs here).
                    loss_rate_bps: 10_000_000,
                    loss_length: 1200,
                    passes: 1,
                    probe_calls: crate::experiments::mesh::record::DEFAULT_PROBE_CALLS,
                },
                key: self.key.clone(),
                dir: dir.clone(),
                resume: false,
                keep: false,
            };
            let quiet = |line: &str| {
                if line.contains(": failed:") {
                    eprintln!("{line}");
                }
            };
            let outcome = std::fs::create_dir_all(&dir)
                .map_err(anyhow::Error::from)
                .and_then(|()| run.run(&quiet));
            let line = match outcome {
                Ok(s) => PassLine {
                    pass,
                    time: crate::record::now_rfc3339(),
                    agents: inventory.iter().map(|a| a.name.clone()).collect(),
                    dir: dir.display().to_string(),
                    measured: s.measured,
                    failed: s.failed,
                    lost: s.lost,
                    seconds: s.seconds,
                    error: None,
                },
                Err(e) => PassLine {
                    pass,
                    time: crate::record::now_rfc3339(),
                    agents: inventory.iter().map(|a| a.name.clone()).collect(),
                    dir: dir.display().to_string(),
                    measured: 0,
                    failed: 0,
                    lost: Vec::new(),
                    seconds: started.elapsed().as_secs_f64(),
                    error: Some(crate::options::describe(&e)),
                },
            };
            eprintln!(
                "netlab mesh watch: throughput pass {pass} over {} agents: {} tests measured, {} failed in {:.0} s{}",
                line.agents.len(),
                line.measured,
                line.failed,
                line.seconds,
                line.error
                    .as_deref()
                    .map_or(String::new(), |e| format!(": {e}"))
            );
            if let Some(w) = writer.as_mut() {
                let _ = w.write_line(&line);
            }
        }
    }
}

/// The hosts the findings name, and the zones: a zone's hosts are too
/// many to list, so its edge's paths and its racks' lines show it.
fn named_by<'a>(findings: &'a [Finding], fleet: &Fleet) -> (BTreeSet<String>, BTreeSet<&'a str>) {
    let named = findings
        .iter()
        .flat_map(|f| match &f.subject {
            aggregate::Subject::Host { host, .. } => vec![host.clone()],
            aggregate::Subject::Rack { zone, rack } => fleet
                .hosts
                .iter()
                .filter(|h| &h.zone == zone && &h.rack == rack)
                .map(|h| h.name.clone())
                .collect(),
            aggregate::Subject::Pair { a, b } => vec![a.clone(), b.clone()],
            aggregate::Subject::Zone { .. } => Vec::new(),
        })
        .collect();
    let zones = findings
        .iter()
        .filter_map(|f| match &f.subject {
            aggregate::Subject::Zone { zone, .. } => Some(zone.as_str()),
            _ => None,
        })
        .collect();
    (named, zones)
}

#[allow(clippy::too_many_arguments)]
fn cycle_line(
    cycle: u64,
    addrs: &[SocketAddr],
    reports: &[FleetReport],
    unanswered: Vec<(String, String)>,
    fleet: &Fleet,
    findings: Vec<Finding>,
    covered: Option<(u64, u64)>,
    covered_in: Option<u64>,
    (gather_s, cpu0): (f64, f64),
) -> CycleLine {
    let (named, zones) = named_by(&findings, fleet);
    let mut hosts: Vec<HostLine> = named
        .iter()
        .map(|h| HostLine {
            host: h.clone(),
            out_calls: 0,
            out_lost: 0,
            in_calls: 0,
            in_lost: 0,
        })
        .collect();
    let mut trouble_paths = Vec::new();
    for p in &fleet.paths {
        let (from, to) = (&fleet.hosts[p.from].name, &fleet.hosts[p.to].name);
        for h in hosts.iter_mut() {
            if &h.host == from {
                h.out_calls += p.calls;
                h.out_lost += p.lost;
            }
            if &h.host == to {
                h.in_calls += p.calls;
                h.in_lost += p.lost;
            }
        }
        let (zone_from, zone_to) = (
            fleet.hosts[p.from].zone.as_str(),
            fleet.hosts[p.to].zone.as_str(),
        );
        let across_zone =
            zone_from != zone_to && (zones.contains(zone_from) || zones.contains(zone_to));
        if (named.contains(from) || named.contains(to) || across_zone)
            && trouble_paths.len() < MAX_PATHS
        {
            trouble_paths.push(PathLine {
                from: from.clone(),
                to: to.clone(),
                calls: p.calls,
                lost: p.lost,
                p50_us: p.p50_us,
            });
        }
    }
    let (cpu1, rss_kb, threads) = own_cost();
    let unanswered_count = unanswered.len();
    CycleLine {
        cycle,
        time: crate::record::now_rfc3339(),
        agents: addrs.len(),
        answered: reports.len(),
        unanswered: unanswered.into_iter().take(20).collect(),
        unanswered_count,
        paths: fleet.paths.len(),
        calls: fleet.paths.iter().map(|p| p.calls).sum(),
        lost: fleet.paths.iter().map(|p| p.lost).sum(),
        covered,
        covered_in,
        findings,
        hosts,
        trouble_paths,
        racks: aggregate::racks(fleet),
        controller: ControllerCost {
            gather_s,
            cpu_s: cpu1 - cpu0,
            rss_kb,
            threads,
            pool_threads: POOL.with(|p| p.get()),
        },
    }
}

fn say(line: &CycleLine, json: bool, out: &mut Output) -> anyhow::Result<()> {
    if json {
        return Ok(out.text(&format!("{}\n", serde_json::to_string(line)?))?);
    }
    let mut text = format!(
        "cycle {}: {} of {} agents answered, {} paths, lost {} of {} calls",
        line.cycle, line.answered, line.agents, line.paths, line.lost, line.calls
    );
    if let Some((seen, all)) = line.covered {
        text += &format!(", pairs covered {seen} of {all}");
    }
    text += &format!(
        "; read in {:.2} s by {} threads, controller {:.3} CPU s, {} MB\n",
        line.controller.gather_s,
        line.controller.pool_threads,
        line.controller.cpu_s,
        line.controller.rss_kb / 1024,
    );
    for (agent, why) in &line.unanswered {
        text += &format!("  no summary from {agent}: {why}\n");
    }
    if line.findings.is_empty() {
        text += "  no finding\n";
    }
    for f in &line.findings {
        text += &format!("  finding: {f}\n");
    }
    Ok(out.text(&text)?)
}
