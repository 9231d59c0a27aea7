//! `/metrics` over HTTP for Prometheus: a [`prometheus_client`] registry
//! encoded as OpenMetrics text (`application/openmetrics-text;
//! version=1.0.0`) at each scrape, served on one thread of its own by a
//! small bounded server (netlab has no async runtime; a scrape every few
//! seconds needs none). Used by the continuous mesh controller and by
//! agents.
//!
//! A scraper that asks for OpenMetrics (`Accept:
//! application/openmetrics-text`, as Prometheus does) gets it; any other
//! gets the same figures in Prometheus' text format 0.0.4
//! ([`Text004`]): there a counter's metadata is named with its `_total`
//! (OpenMetrics names the family without it), which is what `promtool
//! check metrics` (2.42, Debian's) reads; it reports OpenMetrics'
//! counters as lacking help.
//!
//! # What a stranger can hold
//!
//! A metrics port answers anyone who can reach it, so it trusts no one
//! (found 2026-12: tiny_http, which served it before, gave every
//! connection a thread and two descriptors with no cap, queued every
//! pipelined request and buffered a header line whole; 10,100 idle
//! connections took an agent's descriptors and stopped its runs). Here
//! one thread polls every connection, and:
//!
//! - at most [`MAX_CONNECTIONS`] connections, [`MAX_PER_SOURCE`] from one
//!   address; a new one past either ends the oldest idle one (of its
//!   source, then of all), else the oldest. So the port holds at most
//!   `MAX_CONNECTIONS + 1` descriptors, a share apart from the runs';
//! - a request's head is bounded ([`crate::wire::http`]: 8 KiB, 4 KiB a
//!   line, 32 fields) and must arrive whole within [`REQUEST_TIME`] of
//!   its first byte; a connection idle for [`IDLE_TIME`] is closed;
//! - one request at a time: nothing more is read from a connection while
//!   its answer is unsent, so pipelined requests wait in the peer's own
//!   buffers and in at most 8 KiB here; an answer unsent after
//!   [`WRITE_TIME`] closes the connection;
//! - an error on accept (out of descriptors) is logged, waited out for
//!   [`ACCEPT_BACKOFF`] and never ends the listener.
//!
//! Invariants: the port is bound before [`serve`] returns, so a port in
//! use is an error at start, never a thread that fails later; anything
//! but `GET` or `HEAD` of `/metrics` (or `/`) is answered 404 or 405
//! without encoding; dropping the [`MetricsServer`] stops its thread,
//! closes every connection and frees the port.

use crate::endpoint::ratelog::RateLog;
use crate::export::Export;
use crate::export::openmetrics::{OpenMetrics, Text004};
use crate::wire::http::{self, Head, Method, Reading};
use prometheus_client::registry::Registry;
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// Connections held at once.
pub const MAX_CONNECTIONS: usize = 32;
/// Connections held at once from one source address.
pub const MAX_PER_SOURCE: usize = 8;
/// From a request's first byte to its whole head.
pub const REQUEST_TIME: Duration = Duration::from_secs(5);
/// A connection with no request in it is closed after this.
pub const IDLE_TIME: Duration = Duration::from_secs(30);
/// From an answer's first byte to its last.
pub const WRITE_TIME: Duration = Duration::from_secs(10);
/// The wait after a failed accept (the listener stays readable).
pub const ACCEPT_BACKOFF: Duration = Duration::from_millis(100);
/// New connections accepted between two rounds over those held, so a
/// request that has arrived is answered before new ones can end it.
const ACCEPT_BURST: usize = 8;
/// How often the thread looks at the stop flag when nothing happens.
const IDLE_POLL: Duration = Duration::from_millis(100);

/// Why the metrics endpoint did not start.
#[derive(Debug, thiserror::Error)]
pub enum MetricsError {
    #[error(
        "--metrics {0}: the port is in use (another exporter, or a netlab already serving there): choose another"
    )]
    InUse(SocketAddr),
    #[error("--metrics {0}: {1}")]
    Bind(SocketAddr, String),
}

/// A registry others update (under its lock) while the server reads it.
pub type SharedRegistry = Arc<Mutex<Registry>>;

/// A running `/metrics` endpoint; stops when dropped.
pub struct MetricsServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl MetricsServer {
    /// The address it listens on (the port chosen when 0 was asked).
    pub fn address(&self) -> SocketAddr {
        self.address
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Serves `registry` at `http://ADDRESS/metrics` until the server is
/// dropped.
pub fn serve(address: SocketAddr, registry: SharedRegistry) -> Result<MetricsServer, MetricsError> {
    let listener = TcpListener::bind(address).map_err(|e| match e.kind() {
        io::ErrorKind::AddrInUse => MetricsError::InUse(address),
        _ => MetricsError::Bind(address, e.to_string()),
    })?;
    let bind_err = |e: io::Error| MetricsError::Bind(address, e.to_string());
    listener.set_nonblocking(true).map_err(bind_err)?;
    let bound = listener.local_addr().map_err(bind_err)?;
    let stop = Arc::new(AtomicBool::new(false));
    let stopping = stop.clone();
    let thread = std::thread::Builder::new()
        .name("metrics".into())
        .spawn(move || Port::new(listener, registry).run(&stopping))
        .map_err(bind_err)?;
    Ok(MetricsServer {
        address: bound,
        stop,
        thread: Some(thread),
    })
}

/// Where a connection is in its exchange.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Phase {
    /// No byte of a request yet (since accept or the last answer).
    Idle,
    /// Part of a request's head is in.
    Reading,
    /// An answer is being sent.
    Writing,
}

/// One connection the port holds.
struct Connection {
    stream: TcpStream,
    source: IpAddr,
    phase: Phase,
    /// When the phase began.
    since: Instant,
    /// Bytes read and not yet taken by a request (at most [`http::MAX_HEAD`]).
    read: Vec<u8>,
    /// The answer, and how much of it is sent.
    answer: Vec<u8>,
    sent: usize,
    /// Close once the answer is sent.
    last: bool,
    /// The peer shut its side: answer what it sent, then close.
    eof: bool,
    /// Ended: dropped at the end of the round.
    closed: bool,
}

impl Connection {
    fn new(stream: TcpStream, source: IpAddr) -> Connection {
        Connection {
            stream,
            source,
            phase: Phase::Idle,
            since: Instant::now(),
            read: Vec::new(),
            answer: Vec::new(),
            sent: 0,
            last: false,
            eof: false,
            closed: false,
        }
    }

    fn enter(&mut self, phase: Phase) {
        self.phase = phase;
        self.since = Instant::now();
    }

    /// When this connection's phase runs out.
    fn deadline(&self) -> Instant {
        self.since
            + match self.phase {
                Phase::Idle => IDLE_TIME,
                Phase::Reading => REQUEST_TIME,
                Phase::Writing => WRITE_TIME,
            }
    }

    /// Reads what has arrived, up to the head's bound, then goes on.
    fn read_some(&mut self, registry: &SharedRegistry) {
        let mut chunk = [0u8; 4096];
        loop {
            let room = http::MAX_HEAD
                .saturating_sub(self.read.len())
                .min(chunk.len());
            if room == 0 {
                break;
            }
            match self.stream.read(&mut chunk[..room]) {
                // The peer has said all it will (a client that shuts its
                // side after its request): what it sent is still answered.
                Ok(0) => {
                    self.eof = true;
                    break;
                }
                Ok(n) => self.read.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(_) => {
                    self.closed = true;
                    return;
                }
            }
        }
        self.go_on(registry);
    }

    /// Sends what the socket takes of the answer; once it is sent, answers
    /// the next whole request already read (pipelined), and so on until
    /// the socket is full or no whole request is left.
    fn go_on(&mut self, registry: &SharedRegistry) {
        loop {
            if self.phase == Phase::Writing {
                while self.sent < self.answer.len() {
                    match self.stream.write(&self.answer[self.sent..]) {
                        Ok(0) => {
                            self.closed = true;
                            return;
                        }
                        Ok(n) => self.sent += n,
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                        Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                        Err(_) => {
                            self.closed = true;
                            return;
                        }
                    }
                }
                self.answer = Vec::new();
                if self.last {
                    let _ = self.stream.shutdown(std::net::Shutdown::Write);
                    self.closed = true;
                    return;
                }
                self.enter(Phase::Idle);
            }
            match http::read_head(&self.read) {
                Ok(Reading::Whole(head, taken)) => {
                    self.read.drain(..taken);
                    self.answer = answer(&head, registry);
                    self.last = !head.keep_alive;
                }
                Ok(Reading::Partial) => {
                    if self.eof {
                        self.closed = true;
                    } else if !self.read.is_empty() && self.phase == Phase::Idle {
                        self.enter(Phase::Reading);
                    }
                    return;
                }
                Err(refused) => {
                    self.read.clear();
                    let body = format!("{refused}\n");
                    self.answer =
                        http::emit_answer(refused.status(), &[], body.as_bytes(), false, true);
                    self.last = true;
                }
            }
            self.sent = 0;
            self.enter(Phase::Writing);
        }
    }
}

/// The listener, the connections it holds (oldest first) and the registry.
struct Port {
    listener: TcpListener,
    registry: SharedRegistry,
    held: Vec<Connection>,
    accept_after: Instant,
    log: RateLog,
}

fn print_line(line: std::fmt::Arguments<'_>) {
    eprintln!("netlab metrics: {line}");
}

impl Port {
    fn new(listener: TcpListener, registry: SharedRegistry) -> Port {
        Port {
            listener,
            registry,
            held: Vec::new(),
            accept_after: Instant::now(),
            log: RateLog::new("accept errors", print_line),
        }
    }

    fn run(mut self, stop: &AtomicBool) {
        while !stop.load(Ordering::Relaxed) {
            let (listener_ready, ready) = self.wait();
            for (connection, ready) in self.held.iter_mut().zip(ready) {
                if !ready {
                    continue;
                }
                match connection.phase {
                    Phase::Writing => connection.go_on(&self.registry),
                    Phase::Idle | Phase::Reading => connection.read_some(&self.registry),
                }
            }
            let now = Instant::now();
            for connection in &mut self.held {
                if now >= connection.deadline() {
                    connection.closed = true;
                }
            }
            self.held.retain(|c| !c.closed);
            if listener_ready {
                self.accept_some();
            }
        }
    }

    /// Polls the listener (unless backing off) and every connection, for
    /// reading or, with an answer unsent, for writing; until one is ready,
    /// the next deadline or [`IDLE_POLL`].
    fn wait(&self) -> (bool, Vec<bool>) {
        use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
        let now = Instant::now();
        let listening = now >= self.accept_after;
        let next = self
            .held
            .iter()
            .map(Connection::deadline)
            .chain((!listening).then_some(self.accept_after))
            .min()
            .map_or(IDLE_POLL, |d| {
                d.saturating_duration_since(now).min(IDLE_POLL)
            });
        let listener_flags = if listening {
            PollFlags::POLLIN
        } else {
            PollFlags::empty()
        };
        let mut fds = vec![PollFd::new(self.listener.as_fd(), listener_flags)];
        fds.extend(self.held.iter().map(|c| {
            let flags = match c.phase {
                Phase::Writing => PollFlags::POLLOUT,
                Phase::Idle | Phase::Reading => PollFlags::POLLIN,
            };
            PollFd::new(c.stream.as_fd(), flags)
        }));
        let timeout =
            PollTimeout::try_from(next.max(Duration::from_millis(1))).unwrap_or(PollTimeout::MAX);
        if poll(&mut fds, timeout).is_err() {
            return (false, vec![false; fds.len() - 1]);
        }
        let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
        (
            listening && ready(&fds[0]),
            fds[1..].iter().map(ready).collect(),
        )
    }

    /// Accepts at most [`ACCEPT_BURST`] waiting connections, ending held
    /// ones to make room.
    fn accept_some(&mut self) {
        for _ in 0..ACCEPT_BURST {
            match self.listener.accept() {
                Ok((stream, peer)) => {
                    if stream.set_nonblocking(true).is_err() {
                        continue;
                    }
                    self.admit(Connection::new(stream, peer.ip()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // A connection reset before it was accepted costs nothing.
                Err(e) if e.kind() == io::ErrorKind::ConnectionAborted => {}
                Err(e) => {
                    // Out of descriptors (this process's or the system's),
                    // or out of memory: the waiting connections stay
                    // queued; the listener waits, then tries again.
                    self.log.line_about(
                        "accept",
                        format_args!("accept failed ({e}); trying again in {ACCEPT_BACKOFF:?}"),
                    );
                    self.accept_after = Instant::now() + ACCEPT_BACKOFF;
                    return;
                }
            }
        }
    }

    /// Holds `new`, ending the oldest idle connection of its source when
    /// the source has its share, then the oldest idle of all when the
    /// port is full (the oldest of any phase when none is idle).
    fn admit(&mut self, new: Connection) {
        let source = new.source;
        if self.held.iter().filter(|c| c.source == source).count() >= MAX_PER_SOURCE {
            self.end_oldest(|c| c.source == source);
        }
        if self.held.len() >= MAX_CONNECTIONS {
            self.end_oldest(|_| true);
        }
        self.held.push(new);
    }

    fn end_oldest(&mut self, among: impl Fn(&Connection) -> bool) {
        let idle = self
            .held
            .iter()
            .position(|c| among(c) && c.phase == Phase::Idle);
        if let Some(i) = idle.or_else(|| self.held.iter().position(&among)) {
            self.held.remove(i);
        }
    }
}

/// The answer to `head`: the exposition for `GET` or `HEAD` of
/// `/metrics` (or `/`), else 404 or 405 without encoding.
fn answer(head: &Head, registry: &SharedRegistry) -> Vec<u8> {
    let keep_alive = head.keep_alive;
    match (head.method, head.path.as_str()) {
        (Method::Get | Method::Head, "/metrics" | "/") => {
            let registry = registry.lock().unwrap_or_else(|p| p.into_inner());
            let (kind, body) = if head.openmetrics {
                (OpenMetrics::MEDIA_TYPE, OpenMetrics(&registry).text())
            } else {
                (Text004::MEDIA_TYPE, Text004(&registry).text())
            };
            http::emit_answer(
                (200, "OK"),
                &[("Content-Type", kind)],
                body.as_bytes(),
                keep_alive,
                head.method == Method::Get,
            )
        }
        (Method::Get | Method::Head, _) => http::emit_answer(
            (404, "Not Found"),
            &[],
            b"not found\n",
            keep_alive,
            head.method == Method::Get,
        ),
        (Method::Other, _) => http::emit_answer(
            (405, "Method Not Allowed"),
            &[("Allow", "GET, HEAD")],
            b"GET /metrics only\n",
            keep_alive,
            true,
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use prometheus_client::metrics::counter::Counter;
    use std::io::{Read, Write};

    fn get(address: SocketAddr, request: &str) -> String {
        let mut socket = std::net::TcpStream::connect(address).unwrap();
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        socket.write_all(request.as_bytes()).unwrap();
        let mut reply = String::new();
        let _ = socket.read_to_string(&mut reply);
        reply
    }

    #[test]
    fn a_scrape_gets_openmetrics_and_other_paths_do_not() {
        let mut registry = Registry::default();
        let runs = Counter::<u64>::default();
        registry.register("netlab_test_runs", "Runs", runs.clone());
        runs.inc_by(3);
        let registry = Arc::new(Mutex::new(registry));
        let server = serve("127.0.0.1:0".parse().unwrap(), registry).unwrap();
        let reply = get(
            server.address(),
            "GET /metrics HTTP/1.0\r\nAccept: application/openmetrics-text;version=1.0.0,text/plain;q=0.5\r\n\r\n",
        );
        assert!(
            reply.starts_with("HTTP/1.0 200") || reply.starts_with("HTTP/1.1 200"),
            "{reply}"
        );
        assert!(reply.contains("application/openmetrics-text"), "{reply}");
        assert!(reply.contains("netlab_test_runs_total 3"), "{reply}");
        assert!(reply.trim_end().ends_with("# EOF"), "{reply}");
        // Without asking, the 0.0.4 text format: the counter's metadata
        // named as its sample.
        let plain = get(server.address(), "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(plain.contains("text/plain; version=0.0.4"), "{plain}");
        assert!(
            plain.contains("# TYPE netlab_test_runs_total counter"),
            "{plain}"
        );
        assert!(!plain.contains("# EOF"), "{plain}");
        let missing = get(server.address(), "GET /nothing HTTP/1.0\r\n\r\n");
        assert!(missing.contains(" 404 "), "{missing}");
        let post = get(
            server.address(),
            "POST /metrics HTTP/1.0\r\nContent-Length: 0\r\n\r\n",
        );
        assert!(post.contains(" 405 "), "{post}");
    }

    #[test]
    fn head_is_answered_as_get_without_its_body() {
        let server = serve("127.0.0.1:0".parse().unwrap(), Arc::default()).unwrap();
        let reply = get(server.address(), "HEAD /metrics HTTP/1.0\r\n\r\n");
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        let (head, body) = reply.split_once("\r\n\r\n").unwrap();
        assert!(head.contains("Content-Length: "), "{reply}");
        assert!(body.is_empty(), "{reply}");
    }

    fn registry_with_a_counter() -> SharedRegistry {
        let mut registry = Registry::default();
        let runs = Counter::<u64>::default();
        registry.register("netlab_test_runs", "Runs", runs.clone());
        runs.inc_by(3);
        Arc::new(Mutex::new(registry))
    }

    /// Whether the server has closed `socket` (EOF or reset within `wait`).
    fn closed_by_server(socket: &mut std::net::TcpStream, wait: Duration) -> bool {
        socket.set_read_timeout(Some(wait)).unwrap();
        let mut byte = [0u8; 4096];
        loop {
            match socket.read(&mut byte) {
                Ok(0) => return true,
                Ok(_) => continue,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return false,
                Err(e) if e.kind() == io::ErrorKind::TimedOut => return false,
                Err(_) => return true,
            }
        }
    }

    #[test]
    fn a_flood_of_idle_connections_ends_the_oldest_and_scrapes_go_on() {
        let server = serve("127.0.0.1:0".parse().unwrap(), registry_with_a_counter()).unwrap();
        let flood: Vec<std::net::TcpStream> = (0..MAX_CONNECTIONS * 4)
            .map(|_| std::net::TcpStream::connect(server.address()).unwrap())
            .collect();
        // Let the port take them all (it accepts in bursts between rounds).
        std::thread::sleep(Duration::from_millis(300));
        let reply = get(server.address(), "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(reply.contains("netlab_test_runs_total 3"), "{reply}");
        // One source holds at most its share: all but the newest few of
        // the flood were ended.
        let open = flood
            .into_iter()
            .filter_map(|mut s| {
                (!closed_by_server(&mut s, Duration::from_millis(100))).then_some(())
            })
            .count();
        assert!(open <= MAX_PER_SOURCE, "{open} of the flood still held");
    }

    #[test]
    fn a_line_that_never_ends_is_refused_at_its_bound() {
        let server = serve("127.0.0.1:0".parse().unwrap(), Arc::default()).unwrap();
        let mut socket = std::net::TcpStream::connect(server.address()).unwrap();
        socket
            .set_write_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        // Far more than the bound, in pieces: the port answers 431 and
        // closes once the line passes 4 KiB, so a write may fail then.
        let mut sent = 0;
        let piece = vec![b'X'; 1024];
        while sent < 64 * 1024 && socket.write_all(&piece).is_ok() {
            sent += piece.len();
        }
        socket
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut reply = String::new();
        let _ = socket.read_to_string(&mut reply);
        assert!(
            reply.starts_with("HTTP/1.1 431") || reply.is_empty(),
            "{reply}"
        );
        assert!(closed_by_server(&mut socket, Duration::from_secs(2)));
    }

    #[test]
    fn pipelined_requests_never_read_are_not_queued() {
        let server = serve("127.0.0.1:0".parse().unwrap(), registry_with_a_counter()).unwrap();
        let mut greedy = std::net::TcpStream::connect(server.address()).unwrap();
        greedy.set_nonblocking(true).unwrap();
        // Requests until the port stops taking them: it reads no more
        // while an answer is unsent, so the peer's own buffers fill.
        let request = b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n".repeat(64);
        let mut sent = 0usize;
        let mut stalled = 0;
        while sent < 256 << 20 && stalled < 20 {
            match greedy.write(&request) {
                Ok(n) => {
                    sent += n;
                    stalled = 0;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    stalled += 1;
                    std::thread::sleep(Duration::from_millis(10));
                }
                Err(_) => break,
            }
        }
        assert!(
            sent < 64 << 20,
            "the port took {sent} bytes of requests unread"
        );
        // Others are served meanwhile.
        let reply = get(server.address(), "GET /metrics HTTP/1.0\r\n\r\n");
        assert!(reply.contains("netlab_test_runs_total 3"), "{reply}");
    }

    #[test]
    fn a_request_that_trickles_is_cut_at_its_deadline() {
        let server = serve("127.0.0.1:0".parse().unwrap(), Arc::default()).unwrap();
        let mut socket = std::net::TcpStream::connect(server.address()).unwrap();
        socket.write_all(b"GET /metr").unwrap();
        std::thread::sleep(REQUEST_TIME + Duration::from_millis(300));
        assert!(closed_by_server(&mut socket, Duration::from_secs(2)));
    }

    #[test]
    fn a_port_in_use_is_refused_by_name() {
        let taken = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let address = taken.local_addr().unwrap();
        let error = serve(address, Arc::default()).err().expect("refused");
        assert!(matches!(error, MetricsError::InUse(_)), "{error}");
        assert!(error.to_string().contains("in use"), "{error}");
    }
}
