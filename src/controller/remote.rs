//! The controller's side of the agents: one authenticated channel per agent
//! for the whole experiment ([`AgentLink`]), shared by every cell, and the
//! endpoints started through it.
//!
//! [`configure`] gives the key and the experiment's name; [`link`] connects
//! on first use and again after an agent was lost, so a cell after a lost
//! agent fails (or succeeds, once the agent is back) on its own. A reader
//! thread per link hands each endpoint's replies to its
//! [`EndpointProcess`], which then behaves exactly as a local one.

use super::processes::{ControlError, EndpointProcess};
use crate::endpoint::agent::channel::{self, ChannelError, Opener, Sealer};
use crate::endpoint::agent::key::Key;
use crate::endpoint::agent::{DEFAULT_PORT, FromAgent, Hello, ToAgent, Welcome, lock, now_us};
use crate::endpoint::protocol::{Command, Reply};
use crate::record::testbed::AgentFacts;
use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// How long a controller waits to reach an agent.
const CONNECT_TIME: Duration = Duration::from_secs(5);
/// How long an agent has to answer a request of the controller's own.
const ANSWER_TIME: Duration = Duration::from_secs(10);

/// Handshakes tried while an agent says it is busy with unauthenticated
/// connections, and the pause before the next (times the attempt).
const BUSY_ATTEMPTS: u32 = 3;
const BUSY_PAUSE: Duration = Duration::from_millis(200);

/// What a failed handshake means, in the words a user acts on.
fn handshake_failure(e: ChannelError, attempts: u32) -> String {
    match e {
        ChannelError::Refused(channel::Refusal::Busy) => format!(
            "{} ({attempts} attempts)",
            channel::Refusal::Busy
        ),
        ChannelError::Refused(refusal) => format!("authentication failed: {refusal}"),
        ChannelError::Authentication(why) => format!("authentication failed ({why})"),
        ChannelError::Closed | ChannelError::Decrypt => "could not complete a handshake: the agent closed the connection without saying why (it is stopping, or it is not a netlab agent of this protocol)".into(),
        ChannelError::Timeout(_) => format!(
            "could not complete a handshake: the agent did not answer within {} s",
            channel::HANDSHAKE_TIME.as_secs()
        ),
        other => format!("could not complete a handshake ({other})"),
    }
}

/// An authenticated channel to one agent.
pub struct AgentLink {
    name: String,
    addr: SocketAddr,
    local: SocketAddr,
    welcome: Welcome,
    clock_offset_us: i64,
    control_rtt_us: u64,
    sealer: Mutex<Sealer>,
    shared: Arc<Shared>,
    next_id: AtomicU32,
}

/// What the reader thread and the endpoints share.
#[derive(Default)]
struct Shared {
    routes: Mutex<HashMap<u32, mpsc::Sender<io::Result<Reply>>>>,
    fates: Mutex<HashMap<u32, String>>,
    lost: Mutex<Option<String>>,
    route_answer: Mutex<Option<mpsc::Sender<Result<IpAddr, String>>>>,
}

/// `HOST[:PORT]` as a socket address (the agent's port by default).
pub fn resolve(name: &str) -> Result<SocketAddr, String> {
    let with_port = if name.parse::<SocketAddr>().is_ok() {
        name.to_string()
    } else if name.parse::<IpAddr>().is_ok_and(|ip| ip.is_ipv6()) {
        format!("[{name}]:{DEFAULT_PORT}")
    } else if name
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        name.to_string()
    } else {
        format!("{name}:{DEFAULT_PORT}")
    };
    let addr = with_port
        .to_socket_addrs()
        .map_err(|e| format!("cannot resolve {name}: {e}"))?
        .next()
        .ok_or_else(|| format!("{name} resolves to no address"))?;
    if addr.port() == 0 {
        return Err(format!(
            "{name}: port 0 is no agent's port (an agent listens on {DEFAULT_PORT} unless told otherwise)"
        ));
    }
    Ok(addr)
}

/// Reads the summary of the probing agent at `addr` runs on its own
/// (`netlab agent serve --probe-peers`): one handshake, one Hello of
/// [`crate::endpoint::agent::FLEET_REPORT`], one answer; no run slot is
/// taken and no thread is left behind.
pub fn read_fleet(
    addr: SocketAddr,
    key: &Key,
    within: Duration,
) -> Result<crate::fleet::report::FleetReport, String> {
    let stream = TcpStream::connect_timeout(&addr, within.min(CONNECT_TIME))
        .map_err(|e| format!("cannot connect: {e}"))?;
    let _ = stream.set_nodelay(true);
    let mut channel = channel::connect(stream, key).map_err(|e| handshake_failure(e, 1))?;
    channel
        .send(&ToAgent::Hello(Hello {
            version: claimed_version(),
            experiment: crate::endpoint::agent::FLEET_REPORT.to_string(),
            controller: controller_name(),
            time_us: now_us(),
        }))
        .map_err(|e| format!("cannot ask: {e}"))?;
    match channel.recv::<FromAgent>(Some(within.min(ANSWER_TIME))) {
        Ok(FromAgent::Fleet(report)) => Ok(*report),
        Ok(FromAgent::Refused { reason }) => Err(format!("refused: {reason}")),
        Ok(other) => Err(format!("unexpected answer: {other:?}")),
        Err(e) => Err(format!("no answer ({e})")),
    }
}

impl AgentLink {
    /// Connects, authenticates and opens a run of `experiment`.
    pub fn connect(name: &str, key: &Key, experiment: &str) -> Result<AgentLink, ControlError> {
        let fail = |message: String| ControlError::Agent {
            agent: name.to_string(),
            message,
        };
        let addr = resolve(name).map_err(fail)?;
        // The agent judges the key from our first message and, if it
        // will not go on, says why before closing. A Busy agent ended our
        // handshake unjudged to make room: try again a little later.
        let mut attempt = 0;
        let (mut channel, local) = loop {
            attempt += 1;
            let stream = TcpStream::connect_timeout(&addr, CONNECT_TIME)
                .map_err(|e| fail(format!("cannot connect to {addr}: {e}")))?;
            let _ = stream.set_nodelay(true);
            let _ = keepalive(&stream);
            let local = stream.local_addr().map_err(|e| fail(e.to_string()))?;
            match channel::connect(stream, key) {
                Ok(channel) => break (channel, local),
                Err(ChannelError::Refused(channel::Refusal::Busy)) if attempt < BUSY_ATTEMPTS => {
                    std::thread::sleep(BUSY_PAUSE * attempt);
                }
                Err(e) => return Err(fail(handshake_failure(e, attempt))),
            }
        };
        let auth_failed = |e: ChannelError| {
            fail(match e {
                ChannelError::Closed | ChannelError::Decrypt => "the agent closed the connection after our handshake, before answering Hello (it stopped, or was ended by its host)".into(),
                other => format!("no answer to Hello ({other})"),
            })
        };
        let sent_us = now_us();
        let started = Instant::now();
        channel
            .send(&ToAgent::Hello(Hello {
                version: claimed_version(),
                experiment: experiment.to_string(),
                controller: controller_name(),
                time_us: sent_us,
            }))
            .map_err(auth_failed)?;
        let welcome = match channel.recv::<FromAgent>(Some(ANSWER_TIME)) {
            Ok(FromAgent::Welcome(welcome)) => *welcome,
            Ok(FromAgent::Busy {
                experiment,
                controller,
                since,
            }) => {
                return Err(fail(format!(
                    "busy: running {experiment} for {controller} since {since}"
                )));
            }
            Ok(FromAgent::Refused { reason }) => return Err(fail(format!("refused: {reason}"))),
            Ok(other) => return Err(fail(format!("unexpected answer to Hello: {other:?}"))),
            Err(e) => return Err(auth_failed(e)),
        };
        let rtt = started.elapsed();
        // The agent's clock at the midpoint of the exchange, against ours.
        let clock_offset_us = welcome.time_us - (sent_us + rtt.as_micros() as i64 / 2);
        let (sealer, opener) = channel.split().map_err(|e| fail(e.to_string()))?;
        let shared = Arc::new(Shared::default());
        {
            let shared = shared.clone();
            std::thread::Builder::new()
                .name("agent-reader".into())
                .spawn(move || read_agent(opener, &shared))
                .map_err(|e| fail(e.to_string()))?;
        }
        Ok(AgentLink {
            name: name.to_string(),
            addr,
            local,
            welcome,
            clock_offset_us,
            control_rtt_us: rtt.as_micros() as u64,
            sealer: Mutex::new(sealer),
            shared,
            next_id: AtomicU32::new(1),
        })
    }

    /// The agent as the user named it.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The agent's address as this controller reaches it.
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// This controller's address on the channel (as the agent sees it).
    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The agent's `--max-duration`, seconds a run (older agents: unknown).
    pub fn max_duration_s(&self) -> Option<u64> {
        self.welcome.max_duration_s
    }

    /// Why the link is unusable, if it is.
    pub fn lost(&self) -> Option<String> {
        lock(&self.shared.lost).clone()
    }

    /// The agent's host and clock, for the records.
    pub fn facts(&self) -> AgentFacts {
        AgentFacts {
            agent: self.name.clone(),
            address: self.addr.to_string(),
            netlab_version: self.welcome.version.clone(),
            host: self.welcome.facts.clone(),
            clock_offset_us: self.clock_offset_us,
            control_rtt_us: self.control_rtt_us,
            limits: self.welcome.limits.clone(),
            allow: self.welcome.allow.clone(),
            identity: self.welcome.identity.clone(),
        }
    }

    fn send(&self, message: &ToAgent) -> Result<(), ControlError> {
        if let Some(why) = self.lost() {
            return Err(self.error(why));
        }
        lock(&self.sealer)
            .send(message)
            .map_err(|e| self.error(format!("connection lost: {e}")))
    }

    fn error(&self, message: String) -> ControlError {
        ControlError::Agent {
            agent: self.name.clone(),
            message,
        }
    }

    /// Starts `netlab endpoint` for `role` on the agent's host.
    pub fn spawn(
        self: &Arc<AgentLink>,
        role: &'static str,
    ) -> Result<EndpointProcess, ControlError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let (tx, rx) = mpsc::channel();
        lock(&self.shared.routes).insert(id, tx);
        let sent = self.send(&ToAgent::Spawn {
            id,
            role: role.to_string(),
        });
        if let Err(e) = sent {
            lock(&self.shared.routes).remove(&id);
            return Err(e);
        }
        EndpointProcess::on_agent(role, self.clone(), id, rx)
    }

    /// Sends `command` to endpoint `id`.
    fn command_endpoint(&self, id: u32, command: &Command) -> Result<(), ControlError> {
        self.send(&ToAgent::Endpoint {
            id,
            command: command.clone(),
        })
    }

    /// How endpoint `id` ended, as the agent said, or why the link is gone.
    fn fate_endpoint(&self, id: u32) -> String {
        if let Some(status) = lock(&self.shared.fates).get(&id) {
            return format!("on agent {}: {status}", self.name);
        }
        match self.lost() {
            Some(why) => format!("agent {}: {why}", self.name),
            None => format!("on agent {}: ended without a word", self.name),
        }
    }

    /// Drops what the link keeps of endpoint `id`, telling the agent to
    /// stop it if it still runs.
    fn forget_endpoint(&self, id: u32) {
        if lock(&self.shared.routes).remove(&id).is_some() {
            let _ = self.command_endpoint(id, &Command::Exit);
        }
        lock(&self.shared.fates).remove(&id);
    }

    /// The agent's source address toward `to`.
    pub fn route(&self, to: IpAddr) -> Result<IpAddr, ControlError> {
        let (tx, rx) = mpsc::channel();
        *lock(&self.shared.route_answer) = Some(tx);
        self.send(&ToAgent::Route { to })?;
        rx.recv_timeout(ANSWER_TIME)
            .map_err(|_| {
                self.error(format!(
                    "no route answer within {} s",
                    ANSWER_TIME.as_secs()
                ))
            })?
            .map_err(|why| self.error(format!("no route to {to}: {why}")))
    }

    /// Ends the run on the agent (it stops whatever of the run still runs).
    pub fn bye(&self) {
        let _ = self.send(&ToAgent::Bye);
        lock(&self.sealer).shutdown();
    }
}

fn keepalive(stream: &TcpStream) -> io::Result<()> {
    // A vanished peer is noticed within about two minutes of silence;
    // probes start only after a minute, so a cell of less than a minute
    // sends nothing at all on the control connection.
    let keepalive = socket2::TcpKeepalive::new()
        .with_time(Duration::from_secs(60))
        .with_interval(Duration::from_secs(10))
        .with_retries(6);
    socket2::SockRef::from(stream).set_tcp_keepalive(&keepalive)
}

/// `user@host` of this controller.
pub fn controller_name() -> String {
    let uid = nix::unistd::getuid();
    let user = nix::unistd::User::from_uid(uid)
        .ok()
        .flatten()
        .map_or_else(|| format!("uid {uid}"), |u| u.name);
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!("{user}@{} pid {}", host.trim(), std::process::id())
}

/// How long a controller whose link to an agent was lost waits for the
/// agent to end its old run (reap its endpoints, free the slot) before a
/// new link is refused as busy with that same run.
const OWN_RUN_ENDING: Duration = Duration::from_secs(10);

fn read_agent(mut opener: Opener, shared: &Shared) {
    let why = loop {
        match opener.recv::<FromAgent>(None) {
            Ok(FromAgent::Endpoint { id, reply }) => {
                if let Some(route) = lock(&shared.routes).get(&id) {
                    let _ = route.send(Ok(reply));
                }
            }
            Ok(FromAgent::Gone { id, status }) => {
                lock(&shared.fates).insert(id, status);
                lock(&shared.routes).remove(&id);
            }
            Ok(FromAgent::Route { from }) => {
                if let Some(answer) = lock(&shared.route_answer).take() {
                    let _ = answer.send(from);
                }
            }
            Ok(FromAgent::Ended { reason }) => break format!("the agent ended the run: {reason}"),
            Ok(other) => break format!("unexpected message {other:?}"),
            Err(ChannelError::Closed) => break "the agent closed the connection".to_string(),
            Err(e) => break format!("connection lost: {e}"),
        }
    };
    *lock(&shared.lost) = Some(why);
    // Every waiting endpoint sees its channel close, and asks `fate`.
    lock(&shared.routes).clear();
}

/// The release this controller announces: its own, or for tests of a
/// mismatch (`NETLAB_FAULT=claim-version:X`, documented in
/// docs/ARCHITECTURE.md; never set in normal use) another one.
fn claimed_version() -> String {
    match std::env::var("NETLAB_FAULT") {
        Ok(fault) if fault.starts_with("claim-version:") => {
            fault["claim-version:".len()..].to_string()
        }
        _ => env!("CARGO_PKG_VERSION").to_string(),
    }
}

/// The links of this process's run.
struct Registry {
    key: Key,
    experiment: String,
    links: HashMap<String, Arc<AgentLink>>,
}

static REGISTRY: Mutex<Option<Registry>> = Mutex::new(None);

/// Sets the key and the experiment's name for every link this process makes.
pub fn configure(key: Key, experiment: &str) {
    *lock(&REGISTRY) = Some(Registry {
        key,
        experiment: experiment.to_string(),
        links: HashMap::new(),
    });
}

/// The live link to agent `name`, connecting (again) if there is none.
/// The connection is made outside the registry's lock, so threads reaching
/// many agents at once (a mesh) wait for none but their own.
pub fn link(name: &str) -> Result<Arc<AgentLink>, ControlError> {
    let (key, experiment, had_one) = {
        let registry = lock(&REGISTRY);
        let registry = registry.as_ref().ok_or_else(|| ControlError::Agent {
            agent: name.to_string(),
            message: "no key: give --key FILE or set NETLAB_KEY_FILE".into(),
        })?;
        let had_one = match registry.links.get(name) {
            Some(link) if link.lost().is_none() => return Ok(link.clone()),
            Some(_) => true,
            None => false,
        };
        (registry.key.clone(), registry.experiment.clone(), had_one)
    };
    // The agent may still be ending our own lost run: wait for it rather
    // than be refused as busy with ourselves.
    let ours = format!("for {} (", controller_name());
    let give_up = Instant::now() + OWN_RUN_ENDING;
    let link = loop {
        match AgentLink::connect(name, &key, &experiment) {
            Err(ControlError::Agent { message, .. })
                if had_one
                    && message.starts_with("busy:")
                    && message.contains(&ours)
                    && Instant::now() < give_up =>
            {
                std::thread::sleep(Duration::from_millis(200));
            }
            other => break Arc::new(other?),
        }
    };
    let mut registry = lock(&REGISTRY);
    let Some(registry) = registry.as_mut() else {
        link.bye();
        return Err(ControlError::Agent {
            agent: name.to_string(),
            message: "the run ended while connecting".into(),
        });
    };
    // Another thread reached it meanwhile: keep one link, end the other.
    if let Some(live) = registry.links.get(name).filter(|l| l.lost().is_none()) {
        link.bye();
        return Ok(live.clone());
    }
    registry.links.insert(name.to_string(), link.clone());
    Ok(link)
}

/// What a run asks of the agents at its ends, to check against their
/// limits before anything starts.
#[derive(Debug, Clone, Copy, Default)]
pub struct RunBudget {
    /// Each cell's nominal length, and how many cells the run makes.
    pub cell_seconds: Option<f64>,
    pub cells: u32,
    /// Bytes each cell moves.
    pub cell_bytes: Option<u64>,
}

/// Refuses, before anything starts, a run that an agent at `ends` (names;
/// `local` is this host) would end part-way: a cell longer than its
/// `--max-duration` or all cells together beyond it (a run is one
/// session), or a cell of more bytes than its `--max-bytes`.
pub fn check_budget(ends: &[&str], budget: RunBudget) -> Result<(), ControlError> {
    for &name in ends.iter().filter(|&&n| n != "local") {
        let link = link(name)?;
        let refuse = |message: String| ControlError::Agent {
            agent: name.to_string(),
            message,
        };
        if let (Some(limit), Some(seconds)) = (link.welcome.max_duration_s, budget.cell_seconds) {
            if seconds > limit as f64 {
                return Err(refuse(format!(
                    "a cell of {seconds} s is longer than the agent's --max-duration of {limit} s a run; ask for at most {limit} s"
                )));
            }
            let total = seconds * f64::from(budget.cells.max(1));
            if total > limit as f64 {
                return Err(refuse(format!(
                    "{} cells of {seconds} s ({total} s) are longer than the agent's --max-duration of {limit} s a run; make fewer (--repeat) or shorter cells, or run them as separate runs",
                    budget.cells
                )));
            }
        }
        if let (Some(limit), Some(bytes)) = (link.welcome.max_bytes, budget.cell_bytes)
            && bytes > limit
        {
            return Err(refuse(format!(
                "a cell of {bytes} bytes is more than the agent's --max-bytes of {limit} a cell; ask for at most {limit}"
            )));
        }
    }
    Ok(())
}

/// The facts of every agent this process has reached, for the records.
pub fn facts() -> Vec<AgentFacts> {
    let registry = lock(&REGISTRY);
    let mut facts: Vec<AgentFacts> = registry
        .iter()
        .flat_map(|r| r.links.values())
        .map(|link| link.facts())
        .collect();
    facts.sort_by(|a, b| a.agent.cmp(&b.agent));
    facts
}

/// Ends the run on every agent.
pub fn close_all() {
    if let Some(registry) = lock(&REGISTRY).as_mut() {
        for (_, link) in registry.links.drain() {
            link.bye();
        }
    }
}

impl super::processes::AgentCourier for AgentLink {
    fn name(&self) -> &str {
        AgentLink::name(self)
    }

    fn command(&self, id: u32, command: &Command) -> Result<(), ControlError> {
        self.command_endpoint(id, command)
    }

    fn fate(&self, id: u32) -> String {
        self.fate_endpoint(id)
    }

    fn forget(&self, id: u32) {
        self.forget_endpoint(id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_resolve_with_the_default_port() {
        assert_eq!(resolve("127.0.0.1").unwrap().port(), DEFAULT_PORT);
        assert_eq!(resolve("127.0.0.1:7000").unwrap().port(), 7000);
        assert_eq!(resolve("::1").unwrap().port(), DEFAULT_PORT);
        assert_eq!(resolve("[::1]:7000").unwrap().port(), 7000);
        assert_eq!(resolve("localhost").unwrap().port(), DEFAULT_PORT);
        assert!(resolve("no.such.host.invalid").is_err());
        assert!(resolve("127.0.0.1:0").unwrap_err().contains("port 0"));
    }
}
