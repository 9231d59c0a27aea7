//! The typist load generator: N simulated users, each a real TELNET or
//! rlogin session, typing a text corpus at R characters a second (evenly
//! spaced as in 000_2144c0e834c30e0c.txt, or Poisson), and the time from
//! each keystroke's send to its echo's arrival.
//!
//! One thread and one epoll set drive every session; keystrokes are due on
//! a heap of (time, user), so thousands of sessions cost one wake-up per
//! due keystroke or arriving echo, not a thread each. The generator reports
//! its own CPU time (RUSAGE_THREAD) and how late it fired keystrokes, so a
//! result limited by the generator is visible as such.
//!
//! Echo matching: the server's terminal echoes each typed byte in order
//! (Enter, typed as CR, comes back as CR LF). A session keeps its typed,
//! not yet echoed bytes in order with their send times; an arriving byte
//! equal to the oldest one completes it. Bytes that match nothing (the LF
//! after CR, negotiation) are skipped.
//!
//! Three kinds of session:
//! - netlab's own TELNET or rlogin client logic on a TCP socket,
//!   character at a time: each keystroke waits for its echo.
//! - TELNET with LINEMODE EDIT (RFC 1184): the client edits and echoes
//!   locally, so a keystroke costs the network nothing until Enter sends
//!   the line. The server echoes nothing; the command is `cat`, which
//!   writes each line back once it has read it, and the latency is per
//!   line: Enter sent to the line's copy (its LF) received.
//! - a real client program on a pty (OpenSSH's `ssh -tt`): the generator
//!   types into the pty and reads the terminal's output; the session is
//!   ready once the remote command prints [`READY_MARKER`]. The programs'
//!   own CPU is reported apart from the generator's.

use super::client::{RloginClient, TelnetClient};
use super::protocol::Protocol;
use super::pty::{self, Pty};
use crate::endpoint::stall::{StallBound, Stalled, connection_words};
use serde::{Deserialize, Serialize};
/// What the generator saw in the measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TypistReport {
    pub users: usize,
    /// Sessions that did not open or broke during the run, with the first reason.
    pub failed_sessions: usize,
    pub first_failure: Option<String>,
    pub keystrokes: u64,
    /// Echoes awaited for keystrokes of the window: one per keystroke, or
    /// one per line in LINEMODE.
    #[serde(default)]
    pub awaited: u64,
    /// Whether latency is per line (LINEMODE) rather than per keystroke.
    #[serde(default)]
    pub per_line: bool,
    pub echoes: u64,
    /// Echoes awaited in the window that had not come [`ECHO_DRAIN`]
    /// after it closed.
    pub unechoed: u64,
    pub echo_p50_ms: f64,
    pub echo_p99_ms: f64,
    pub echo_max_ms: f64,
    pub echo_mean_ms: f64,
    /// How late keystrokes were sent against their schedule (the generator's own lag).
    pub send_lag_p99_ms: f64,
    pub send_lag_max_ms: f64,
    /// The generator thread's CPU time over the window, seconds.
    pub own_cpu_s: f64,
    /// CPU time of the client programs (e.g. `ssh`) over the window,
    /// seconds; zero when the generator speaks the protocol itself.
    #[serde(default)]
    pub client_programs_cpu_s: f64,
    pub window_s: f64,
    /// TCP_INFO of the first session's socket at the window's end (RTT,
    /// MSS, path MTU of the path typed across); none for client programs.
    #[serde(default)]
    pub tcp_info: Option<crate::measure::tcpinfo::TcpInfo>,
    /// TCP segments the sessions' own sockets sent and received over the
    /// window (TCP_INFO's `tcpi_segs_out` and `tcpi_segs_in`, pure ACKs
    /// included): the run's packets, whatever else the host carries. None
    /// when a session runs through a client program or the kernel lacks
    /// the counters.
    #[serde(default)]
    pub segments: Option<SessionSegments>,
}

/// Segments of the typing sessions' sockets over the measured window.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionSegments {
    /// Sent by the typists: what the server received.
    pub typed: u64,
    /// Received by the typists: what the server sent.
    pub echoed: u64,
}

/// The sessions' (sent, received) segment counters now; None unless every
/// session is a socket whose kernel reports them.
fn session_segments(users: &[User]) -> Option<(u64, u64)> {
    users.iter().try_fold((0u64, 0u64), |(out, inn), user| {
        let Link::Socket(stream) = &user.link else {
            return None;
        };
        let info = crate::measure::tcpinfo::TcpInfo::read(stream.as_fd()).ok()?;
        Some((
            out + u64::from(info.segs_out?),
            inn + u64::from(info.segs_in?),
        ))
    })
}

impl TypistReport {
    /// The generator's share of one core over the window.
    pub fn own_cpu_pct(&self) -> f64 {
        100.0 * self.own_cpu_s / self.window_s.max(1e-9)
    }
}
use crate::measure::schedstat::tree_cpu_ns;
use hdrhistogram::Histogram;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What a remote command prints once it runs, so a session driven through
/// a client program knows the login is done and typing may start.
pub const READY_MARKER: &[u8] = b"NETLAB-READY";

/// How long after the window the typing end still awaits its keystrokes'
/// echoes before it counts them lost: past the 1 s at which the verdict
/// already reads unusable, so that a late echo is judged by its delay.
pub const ECHO_DRAIN: Duration = Duration::from_secs(2);

/// How each simulated user reaches the server.
#[derive(Debug, Clone)]
pub enum Connect {
    /// netlab's own client logic on a TCP socket; `linemode` asks a TELNET
    /// server for LINEMODE EDIT and types whole lines.
    Socket {
        server: SocketAddr,
        protocol: Protocol,
        linemode: bool,
        /// Through an agent, to netlab's own server: the run token, sent first.
        token: Option<crate::endpoint::protocol::Token>,
    },
    /// A real client program (argv) on a pty of its own, e.g. `ssh -tt`.
    Program { argv: Vec<String> },
}

/// What the generator does.
#[derive(Debug, Clone)]
pub struct TypistConfig {
    pub connect: Connect,
    pub users: usize,
    /// Characters per second per user.
    pub rate: f64,
    /// Exponential gaps (mean 1/rate) instead of even spacing.
    pub poisson: bool,
    /// Text the users type; line ends become Enter.
    pub corpus: Vec<u8>,
    /// Typing before the measured window (not counted).
    pub warmup: Duration,
    /// The measured window.
    pub duration: Duration,
    /// No echo to any session for this long while keystrokes await one
    /// ends the run as stalled (`--stall-timeout`).
    pub stall: crate::endpoint::stall::StallBound,
}

enum Client {
    Telnet(Box<TelnetClient>),
    Rlogin(RloginClient),
    /// A program on a pty: the bytes are the terminal's.
    Program,
}

/// A session's descriptor: a socket, or the master of a client program's pty.
enum Link {
    Socket(TcpStream),
    Program { master: File, pty: Pty },
}

impl Link {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Link::Socket(s) => s.read(buf),
            Link::Program { master, .. } => master.read(buf),
        }
    }

    fn write(&mut self, bytes: &[u8]) -> io::Result<usize> {
        match self {
            Link::Socket(s) => s.write(bytes),
            Link::Program { master, .. } => master.write(bytes),
        }
    }

    fn write_all(&mut self, bytes: &[u8]) -> io::Result<()> {
        match self {
            Link::Socket(s) => s.write_all(bytes),
            Link::Program { master, .. } => master.write_all(bytes),
        }
    }

    fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        match self {
            Link::Socket(s) => s.as_fd(),
            Link::Program { master, .. } => master.as_fd(),
        }
    }

    fn program_pid(&self) -> Option<u32> {
        match self {
            Link::Socket(_) => None,
            Link::Program { pty, .. } => Some(pty.child.id()),
        }
    }
}

struct User {
    link: Link,
    client: Client,
    /// LINEMODE: type whole lines; the line being edited locally.
    linemode: bool,
    line: Vec<u8>,
    /// A program session: the tail of its output before the ready marker.
    seen: Vec<u8>,
    ready: bool,
    /// Scratch for terminal data and protocol replies, reused across reads
    /// so the generator does not allocate per read.
    data: Vec<u8>,
    reply: Vec<u8>,
    /// Typed, not yet echoed: expected byte, send time, and whether it
    /// counts (sent in the measured window).
    pending: VecDeque<(u8, Instant, bool)>,
    /// Position in the corpus.
    cursor: usize,
    broken: Option<String>,
}

fn thread_cpu_s() -> f64 {
    crate::measure::rusage::thread_cpu_ns() as f64 / 1e9
}

/// The corpus as keystrokes: printable bytes, line ends as CR, tabs as
/// spaces; other control bytes dropped (they would mean something to the
/// terminal).
pub fn keystrokes_of(text: &[u8]) -> Vec<u8> {
    text.iter()
        .filter_map(|&b| match b {
            b'\n' => Some(b'\r'),
            b'\t' => Some(b' '),
            0x20..=0x7e => Some(b),
            _ => None,
        })
        .collect()
}

/// The gap before a user's next keystroke.
fn gap(rate: f64, poisson: bool) -> Duration {
    let mean = 1.0 / rate;
    if poisson {
        // Inverse transform of a uniform in (0, 1].
        let u = 1.0 - fastrand::f64();
        Duration::from_secs_f64(-mean * u.ln())
    } else {
        Duration::from_secs_f64(mean)
    }
}

impl User {
    fn open(config: &TypistConfig, index: usize) -> io::Result<User> {
        let (link, client, linemode) = match &config.connect {
            Connect::Socket {
                server,
                protocol,
                linemode,
                token,
            } => {
                let mut stream = TcpStream::connect(server)?;
                crate::endpoint::guard::present(&mut stream, token.as_ref())?;
                stream.set_nodelay(true)?;
                let client = match protocol {
                    Protocol::Telnet => {
                        Client::Telnet(Box::new(TelnetClient::new(*linemode, 24, 80)))
                    }
                    Protocol::Rlogin => {
                        let (client, startup) = RloginClient::new("typist", "vt100", 9600, 24, 80);
                        stream.write_all(&startup)?;
                        Client::Rlogin(client)
                    }
                };
                stream.set_nonblocking(true)?;
                (Link::Socket(stream), client, *linemode)
            }
            Connect::Program { argv } => {
                let pty = pty::spawn(argv, 24, 80)?;
                super::conn::set_nonblocking(pty.master.as_fd(), true)?;
                let master = File::from(pty.master.try_clone()?);
                (Link::Program { master, pty }, Client::Program, false)
            }
        };
        Ok(User {
            link,
            client,
            linemode,
            line: Vec::new(),
            seen: Vec::new(),
            ready: false,
            data: Vec::new(),
            reply: Vec::new(),
            pending: VecDeque::new(),
            // Users start at different places in the corpus.
            cursor: index.wrapping_mul(7919) % config.corpus.len().max(1),
            broken: None,
        })
    }

    /// Reads what arrived; appends the latency of each echo completed (if
    /// its keystroke counts).
    fn receive(&mut self, buf: &mut [u8], now: Instant, latencies: &mut Vec<Duration>) {
        loop {
            let n = match self.link.read(buf) {
                Ok(0) => {
                    self.broken = Some("server closed the session".into());
                    return;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                // A pty master reads EIO once the program on it has exited.
                Err(e)
                    if self.link.program_pid().is_some() && e.raw_os_error() == Some(libc::EIO) =>
                {
                    self.broken = Some("the client program exited".into());
                    return;
                }
                Err(e) => {
                    self.broken = Some(e.to_string());
                    return;
                }
            };
            self.data.clear();
            self.reply.clear();
            match &mut self.client {
                Client::Telnet(t) => {
                    t.from_server(&buf[..n], &mut self.data, &mut self.reply);
                    self.ready = if self.linemode {
                        t.linemode()
                    } else {
                        t.server_echoes()
                    };
                }
                Client::Rlogin(r) => {
                    r.from_server(&buf[..n], &mut self.data);
                    self.ready = r.accepted;
                }
                Client::Program => {
                    self.data.extend_from_slice(&buf[..n]);
                    if !self.ready {
                        self.seen.extend_from_slice(&buf[..n]);
                        self.ready = self
                            .seen
                            .windows(READY_MARKER.len())
                            .any(|w| w == READY_MARKER);
                        let keep = self.seen.len().min(READY_MARKER.len());
                        self.seen.drain(..self.seen.len() - keep);
                    }
                }
            }
            if !self.reply.is_empty() {
                // Negotiation replies are small; the socket buffer takes them.
                if let Err(e) = self.link.write_all(&self.reply) {
                    self.broken = Some(e.to_string());
                    return;
                }
            }
            for &b in &self.data {
                if let Some(&(expected, sent, counts)) = self.pending.front()
                    && b == expected
                {
                    if counts {
                        latencies.push(now.saturating_duration_since(sent));
                    }
                    self.pending.pop_front();
                }
            }
        }
    }

    /// Types the next key; returns whether an echo is now awaited (every
    /// key, or in LINEMODE only Enter, which sends the line).
    fn type_one(&mut self, corpus: &[u8], now: Instant, counts: bool) -> bool {
        let key = corpus[self.cursor];
        self.cursor = (self.cursor + 1) % corpus.len();
        let mut wire = Vec::with_capacity(2);
        let expected = match &self.client {
            Client::Telnet(t) if self.linemode => {
                // Local editing: the key goes to the line; Enter sends it,
                // and `cat`'s copy of it ends with LF.
                self.line.push(key);
                if key != b'\r' {
                    return false;
                }
                t.keystrokes(&self.line, &mut wire);
                self.line.clear();
                b'\n'
            }
            Client::Telnet(t) => {
                t.keystrokes(&[key], &mut wire);
                key
            }
            Client::Rlogin(_) | Client::Program => {
                wire.push(key);
                key
            }
        };
        match self.link.write(&wire) {
            Ok(n) if n == wire.len() => {
                self.pending.push_back((expected, now, counts));
                true
            }
            Ok(_) => {
                self.broken = Some("a keystroke did not fit the socket buffer".into());
                false
            }
            Err(e) => {
                self.broken = Some(e.to_string());
                false
            }
        }
    }
}

/// CPU time of every user's client program (and its children), ns.
fn programs_cpu_ns(users: &[User]) -> u64 {
    users
        .iter()
        .filter_map(|u| u.link.program_pid())
        .map(tree_cpu_ns)
        .sum()
}

/// A moment of a typing run that the caller hears of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Moment {
    /// Every session has logged in (or given up): warm-up starts.
    LoggedIn,
    WindowOpen,
    WindowClose,
}

/// Opens every session, types for warm-up plus the window, and reports
/// the window. `on_moment` hears when every session has logged in, and as
/// the window opens and closes, so a caller can put a budget on the
/// server once logging in is over and sample the machine over exactly
/// the window. `stop` ends it early (Ctrl-C); what was measured is kept.
pub fn run(
    config: &TypistConfig,
    stop: &Arc<AtomicBool>,
    on_moment: &dyn Fn(Moment),
) -> io::Result<TypistReport> {
    if config.users == 0 {
        return Err(io::Error::other("zero users"));
    }
    let corpus = keystrokes_of(&config.corpus);
    if corpus.is_empty() {
        return Err(io::Error::other("the corpus has no typeable characters"));
    }
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
    let mut users = open_sessions(config, &epoll)?;
    let mut report = TypistReport {
        users: config.users,
        ..Default::default()
    };
    let mut buf = vec![0u8; 16 * 1024];
    let mut events = vec![EpollEvent::empty(); 1024];
    log_in(&mut users, &epoll, &mut events, &mut buf, stop);
    on_moment(Moment::LoggedIn);

    let interval = Duration::from_secs_f64(1.0 / config.rate);
    let start = Instant::now();
    let window_start = start + config.warmup;
    let end = window_start + config.duration;
    let typing = Typing {
        corpus: &corpus,
        window_start,
        interval,
        config,
    };
    let mut due: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::with_capacity(users.len());
    for i in 0..users.len() {
        // Phases spread evenly over one interval, so users do not type in lockstep.
        let phase = interval.mul_f64(i as f64 / users.len() as f64);
        due.push(Reverse((start + phase, i)));
    }
    let mut echo = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
    let mut lag = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
    let mut latencies = Vec::new();
    let mut at_window: Option<AtWindow> = None;
    let mut last_echo = Instant::now();
    loop {
        let now = Instant::now();
        if now >= end || stop.load(Ordering::Relaxed) {
            break;
        }
        if at_window.is_none() && now >= window_start {
            at_window = Some(AtWindow::now(&users));
            on_moment(Moment::WindowOpen);
        }
        typing.fire_due(now, &mut due, &mut users, &mut report, &mut lag);
        let wait = due
            .peek()
            .map(|Reverse((at, _))| at.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(100))
            .min(end.saturating_duration_since(Instant::now()));
        // Round up to whole milliseconds: epoll's resolution.
        let ms = wait.as_micros().div_ceil(1000).min(1000) as u16;
        let mut echoes = Echoes {
            histogram: &mut echo,
            count: &mut report.echoes,
            latencies: &mut latencies,
        };
        let came = echoes.collect(&epoll, &mut events, &mut users, &mut buf, ms)?;
        let now = Instant::now();
        if came {
            last_echo = now;
        }
        if now.saturating_duration_since(last_echo) > config.stall.duration()
            && let Some(stalled) = stalled(&users, config.stall)
        {
            return Err(io::Error::other(stalled));
        }
    }
    if let Some(at) = &at_window {
        at.close(&users, &mut report);
        on_moment(Moment::WindowClose);
    }
    let window = Instant::now().saturating_duration_since(window_start);
    report.own_cpu_s = at_window.map_or(0.0, |at| thread_cpu_s() - at.cpu_s);
    // The window's last keystrokes are still on their way: their echoes
    // are awaited a while longer (no typing, the CPU no longer counted),
    // so that on a slow or loaded path they count as slow, not as lost.
    let mut echoes = Echoes {
        histogram: &mut echo,
        count: &mut report.echoes,
        latencies: &mut latencies,
    };
    echoes.drain(&epoll, &mut events, &mut users, &mut buf, stop)?;
    report.window_s = window.as_secs_f64();
    finish(&mut report, &users, &echo, &lag);
    Ok(report)
}

/// What the window's accounts start from, read as it opens: the typist's
/// own CPU, its client programs' and the sessions' segments.
struct AtWindow {
    cpu_s: f64,
    programs_ns: u64,
    segments: Option<(u64, u64)>,
}

impl AtWindow {
    fn now(users: &[User]) -> Self {
        AtWindow {
            cpu_s: thread_cpu_s(),
            programs_ns: programs_cpu_ns(users),
            segments: session_segments(users),
        }
    }

    /// The window's share of its client programs' CPU and of the segments
    /// typed and echoed, as it closes.
    fn close(&self, users: &[User], report: &mut TypistReport) {
        report.client_programs_cpu_s =
            programs_cpu_ns(users).saturating_sub(self.programs_ns) as f64 / 1e9;
        report.segments =
            self.segments
                .zip(session_segments(users))
                .map(|((out0, in0), (out1, in1))| SessionSegments {
                    typed: out1.saturating_sub(out0),
                    echoed: in1.saturating_sub(in0),
                });
    }
}

/// What a keystroke is typed from: the corpus, when the window opens, and
/// the pace.
struct Typing<'a> {
    corpus: &'a [u8],
    window_start: Instant,
    interval: Duration,
    config: &'a TypistConfig,
}

impl Typing<'_> {
    /// Types every keystroke that is due by `now`, each user's next one
    /// then scheduled (an interval on, or a Poisson gap). Warm-up
    /// keystrokes are typed but not counted; a window keystroke counts
    /// with how late it was typed (`lag`).
    fn fire_due(
        &self,
        now: Instant,
        due: &mut BinaryHeap<Reverse<(Instant, usize)>>,
        users: &mut [User],
        report: &mut TypistReport,
        lag: &mut Histogram<u64>,
    ) {
        while let Some(&Reverse((at, i))) = due.peek() {
            if at > now {
                break;
            }
            due.pop();
            let user = &mut users[i];
            if user.broken.is_none() {
                let in_window = at >= self.window_start;
                let awaits = user.type_one(self.corpus, now, in_window);
                if in_window && user.broken.is_none() {
                    report.keystrokes += 1;
                    report.awaited += u64::from(awaits);
                    lag.saturating_record(
                        now.saturating_duration_since(at).as_micros().max(1) as u64
                    );
                }
            }
            let next = at
                + if self.config.poisson {
                    gap(self.config.rate, true)
                } else {
                    self.interval
                };
            due.push(Reverse((next, i)));
        }
    }
}

/// Opens every session and watches each for input.
fn open_sessions(config: &TypistConfig, epoll: &Epoll) -> io::Result<Vec<User>> {
    let mut users = Vec::with_capacity(config.users);
    for i in 0..config.users {
        match User::open(config, i) {
            Ok(user) => {
                epoll.add(
                    user.link.fd(),
                    EpollEvent::new(EpollFlags::EPOLLIN, i as u64),
                )?;
                users.push(user);
            }
            Err(e) => return Err(io::Error::other(format!("session {i} did not open: {e}"))),
        }
    }
    Ok(users)
}

/// Lets every session negotiate before typing starts; a session that has
/// not finished within the wait (10 s and 20 ms a session) is broken.
fn log_in(
    users: &mut [User],
    epoll: &Epoll,
    events: &mut [EpollEvent],
    buf: &mut [u8],
    stop: &AtomicBool,
) {
    let mut sink = Vec::new();
    let deadline =
        Instant::now() + Duration::from_secs(10) + Duration::from_millis(20 * users.len() as u64);
    while users.iter().any(|u| !u.ready && u.broken.is_none()) && Instant::now() < deadline {
        let n = epoll.wait(events, 100u16).unwrap_or(0);
        for event in &events[..n] {
            users[event.data() as usize].receive(buf, Instant::now(), &mut sink);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    for user in users {
        if !user.ready && user.broken.is_none() {
            user.broken = Some("negotiation did not finish within the wait".into());
        }
    }
}

/// The report's account of the sessions and the figures of the echoes'
/// and the send lag's histograms.
fn finish(report: &mut TypistReport, users: &[User], echo: &Histogram<u64>, lag: &Histogram<u64>) {
    report.per_line = users.iter().any(|u| u.linemode);
    report.tcp_info = users.iter().find_map(|u| match &u.link {
        Link::Socket(stream) => crate::measure::tcpinfo::TcpInfo::read(stream.as_fd()).ok(),
        Link::Program { .. } => None,
    });
    report.unechoed = users
        .iter()
        .map(|u| u.pending.iter().filter(|(_, _, counts)| *counts).count() as u64)
        .sum();
    for u in users {
        if let Some(why) = &u.broken {
            report.failed_sessions += 1;
            if report.first_failure.is_none() {
                report.first_failure = Some(why.clone());
            }
        }
    }
    let ms = |us: u64| us as f64 / 1000.0;
    if !echo.is_empty() {
        report.echo_p50_ms = ms(echo.value_at_quantile(0.5));
        report.echo_p99_ms = ms(echo.value_at_quantile(0.99));
        report.echo_max_ms = ms(echo.max());
        report.echo_mean_ms = echo.mean() / 1000.0;
    }
    if !lag.is_empty() {
        report.send_lag_p99_ms = ms(lag.value_at_quantile(0.99));
        report.send_lag_max_ms = ms(lag.max());
    }
}

/// Where the echoes that come back are recorded.
struct Echoes<'a> {
    histogram: &'a mut Histogram<u64>,
    count: &'a mut u64,
    latencies: &'a mut Vec<Duration>,
}

impl Echoes<'_> {
    /// Awaits the echoes still owed after the window, up to [`ECHO_DRAIN`]
    /// (no typing meanwhile), or until `stop`.
    fn drain(
        &mut self,
        epoll: &Epoll,
        events: &mut [EpollEvent],
        users: &mut [User],
        buf: &mut [u8],
        stop: &AtomicBool,
    ) -> io::Result<()> {
        let drain_end = Instant::now() + ECHO_DRAIN;
        let awaiting = |users: &[User]| {
            users
                .iter()
                .any(|u| u.broken.is_none() && u.pending.iter().any(|(_, _, counts)| *counts))
        };
        while awaiting(users) && !stop.load(Ordering::Relaxed) {
            let left = drain_end.saturating_duration_since(Instant::now());
            if left.is_zero() {
                break;
            }
            let ms = left.as_millis().clamp(1, 100) as u16;
            self.collect(epoll, events, users, buf, ms)?;
        }
        Ok(())
    }

    /// Waits up to `ms` for the sessions' output, records each echo that
    /// came, and stops watching a session that broke: whether any came.
    fn collect(
        &mut self,
        epoll: &Epoll,
        events: &mut [EpollEvent],
        users: &mut [User],
        buf: &mut [u8],
        ms: u16,
    ) -> io::Result<bool> {
        let n = match epoll.wait(events, ms) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(e.into()),
        };
        let now = Instant::now();
        let mut any = false;
        for event in &events[..n] {
            let user = &mut users[event.data() as usize];
            self.latencies.clear();
            user.receive(buf, now, self.latencies);
            for l in self.latencies.iter() {
                self.histogram
                    .saturating_record(l.as_micros().max(1) as u64);
                *self.count += 1;
            }
            any |= !self.latencies.is_empty();
            if user.broken.is_some() {
                let _ = epoll.delete(user.link.fd());
            }
        }
        Ok(any)
    }
}

/// The typing end's stall, when keystrokes await echoes that no session
/// has had for the whole bound: how many, in how many sessions, and the
/// first waiting session's connection as the kernel sees it.
fn stalled(users: &[User], bound: StallBound) -> Option<Stalled> {
    let waiting: Vec<&User> = users
        .iter()
        .filter(|u| u.broken.is_none() && !u.pending.is_empty())
        .collect();
    let first = waiting.first()?;
    let keystrokes: usize = waiting.iter().map(|u| u.pending.len()).sum();
    let connection = match &first.link {
        Link::Socket(stream) => connection_words(stream.as_fd()),
        Link::Program { .. } => "through a client program (no socket of its own)".into(),
    };
    Some(Stalled {
        side: "typing end",
        doing: "waiting for echoes",
        seconds: bound.seconds(),
        connection: format!(
            "{keystrokes} keystrokes unechoed in {} of {} sessions; the first's {connection}",
            waiting.len(),
            users.len()
        ),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn corpus_becomes_keystrokes() {
        assert_eq!(keystrokes_of(b"ab\tc\nd\x07\xff"), b"ab c\rd");
    }

    #[test]
    fn poisson_gaps_average_the_rate() {
        let n = 20_000;
        let total: f64 = (0..n).map(|_| gap(5.0, true).as_secs_f64()).sum();
        let mean = total / n as f64;
        assert!((mean - 0.2).abs() < 0.01, "mean gap {mean}");
        assert_eq!(gap(5.0, false), Duration::from_millis(200));
    }
}
