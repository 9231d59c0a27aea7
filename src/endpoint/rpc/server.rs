//! netlab's ONC RPC server: program [`PROGRAM`] version 1, procedures NULL
//! (void → void) and SINK (opaque<> → void: the 1989 experiment's null
//! routine with an array argument), over TCP (record marking) and UDP on the
//! same port.
//!
//! The protocol decision ([`dispatch`]) is a pure function from a request
//! record to a reply record, tested without sockets. The I/O around it: one
//! thread accepting TCP connections, one per connection, one for UDP; the
//! UDP and connection threads serve from file tables of their own
//! ([`super::fdtable`]), so a call's system calls skip the shared table's
//! reference counting. Idle connections are found by the accept loop from a
//! per-connection read counter (no clock read per call). A bad
//! peer (garbage, a record mark announcing more than the maximum record, a
//! truncated fragment, silence past the idle timeout) has its connection
//! closed with a logged reason; every other client goes on being served.
//! Calls that parse but cannot be served get the RFC 5531 reply that says
//! why (PROG_UNAVAIL, PROG_MISMATCH, PROC_UNAVAIL, GARBAGE_ARGS,
//! RPC_MISMATCH, AUTH_ERROR), never a dropped connection.

use super::{busypoll, fdtable};
use crate::endpoint::guard::{self};
use crate::endpoint::pin;
use crate::endpoint::protocol::DataGuard;
use crate::endpoint::ratelog::RateLog;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::net::IpAddr;
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ServerOptions {
    /// Largest record accepted over TCP (and largest SINK argument).
    pub max_record: usize,
    pub nodelay: bool,
    /// Re-arm TCP_QUICKACK after every read, so the server never delays an ACK.
    pub quickack: bool,
    /// A connection silent this long is closed.
    pub idle_timeout_ms: u64,
    /// Once a record has begun, the rest must arrive within this.
    #[serde(
        default = "default_record_timeout_ms",
        skip_serializing_if = "is_default_record_timeout"
    )]
    pub record_timeout_ms: u64,
    pub max_connections: usize,
    /// Spin on non-blocking receives this many µs before sleeping in a
    /// blocking one, on every connection and on UDP (see
    /// [`crate::record::busypoll`]); 0 never spins.
    #[serde(default)]
    pub busy_poll_us: u32,
    /// The CPU every serving thread runs on (`--pin`); none: where the
    /// scheduler puts them.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// SO_SNDBUF and SO_RCVBUF of the listening socket, which accepted
    /// connections inherit (`--sockbuf`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockbuf: Option<u32>,
}

impl Default for ServerOptions {
    fn default() -> Self {
        ServerOptions {
            max_record: 1 << 20,
            nodelay: false,
            quickack: false,
            idle_timeout_ms: 60_000,
            record_timeout_ms: default_record_timeout_ms(),
            max_connections: 1024,
            busy_poll_us: 0,
            cpu: None,
            sockbuf: None,
        }
    }
}

/// What a server did over its life.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ServerReport {
    pub calls: u64,
    pub dropped_records: u64,
    pub closed_bad_peers: u64,
    pub connections: u64,
    pub usage: ProcessUsage,
    /// Kernel counter deltas in the server's namespace over its life.
    pub counters: Counters,
    /// Time spent in the procedure's own work: decoding each call, running
    /// it and encoding its reply (ns, summed over calls; the reads and
    /// writes around it are not in it). Older records: 0.
    #[serde(default)]
    pub work_ns: u64,
    /// The serving threads' time runnable but waiting for a CPU (ns,
    /// schedstat), summed; none where schedstat cannot be read.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub run_delay_ns: Option<u64>,
}
use crate::measure::{netstat::Counters, rusage::ProcessUsage};
use crate::wire::recmark::{Assembler, fragment_header};
use crate::wire::rpc::{
    AUTH_NONE, AUTH_SYS, AcceptStat, AuthSys, Message, RPC_VERSION, RejectStat, Reply, auth_stat,
    parse, peek_xid,
};
use crate::wire::xdr::{Reader, Writer};
use std::io::{self, Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// netlab's program number, in the range RFC 5531 §8.3 leaves to users
/// (0x20000000-0x3fffffff); the digits recall the 1989 measurement.
pub const PROGRAM: u32 = 0x2005_1989;
pub const VERSION: u32 = 1;
pub const PROC_NULL: u32 = 0;
pub const PROC_SINK: u32 = 1;

/// What [`dispatch`] decided for one request record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Send this reply record.
    Reply(Vec<u8>),
    /// Send nothing; the reason is logged (and a TCP connection closed).
    Drop(String),
}

/// Answers one request record as RFC 5531 says.
pub fn dispatch(record: &[u8], max_arg: u32) -> Outcome {
    let mut reply = Vec::new();
    match dispatch_into(record, max_arg, &mut reply) {
        Ok(()) => Outcome::Reply(reply),
        Err(why) => Outcome::Drop(why),
    }
}

/// [`dispatch`] appending the reply to `out` (a reused buffer, so serving a
/// call allocates nothing); `Err` carries why the record gets no answer.
pub fn dispatch_into(record: &[u8], max_arg: u32, out: &mut Vec<u8>) -> Result<(), String> {
    let reply = decide(record, max_arg)?;
    let mut w = Writer {
        buf: std::mem::take(out),
    };
    reply.emit(&mut w);
    *out = w.buf;
    Ok(())
}

/// The reply RFC 5531 prescribes for `record`, or why there is none.
fn decide(record: &[u8], max_arg: u32) -> Result<Reply, String> {
    let (message, args) = match parse(record) {
        Ok(parsed) => parsed,
        Err(e) => {
            // A call whose credentials are malformed gets AUTH_ERROR; anything
            // without even a call header is dropped.
            // RFC 5531 §9: the RPC version is checked before anything
            // after it, so a call of another version is RPC_MISMATCH even
            // when what follows does not parse.
            let rpcvers = record
                .get(8..12)
                .map(|b| u32::from_be_bytes(b.try_into().expect("4 bytes")));
            return match peek_xid(record) {
                Some((xid, 0)) if rpcvers.is_some_and(|v| v != RPC_VERSION) => Ok(Reply::denied(
                    xid,
                    RejectStat::RpcMismatch {
                        low: RPC_VERSION,
                        high: RPC_VERSION,
                    },
                )),
                Some((xid, 0)) if record.len() >= 24 => Ok(Reply::denied(
                    xid,
                    RejectStat::AuthError(auth_stat::BADCRED),
                )),
                _ => Err(format!("not an RPC call: {e}")),
            };
        }
    };
    let call = match message {
        Message::Call(call) => call,
        Message::Reply(reply) => {
            return Err(format!("a reply (xid {}) sent to a server", reply.xid));
        }
    };
    let xid = call.xid;
    let reply = if call.rpcvers != RPC_VERSION {
        Reply::denied(
            xid,
            RejectStat::RpcMismatch {
                low: RPC_VERSION,
                high: RPC_VERSION,
            },
        )
    } else if !matches!(call.cred.flavor, AUTH_NONE | AUTH_SYS) {
        Reply::denied(xid, RejectStat::AuthError(auth_stat::REJECTEDCRED))
    } else if call.cred.flavor == AUTH_SYS && AuthSys::parse(&call.cred.body).is_err() {
        Reply::denied(xid, RejectStat::AuthError(auth_stat::BADCRED))
    } else if call.prog != PROGRAM {
        Reply::accepted(xid, AcceptStat::ProgUnavail)
    } else if call.vers != VERSION {
        Reply::accepted(
            xid,
            AcceptStat::ProgMismatch {
                low: VERSION,
                high: VERSION,
            },
        )
    } else {
        match call.proc_ {
            PROC_NULL => Reply::accepted(xid, AcceptStat::Success),
            PROC_SINK => {
                let mut r = Reader::new(args);
                match r.opaque(max_arg) {
                    Ok(_) if r.remaining().is_empty() => Reply::accepted(xid, AcceptStat::Success),
                    _ => Reply::accepted(xid, AcceptStat::GarbageArgs),
                }
            }
            _ => Reply::accepted(xid, AcceptStat::ProcUnavail),
        }
    };
    Ok(reply)
}

/// Counts kept while serving.
#[derive(Debug, Default)]
struct Stats {
    calls: AtomicU64,
    work_ns: AtomicU64,
    run_delay_ns: AtomicU64,
    /// A serving thread could not read its schedstat.
    run_delay_unknown: AtomicBool,
    dropped_records: AtomicU64,
    closed_bad_peers: AtomicU64,
    connections: AtomicU64,
    open: AtomicUsize,
    /// Bytes of partial records held across connections ([`PARTIAL_BUDGET`]).
    partial_bytes: AtomicUsize,
}

impl Stats {
    fn add_work(&self, began: Instant) {
        let ns = began.elapsed().as_nanos() as u64;
        self.work_ns.fetch_add(ns, Ordering::Relaxed);
    }

    /// Adds the calling thread's run delay from now until the guard drops
    /// (the thread's end).
    fn run_delay_of_this_thread(&self) -> RunDelayGuard<'_> {
        RunDelayGuard {
            stats: self,
            start: crate::measure::schedstat::thread_run_delay_ns(),
        }
    }
}

struct RunDelayGuard<'a> {
    stats: &'a Stats,
    start: Option<u64>,
}

impl Drop for RunDelayGuard<'_> {
    fn drop(&mut self) {
        let end = crate::measure::schedstat::thread_run_delay_ns();
        match (self.start, end) {
            (Some(start), Some(end)) => {
                let ns = end.saturating_sub(start);
                self.stats.run_delay_ns.fetch_add(ns, Ordering::Relaxed);
            }
            _ => self.stats.run_delay_unknown.store(true, Ordering::Relaxed),
        }
    }
}

/// A bound server, not yet serving.
pub struct Server {
    tcp: TcpListener,
    udp: UdpSocket,
    options: ServerOptions,
    guard: Option<DataGuard>,
}

/// A serving server; [`Running::stop`] ends it.
pub struct Running {
    /// The process's handle on the UDP socket, which the UDP thread copied
    /// into its own file table; closed here after the thread has ended.
    _udp: UdpSocket,
    stop: Arc<AtomicBool>,
    stats: Arc<Stats>,
    threads: Vec<JoinHandle<()>>,
    udp_addr: SocketAddr,
    port: u16,
    usage_before: ProcessUsage,
    counters_before: Counters,
}

impl Server {
    /// Binds TCP and UDP on `addr`; port 0 picks a port free for both.
    pub fn bind(addr: SocketAddr, options: ServerOptions) -> io::Result<Server> {
        Server::bind_guarded(addr, options, None)
    }

    /// As [`Server::bind`], serving only the guard's peer (TCP connections
    /// must also send its token first), on a port of its range.
    pub fn bind_guarded(
        addr: SocketAddr,
        options: ServerOptions,
        guard: Option<DataGuard>,
    ) -> io::Result<Server> {
        // Accepted connections inherit the listener's buffer sizes.
        let sized = |tcp: TcpListener| -> io::Result<TcpListener> {
            if let Some(size) = options.sockbuf {
                let socket = socket2::SockRef::from(&tcp);
                socket.set_send_buffer_size(size as usize)?;
                socket.set_recv_buffer_size(size as usize)?;
            }
            Ok(tcp)
        };
        let server = |tcp, udp| Server {
            tcp,
            udp,
            options: options.clone(),
            guard: guard.clone(),
        };
        if guard.as_ref().is_some_and(|g| g.ports.is_some()) {
            return guard::bind_first(addr, guard.as_ref(), |addr| {
                let tcp = sized(TcpListener::bind(addr)?)?;
                Ok(server(tcp, UdpSocket::bind(addr)?))
            });
        }
        let mut last_error = None;
        for _ in 0..20 {
            let tcp = sized(TcpListener::bind(addr)?)?;
            let port = tcp.local_addr()?.port();
            match UdpSocket::bind(SocketAddr::new(addr.ip(), port)) {
                Ok(udp) => return Ok(server(tcp, udp)),
                Err(e) if addr.port() == 0 => last_error = Some(e),
                Err(e) => return Err(e),
            }
        }
        Err(last_error.unwrap_or_else(|| io::Error::other("no port free for both TCP and UDP")))
    }

    pub fn port(&self) -> u16 {
        self.tcp.local_addr().map(|a| a.port()).unwrap_or(0)
    }

    /// Starts the accept, connection and UDP threads.
    pub fn start(self) -> io::Result<Running> {
        if let Some(cpu) = self.options.cpu {
            // Refused here, before any thread starts, rather than in each.
            pin::check(cpu).map_err(io::Error::other)?;
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(Stats::default());
        let port = self.port();
        let usage_before = ProcessUsage::now();
        let counters_before = Counters::read();
        self.tcp.set_nonblocking(true)?;
        // The UDP thread blocks in recv with no timeout (no kernel timer per
        // call); `stop` wakes it with an empty datagram.
        let mut udp_addr = self.udp.local_addr()?;
        if udp_addr.ip().is_unspecified() {
            udp_addr.set_ip(match udp_addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::LOCALHOST.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::LOCALHOST.into(),
            });
        }
        let mut threads = Vec::new();
        {
            let (stop, stats, options) = (stop.clone(), stats.clone(), self.options.clone());
            let guard = self.guard.clone();
            // The thread serves from its own file table (fdtable.rs);
            // `Running` keeps the process's handle, closed after the join.
            let udp_fd = self.udp.as_raw_fd();
            threads.push(
                std::thread::Builder::new()
                    .name("rpc-udp".into())
                    .spawn(move || {
                        pin_thread(&options);
                        match fdtable::own_socket::<UdpSocket>(udp_fd) {
                            Ok(udp) => serve_udp(&udp, &options, guard.as_ref(), &stop, &stats),
                            Err(e) => eprintln!("netlab rpc server: UDP: cannot serve: {e}"),
                        }
                    })?,
            );
        }
        {
            let (stop, stats, options) = (stop.clone(), stats.clone(), self.options.clone());
            // Through an agent, a gate takes connections and checks their
            // tokens on threads of its own, so strangers cannot hold the
            // accept loop (guard.rs).
            let door = guard::Door::new(self.tcp, self.guard.clone())?.nonblocking()?;
            threads.push(
                std::thread::Builder::new()
                    .name("rpc-accept".into())
                    .spawn(move || {
                        // Connection threads start from this one and inherit its CPU.
                        pin_thread(&options);
                        accept_loop(&door, &options, &stop, &stats);
                    })?,
            );
        }
        Ok(Running {
            _udp: self.udp,
            stop,
            stats,
            threads,
            udp_addr,
            port,
            usage_before,
            counters_before,
        })
    }
}

impl Running {
    pub fn port(&self) -> u16 {
        self.port
    }

    pub fn stop(self) -> ServerReport {
        self.stop.store(true, Ordering::Relaxed);
        let unspecified = SocketAddr::new(
            match self.udp_addr {
                SocketAddr::V4(_) => std::net::Ipv4Addr::UNSPECIFIED.into(),
                SocketAddr::V6(_) => std::net::Ipv6Addr::UNSPECIFIED.into(),
            },
            0,
        );
        if let Ok(waker) = UdpSocket::bind(unspecified) {
            let _ = waker.send_to(&[], self.udp_addr);
        }
        for thread in self.threads {
            let _ = thread.join();
        }
        ServerReport {
            calls: self.stats.calls.load(Ordering::Relaxed),
            dropped_records: self.stats.dropped_records.load(Ordering::Relaxed),
            closed_bad_peers: self.stats.closed_bad_peers.load(Ordering::Relaxed),
            connections: self.stats.connections.load(Ordering::Relaxed),
            usage: ProcessUsage::now().since(&self.usage_before),
            counters: Counters::read().delta_reported(&self.counters_before),
            work_ns: self.stats.work_ns.load(Ordering::Relaxed),
            run_delay_ns: (!self.stats.run_delay_unknown.load(Ordering::Relaxed))
                .then(|| self.stats.run_delay_ns.load(Ordering::Relaxed)),
        }
    }
}

/// Pins the calling thread where `options` say (checked in `start`).
fn pin_thread(options: &ServerOptions) {
    if let Some(cpu) = options.cpu
        && let Err(e) = pin::pin_current_thread(cpu)
    {
        eprintln!("netlab rpc server: {e}");
    }
}

/// The server's lines about peers and their input, rate-limited: a peer
/// sending garbage a thousand times a second writes ten lines a window.
static LOG: RateLog = RateLog::new("lines about peers", |line| {
    eprintln!("netlab rpc server: {line}")
});

fn log(peer: SocketAddr, why: &str) {
    LOG.line(format_args!("{peer}: {why}"));
}

/// Once a record has begun, the rest must arrive within this by default
/// (a peer sending a byte every few seconds is not idle, and must not hold
/// a connection and its buffer for ever): 1 MiB at 420 kbit/s.
pub const RECORD_TIME: Duration = Duration::from_secs(20);

fn default_record_timeout_ms() -> u64 {
    RECORD_TIME.as_millis() as u64
}

fn is_default_record_timeout(ms: &u64) -> bool {
    *ms == default_record_timeout_ms()
}

/// Bytes of records not yet whole the server holds across all its
/// connections; past it, a connection holding more than
/// [`PARTIAL_FAIR_SHARE`] is closed rather than let grow.
pub const PARTIAL_BUDGET: usize = 64 << 20;
pub const PARTIAL_FAIR_SHARE: usize = 64 << 10;

/// Buffer room a connection keeps between records; a larger record's
/// memory is given back once it is served.
const KEEP_BETWEEN_RECORDS: usize = 256 << 10;

fn serve_udp(
    udp: &UdpSocket,
    options: &ServerOptions,
    guard: Option<&DataGuard>,
    stop: &AtomicBool,
    stats: &Stats,
) {
    let _delay = stats.run_delay_of_this_thread();
    let mut buf = vec![0u8; 65536];
    let mut reply = Vec::with_capacity(64);
    let mut empty_polls = 0;
    while !stop.load(Ordering::Relaxed) {
        let spun = busypoll::spin(
            busypoll::budget(options.busy_poll_us),
            &mut empty_polls,
            || busypoll::recv_from_now(udp, &mut buf),
        );
        let received = match spun {
            Some(got) => got,
            None => udp.recv_from(&mut buf),
        };
        let (n, peer) = match received {
            Ok(got) => got,
            Err(e) if crate::endpoint::stall::nothing_came(&e) => {
                continue;
            }
            Err(e) => {
                LOG.line(format_args!("UDP: {e}"));
                continue;
            }
        };
        if stop.load(Ordering::Relaxed) {
            break;
        }
        if !guard::admits(guard, peer.ip()) {
            stats.dropped_records.fetch_add(1, Ordering::Relaxed);
            log(peer, "UDP datagram dropped: not the run's peer");
            continue;
        }
        // The client's hello before its first call (a run through an
        // agent): answered with the consent, never dispatched as a call.
        if let Some(consent) = guard.and_then(|g| guard::udp_consent(&buf[..n], peer, g)) {
            let _ = udp.send_to(&consent, peer);
            continue;
        }
        reply.clear();
        let began = Instant::now();
        let dispatched = dispatch_into(&buf[..n], options.max_record as u32, &mut reply);
        stats.add_work(began);
        match dispatched {
            Ok(()) => {
                stats.calls.fetch_add(1, Ordering::Relaxed);
                let _ = udp.send_to(&reply, peer);
            }
            Err(why) => {
                stats.dropped_records.fetch_add(1, Ordering::Relaxed);
                log(peer, &format!("UDP datagram dropped: {why}"));
            }
        }
    }
}

/// What the accept loop keeps of each connection it serves, to close it
/// when idle or when the server stops.
struct Connection {
    thread: JoinHandle<()>,
    /// The process's handle on the socket, which the serving thread copied
    /// into its own file table: `shutdown` on it wakes the thread out of
    /// its blocking read. Dropped only once the thread has finished.
    socket: TcpStream,
    peer: SocketAddr,
    watch: Arc<Watch>,
    /// `watch.reads` when the accept loop last saw it change, and when.
    reads_seen: u64,
    quiet_since: Instant,
    /// When the accept loop first saw the current partial record.
    partial_since: Option<Instant>,
}

impl Connection {
    /// Shuts the connection down for `why` (its thread then ends).
    fn cut(&self, why: &'static str) {
        let _ = self.watch.cut.set(why);
        let _ = self.socket.shutdown(Shutdown::Both);
    }
}

/// Shared between a connection's thread and the accept loop.
#[derive(Default)]
struct Watch {
    /// Reads that brought input. The serving thread only counts; the accept
    /// loop, which wakes every 100 ms anyway, notes when the count last
    /// changed. So a call costs no clock read for idle tracking.
    reads: AtomicU64,
    /// The accept loop shut the connection down for idleness.
    idled_out: AtomicBool,
    /// A record has begun and is not whole yet (set by the serving thread
    /// only when that changes).
    partial: AtomicBool,
    /// The accept loop shut the connection down: a record took longer than
    /// [`RECORD_TIME`], or the server made room for a new connection.
    cut: std::sync::OnceLock<&'static str>,
}

/// The most connections one source address may hold: a quarter of the
/// server's, so three other addresses always find room.
fn per_address(options: &ServerOptions) -> usize {
    (options.max_connections / 4).max(1)
}

/// Which connection makes room for a new one from `peer`, if one must go:
/// the quietest of `peer`'s own when its address holds its share; else,
/// when the server is full, the quietest of the address holding the most
/// (never the newcomer's if another holds more). So strangers that keep
/// their connections busy hold at most their address's share, and a
/// client from another address is always served.
fn to_make_room(
    connections: &[Connection],
    peer: IpAddr,
    open: usize,
    options: &ServerOptions,
) -> Option<usize> {
    let live = |c: &&Connection| !c.thread.is_finished() && c.watch.cut.get().is_none();
    let quietest_of = |ip: IpAddr| {
        connections
            .iter()
            .enumerate()
            .filter(|(_, c)| live(c) && c.peer.ip() == ip)
            .min_by_key(|(_, c)| c.quiet_since)
            .map(|(i, _)| i)
    };
    let mut held: HashMap<IpAddr, usize> = HashMap::new();
    for c in connections.iter().filter(live) {
        *held.entry(c.peer.ip()).or_default() += 1;
    }
    if held.get(&peer).copied().unwrap_or(0) >= per_address(options) {
        return quietest_of(peer);
    }
    if open < options.max_connections {
        return None;
    }
    let heaviest = held
        .iter()
        .max_by_key(|(ip, n)| (**n, **ip != peer))
        .map(|(ip, _)| *ip)?;
    quietest_of(heaviest)
}

fn accept_loop(
    door: &guard::Door,
    options: &ServerOptions,
    stop: &Arc<AtomicBool>,
    stats: &Arc<Stats>,
) {
    let idle_limit = Duration::from_millis(options.idle_timeout_ms);
    let record_limit = Duration::from_millis(options.record_timeout_ms);
    let mut connections: Vec<Connection> = Vec::new();
    let mut looked = Instant::now();
    while !stop.load(Ordering::Relaxed) {
        let next = door.accept_within(Duration::from_millis(100));
        // Every 100 ms, connection or not (a stream of new connections
        // must not stop the watch on the old ones).
        if looked.elapsed() >= WATCH_EVERY || next.is_err() {
            looked = Instant::now();
            watch_connections(&mut connections, idle_limit, record_limit);
        }
        match next {
            Ok((stream, peer)) => {
                connections.retain(|c| !c.thread.is_finished());
                let open = stats.open.load(Ordering::Relaxed);
                if let Some(i) = to_make_room(&connections, peer.ip(), open, options) {
                    connections[i].cut(
                        "closed to make room for a new connection (the quietest of the address holding the most)",
                    );
                } else if open >= options.max_connections {
                    log(peer, "refused: too many connections");
                    continue;
                }
                let fd = stream.as_raw_fd();
                let watch = Arc::new(Watch::default());
                stats.connections.fetch_add(1, Ordering::Relaxed);
                stats.open.fetch_add(1, Ordering::Relaxed);
                let (shared, options, w) = (stats.clone(), options.clone(), watch.clone());
                let spawned =
                    std::thread::Builder::new()
                        .name("rpc-conn".into())
                        .spawn(move || {
                            // The accept loop holds `stream` open until
                            // this thread has finished (fdtable.rs).
                            let result = match fdtable::own_socket::<TcpStream>(fd) {
                                Ok(mine) => {
                                    let served = serve_connection(&mine, &options, &w, &shared);
                                    // The peer sees the end now, not when the
                                    // accept loop drops its handle.
                                    let _ = mine.shutdown(Shutdown::Both);
                                    served
                                }
                                Err(e) => Err(format!("cannot serve: {e}")),
                            };
                            let cut = w.cut.get().copied();
                            let result = match (result, cut) {
                                (_, Some(why)) => Err(why.to_string()),
                                (Ok(()), None) if w.idled_out.load(Ordering::Relaxed) => {
                                    Err(format!(
                                        "idle for {} s",
                                        options.idle_timeout_ms as f64 / 1000.0
                                    ))
                                }
                                (other, None) => other,
                            };
                            if let Err(why) = result {
                                shared.closed_bad_peers.fetch_add(1, Ordering::Relaxed);
                                log(peer, &format!("closing: {why}"));
                            }
                            shared.open.fetch_sub(1, Ordering::Relaxed);
                        });
                match spawned {
                    Ok(thread) => connections.push(Connection {
                        thread,
                        socket: stream,
                        peer,
                        watch,
                        reads_seen: 0,
                        quiet_since: Instant::now(),
                        partial_since: None,
                    }),
                    Err(e) => {
                        log(peer, &format!("cannot serve: {e}"));
                        stats.open.fetch_sub(1, Ordering::Relaxed);
                    }
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            Err(e) => {
                LOG.line(format_args!("accept: {e}"));
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
    for c in &connections {
        let _ = c.socket.shutdown(Shutdown::Both);
    }
    for c in connections {
        let _ = c.thread.join();
    }
}

/// How often the accept loop looks at its connections' progress.
const WATCH_EVERY: Duration = Duration::from_millis(100);

/// Closes finished connections' sockets, cuts records past their deadline
/// and shuts idle connections down.
fn watch_connections(
    connections: &mut Vec<Connection>,
    idle_limit: Duration,
    record_limit: Duration,
) {
    connections.retain(|c| !c.thread.is_finished());
    let now = Instant::now();
    for c in connections.iter_mut() {
        if c.watch.partial.load(Ordering::Relaxed) {
            let since = *c.partial_since.get_or_insert(now);
            if now - since > record_limit {
                c.cut("a record took longer than its deadline (record_timeout_ms) to arrive");
            }
        } else {
            c.partial_since = None;
        }
        let reads = c.watch.reads.load(Ordering::Relaxed);
        if reads != c.reads_seen {
            c.reads_seen = reads;
            c.quiet_since = now;
        } else if now - c.quiet_since > idle_limit
            && !c.watch.idled_out.swap(true, Ordering::Relaxed)
        {
            let _ = c.socket.shutdown(Shutdown::Both);
        }
    }
}

fn set_quickack(stream: &TcpStream) {
    let one: libc::c_int = 1;
    // SAFETY: an int-valued socket option.
    unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_QUICKACK,
            (&one as *const libc::c_int).cast(),
            4,
        )
    };
}

/// Serves one connection until the peer closes (Ok) or misbehaves (Err, with
/// why). It blocks in `read` with no timeout, so a waiting call arms no
/// kernel timer; the accept loop shuts the socket down to end it (idle, or
/// the server stopping).
fn serve_connection(
    mut stream: &TcpStream,
    options: &ServerOptions,
    watch: &Watch,
    stats: &Stats,
) -> Result<(), String> {
    stream
        .set_nodelay(options.nodelay)
        .map_err(|e| e.to_string())?;
    let mut assembler = Assembler::new(options.max_record);
    let mut buf = vec![0u8; 64 * 1024];
    let mut out = Vec::with_capacity(64);
    if options.quickack {
        set_quickack(stream);
    }
    let _delay = stats.run_delay_of_this_thread();
    let mut held = Held {
        stats,
        bytes: 0,
        partial: false,
    };
    let mut empty_polls = 0;
    let mut reads = 0;
    loop {
        let spun = busypoll::spin(
            busypoll::budget(options.busy_poll_us),
            &mut empty_polls,
            || busypoll::recv_now(stream, &mut buf),
        );
        let received = match spun {
            Some(got) => got,
            None => stream.read(&mut buf),
        };
        let n = match received {
            Ok(0) => {
                return if assembler.in_progress() && !watch.idled_out.load(Ordering::Relaxed) {
                    Err("peer closed in the middle of a record (truncated fragment)".into())
                } else {
                    Ok(())
                };
            }
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(e.to_string()),
        };
        // This thread is the only writer: a plain store, no locked add.
        reads += 1;
        watch.reads.store(reads, Ordering::Relaxed);
        if options.quickack {
            set_quickack(stream);
        }
        assembler.push(&buf[..n]);
        loop {
            let record = match assembler.next_record() {
                Ok(Some(record)) => record,
                Ok(None) => break,
                Err(e) => return Err(e.to_string()),
            };
            out.clear();
            out.extend_from_slice(&[0; 4]);
            let began = Instant::now();
            let dispatched = dispatch_into(record, options.max_record as u32, &mut out);
            stats.add_work(began);
            match dispatched {
                Ok(()) => {
                    stats.calls.fetch_add(1, Ordering::Relaxed);
                    let header = fragment_header(out.len() as u32 - 4, true);
                    out[..4].copy_from_slice(&header);
                    stream.write_all(&out).map_err(|e| e.to_string())?;
                }
                Err(why) => {
                    stats.dropped_records.fetch_add(1, Ordering::Relaxed);
                    return Err(why);
                }
            }
        }
        held.update(&mut assembler, watch)?;
    }
}

/// What one connection holds of records not yet whole, kept in the
/// server's total ([`PARTIAL_BUDGET`]) and given back when it ends. The
/// shared counters are touched only when the holding changes, so a stream
/// of calls that each arrive whole costs no atomic operation.
struct Held<'a> {
    stats: &'a Stats,
    bytes: usize,
    partial: bool,
}

impl Held<'_> {
    fn update(&mut self, assembler: &mut Assembler, watch: &Watch) -> Result<(), String> {
        let bytes = assembler.buffered();
        if bytes == 0 {
            assembler.shrink_idle(KEEP_BETWEEN_RECORDS);
        }
        let partial = bytes > 0;
        if partial != self.partial {
            self.partial = partial;
            watch.partial.store(partial, Ordering::Relaxed);
        }
        if bytes == self.bytes {
            return Ok(());
        }
        let total = if bytes > self.bytes {
            self.stats
                .partial_bytes
                .fetch_add(bytes - self.bytes, Ordering::Relaxed)
                + (bytes - self.bytes)
        } else {
            self.stats
                .partial_bytes
                .fetch_sub(self.bytes - bytes, Ordering::Relaxed)
                - (self.bytes - bytes)
        };
        self.bytes = bytes;
        if total > PARTIAL_BUDGET && bytes > PARTIAL_FAIR_SHARE {
            return Err(format!(
                "closed: the server's budget of {} MiB for records not yet whole is spent ({bytes} bytes of them this connection's)",
                PARTIAL_BUDGET >> 20
            ));
        }
        Ok(())
    }
}

impl Drop for Held<'_> {
    fn drop(&mut self) {
        self.stats
            .partial_bytes
            .fetch_sub(self.bytes, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::rpc::{Call, OpaqueAuth, ReplyBody};

    fn call_bytes(call: &Call, args: &[u8]) -> Vec<u8> {
        let mut w = Writer::new();
        call.emit(&mut w);
        w.buf.extend_from_slice(args);
        w.into_bytes()
    }

    fn reply_of(outcome: Outcome) -> Reply {
        match outcome {
            Outcome::Reply(bytes) => match parse(&bytes).unwrap().0 {
                Message::Reply(r) => r,
                other => panic!("{other:?}"),
            },
            Outcome::Drop(why) => panic!("dropped: {why}"),
        }
    }

    #[test]
    fn every_rfc_answer() {
        let ok = |c: &Call, a: &[u8]| reply_of(dispatch(&call_bytes(c, a), 1 << 20));
        let sink_args = {
            let mut w = Writer::new();
            w.opaque(&[7u8; 4096]);
            w.into_bytes()
        };
        assert_eq!(
            ok(&Call::new(1, PROGRAM, 1, PROC_NULL), &[]),
            Reply::accepted(1, AcceptStat::Success)
        );
        assert_eq!(
            ok(&Call::new(2, PROGRAM, 1, PROC_SINK), &sink_args),
            Reply::accepted(2, AcceptStat::Success)
        );
        assert_eq!(
            ok(&Call::new(3, 100_003, 1, 0), &[]),
            Reply::accepted(3, AcceptStat::ProgUnavail)
        );
        assert_eq!(
            ok(&Call::new(4, PROGRAM, 7, 0), &[]),
            Reply::accepted(4, AcceptStat::ProgMismatch { low: 1, high: 1 })
        );
        assert_eq!(
            ok(&Call::new(5, PROGRAM, 1, 99), &[]),
            Reply::accepted(5, AcceptStat::ProcUnavail)
        );
        // An opaque length beyond the record.
        assert_eq!(
            ok(&Call::new(6, PROGRAM, 1, PROC_SINK), &[0, 0, 0x10, 0, 1, 2]),
            Reply::accepted(6, AcceptStat::GarbageArgs)
        );
        let mut v3 = Call::new(7, PROGRAM, 1, 0);
        v3.rpcvers = 3;
        assert_eq!(
            ok(&v3, &[]),
            Reply::denied(7, RejectStat::RpcMismatch { low: 2, high: 2 })
        );
        let mut kerberos = Call::new(8, PROGRAM, 1, 0);
        kerberos.cred = OpaqueAuth {
            flavor: 6,
            body: vec![],
        };
        assert_eq!(
            ok(&kerberos, &[]),
            Reply::denied(8, RejectStat::AuthError(auth_stat::REJECTEDCRED))
        );
        let mut bad_sys = Call::new(9, PROGRAM, 1, 0);
        bad_sys.cred = OpaqueAuth {
            flavor: AUTH_SYS,
            body: vec![0, 0, 0, 1],
        };
        assert_eq!(
            ok(&bad_sys, &[]),
            Reply::denied(9, RejectStat::AuthError(auth_stat::BADCRED))
        );
        // A machine name that is not text (stamp 0, a 3-byte name with 0xff).
        let mut not_text = Call::new(11, PROGRAM, 1, 0);
        not_text.cred = OpaqueAuth {
            flavor: AUTH_SYS,
            body: vec![
                0, 0, 0, 0, 0, 0, 0, 3, b'h', 0xff, b't', 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
            ],
        };
        assert_eq!(
            ok(&not_text, &[]),
            Reply::denied(11, RejectStat::AuthError(auth_stat::BADCRED))
        );
        let mut good_sys = Call::new(10, PROGRAM, 1, 0);
        good_sys.cred = AuthSys {
            stamp: 1,
            machine_name: "h".into(),
            uid: 0,
            gid: 0,
            gids: vec![],
        }
        .to_auth();
        assert!(matches!(
            ok(&good_sys, &[]).body,
            ReplyBody::Accepted {
                stat: AcceptStat::Success,
                ..
            }
        ));
    }

    /// `rpcinfo -n PORT -t 127.0.0.1 537205129 1` (Debian rpcbind 1.2.6),
    /// captured on lo with tcpdump: the TCP payload, record mark included.
    const RPCINFO_TCP_REQUEST: [u8; 44] = [
        0x80, 0x00, 0x00, 0x28, 0x6a, 0xe6, 0xdc, 0xbd, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x02, 0x20, 0x05, 0x19, 0x89, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];
    /// netlab's reply in the same capture, which rpcinfo accepted.
    const REPLY_TO_RPCINFO: [u8; 28] = [
        0x80, 0x00, 0x00, 0x18, 0x6a, 0xe6, 0xdc, 0xbd, 0x00, 0x00, 0x00, 0x01, 0x00, 0x00, 0x00,
        0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00,
    ];

    #[test]
    fn answers_rpcinfo_bytes_as_captured() {
        let mut assembler = Assembler::new(1 << 20);
        assembler.push(&RPCINFO_TCP_REQUEST);
        let record = assembler.next_record().unwrap().unwrap();
        let Outcome::Reply(reply) = dispatch(record, 1 << 20) else {
            panic!("rpcinfo's call was dropped");
        };
        let mut framed = fragment_header(reply.len() as u32, true).to_vec();
        framed.extend_from_slice(&reply);
        assert_eq!(framed, REPLY_TO_RPCINFO);
        // Over UDP rpcinfo sends the same call without the record mark.
        assert_eq!(
            dispatch(&RPCINFO_TCP_REQUEST[4..], 1 << 20),
            Outcome::Reply(REPLY_TO_RPCINFO[4..].to_vec())
        );
    }

    #[test]
    fn garbage_is_dropped_not_answered() {
        assert!(matches!(dispatch(b"hello", 100), Outcome::Drop(_)));
        let mut reply = Writer::new();
        Reply::accepted(1, AcceptStat::Success).emit(&mut reply);
        assert!(matches!(dispatch(&reply.buf, 100), Outcome::Drop(_)));
    }
}
