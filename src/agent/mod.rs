//! `netlab agent serve`: runs the ends of experiments for controllers on
//! other hosts.
//!
//! # Admission: what a stranger can hold
//!
//! The handshake ([`crate::endpoint::agent::channel`], NNpsk0) proves the
//! key in the controller's *first* message, which arrives with its
//! connection's last ACK. So the agent keeps a connection in two states:
//!
//! - **unproven**: accepted, its first message not yet whole. These are
//!   held by the accept thread itself, not by threads: a non-blocking
//!   socket and a 258-byte buffer each, read when poll says so, judged at
//!   once when whole (one hash chain and one AEAD open, no Diffie-Hellman).
//!   At most [`MAX_PER_SOURCE`] per source address and [`MAX_HANDSHAKES`]
//!   in all; a new connection ends its source's oldest, then the oldest of
//!   all, each told [`Refusal::Busy`] before it is closed, but never one
//!   younger than [`YOUNG`] (the new one is refused instead). So a key
//!   holder whose first message arrives late, through a relay, tunnel or
//!   NAT whose address strangers share, is judged before they can push it
//!   out (found 2026-12: 96 strangers behind a 40 ms relay locked out 5
//!   runs of 5 when the share was 32 and the oldest always went). Each
//!   has [`channel::HANDSHAKE_TIME`] to send its first message; the agent
//!   raises its descriptor limit to hold them all and the runs beside.
//! - **proven**: the first message verified (and its ephemeral key is new:
//!   [`ReplayCache`]). Only now does it get a thread, and no stranger can end
//!   it: only key holders, or replays of messages a key holder sent once
//!   each, reach this state, at most [`MAX_PROVEN`] at once.
//!
//! A key holder's connection is unproven only from its accept until its
//! first message is read: the accept thread reads every readable unproven
//! connection before it accepts at most [`ACCEPT_BURST`] new ones, so a
//! first message that has arrived is judged before fewer new connections
//! than a source's share could end it, however fast strangers reconnect
//! and however long the round trip. Across a long round trip a stranger's
//! reconnections are as slow as anyone's; it never matters, because no
//! state waits on a round trip before proof.
//!
//! After its handshake a controller says `Hello`; the agent checks its
//! version and the experiment against `--allow`, takes one of `--max-runs`
//! slots or answers `Busy` naming the run that holds it, and serves the
//! run ([`session`]) until the controller says `Bye`, goes away, or the run
//! passes `--max-duration`. Then every endpoint of the run is killed and
//! reaped, and the slot is free for the next controller.
//!
//! Refused peers are logged with their address and the reason, at most
//! [`LOG_BURST`] lines per cause per [`LOG_WINDOW`], then a count.

pub mod log;
pub mod metrics;
pub mod session;

use log::{log, printable};

use crate::endpoint::agent::channel::{
    self, ChannelError, FIRST_MESSAGE_LEN, HANDSHAKE_MESSAGE_MAX, Refusal, ReplayCache, Verified,
};
use crate::endpoint::agent::key::Key;
use crate::endpoint::agent::policy::Policy;
use crate::endpoint::agent::{
    FLEET_REPORT, FromAgent, Hello, ToAgent, Welcome, lock, now_us, version_mismatch,
};
use crate::measure::host::HostFacts;
use std::io::{self, Read};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::endpoint::ratelog::RateLog;

/// Unproven connections at once; a new one ends the oldest.
pub const MAX_HANDSHAKES: usize = 1024;
/// Unproven connections of one source address; a new one ends its oldest.
/// Half of all: one address may be a relay, a tunnel or a NAT that key
/// holders share with strangers.
pub const MAX_PER_SOURCE: usize = 512;
/// An unproven connection this young is never ended for a newer one (the
/// newer is refused instead): a controller whose first message comes late
/// (through a relay that accepts at once and delays the data, 100 ms and
/// more) is judged before strangers reconnecting from the relay's
/// address can push it out.
pub const YOUNG: Duration = Duration::from_millis(500);
/// Descriptors the agent asks for at start: every unproven connection,
/// and as many again for the runs (their endpoints, sockets and pipes).
const NOFILE_WANTED: u64 = 4 * MAX_HANDSHAKES as u64;
/// New connections accepted between two readings of the unproven ones:
/// well under [`MAX_PER_SOURCE`], so a first message that has arrived is
/// read before its source's share turns over.
pub const ACCEPT_BURST: usize = 8;
/// Proven connections in their Hello at once (each a thread); more are
/// told [`Refusal::Busy`].
pub const MAX_PROVEN: usize = 64;
/// How often the accept thread looks at the stop flag when nothing happens.
const IDLE_POLL: Duration = Duration::from_millis(200);

/// A connection whose first message has not arrived whole.
struct Unproven {
    stream: TcpStream,
    peer: SocketAddr,
    since: Instant,
    buf: [u8; 2 + HANDSHAKE_MESSAGE_MAX],
    got: usize,
}

/// What reading an unproven connection found.
#[derive(Debug)]
enum FirstMessage {
    /// Not whole yet.
    Partial,
    /// Whole: the message (without its length).
    Whole,
    /// The peer closed or reset the connection.
    Closed,
    /// A length no first message has.
    WrongLength(usize),
}

impl Unproven {
    fn new(stream: TcpStream, peer: SocketAddr) -> Unproven {
        Unproven {
            stream,
            peer,
            since: Instant::now(),
            buf: [0; 2 + HANDSHAKE_MESSAGE_MAX],
            got: 0,
        }
    }

    /// The first message's length, once its length field is in.
    fn length(&self) -> Option<usize> {
        (self.got >= 2).then(|| usize::from(u16::from_be_bytes([self.buf[0], self.buf[1]])))
    }

    /// Reads what has arrived (never more than the first message).
    fn read(&mut self) -> FirstMessage {
        loop {
            let want = match self.length() {
                None => 2,
                Some(n) if n != FIRST_MESSAGE_LEN => return FirstMessage::WrongLength(n),
                Some(n) => 2 + n,
            };
            if self.got == want {
                return FirstMessage::Whole;
            }
            match self.stream.read(&mut self.buf[self.got..want]) {
                Ok(0) => return FirstMessage::Closed,
                Ok(n) => self.got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return FirstMessage::Partial,
                Err(_) => return FirstMessage::Closed,
            }
        }
    }

    fn message(&self) -> &[u8] {
        &self.buf[2..self.got]
    }

    /// Tells the peer why and closes (best effort: the socket's buffer is
    /// empty, so three bytes never block).
    fn refuse(mut self, refusal: Refusal) {
        channel::refuse(&mut self.stream, refusal);
        let _ = self.stream.shutdown(std::net::Shutdown::Both);
    }
}

/// The unproven connections, oldest first.
struct Unprovens {
    pending: Vec<Unproven>,
    /// Never ended for a newer one while younger than this ([`YOUNG`]).
    young: Duration,
}

impl Default for Unprovens {
    fn default() -> Self {
        Unprovens {
            pending: Vec::new(),
            young: YOUNG,
        }
    }
}

/// What admitting a connection did.
#[derive(Default)]
struct Admitted {
    /// Older unproven connections ended to make room.
    ended: Vec<Unproven>,
    /// The new one, when every connection it could have ended was young.
    refused: Option<Unproven>,
}

impl Unprovens {
    /// Takes a new connection, ending whichever unproven ones must go to
    /// make room (its source's oldest when the source holds its share,
    /// then the oldest of all), never one younger than [`YOUNG`]: when
    /// only young ones could go, the new one is refused.
    fn admit(&mut self, new: Unproven) -> Admitted {
        let mut admitted = Admitted::default();
        let source = new.peer.ip();
        let now = Instant::now();
        let young = self.young;
        let old_enough = |u: &Unproven| now.duration_since(u.since) >= young;
        if self.of(source) >= MAX_PER_SOURCE {
            match self
                .pending
                .iter()
                .position(|u| u.peer.ip() == source && old_enough(u))
            {
                Some(i) => admitted.ended.push(self.pending.remove(i)),
                None => {
                    admitted.refused = Some(new);
                    return admitted;
                }
            }
        }
        if self.pending.len() >= MAX_HANDSHAKES {
            match self.pending.iter().position(old_enough) {
                Some(i) => admitted.ended.push(self.pending.remove(i)),
                None => {
                    admitted.refused = Some(new);
                    return admitted;
                }
            }
        }
        self.pending.push(new);
        admitted
    }

    fn of(&self, source: IpAddr) -> usize {
        self.pending
            .iter()
            .filter(|u| u.peer.ip() == source)
            .count()
    }

    fn len(&self) -> usize {
        self.pending.len()
    }
}

/// What `netlab agent serve` was told.
#[derive(Debug, Clone)]
pub struct AgentConfig {
    pub key: Key,
    pub listen: SocketAddr,
    pub policy: Policy,
    /// Its node and labels, said in every Welcome.
    pub identity: crate::record::testbed::Identity,
    /// Serve its own metrics here (`--metrics`).
    pub metrics: Option<SocketAddr>,
    /// Probe a fleet on its own (`--probe-peers`).
    pub probes: Option<crate::fleet::prober::ProberConfig>,
}

/// Logs refused peers, at most [`LOG_BURST`] a window, and counts each
/// by its reason.
struct RefusalLog {
    log: RateLog,
    metrics: Arc<metrics::AgentMetrics>,
}

impl RefusalLog {
    /// Logs `peer`'s refusal for `cause` (a fixed text, its rate window's
    /// name) with `detail` (may be empty).
    fn refuse(&self, peer: SocketAddr, cause: &'static str, detail: &str) {
        self.metrics.refused(cause);
        if detail.is_empty() {
            self.log
                .line_about(cause, format_args!("refused {peer}: {cause}"));
        } else {
            self.log
                .line_about(cause, format_args!("refused {peer}: {cause}: {detail}"));
        }
    }
}

impl RefusalLog {
    fn new(metrics: Arc<metrics::AgentMetrics>) -> Self {
        RefusalLog {
            log: RateLog::new("refused peers", |line| log(line)),
            metrics,
        }
    }
}

/// A run holding a slot.
#[derive(Debug, Clone)]
struct RunInfo {
    id: u64,
    experiment: String,
    controller: String,
    since: String,
}

/// The `--max-runs` slots.
struct Slots {
    max: usize,
    /// The runs holding a slot, and the id the next one gets.
    runs: Mutex<(Vec<RunInfo>, u64)>,
}

/// A held slot, freed on drop.
struct Slot<'a> {
    slots: &'a Slots,
    id: u64,
}

impl Slots {
    fn acquire(&self, experiment: &str, controller: String) -> Result<Slot<'_>, RunInfo> {
        let mut guard = lock(&self.runs);
        let (runs, next) = &mut *guard;
        if runs.len() >= self.max {
            return Err(runs[0].clone());
        }
        let id = *next;
        *next += 1;
        runs.push(RunInfo {
            id,
            experiment: experiment.to_string(),
            controller,
            since: crate::record::now_rfc3339(),
        });
        Ok(Slot { slots: self, id })
    }
}

impl Drop for Slot<'_> {
    fn drop(&mut self) {
        lock(&self.slots.runs).0.retain(|r| r.id != self.id);
    }
}

/// Shared by every connection's thread.
struct Agent {
    config: AgentConfig,
    facts: HostFacts,
    refusals: RefusalLog,
    metrics: Arc<metrics::AgentMetrics>,
    slots: Slots,
    /// Proven connections not yet past their Hello.
    proven: AtomicUsize,
    stop: Arc<AtomicBool>,
    /// Its own probing, when it probes.
    prober: Option<crate::fleet::prober::Prober>,
}

/// Serves until `stop` is set; then ends every run and returns.
pub fn serve(config: AgentConfig, stop: Arc<AtomicBool>) -> io::Result<()> {
    let listener = TcpListener::bind(config.listen).map_err(|e| {
        io::Error::new(e.kind(), format!("cannot listen on {}: {e}", config.listen))
    })?;
    listener.set_nonblocking(true)?;
    // Room for every unproven connection and as much again for the runs,
    // where the hard limit allows: strangers then run out of slots, never
    // the runs out of descriptors.
    match crate::measure::limits::raise_nofile(NOFILE_WANTED) {
        Ok(n) if n < NOFILE_WANTED => log(format_args!(
            "descriptors: {n} allowed (RLIMIT_NOFILE's hard limit), under the {NOFILE_WANTED} asked; a flood of unauthenticated connections may leave runs short"
        )),
        Ok(_) => {}
        Err(e) => log(format_args!("descriptors: cannot raise RLIMIT_NOFILE: {e}")),
    }
    let metrics = Arc::new(metrics::AgentMetrics::default());
    let prober = match config.probes.clone() {
        Some(probes) => {
            let fleet = crate::fleet::metrics::FleetMetrics::default();
            fleet.register(&mut lock(&metrics.registry));
            Some(crate::fleet::prober::Prober::start(
                probes,
                fleet,
                Box::new(log),
            )?)
        }
        None => None,
    };
    let _exporter = match config.metrics {
        Some(address) => {
            let server = crate::controller::metrics::serve(address, metrics.registry.clone())
                .map_err(|e| io::Error::new(io::ErrorKind::AddrInUse, e.to_string()))?;
            log(format_args!(
                "metrics at http://{}/metrics",
                server.address()
            ));
            Some(server)
        }
        None => None,
    };
    log(format_args!(
        "listening on {} ({}); control channel {}",
        listener.local_addr()?,
        config.policy.describe(),
        channel::PATTERN
    ));
    let agent = Arc::new(Agent {
        slots: Slots {
            max: config.policy.max_runs,
            runs: Mutex::new((Vec::new(), 1)),
        },
        config,
        facts: HostFacts::gather(),
        refusals: RefusalLog::new(metrics.clone()),
        metrics,
        proven: AtomicUsize::new(0),
        stop: stop.clone(),
        prober,
    });
    let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
    let mut unproven = Unprovens::default();
    let mut replays = ReplayCache::default();
    while !stop.load(Ordering::Relaxed) {
        let (listener_ready, ready) = wait(&listener, &unproven);
        // First the connections already here: a first message that has
        // arrived is judged before anyone new can push it out.
        let mut still = Vec::with_capacity(unproven.len());
        for (mut u, readable) in unproven.pending.drain(..).zip(ready) {
            if !readable {
                still.push(u);
                continue;
            }
            match u.read() {
                FirstMessage::Partial => still.push(u),
                // A connection closed before its first byte is a probe
                // (Kubernetes' tcpSocket readiness probe, a port check):
                // it asked for nothing, so nothing was refused or logged.
                FirstMessage::Closed if u.got == 0 => {}
                FirstMessage::Closed => {
                    agent
                        .refusals
                        .refuse(u.peer, "closed the connection in the handshake", "");
                }
                FirstMessage::WrongLength(n) => {
                    agent.refusals.refuse(
                        u.peer,
                        "a first handshake message of the wrong length",
                        &format!("{n} bytes, not {FIRST_MESSAGE_LEN}"),
                    );
                    u.refuse(Refusal::KeyDiffers);
                }
                FirstMessage::Whole => {
                    judge(&agent, u, &mut replays, &mut threads);
                }
            }
        }
        unproven.pending = still;
        // Then those out of time.
        let now = Instant::now();
        let (late, keep): (Vec<_>, Vec<_>) = unproven
            .pending
            .drain(..)
            .partition(|u| now.duration_since(u.since) >= channel::HANDSHAKE_TIME);
        unproven.pending = keep;
        for u in late {
            agent.refusals.refuse(
                u.peer,
                "no whole first handshake message in time",
                &format!("{} s", channel::HANDSHAKE_TIME.as_secs()),
            );
            u.refuse(Refusal::TooSlow);
        }
        // Then a few new ones.
        if listener_ready {
            accept_some(&agent, &listener, &mut unproven);
        }
        threads.retain(|t| !t.is_finished());
    }
    log("stopping: ending every run");
    for u in unproven.pending.drain(..) {
        u.refuse(Refusal::Busy);
    }
    for thread in threads {
        let _ = thread.join();
    }
    Ok(())
}

/// Polls the listener and every unproven connection until one is ready,
/// the oldest's deadline, or [`IDLE_POLL`]; returns whether the listener
/// is ready and, in order, which connections are.
fn wait(listener: &TcpListener, unproven: &Unprovens) -> (bool, Vec<bool>) {
    let timeout = unproven.pending.first().map_or(IDLE_POLL, |oldest| {
        (oldest.since + channel::HANDSHAKE_TIME)
            .saturating_duration_since(Instant::now())
            .min(IDLE_POLL)
    });
    crate::endpoint::waiting::poll_ready(
        listener,
        unproven.pending.iter().map(|u| &u.stream),
        timeout,
    )
}

/// Accepts at most [`ACCEPT_BURST`] waiting connections as unproven ones.
fn accept_some(agent: &Agent, listener: &TcpListener, unproven: &mut Unprovens) {
    for _ in 0..ACCEPT_BURST {
        match listener.accept() {
            Ok((stream, peer)) => {
                if let Err(e) = stream.set_nonblocking(true) {
                    agent
                        .refusals
                        .refuse(peer, "cannot serve it", &e.to_string());
                    continue;
                }
                let _ = stream.set_nodelay(true);
                let admitted = unproven.admit(Unproven::new(stream, peer));
                for old in admitted.ended {
                    agent.refusals.refuse(
                        old.peer,
                        "ended unauthenticated to make room for a newer connection",
                        "",
                    );
                    old.refuse(Refusal::Busy);
                }
                if let Some(new) = admitted.refused {
                    agent.refusals.refuse(
                        new.peer,
                        "refused: every unauthenticated connection it could end is under half a second old",
                        "",
                    );
                    new.refuse(Refusal::Busy);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                // Out of descriptors, typically: say so, let the others go on.
                log(format_args!("accept: {e}"));
                return;
            }
        }
    }
}

/// Judges a whole first message: a key holder's new one gets a thread.
fn judge(
    agent: &Arc<Agent>,
    u: Unproven,
    replays: &mut ReplayCache,
    threads: &mut Vec<std::thread::JoinHandle<()>>,
) {
    let verified = match channel::verify_first(u.message(), &agent.config.key) {
        Ok(verified) => verified,
        Err(_) => {
            agent.refusals.refuse(
                u.peer,
                "its first handshake message does not verify",
                "it holds another key, or is not a netlab controller",
            );
            return u.refuse(Refusal::KeyDiffers);
        }
    };
    if !replays.first_time(verified.ephemeral) {
        agent
            .refusals
            .refuse(u.peer, "a replayed first handshake message", "");
        return u.refuse(Refusal::Replayed);
    }
    if agent.proven.fetch_add(1, Ordering::Relaxed) >= MAX_PROVEN {
        agent.proven.fetch_sub(1, Ordering::Relaxed);
        agent.refusals.refuse(
            u.peer,
            "too many authenticated handshakes at once",
            &format!("{MAX_PROVEN}"),
        );
        return u.refuse(Refusal::Busy);
    }
    let peer = u.peer;
    let stream = u.stream;
    let agent_ref = agent.clone();
    let spawned = std::thread::Builder::new()
        .name(format!("agent-{peer}"))
        .spawn(move || connection(&agent_ref, stream, peer, verified));
    match spawned {
        Ok(thread) => threads.push(thread),
        // The thread's ticket was never made: give the count back here.
        Err(e) => {
            agent.proven.fetch_sub(1, Ordering::Relaxed);
            log(format_args!("cannot serve {peer}: {e}"));
        }
    }
}

/// One of [`MAX_PROVEN`], given back on drop.
struct ProvenTicket<'a>(&'a AtomicUsize);

impl Drop for ProvenTicket<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::Relaxed);
    }
}

fn connection(agent: &Agent, stream: TcpStream, peer: SocketAddr, verified: Verified) {
    let ticket = ProvenTicket(&agent.proven);
    let answered = stream
        .set_nonblocking(false)
        .map_err(ChannelError::from)
        .and_then(|()| channel::answer(stream, verified));
    let channel = match answered {
        Ok(channel) => channel,
        Err(e) => {
            return agent
                .refusals
                .refuse(peer, "lost in the handshake", &e.to_string());
        }
    };
    let (mut sealer, mut opener) = match channel.split() {
        Ok(halves) => halves,
        Err(e) => return log(format_args!("{peer}: {e}")),
    };
    // A replayer's Hello never decrypts: it holds its thread this long.
    let hello = opener.recv::<ToAgent>(Some(channel::HANDSHAKE_TIME));
    drop(ticket);
    let hello = match hello {
        Ok(ToAgent::Hello(hello)) => hello,
        Ok(_) => {
            return agent
                .refusals
                .refuse(peer, "its first message was not Hello", "");
        }
        Err(e) => {
            return agent.refusals.refuse(peer, "no Hello", &e.to_string());
        }
    };
    let ours = env!("CARGO_PKG_VERSION");
    if hello.version == ours && hello.experiment == FLEET_REPORT {
        // A read of figures: no slot, nothing started.
        let answer = match &agent.prober {
            Some(prober) => FromAgent::Fleet(Box::new(prober.report())),
            None => FromAgent::Refused {
                reason: "this agent does not probe a fleet (it was started without --probe-peers)"
                    .into(),
            },
        };
        let _ = sealer.send(&answer);
        return;
    }
    let refusal = if hello.version != ours {
        Some(version_mismatch(ours, &hello.version))
    } else {
        agent.config.policy.admit(&hello.experiment).err()
    };
    if let Some(reason) = refusal {
        agent
            .refusals
            .refuse(peer, "its Hello was refused", &printable(&reason));
        let _ = sealer.send(&FromAgent::Refused { reason });
        return;
    }
    let controller = format!("{} ({peer})", printable(&hello.controller));
    let slot = match agent.slots.acquire(&hello.experiment, controller.clone()) {
        Ok(slot) => slot,
        Err(holder) => {
            agent.refusals.refuse(
                peer,
                "busy",
                &format!("with {} for {}", holder.experiment, holder.controller),
            );
            let _ = sealer.send(&FromAgent::Busy {
                experiment: holder.experiment,
                controller: holder.controller,
                since: holder.since,
            });
            return;
        }
    };
    let welcome = Welcome {
        version: ours.to_string(),
        facts: agent.facts.clone(),
        time_us: now_us(),
        limits: agent.config.policy.describe(),
        allow: agent.config.policy.allow.iter().cloned().collect(),
        max_duration_s: Some(agent.config.policy.max_duration.as_secs()),
        max_bytes: Some(agent.config.policy.max_bytes),
        identity: agent.config.identity.clone(),
    };
    if let Err(e) = sealer.send(&FromAgent::Welcome(Box::new(welcome))) {
        return log(format_args!("{peer}: {e}"));
    }
    run(agent, &hello, &controller, sealer, opener);
    drop(slot);
}

fn run(
    agent: &Agent,
    hello: &Hello,
    controller: &str,
    sealer: channel::Sealer,
    opener: channel::Opener,
) {
    log(format_args!(
        "run of {} for {controller} started",
        hello.experiment
    ));
    let started = Instant::now();
    agent.metrics.run(&hello.experiment);
    let outcome = session::Session::new(
        &agent.config.policy,
        &hello.experiment,
        sealer,
        agent.stop.clone(),
        agent.metrics.clone(),
    )
    .serve(opener);
    log(format_args!(
        "run of {} for {controller} ended after {:.1} s: {}; {} endpoint(s) started, every one reaped",
        hello.experiment,
        started.elapsed().as_secs_f64(),
        outcome.reason,
        outcome.endpoints
    ));
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    /// A connected pair: the agent's end as an unproven connection from
    /// `peer`, and the client's end.
    fn connected(listener: &TcpListener, peer: SocketAddr) -> (Unproven, TcpStream) {
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        server.set_nonblocking(true).unwrap();
        (Unproven::new(server, peer), client)
    }

    #[test]
    fn a_new_connection_ends_the_oldest_of_its_source_then_the_oldest_of_all() {
        // Two descriptors a connection here, past the usual 1,024.
        crate::measure::limits::raise_nofile(8 * MAX_HANDSHAKES as u64).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        // Every connection old enough to end (the youth rule has its own test).
        let mut unproven = Unprovens {
            young: Duration::ZERO,
            ..Unprovens::default()
        };
        let mut clients = Vec::new();
        let source = |last: u8, port: u16| SocketAddr::from(([10, 0, 0, last], port));
        let admit = |unproven: &mut Unprovens, clients: &mut Vec<TcpStream>, peer: SocketAddr| {
            let (u, client) = connected(&listener, peer);
            clients.push(client);
            let admitted = unproven.admit(u);
            assert!(admitted.refused.is_none());
            admitted
                .ended
                .into_iter()
                .map(|u| {
                    let peer = u.peer;
                    u.refuse(Refusal::Busy);
                    peer
                })
                .collect::<Vec<SocketAddr>>()
        };
        // One source fills its share; its next connection ends its own oldest.
        for port in 0..MAX_PER_SOURCE as u16 {
            assert!(admit(&mut unproven, &mut clients, source(1, port)).is_empty());
        }
        assert_eq!(
            admit(&mut unproven, &mut clients, source(1, 999)),
            vec![source(1, 0)]
        );
        assert_eq!(unproven.of(source(1, 0).ip()), MAX_PER_SOURCE);
        // Others fill the rest; then the oldest of all goes, whoever's it is.
        let mut last = 2u32;
        while unproven.len() < MAX_HANDSHAKES {
            let peer = SocketAddr::from(([10, 1, (last >> 8) as u8, last as u8], 1));
            assert!(admit(&mut unproven, &mut clients, peer).is_empty());
            last += 1;
        }
        assert_eq!(
            admit(&mut unproven, &mut clients, source(200, 1)),
            vec![source(1, 1)]
        );
        assert_eq!(unproven.len(), MAX_HANDSHAKES);
        // The ended connection is told why, then sees the end.
        let client = &mut clients[0];
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut said = Vec::new();
        client.read_to_end(&mut said).unwrap();
        assert_eq!(said, Refusal::Busy.wire());
    }

    #[test]
    fn a_young_connection_is_never_ended_for_a_newer_one() {
        crate::measure::limits::raise_nofile(8 * MAX_HANDSHAKES as u64).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut unproven = Unprovens {
            young: Duration::from_millis(300),
            ..Unprovens::default()
        };
        let relay = |port: u16| SocketAddr::from(([10, 0, 0, 9], port));
        let mut clients = Vec::new();
        for port in 0..MAX_PER_SOURCE as u16 {
            let (u, client) = connected(&listener, relay(port));
            clients.push(client);
            assert!(unproven.admit(u).ended.is_empty());
        }
        // The relay's share is full of young connections: the newest
        // stranger is refused, the controller among them kept.
        let (u, client) = connected(&listener, relay(9999));
        clients.push(client);
        let admitted = unproven.admit(u);
        assert!(admitted.ended.is_empty());
        assert_eq!(admitted.refused.map(|u| u.peer), Some(relay(9999)));
        // Once old enough, the oldest goes as before.
        std::thread::sleep(Duration::from_millis(350));
        let (u, client) = connected(&listener, relay(10_000));
        clients.push(client);
        let admitted = unproven.admit(u);
        assert!(admitted.refused.is_none());
        let ended: Vec<SocketAddr> = admitted.ended.iter().map(|u| u.peer).collect();
        assert_eq!(ended, vec![relay(0)]);
    }

    #[test]
    fn a_first_message_is_read_as_it_arrives_and_judged_whole() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let peer = SocketAddr::from(([10, 0, 0, 1], 1));
        // A key holder's first message, a byte at a time.
        let key = Key::from_bytes([5; 32]);
        let (client_end, mut recorder) = channel::tests::pair();
        let controller = std::thread::spawn(move || channel::connect(client_end, &key).map(|_| ()));
        let first = recorder.rx.recv().unwrap();
        assert_eq!(first.len(), 2 + FIRST_MESSAGE_LEN);
        let (mut u, mut client) = connected(&listener, peer);
        for (i, byte) in first.iter().enumerate() {
            assert!(matches!(u.read(), FirstMessage::Partial), "byte {i}");
            client.write_all(&[*byte]).unwrap();
            std::thread::sleep(Duration::from_millis(2));
        }
        assert!(matches!(u.read(), FirstMessage::Whole));
        assert!(channel::verify_first(u.message(), &Key::from_bytes([5; 32])).is_ok());
        assert!(channel::verify_first(u.message(), &Key::from_bytes([6; 32])).is_err());
        channel::refuse(&mut recorder, Refusal::Busy);
        assert!(controller.join().unwrap().is_err());
        // A length no first message has is refused before its body.
        let (mut u, mut client) = connected(&listener, peer);
        client.write_all(&[0xff, 0xff]).unwrap();
        std::thread::sleep(Duration::from_millis(20));
        assert!(matches!(u.read(), FirstMessage::WrongLength(65535)));
        // A peer that goes away is closed.
        let (mut u, client) = connected(&listener, peer);
        drop(client);
        std::thread::sleep(Duration::from_millis(20));
        assert!(matches!(u.read(), FirstMessage::Closed));
    }

    #[test]
    fn a_peer_s_name_cannot_forge_log_lines() {
        let shown = printable("host\n2026-11-26 agent: run granted to admin\r");
        assert!(!shown.contains('\n') && !shown.contains('\r'), "{shown}");
        assert!(shown.starts_with("host\\n2026"), "{shown}");
        assert_eq!(printable(&"x".repeat(100)).len(), 67);
        assert_eq!(printable("lab-ctl (pid 42)"), "lab-ctl (pid 42)");
    }
}
