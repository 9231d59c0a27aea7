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

use super::client::{RloginClient, TelnetClient};
use super::protocol::Protocol;
use hdrhistogram::Histogram;
use nix::sys::epoll::{Epoll, EpollCreateFlags, EpollEvent, EpollFlags};
use serde::{Deserialize, Serialize};
use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

/// What the generator does.
#[derive(Debug, Clone)]
pub struct TypistConfig {
    pub server: SocketAddr,
    pub protocol: Protocol,
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
}

/// What the generator saw in the measured window.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TypistReport {
    pub users: usize,
    /// Sessions that did not open or broke during the run, with the first reason.
    pub failed_sessions: usize,
    pub first_failure: Option<String>,
    pub keystrokes: u64,
    pub echoes: u64,
    /// Keystrokes sent in the window whose echo never came.
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
    pub window_s: f64,
}

impl TypistReport {
    /// The generator's share of one core over the window.
    pub fn own_cpu_pct(&self) -> f64 {
        100.0 * self.own_cpu_s / self.window_s.max(1e-9)
    }
}

enum Client {
    Telnet(Box<TelnetClient>),
    Rlogin(RloginClient),
}

struct User {
    stream: TcpStream,
    client: Client,
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
    // SAFETY: getrusage fills the struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
    tv(usage.ru_utime) + tv(usage.ru_stime)
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
        let mut stream = TcpStream::connect(config.server)?;
        stream.set_nodelay(true)?;
        let client = match config.protocol {
            Protocol::Telnet => Client::Telnet(Box::new(TelnetClient::new(false, 24, 80))),
            Protocol::Rlogin => {
                let (client, startup) = RloginClient::new("typist", "vt100", 9600, 24, 80);
                stream.write_all(&startup)?;
                Client::Rlogin(client)
            }
        };
        stream.set_nonblocking(true)?;
        Ok(User {
            stream,
            client,
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
            let n = match self.stream.read(buf) {
                Ok(0) => {
                    self.broken = Some("server closed the session".into());
                    return;
                }
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
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
                    self.ready = t.server_echoes();
                }
                Client::Rlogin(r) => {
                    r.from_server(&buf[..n], &mut self.data);
                    self.ready = r.accepted;
                }
            }
            if !self.reply.is_empty() {
                // Negotiation replies are small; the socket buffer takes them.
                if let Err(e) = self.stream.write_all(&self.reply) {
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

    fn type_one(&mut self, corpus: &[u8], now: Instant, counts: bool) {
        let key = corpus[self.cursor];
        self.cursor = (self.cursor + 1) % corpus.len();
        let mut wire = Vec::with_capacity(2);
        match &self.client {
            Client::Telnet(t) => t.keystrokes(&[key], &mut wire),
            Client::Rlogin(_) => wire.push(key),
        }
        match self.stream.write(&wire) {
            Ok(n) if n == wire.len() => self.pending.push_back((key, now, counts)),
            Ok(_) => self.broken = Some("a keystroke did not fit the socket buffer".into()),
            Err(e) => self.broken = Some(e.to_string()),
        }
    }
}

/// Opens every session, types for warm-up plus the window, and reports
/// the window. `on_window(true)` is called as the window opens and
/// `on_window(false)` as it closes, so a caller can sample the machine over
/// exactly that time. `stop` ends it early (Ctrl-C); what was measured is kept.
pub fn run(
    config: &TypistConfig,
    stop: &Arc<AtomicBool>,
    on_window: &dyn Fn(bool),
) -> io::Result<TypistReport> {
    if config.users == 0 {
        return Err(io::Error::other("zero users"));
    }
    let corpus = keystrokes_of(&config.corpus);
    if corpus.is_empty() {
        return Err(io::Error::other("the corpus has no typeable characters"));
    }
    let epoll = Epoll::new(EpollCreateFlags::EPOLL_CLOEXEC)?;
    let mut users = Vec::with_capacity(config.users);
    let mut report = TypistReport {
        users: config.users,
        ..Default::default()
    };
    for i in 0..config.users {
        match User::open(config, i) {
            Ok(user) => {
                epoll.add(&user.stream, EpollEvent::new(EpollFlags::EPOLLIN, i as u64))?;
                users.push(user);
            }
            Err(e) => return Err(io::Error::other(format!("session {i} did not open: {e}"))),
        }
    }
    let mut buf = vec![0u8; 16 * 1024];
    let mut events = vec![EpollEvent::empty(); 1024];
    let mut sink = Vec::new();
    // Let every session negotiate before typing starts.
    let deadline =
        Instant::now() + Duration::from_secs(10) + Duration::from_millis(20 * config.users as u64);
    while users.iter().any(|u| !u.ready && u.broken.is_none()) && Instant::now() < deadline {
        let n = epoll.wait(&mut events, 100u16).unwrap_or(0);
        for event in &events[..n] {
            users[event.data() as usize].receive(&mut buf, Instant::now(), &mut sink);
        }
        if stop.load(Ordering::Relaxed) {
            break;
        }
    }
    for user in &mut users {
        if !user.ready && user.broken.is_none() {
            user.broken = Some("negotiation did not finish within the wait".into());
        }
    }

    let interval = Duration::from_secs_f64(1.0 / config.rate);
    let start = Instant::now();
    let window_start = start + config.warmup;
    let end = window_start + config.duration;
    let mut due: BinaryHeap<Reverse<(Instant, usize)>> = BinaryHeap::with_capacity(users.len());
    for i in 0..users.len() {
        // Phases spread evenly over one interval, so users do not type in lockstep.
        let phase = interval.mul_f64(i as f64 / users.len() as f64);
        due.push(Reverse((start + phase, i)));
    }
    let mut echo = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
    let mut lag = Histogram::<u64>::new_with_bounds(1, 60_000_000, 3).expect("bounds");
    let mut latencies = Vec::new();
    let mut cpu_at_window: Option<f64> = None;
    loop {
        let now = Instant::now();
        if now >= end || stop.load(Ordering::Relaxed) {
            break;
        }
        if cpu_at_window.is_none() && now >= window_start {
            cpu_at_window = Some(thread_cpu_s());
            on_window(true);
        }
        // Fire every keystroke that is due.
        while let Some(&Reverse((at, i))) = due.peek() {
            if at > now {
                break;
            }
            due.pop();
            let user = &mut users[i];
            if user.broken.is_none() {
                // Warm-up keystrokes are typed but not counted.
                let in_window = at >= window_start;
                user.type_one(&corpus, now, in_window);
                if in_window && user.broken.is_none() {
                    report.keystrokes += 1;
                    lag.saturating_record(
                        now.saturating_duration_since(at).as_micros().max(1) as u64
                    );
                }
            }
            let next = at
                + if config.poisson {
                    gap(config.rate, true)
                } else {
                    interval
                };
            due.push(Reverse((next, i)));
        }
        let wait = due
            .peek()
            .map(|Reverse((at, _))| at.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_millis(100))
            .min(end.saturating_duration_since(Instant::now()));
        // Round up to whole milliseconds: epoll's resolution.
        let ms = wait.as_micros().div_ceil(1000).min(1000) as u16;
        let n = match epoll.wait(&mut events, ms) {
            Ok(n) => n,
            Err(nix::errno::Errno::EINTR) => 0,
            Err(e) => return Err(e.into()),
        };
        let now = Instant::now();
        for event in &events[..n] {
            let user = &mut users[event.data() as usize];
            latencies.clear();
            user.receive(&mut buf, now, &mut latencies);
            for l in &latencies {
                echo.saturating_record(l.as_micros().max(1) as u64);
                report.echoes += 1;
            }
            if user.broken.is_some() {
                let _ = epoll.delete(&user.stream);
            }
        }
    }
    if cpu_at_window.is_some() {
        on_window(false);
    }
    let window = Instant::now().saturating_duration_since(window_start);
    report.own_cpu_s = cpu_at_window.map_or(0.0, |c| thread_cpu_s() - c);
    report.window_s = window.as_secs_f64();
    report.unechoed = users
        .iter()
        .map(|u| u.pending.iter().filter(|(_, _, counts)| *counts).count() as u64)
        .sum();
    for u in &users {
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
    Ok(report)
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
