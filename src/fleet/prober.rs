//! An agent's own probing of its peer list (#64, point 2): one thread and
//! one UDP socket, bound to the agent's address and port, that both
//! answers its peers' calls and sends its own, cycle after cycle, with no
//! controller. If a controller goes away, nothing here notices.
//!
//! It answers from its start and probes from the first cycle that
//! begins after it. Each cycle (cycles are counted from the Unix epoch, so agents number
//! them alike and draw matching lists, [`PeerPlan`]) it probes the peers
//! its plan gives it, each at its offset in the cycle: `calls` calls
//! `spacing` apart, each answered or lost after `timeout`. A probe's
//! calls, losses and round trips go to its [`Summaries`] and its metrics.
//!
//! The peers come from a file of hosts (their labels from the file) or
//! from DNS (every address of a name, as a Kubernetes headless Service
//! gives its ready pods; their labels from their answers, which carry the
//! answerer's zone and rack, so no agent asks an API server). It reads
//! its source again every `reload` cycles; a changed fleet gives a new
//! plan from the next cycle.
//!
//! Invariants: the socket answers only calls sealed with the key
//! ([`crate::wire::probe`]); at most the calls of the probes in flight
//! wait for answers (a probe's unanswered calls are dropped when it
//! closes), and the summaries are bounded ([`Summaries`]), so its memory
//! does not grow with time. A round trip is measured from the send to the
//! thread's receive (its wake-up included: microseconds here).

use super::HostLabels;
use super::metrics::FleetMetrics;
use super::peers::{AgentPeers, PeerPlan};
use super::report::FleetReport;
use super::summaries::{Probe, Summaries};
use crate::wire::probe::{self, CALL_LEN, ProbeKey};
use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::net::{SocketAddr, ToSocketAddrs, UdpSocket};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where the peers come from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PeerSource {
    /// A file of hosts (`HOST[:PORT] zone=.. rack=..`, [`super::hosts`]).
    File(PathBuf),
    /// Every address of a name, on `port`.
    Dns { name: String, port: u16 },
}

impl PeerSource {
    /// `dns:NAME[:PORT]` or a file's path.
    pub fn parse(spec: &str, default_port: u16) -> Result<PeerSource, String> {
        match spec.strip_prefix("dns:") {
            Some(rest) => {
                let (name, port) = split_port(rest, default_port)?;
                if name.is_empty() {
                    return Err(format!("{spec}: no name after dns:"));
                }
                Ok(PeerSource::Dns { name, port })
            }
            None => Ok(PeerSource::File(PathBuf::from(spec))),
        }
    }
}

/// `HOST[:PORT]` as (host, port); a bracketed or bare IPv6 address keeps
/// its colons.
fn split_port(text: &str, default_port: u16) -> Result<(String, u16), String> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok((addr.ip().to_string(), addr.port()));
    }
    if text.parse::<std::net::IpAddr>().is_ok() {
        return Ok((text.to_string(), default_port));
    }
    match text.rsplit_once(':') {
        Some((host, port)) => port
            .parse()
            .map(|p| (host.to_string(), p))
            .map_err(|_| format!("{text}: {port:?} is not a port")),
        None => Ok((text.to_string(), default_port)),
    }
}

/// What the prober is told.
#[derive(Debug, Clone)]
pub struct ProberConfig {
    pub key: ProbeKey,
    /// The socket's address: the agent's own address and port.
    pub bind: SocketAddr,
    /// This agent as its peers list it, with its labels.
    pub me: SocketAddr,
    pub zone: String,
    pub rack: String,
    pub source: PeerSource,
    /// A cycle's length.
    pub every: Duration,
    /// Peers a cycle (from the probe budget, [`super::peers::peers_within`]).
    pub peers: usize,
    /// Calls a probe, `spacing` apart; a call unanswered after `timeout` is lost.
    pub calls: u32,
    pub spacing: Duration,
    pub timeout: Duration,
    pub seed: u64,
    /// Probes kept a peer, peers kept, and the worst served as series.
    pub window: usize,
    pub max_peers: usize,
    pub worst: usize,
    /// Cycles between readings of the source.
    pub reload: u64,
}

/// The most hosts a source may list: a plan of this many is drawn in
/// about a second, and DNS answers hold fewer (docs/FLEET.md).
pub const MAX_HOSTS: usize = 20_000;

/// What the thread shares with whoever reports it.
#[derive(Debug)]
struct Shared {
    summaries: Summaries,
    last_cycle: Option<u64>,
    cycles: u64,
    hosts: usize,
    peers_a_cycle: usize,
    coverage_cycles: u64,
    calls: u64,
    lost: u64,
    answered: u64,
    problem: Option<String>,
}

/// A running prober; dropping it stops its thread and closes its socket.
pub struct Prober {
    shared: Arc<Mutex<Shared>>,
    me: HostLabels,
    every: Duration,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Prober {
    /// Binds the socket (an error here, never later) and starts the thread.
    pub fn start(
        config: ProberConfig,
        metrics: FleetMetrics,
        log: Box<dyn Fn(String) + Send>,
    ) -> io::Result<Prober> {
        if config.every < Duration::from_secs(1) || config.calls == 0 || config.peers == 0 {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                "a probe cycle needs at least 1 s, a call a probe and a peer a cycle",
            ));
        }
        let socket = UdpSocket::bind(config.bind).map_err(|e| {
            io::Error::new(
                e.kind(),
                format!("probes: cannot bind UDP {}: {e}", config.bind),
            )
        })?;
        let me = HostLabels {
            name: config.me.to_string(),
            zone: config.zone.clone(),
            rack: config.rack.clone(),
        };
        let shared = Arc::new(Mutex::new(Shared {
            summaries: Summaries::new(config.window, config.max_peers),
            last_cycle: None,
            cycles: 0,
            hosts: 0,
            peers_a_cycle: 0,
            coverage_cycles: 0,
            calls: 0,
            lost: 0,
            answered: 0,
            problem: Some("no cycle begun yet".into()),
        }));
        let stop = Arc::new(AtomicBool::new(false));
        let every = config.every;
        let thread = {
            let (shared, stop, me) = (shared.clone(), stop.clone(), me.clone());
            std::thread::Builder::new()
                .name("fleet-prober".into())
                .spawn(move || {
                    Loop::new(config, me, socket, metrics, shared, log).run(&stop);
                })?
        };
        Ok(Prober {
            shared,
            me,
            every,
            stop,
            thread: Some(thread),
        })
    }

    /// What it has found so far.
    pub fn report(&self) -> FleetReport {
        let s = lock(&self.shared);
        FleetReport {
            host: self.me.clone(),
            every_s: self.every.as_secs_f64(),
            last_cycle: s.last_cycle,
            cycles: s.cycles,
            hosts: s.hosts,
            peers_a_cycle: s.peers_a_cycle,
            coverage_cycles: s.coverage_cycles,
            calls: s.calls,
            lost: s.lost,
            answered: s.answered,
            peers: s.summaries.figures(),
            problem: s.problem.clone(),
        }
    }
}

impl Drop for Prober {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// A probe in flight.
struct Running {
    cycle: u64,
    peer: HostLabels,
    addr: SocketAddr,
    sent: u32,
    next_call: Instant,
    rtts_us: Vec<u32>,
    seqs: Vec<u32>,
}

/// The plan of the current fleet, and this agent's place in it.
struct Drawn {
    plan: PeerPlan,
    me: usize,
    mine: AgentPeers,
}

struct Loop {
    config: ProberConfig,
    me: HostLabels,
    socket: UdpSocket,
    metrics: FleetMetrics,
    shared: Arc<Mutex<Shared>>,
    log: Box<dyn Fn(String) + Send>,
    /// Each known host's address and labels (None: not yet heard from).
    fleet: BTreeMap<SocketAddr, Option<(String, String)>>,
    drawn: Option<Drawn>,
    cycle: Option<u64>,
    /// Probes yet to start: (when, peer index, cycle). A probe late for
    /// its cycle (the thread was not run in time) starts at once in the
    /// next, never dropped: a dropped probe would leave its pair
    /// unprobed for another C cycles.
    queue: VecDeque<(Instant, u32, u64)>,
    running: Vec<Running>,
    /// Calls awaiting their answer: seq -> (running probe's peer address,
    /// when sent); a discovery call has no probe.
    waiting: HashMap<u32, (SocketAddr, Instant, bool)>,
    next_seq: u32,
    last_problem: Option<String>,
}

impl Loop {
    fn new(
        config: ProberConfig,
        me: HostLabels,
        socket: UdpSocket,
        metrics: FleetMetrics,
        shared: Arc<Mutex<Shared>>,
        log: Box<dyn Fn(String) + Send>,
    ) -> Loop {
        Loop {
            config,
            me,
            socket,
            metrics,
            shared,
            log,
            fleet: BTreeMap::new(),
            drawn: None,
            cycle: None,
            queue: VecDeque::new(),
            running: Vec::new(),
            waiting: HashMap::new(),
            next_seq: fastrand::u32(..),
            last_problem: None,
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        let mut buf = [0u8; 2048];
        while !stop.load(Ordering::Relaxed) {
            let now = Instant::now();
            let (cycle, into) = self.wall_cycle();
            if self.cycle != Some(cycle) {
                self.begin(cycle, now - into);
            }
            while self.queue.front().is_some_and(|(at, ..)| *at <= now) {
                let (_, peer, cycle) = self.queue.pop_front().expect("checked");
                self.open(peer as usize, cycle, now);
            }
            self.send_due(now);
            self.close_due(now);
            let next_cycle = now + (self.config.every - into);
            let wake = [
                self.queue.front().map(|(at, ..)| *at),
                self.running.iter().map(|r| self.due(r)).min(),
                Some(next_cycle),
                Some(now + Duration::from_millis(200)),
            ]
            .into_iter()
            .flatten()
            .min()
            .expect("some");
            let wait = wake.saturating_duration_since(Instant::now());
            let _ = self
                .socket
                .set_read_timeout(Some(wait.max(Duration::from_micros(100))));
            match self.socket.recv_from(&mut buf) {
                Ok((n, from)) => self.heard(&buf[..n], from, Instant::now()),
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) => {}
                // ICMP unreachable from an earlier send: that call is lost anyway.
                Err(_) => {}
            }
        }
    }

    /// The cycle the wall clock is in, and how far into it.
    fn wall_cycle(&self) -> (u64, Duration) {
        let now = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros();
        let every = self.config.every.as_micros().max(1);
        (
            (now / every) as u64,
            Duration::from_micros((now % every) as u64),
        )
    }

    /// When `r` next needs the thread: its next call, or its close.
    fn due(&self, r: &Running) -> Instant {
        if r.sent < self.config.calls {
            r.next_call
        } else {
            r.next_call + self.config.timeout
        }
    }

    fn problem(&mut self, problem: Option<String>) {
        if problem != self.last_problem {
            if let Some(p) = &problem {
                (self.log)(format!("probes: {p}"));
            }
            self.last_problem = problem.clone();
        }
        lock(&self.shared).problem = problem;
    }

    /// Ends the last cycle and plans cycle `cycle`, begun at `began`.
    fn begin(&mut self, cycle: u64, began: Instant) {
        let first = self.cycle.is_none();
        if !first {
            self.metrics.cycles.inc();
            let mut s = lock(&self.shared);
            s.last_cycle = self.cycle;
            s.cycles += 1;
            self.metrics
                .set_worst(&s.summaries.worst(self.config.worst));
        }
        self.cycle = Some(cycle);
        // Probes of a plan that changed are dropped with it.
        if first || cycle.is_multiple_of(self.config.reload.max(1)) {
            match self.read_fleet() {
                Ok(()) => {}
                Err(e) => {
                    self.problem(Some(e));
                    if self.drawn.is_none() {
                        return;
                    }
                }
            }
        }
        if let Err(e) = self.redraw() {
            self.drawn = None;
            self.queue.clear();
            self.problem(Some(e));
            return;
        }
        let Some(drawn) = &self.drawn else {
            return;
        };
        let list = drawn.mine.peers(cycle);
        let offsets = drawn
            .plan
            .probe_offsets(drawn.me, self.config.every, list.len());
        let mut starts: Vec<(Instant, u32, u64)> = offsets
            .into_iter()
            .map(|o| began + o)
            .zip(list)
            .map(|(at, peer)| (at, peer, cycle))
            // Begun mid-cycle (the agent just started), it only answers
            // until the next: a fleet started together then probes only
            // agents already up, and no start-up loss is kept.
            .filter(|_| !first)
            .collect();
        starts.extend(self.queue.drain(..));
        starts.sort();
        self.queue = starts.into();
        self.problem(None);
    }

    /// Reads the source; new DNS addresses are asked their labels.
    fn read_fleet(&mut self) -> Result<(), String> {
        let found: Vec<(SocketAddr, Option<(String, String)>)> = match &self.config.source {
            PeerSource::File(path) => {
                let text = crate::record::files::read_text(
                    path,
                    crate::record::files::MAX_SMALL_FILE,
                    "a list of peers",
                )
                .map_err(|e| e.to_string())?;
                let entries = super::hosts::entries_up_to(&text, MAX_HOSTS)
                    .map_err(|e| format!("{}: {e}", path.display()))?;
                let mut found = Vec::with_capacity(entries.len());
                for (line, (name, labels)) in entries {
                    let (host, port) = split_port(&name, self.config.me.port())
                        .map_err(|e| format!("{} line {line}: {e}", path.display()))?;
                    let addr = (host.as_str(), port)
                        .to_socket_addrs()
                        .ok()
                        .and_then(|mut a| a.next())
                        .ok_or_else(|| {
                            format!("{} line {line}: cannot resolve {name}", path.display())
                        })?;
                    let l = HostLabels::of(&name, &labels);
                    found.push((addr, Some((l.zone, l.rack))));
                }
                found
            }
            PeerSource::Dns { name, port } => {
                let addrs: Vec<SocketAddr> = (name.as_str(), *port)
                    .to_socket_addrs()
                    .map_err(|e| format!("cannot resolve dns:{name}: {e}"))?
                    .take(MAX_HOSTS)
                    .collect();
                addrs
                    .into_iter()
                    .map(|a| (a, self.fleet.get(&a).cloned().flatten()))
                    .collect()
            }
        };
        self.fleet = found.into_iter().collect();
        let me = (self.me.zone.clone(), self.me.rack.clone());
        self.fleet.insert(self.config.me, Some(me));
        let unheard: Vec<SocketAddr> = self
            .fleet
            .iter()
            .filter(|(_, l)| l.is_none())
            .map(|(a, _)| *a)
            .collect();
        for addr in unheard {
            let seq = self.seq();
            self.waiting.insert(seq, (addr, Instant::now(), false));
            self.call(seq, addr);
        }
        Ok(())
    }

    /// A new plan when the labelled fleet differs from the plan's.
    fn redraw(&mut self) -> Result<(), String> {
        let hosts: Vec<HostLabels> = self
            .fleet
            .iter()
            .filter_map(|(addr, labels)| {
                labels.as_ref().map(|(zone, rack)| HostLabels {
                    name: addr.to_string(),
                    zone: zone.clone(),
                    rack: rack.clone(),
                })
            })
            .collect();
        let mut sorted = hosts.clone();
        sorted.sort_by(|a, b| a.name.cmp(&b.name));
        if self
            .drawn
            .as_ref()
            .is_some_and(|d| d.plan.hosts() == sorted.as_slice())
        {
            return Ok(());
        }
        if hosts.len() < 2 {
            return Err(format!("{} host(s) known, none to probe yet", hosts.len()));
        }
        let plan = PeerPlan::new(&hosts, self.config.peers, self.config.seed)
            .map_err(|e| e.to_string())?;
        let me = plan
            .hosts()
            .iter()
            .position(|h| h.name == self.me.name)
            .expect("this agent is in its own fleet");
        let mine = plan.agent(me);
        let peers_a_cycle = mine.peers(0).len();
        self.metrics.hosts.set(plan.hosts().len() as i64);
        self.metrics.peers_a_cycle.set(peers_a_cycle as i64);
        self.metrics
            .coverage_cycles
            .set(plan.coverage_cycles() as i64);
        {
            let mut s = lock(&self.shared);
            s.hosts = plan.hosts().len();
            s.peers_a_cycle = peers_a_cycle;
            s.coverage_cycles = plan.coverage_cycles();
        }
        (self.log)(format!(
            "probes: {} hosts, {peers_a_cycle} peers a cycle of {:?}, every pair within {} cycles",
            plan.hosts().len(),
            self.config.every,
            plan.coverage_cycles()
        ));
        // Queued probes name hosts by the old plan's indices.
        self.queue.clear();
        self.drawn = Some(Drawn { plan, me, mine });
        Ok(())
    }

    fn seq(&mut self) -> u32 {
        self.next_seq = self.next_seq.wrapping_add(1);
        self.next_seq
    }

    /// Sends call `seq` to `addr`; false when it could not be sent.
    fn call(&mut self, seq: u32, addr: SocketAddr) -> bool {
        let stamp_us = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap_or_default()
            .as_micros() as u64;
        let bytes = probe::emit(&probe::Probe::Call { seq, stamp_us }, &self.config.key)
            .expect("a call has no labels");
        debug_assert_eq!(bytes.len(), CALL_LEN);
        self.socket.send_to(&bytes, addr).is_ok()
    }

    fn open(&mut self, peer: usize, cycle: u64, now: Instant) {
        let Some(drawn) = &self.drawn else {
            return;
        };
        let host = drawn.plan.hosts()[peer].clone();
        let Ok(addr) = host.name.parse::<SocketAddr>() else {
            return;
        };
        self.running.push(Running {
            cycle,
            peer: host,
            addr,
            sent: 0,
            next_call: now,
            rtts_us: Vec::new(),
            seqs: Vec::new(),
        });
    }

    fn send_due(&mut self, now: Instant) {
        for i in 0..self.running.len() {
            while self.running[i].sent < self.config.calls && self.running[i].next_call <= now {
                let seq = self.seq();
                let addr = self.running[i].addr;
                if self.call(seq, addr) {
                    self.waiting.insert(seq, (addr, Instant::now(), true));
                }
                let r = &mut self.running[i];
                r.sent += 1;
                r.seqs.push(seq);
                r.next_call += self.config.spacing;
            }
        }
    }

    fn close_due(&mut self, now: Instant) {
        let calls = self.config.calls;
        let timeout = self.config.timeout;
        let (done, still): (Vec<Running>, Vec<Running>) = self
            .running
            .drain(..)
            .partition(|r| r.sent >= calls && r.next_call + timeout <= now);
        self.running = still;
        // Discovery calls unanswered for a timeout are forgotten.
        self.waiting
            .retain(|_, (_, sent, probe)| *probe || now.duration_since(*sent) < timeout);
        for r in done {
            for seq in &r.seqs {
                self.waiting.remove(seq);
            }
            let answered = r.rtts_us.len() as u32;
            let lost = r.sent - answered.min(r.sent);
            self.metrics.calls.inc_by(u64::from(r.sent));
            self.metrics.lost.inc_by(u64::from(lost));
            let mut s = lock(&self.shared);
            s.calls += u64::from(r.sent);
            s.lost += u64::from(lost);
            s.summaries.record(
                &r.peer,
                Probe {
                    cycle: r.cycle,
                    calls: r.sent,
                    lost,
                    rtts_us: r.rtts_us,
                },
            );
        }
    }

    fn heard(&mut self, bytes: &[u8], from: SocketAddr, at: Instant) {
        // Anything without the key's MAC is dropped unanswered.
        let Ok(message) = probe::parse(bytes, &self.config.key) else {
            return;
        };
        match message {
            probe::Probe::Call { seq, stamp_us } => {
                let answer = probe::Probe::Answer {
                    seq,
                    stamp_us,
                    zone: self.me.zone.clone(),
                    rack: self.me.rack.clone(),
                };
                if let Ok(bytes) = probe::emit(&answer, &self.config.key)
                    && self.socket.send_to(&bytes, from).is_ok()
                {
                    self.metrics.answered.inc();
                    lock(&self.shared).answered += 1;
                }
            }
            probe::Probe::Answer {
                seq, zone, rack, ..
            } => {
                let Some((addr, sent, in_probe)) = self.waiting.get(&seq).copied() else {
                    return;
                };
                if addr != from {
                    return;
                }
                self.waiting.remove(&seq);
                if let PeerSource::Dns { .. } = self.config.source
                    && let Some(labels) = self.fleet.get_mut(&from)
                {
                    *labels = Some((zone, rack));
                }
                if !in_probe {
                    return;
                }
                let rtt_us = at
                    .duration_since(sent)
                    .as_micros()
                    .min(u128::from(u32::MAX)) as u32;
                if let Some(r) = self.running.iter_mut().find(|r| r.seqs.contains(&seq)) {
                    self.metrics.round_trip(&self.me, &r.peer, rtt_us);
                    r.rtts_us.push(rtt_us);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_peer_source_is_a_file_or_a_name_with_its_port() {
        assert_eq!(
            PeerSource::parse("dns:agents.netlab.svc", 5310),
            Ok(PeerSource::Dns {
                name: "agents.netlab.svc".into(),
                port: 5310
            })
        );
        assert_eq!(
            PeerSource::parse("dns:agents:7000", 5310),
            Ok(PeerSource::Dns {
                name: "agents".into(),
                port: 7000
            })
        );
        assert!(PeerSource::parse("dns:", 5310).is_err());
        assert!(PeerSource::parse("dns:a:port", 5310).is_err());
        assert_eq!(
            PeerSource::parse("peers.txt", 5310),
            Ok(PeerSource::File("peers.txt".into()))
        );
        assert_eq!(split_port("::1", 9), Ok(("::1".into(), 9)));
        assert_eq!(split_port("[::1]:8", 9), Ok(("::1".into(), 8)));
    }
}
