//! `netlab agent serve`: runs the ends of experiments for controllers on
//! other hosts.
//!
//! One thread accepts; each connection gets a thread that does the Noise
//! handshake ([`crate::endpoint::agent::channel`]) under a deadline, with
//! fixed buffers and nothing parsed, and drops a peer that fails it, logging
//! its address and the reason (at most [`LOG_BURST`] lines per
//! [`LOG_WINDOW`], then a count).
//!
//! Peers without the key must not starve those with it. A new connection
//! is never turned away for want of a handshake slot: when its source
//! already holds [`MAX_PER_SOURCE`] pending handshakes, its own oldest is
//! ended; when [`MAX_HANDSHAKES`] are pending, the oldest of all is. A
//! controller's handshake takes one round trip, so it is the youngest, not
//! the oldest, while peers that trickle bytes (or send nothing) age out
//! first, however fast they reconnect. An authenticated controller says `Hello`;
//! the agent checks its version and the experiment against `--allow`, takes
//! one of `--max-runs` slots or answers `Busy` naming the run that holds it,
//! and serves the run ([`session`]) until the controller says `Bye`, goes
//! away, or the run passes `--max-duration`. Then every endpoint of the run
//! is killed and reaped, and the slot is free for the next controller.

pub mod session;

use crate::endpoint::agent::channel::{self, ChannelError, FRAME_TIME};
use crate::endpoint::agent::key::Key;
use crate::endpoint::agent::policy::Policy;
use crate::endpoint::agent::{FromAgent, Hello, ToAgent, Welcome, lock, now_us, version_mismatch};
use crate::measure::host::HostFacts;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::endpoint::ratelog::RateLog;
pub use crate::endpoint::ratelog::{LOG_BURST, LOG_WINDOW};
/// Connections in their handshake at once; a new one ends the oldest.
/// Each is a thread blocked in a read with two descriptors, so room for
/// many costs little, and the more room, the more newer connections a
/// key holder's one-round-trip handshake outlives before it is the oldest.
pub const MAX_HANDSHAKES: usize = 128;
/// Pending handshakes of one source address; a new one ends its oldest.
pub const MAX_PER_SOURCE: usize = 32;

/// Connections in their handshake: each one's source, start and a second
/// descriptor the accept loop shuts down to end it.
#[derive(Default)]
struct Handshakes {
    pending: Mutex<Vec<PendingHandshake>>,
    next: std::sync::atomic::AtomicU64,
}

struct PendingHandshake {
    id: u64,
    peer: SocketAddr,
    since: Instant,
    stream: TcpStream,
}

impl Handshakes {
    /// Registers a new connection from `peer` (`stream` a clone of it),
    /// ending whichever pending handshakes must go to make room; returns
    /// its id and the peers ended.
    fn admit(&self, peer: SocketAddr, stream: TcpStream) -> (u64, Vec<SocketAddr>) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let mut pending = lock(&self.pending);
        let mut ended = Vec::new();
        let mut end_oldest = |pending: &mut Vec<PendingHandshake>, same_source: bool| {
            let oldest = pending
                .iter()
                .enumerate()
                .filter(|(_, p)| !same_source || p.peer.ip() == peer.ip())
                .min_by_key(|(_, p)| p.since)
                .map(|(i, _)| i);
            if let Some(i) = oldest {
                let gone = pending.swap_remove(i);
                // Its thread's next read fails at once; the thread ends.
                let _ = gone.stream.shutdown(std::net::Shutdown::Both);
                ended.push(gone.peer);
            }
        };
        if pending.iter().filter(|p| p.peer.ip() == peer.ip()).count() >= MAX_PER_SOURCE {
            end_oldest(&mut pending, true);
        }
        if pending.len() >= MAX_HANDSHAKES {
            end_oldest(&mut pending, false);
        }
        pending.push(PendingHandshake {
            id,
            peer,
            since: Instant::now(),
            stream,
        });
        (id, ended)
    }

    /// The handshake `id` is over (done, failed or ended).
    fn done(&self, id: u64) {
        lock(&self.pending).retain(|p| p.id != id);
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.pending).len()
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
}

pub(crate) fn log(line: impl std::fmt::Display) {
    eprintln!("{} netlab agent: {line}", crate::record::now_rfc3339());
}

/// Logs refused peers, at most [`LOG_BURST`] a window.
struct RefusalLog {
    log: RateLog,
}

impl RefusalLog {
    fn refuse(&self, peer: SocketAddr, reason: &str) {
        self.log.line(format_args!("refused {peer}: {reason}"));
    }
}

impl Default for RefusalLog {
    fn default() -> Self {
        RefusalLog {
            log: RateLog::new("refused peers", |line| log(line)),
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
    slots: Slots,
    handshakes: Handshakes,
    stop: Arc<AtomicBool>,
}

/// Serves until `stop` is set; then ends every run and returns.
pub fn serve(config: AgentConfig, stop: Arc<AtomicBool>) -> io::Result<()> {
    let listener = TcpListener::bind(config.listen).map_err(|e| {
        io::Error::new(e.kind(), format!("cannot listen on {}: {e}", config.listen))
    })?;
    listener.set_nonblocking(true)?;
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
        refusals: RefusalLog::default(),
        handshakes: Handshakes::default(),
        stop: stop.clone(),
    });
    let mut threads: Vec<std::thread::JoinHandle<()>> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((stream, peer)) => {
                threads.retain(|t| !t.is_finished());
                let Ok(handle) = stream.try_clone() else {
                    agent
                        .refusals
                        .refuse(peer, "no descriptor left to serve it");
                    continue;
                };
                let (id, ended) = agent.handshakes.admit(peer, handle);
                for old in ended {
                    agent.refusals.refuse(
                        old,
                        "its handshake was the oldest pending when a new connection came",
                    );
                }
                let agent = agent.clone();
                let spawned = std::thread::Builder::new()
                    .name(format!("agent-{peer}"))
                    .spawn(move || connection(&agent, stream, peer, id));
                match spawned {
                    Ok(thread) => threads.push(thread),
                    Err(e) => log(format_args!("cannot serve {peer}: {e}")),
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                wait_readable(&listener, Duration::from_millis(200));
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => {
                log(format_args!("accept: {e}"));
                std::thread::sleep(Duration::from_millis(100));
            }
        }
    }
    log("stopping: ending every run");
    for thread in threads {
        let _ = thread.join();
    }
    Ok(())
}

/// A name a peer sent, fit for one log line: control characters (a newline
/// would forge a line of its own) escaped, at most 64 characters kept.
fn printable(name: &str) -> String {
    let mut shown: String = name
        .chars()
        .take(64)
        .flat_map(char::escape_default)
        .collect();
    if name.chars().count() > 64 {
        shown.push_str("...");
    }
    shown
}

fn wait_readable(listener: &TcpListener, timeout: Duration) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = [PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    // Woken early by a connection, or at the timeout to look at the stop flag.
    let _ = poll(&mut fds, timeout);
}

fn connection(agent: &Agent, stream: TcpStream, peer: SocketAddr, id: u64) {
    let _ = stream.set_nodelay(true);
    let handshake = channel::accept(stream, &agent.config.key);
    agent.handshakes.done(id);
    let channel = match handshake {
        Ok(channel) => channel,
        Err(e) => {
            let reason = match e {
                ChannelError::Closed => "closed the connection in the handshake".to_string(),
                other => other.to_string(),
            };
            agent.refusals.refuse(peer, &reason);
            return;
        }
    };
    let (mut sealer, mut opener) = match channel.split() {
        Ok(halves) => halves,
        Err(e) => return log(format_args!("{peer}: {e}")),
    };
    let hello = match opener.recv::<ToAgent>(Some(FRAME_TIME)) {
        Ok(ToAgent::Hello(hello)) => hello,
        Ok(_) => {
            return agent
                .refusals
                .refuse(peer, "its first message was not Hello");
        }
        Err(e) => return agent.refusals.refuse(peer, &format!("no Hello: {e}")),
    };
    let ours = env!("CARGO_PKG_VERSION");
    let refusal = if hello.version != ours {
        Some(version_mismatch(ours, &hello.version))
    } else {
        agent.config.policy.admit(&hello.experiment).err()
    };
    if let Some(reason) = refusal {
        agent.refusals.refuse(peer, &reason);
        let _ = sealer.send(&FromAgent::Refused { reason });
        return;
    }
    let controller = format!("{} ({peer})", printable(&hello.controller));
    let slot = match agent.slots.acquire(&hello.experiment, controller.clone()) {
        Ok(slot) => slot,
        Err(holder) => {
            agent.refusals.refuse(
                peer,
                &format!("busy with {} for {}", holder.experiment, holder.controller),
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
    let outcome = session::Session::new(
        &agent.config.policy,
        &hello.experiment,
        sealer,
        agent.stop.clone(),
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

    #[test]
    fn a_new_handshake_ends_the_oldest_of_its_source_then_the_oldest_of_all() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let handshakes = Handshakes::default();
        let mut held = Vec::new();
        let source = |last: u8, port: u16| SocketAddr::from(([10, 0, 0, last], port));
        let mut admit = |peer: SocketAddr| {
            let client = TcpStream::connect(addr).unwrap();
            let (server, _) = listener.accept().unwrap();
            held.push((client, server.try_clone().unwrap()));
            handshakes.admit(peer, server)
        };
        // One source fills its share; its next connection ends its own oldest.
        for port in 0..MAX_PER_SOURCE as u16 {
            assert!(admit(source(1, port)).1.is_empty());
        }
        assert_eq!(admit(source(1, 999)).1, vec![source(1, 0)]);
        assert_eq!(handshakes.len(), MAX_PER_SOURCE);
        // Others fill the rest; then the oldest of all goes, whoever's it is.
        let mut last = 2;
        while handshakes.len() < MAX_HANDSHAKES {
            assert!(admit(source(last, 1)).1.is_empty());
            last += 1;
        }
        assert_eq!(admit(source(200, 1)).1, vec![source(1, 1)]);
        assert_eq!(handshakes.len(), MAX_HANDSHAKES);
        // The ended connection's reads see the end at once.
        let (client, _) = &mut held[0];
        client
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        assert_eq!(std::io::Read::read(client, &mut [0u8; 8]).unwrap(), 0);
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
