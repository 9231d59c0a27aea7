//! netlab as an iperf3 client: a TCP or UDP test against any stock `iperf3 -s`
//! through iperf3's own control protocol ([`crate::wire::iperf3`]), with
//! `-P`, `-R` and `--bidir`, by time or by bytes. The data streams run on
//! threads of this process, so netlab's end measures what it always does;
//! the server's figures come back in its results.
//!
//! Invariants: the server is trusted for nothing. Every wait on it is
//! bounded (`Iperf3Spec::timeout`) and so is the whole exchange (the
//! test's duration and four timeouts), however its bytes trickle; its
//! states are taken once each, in order ([`Expect`]), so a repeated
//! CREATE_STREAMS opens no more streams than asked and a repeated
//! TEST_RUNNING runs no second test; every stream thread is joined
//! before [`run`] returns.

use crate::wire::iperf3::{
    self, COOKIE_SIZE, Cookie, Expect, Iperf3Error, Params, Results, State, Step, StreamResult,
};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One test against an iperf3 server.
#[derive(Debug, Clone, PartialEq)]
pub struct Iperf3Spec {
    pub server: SocketAddr,
    /// Streams each way (`-P`).
    pub parallel: u32,
    /// The server sends (`-R`).
    pub reverse: bool,
    /// Both send (`--bidir`): `parallel` streams each way.
    pub bidir: bool,
    /// How long the test runs (by time), or at most, by bytes.
    pub duration: Duration,
    /// Ends when this many bytes were sent or received (`-n`).
    pub bytes: Option<u64>,
    /// Bytes per write (iperf3's TCP default: 128 KiB), or per UDP datagram.
    pub len: usize,
    /// UDP at this many bits a second per stream, instead of TCP.
    pub udp_bps: Option<u64>,
    /// The longest netlab waits for the server at any step.
    pub timeout: Duration,
    /// Every stream's counts are taken this often while the test runs
    /// (iperf3's `-i`, 1 s by default); `None`: only at its end.
    pub interval: Option<Duration>,
}

impl Iperf3Spec {
    /// The parameters iperf3's client would write for this test.
    pub fn params(&self) -> Params {
        Params {
            tcp: self.udp_bps.is_none().then_some(true),
            udp: self.udp_bps.is_some().then_some(true),
            bandwidth: self.udp_bps,
            omit: 0,
            time: if self.bytes.is_some() {
                0
            } else {
                self.duration.as_secs().max(1)
            },
            num: self.bytes.unwrap_or(0),
            blockcount: 0,
            parallel: self.parallel,
            reverse: self.reverse.then_some(true),
            bidirectional: self.bidir.then_some(true),
            len: Some(self.len as u64),
            pacing_timer: Some(1000),
            client_version: iperf3::CLIENT_VERSION.into(),
            ..Params::default()
        }
    }
}

/// One data stream as netlab's end saw it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LocalStream {
    /// iperf3's stream id (1, 3, 4, ...: iperf3 skips 2).
    pub id: i64,
    /// Whether netlab sent on it.
    pub sender: bool,
    pub bytes: u64,
    pub seconds: f64,
    /// UDP: datagrams sent, or the highest sequence number received.
    pub packets: u64,
    /// UDP, received: datagrams missing (iperf3's count: gaps, less those
    /// that came late) and the RFC 1889 jitter, seconds.
    pub lost: i64,
    pub jitter_s: f64,
    /// TCP: the kernel's account of netlab's socket (retransmits,
    /// congestion window, smoothed RTT and its variation, the chrono
    /// accounting): at an interval's end, or when the test ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<crate::measure::tcpinfo::TcpInfo>,
    /// What the stream's thread spent, read by the thread as the test
    /// ended (none in an interval's counts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadAccount>,
}

/// A stream's thread over the test, as it read itself at the test's end.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ThreadAccount {
    /// `getrusage(RUSAGE_THREAD)` from TEST_RUNNING to TEST_END.
    pub usage: crate::measure::rusage::ProcessUsage,
    /// Runnable but waiting for a CPU, seconds (schedstat).
    pub run_delay_s: Option<f64>,
    /// `read(2)`s or `write(2)`s on the data socket.
    pub calls: u64,
    /// The socket's buffer the kernel reported (SO_SNDBUF for a sender,
    /// SO_RCVBUF for a receiver), bytes.
    pub socket_buffer: Option<u64>,
    /// TCP: the socket's congestion control.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_control: Option<String>,
}

/// A data connection as it was opened: iperf3's `connected` entry.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Connected {
    pub id: i64,
    /// The descriptor (iperf3 reports its own as `socket`).
    pub socket: i32,
    pub local: Option<SocketAddr>,
    pub sender: bool,
    /// TCP: the maximum segment size (`TCP_MAXSEG`) as it opened.
    pub mss: Option<u32>,
    /// The socket's buffers as the kernel reported them as it opened.
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
}

/// Every stream's counts, cumulative since TEST_RUNNING, at the end of one
/// interval (`start_s` to `end_s` after TEST_RUNNING).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Tick {
    pub start_s: f64,
    pub end_s: f64,
    pub streams: Vec<LocalStream>,
}

/// What a test reports while it runs.
#[derive(Debug)]
pub enum Progress<'a> {
    /// The streams are open; the test starts.
    Started {
        connected: &'a [Connected],
        cookie: &'a str,
    },
    /// An interval ended.
    Interval(&'a Tick),
}

/// A finished test (or one that ended early: `incomplete`): both ends'
/// accounts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Iperf3Run {
    pub params: Params,
    /// The test's cookie, as iperf3 reports it.
    pub cookie: String,
    pub connected: Vec<Connected>,
    /// netlab's counts when the test ended.
    pub streams: Vec<LocalStream>,
    /// netlab's counts at each interval's end (empty without intervals).
    pub intervals: Vec<Tick>,
    /// What netlab reported to the server.
    pub client: Results,
    /// What the server reported (none when the test ended early).
    pub server: Option<Results>,
    /// From TEST_RUNNING to TEST_END.
    pub seconds: f64,
    /// netlab's process over the test (all its threads).
    pub usage: crate::measure::rusage::ProcessUsage,
    /// Why the test ended before the results were exchanged: the figures
    /// are netlab's own up to then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

/// Why a test against an iperf3 server did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach {0}: {1}")]
    Connect(SocketAddr, io::Error),
    #[error("{0} is not an iperf3 server: {1}")]
    NotIperf3(SocketAddr, String),
    #[error("{0}: the server is busy running a test (iperf3's ACCESS_DENIED); try again later")]
    Busy(SocketAddr),
    #[error("{addr}: the server refused the test: {text} (errno {errno})")]
    Server {
        addr: SocketAddr,
        text: String,
        errno: i32,
    },
    #[error("{0}: the server ended the test (SERVER_TERMINATE)")]
    Terminated(SocketAddr),
    #[error("{0}: {1}")]
    OldServer(SocketAddr, String),
    #[error("{0}: {1}")]
    Protocol(SocketAddr, Iperf3Error),
    #[error("{0}: {1}")]
    Io(SocketAddr, String),
    #[error("{0}: stopped (SIGTERM or Ctrl-C)")]
    Interrupted(SocketAddr),
}

/// A control connection and where it is in the test.
struct Control {
    socket: TcpStream,
    addr: SocketAddr,
    /// The longest wait for any one answer.
    timeout: Duration,
    /// The end of the whole exchange's allowance, however the server
    /// trickles its bytes.
    deadline: Instant,
    allowance: Duration,
    /// Set when the user asks to stop (SIGTERM, Ctrl-C): every wait looks
    /// at it at least every [`STOP_POLL`].
    stop: Arc<AtomicBool>,
}

/// How often a wait on the server looks at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(200);

impl Control {
    fn io(&self, what: &str) -> impl Fn(io::Error) -> ClientError + '_ {
        let what = what.to_string();
        move |e| ClientError::Io(self.addr, format!("{what}: {e}"))
    }

    /// The server's next state; `first` says what an unexpected answer
    /// to the cookie means.
    /// The wait for the next answer: the step's timeout, within the
    /// whole exchange's allowance.
    fn next_wait(&mut self) -> Result<Instant, ClientError> {
        let now = Instant::now();
        if now >= self.deadline {
            return Err(self.overran());
        }
        Ok(self.deadline.min(now + self.timeout))
    }

    fn overran(&self) -> ClientError {
        ClientError::Io(
            self.addr,
            format!(
                "the server held the exchange past its whole allowance of {:.0} s (the setup, the test and its results)",
                self.allowance.as_secs_f64()
            ),
        )
    }

    /// Reads into `buf` by `by`, looking at the stop flag as it waits:
    /// `Ok(n)` as read(2) gives it, or the error (`TimedOut` at `by`).
    fn read_by(&mut self, buf: &mut [u8], by: Instant) -> Result<io::Result<usize>, ClientError> {
        loop {
            if self.stop.load(Ordering::Relaxed) {
                return Err(ClientError::Interrupted(self.addr));
            }
            let left = by.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Ok(Err(io::ErrorKind::TimedOut.into()));
            }
            self.socket
                .set_read_timeout(Some(left.min(STOP_POLL).max(Duration::from_millis(1))))
                .map_err(self.io("waiting for the server"))?;
            match self.socket.read(buf) {
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock
                            | io::ErrorKind::TimedOut
                            | io::ErrorKind::Interrupted
                    ) => {}
                done => return Ok(done),
            }
        }
    }

    /// Fills `buf` by `by` (one deadline however the bytes trickle).
    fn fill_by(&mut self, buf: &mut [u8], by: Instant, what: &str) -> Result<(), ClientError> {
        let mut got = 0;
        while got < buf.len() {
            match self.read_by(&mut buf[got..], by)? {
                Ok(0) => {
                    return Err(ClientError::Io(
                        self.addr,
                        format!("{what}: the server closed the connection"),
                    ));
                }
                Ok(n) => got += n,
                Err(e) => return Err(ClientError::Io(self.addr, format!("{what}: {e}"))),
            }
        }
        Ok(())
    }

    fn state(&mut self, first: bool) -> Result<State, ClientError> {
        let by = self.next_wait()?;
        let mut byte = [0u8; 1];
        let read = self.read_by(&mut byte, by)?;
        if read.is_err() && Instant::now() >= self.deadline {
            return Err(self.overran());
        }
        match read {
            Ok(0) => Err(if first {
                ClientError::NotIperf3(self.addr, "it closed the connection on the cookie".into())
            } else {
                ClientError::Io(self.addr, "the server closed the control connection".into())
            }),
            Ok(_) => match State::from_byte(byte[0]) {
                Ok(state) => Ok(state),
                Err(_) if first => Err(ClientError::NotIperf3(
                    self.addr,
                    format!(
                        "it answered the cookie with {:#04x} ({:?}), no iperf3 state",
                        byte[0],
                        byte[0] as char
                    ),
                )),
                Err(e) => Err(ClientError::Protocol(self.addr, e)),
            },
            Err(e)
                if first
                    && matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
            {
                Err(ClientError::NotIperf3(
                    self.addr,
                    "nothing answered the cookie (an iperf3 server asks for the parameters at once; iperf2 and others wait)".into(),
                ))
            }
            Err(e) => Err(ClientError::Io(
                self.addr,
                format!("reading the server's state: {e}"),
            )),
        }
    }

    /// A state the server sent while the test runs (it ends a test only
    /// by refusal: SERVER_TERMINATE, SERVER_ERROR), without waiting.
    fn poll_state(&mut self) -> Result<Option<State>, ClientError> {
        use std::os::fd::AsRawFd;
        let mut byte = [0u8; 1];
        // One non-blocking receive: the socket itself stays blocking.
        let read = nix::sys::socket::recv(
            self.socket.as_raw_fd(),
            &mut byte,
            nix::sys::socket::MsgFlags::MSG_DONTWAIT,
        );
        match read {
            Ok(0) => Err(ClientError::Io(
                self.addr,
                "the server closed the control connection while the test ran".into(),
            )),
            Ok(_) => State::from_byte(byte[0])
                .map(Some)
                .map_err(|e| ClientError::Protocol(self.addr, e)),
            Err(nix::errno::Errno::EAGAIN | nix::errno::Errno::EINTR) => Ok(None),
            Err(e) => Err(ClientError::Io(
                self.addr,
                format!("reading the control connection: {e}"),
            )),
        }
    }

    /// The exchange's last step, while the client waits for `expect`
    /// (DISPLAY_RESULTS): the server's word, and IPERF_DONE.
    fn display_results(&mut self, expect: Expect) -> Result<(), ClientError> {
        let said = self.state(false)?;
        match expect.step(said) {
            Ok(Step::Act(State::DisplayResults, _)) => self.send_state(State::IperfDone),
            Ok(Step::Act(other, _) | Step::Refusal(other)) => Err(self.refused(other)),
            Err(e) => Err(ClientError::Protocol(self.addr, e)),
        }
    }

    /// Writes a JSON frame ([`iperf3::frame`]); `what` names it.
    fn send_frame(&mut self, frame: &[u8], what: &str) -> Result<(), ClientError> {
        self.socket
            .write_all(frame)
            .map_err(self.io(&format!("writing {what}")))
    }

    fn send_state(&mut self, state: State) -> Result<(), ClientError> {
        self.socket
            .write_all(&[state.byte()])
            .map_err(self.io("writing a state"))
    }

    /// The server's results: one deadline for the whole frame, however
    /// its bytes trickle.
    fn read_results(&mut self) -> Result<Results, ClientError> {
        let by = self.next_wait()?;
        let what = "reading the server's results";
        let mut header = [0u8; 4];
        self.fill_by(&mut header, by, what)?;
        let len = iperf3::frame_length(header).map_err(|e| ClientError::Protocol(self.addr, e))?;
        let mut text = vec![0u8; len];
        self.fill_by(&mut text, by, what)?;
        iperf3::parse_json(&text, "results").map_err(|e| ClientError::Protocol(self.addr, e))
    }

    /// What a refusal state means.
    fn refused(&mut self, state: State) -> ClientError {
        match state {
            State::AccessDenied => ClientError::Busy(self.addr),
            State::ServerTerminate => ClientError::Terminated(self.addr),
            State::ServerError => {
                let mut numbers = [0u8; 8];
                let by = self.deadline.min(Instant::now() + self.timeout);
                match self.fill_by(&mut numbers, by, "reading a server error") {
                    Ok(()) => {
                        let i_errno = i32::from_be_bytes(numbers[..4].try_into().unwrap());
                        let errno = i32::from_be_bytes(numbers[4..].try_into().unwrap());
                        ClientError::Server {
                            addr: self.addr,
                            text: iperf3::server_error_text(i_errno),
                            errno,
                        }
                    }
                    Err(e) => e,
                }
            }
            other => ClientError::Io(self.addr, format!("the server sent {other:?} out of turn")),
        }
    }
}

/// A data stream's thread and its counts.
struct Stream {
    id: i64,
    sender: bool,
    bytes: Arc<AtomicU64>,
    udp: Arc<std::sync::Mutex<UdpCount>>,
    /// TCP: the socket, for TCP_INFO at each interval's end.
    socket: Option<Arc<TcpStream>>,
    tcp_info: Arc<std::sync::Mutex<Option<crate::measure::tcpinfo::TcpInfo>>>,
    account: Arc<std::sync::Mutex<Option<ThreadAccount>>>,
    thread: std::thread::JoinHandle<io::Result<()>>,
}

/// What the threads and the control loop share: `stop`, the test is over,
/// senders stop writing and receivers stop counting; `finished`, the
/// exchange is over and the streams close. Between the two every socket
/// stays open and receivers drain, as iperf3's client does: a server still
/// sending when its peer closes fails the test ("unable to write to stream
/// socket"). `total`: bytes moved either way, for `--bytes`.
#[derive(Clone, Default)]
struct Shared {
    stop: Arc<AtomicBool>,
    finished: Arc<AtomicBool>,
    total: Arc<AtomicU64>,
}

/// A stream thread's own account, begun as the thread starts and read by
/// it once when the test stops.
struct ThreadClock {
    usage: crate::measure::rusage::ProcessUsage,
    run_delay_ns: Option<u64>,
}

impl ThreadClock {
    fn start() -> ThreadClock {
        ThreadClock {
            usage: crate::measure::rusage::ProcessUsage::thread_now(),
            run_delay_ns: crate::measure::schedstat::thread_run_delay_ns(),
        }
    }

    fn account(
        &self,
        calls: u64,
        socket_buffer: Option<u64>,
        congestion_control: Option<String>,
    ) -> ThreadAccount {
        ThreadAccount {
            usage: crate::measure::rusage::ProcessUsage::thread_now().since(&self.usage),
            run_delay_s: match (
                self.run_delay_ns,
                crate::measure::schedstat::thread_run_delay_ns(),
            ) {
                (Some(a), Some(b)) => Some(b.saturating_sub(a) as f64 / 1e9),
                _ => None,
            },
            calls,
            socket_buffer,
            congestion_control,
        }
    }
}

/// A UDP stream's account: datagrams sent, or as iperf3's receiver keeps
/// it (`iperf_udp_recv`): the highest sequence number, gaps less late
/// arrivals, and RFC 1889's jitter over the send timestamps.
#[derive(Debug, Clone, Copy, Default)]
struct UdpCount {
    packets: u64,
    lost: i64,
    jitter_s: f64,
    prev_transit: Option<f64>,
}

impl UdpCount {
    /// One datagram received: its sequence number and send time (s since
    /// the epoch), and when it arrived.
    fn received(&mut self, seq: u64, sent_s: f64, arrived_s: f64) {
        if seq > self.packets {
            self.lost += (seq - 1 - self.packets) as i64;
            self.packets = seq;
        } else if self.lost > 0 {
            self.lost -= 1;
        }
        let transit = arrived_s - sent_s;
        let d = (transit - self.prev_transit.unwrap_or(transit)).abs();
        self.prev_transit = Some(transit);
        self.jitter_s += (d - self.jitter_s) / 16.0;
    }
}

/// Seconds since the epoch now.
fn epoch_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// How often the running test looks at the control connection and the
/// stream threads.
const POLL_EVERY: Duration = Duration::from_millis(100);

/// iperf3's UDP header (`iperf_udp_send`, 32-bit counters): send time,
/// seconds and microseconds, and the sequence number, big-endian.
const UDP_HEADER: usize = 12;

/// Runs one test as `spec` says, telling `progress` as it goes. A test
/// that fails once running returns what netlab counted up to then, marked
/// `incomplete`; one that fails before returns the error.
pub fn run(
    spec: &Iperf3Spec,
    progress: &mut dyn FnMut(Progress<'_>),
    stop: &Arc<AtomicBool>,
) -> Result<Iperf3Run, ClientError> {
    let addr = spec.server;
    let socket = TcpStream::connect_timeout(&addr, spec.timeout)
        .map_err(|e| ClientError::Connect(addr, e))?;
    socket
        .set_read_timeout(Some(spec.timeout))
        .and_then(|()| socket.set_nodelay(true))
        .map_err(|e| ClientError::Io(addr, e.to_string()))?;
    // The whole exchange: the setup (the parameters, the streams), the
    // test (by time, or at most that long by bytes) with the wait for its
    // end, and the results, each step at most `timeout`.
    let allowance = spec.duration + spec.timeout * 4;
    let mut control = Control {
        socket,
        addr,
        timeout: spec.timeout,
        deadline: Instant::now() + allowance,
        allowance,
        stop: stop.clone(),
    };
    let cookie = Cookie::new().map_err(|e| ClientError::Io(addr, e.to_string()))?;
    control
        .socket
        .write_all(cookie.as_bytes())
        .map_err(control.io("writing the cookie"))?;
    let params = spec.params();
    let usage0 = crate::measure::rusage::ProcessUsage::now();
    let shared = Shared::default();
    let (mut streams, mut connected, mut ticks) = (Vec::new(), Vec::new(), Vec::new());
    let (mut running_since, mut ended_after) = (None, None);
    let mut first = true;
    let mut expect = Expect::FIRST;
    let outcome: Result<_, ClientError> = loop {
        let said = match control.state(first) {
            Ok(state) => state,
            Err(e) => break Err(e),
        };
        first = false;
        // Each state once, in order: a second CREATE_STREAMS opens no
        // more streams, a second TEST_RUNNING runs no second test.
        let state = match expect.step(said) {
            Ok(Step::Act(state, next)) => {
                expect = next.unwrap_or(expect);
                state
            }
            Ok(Step::Refusal(state)) => break Err(control.refused(state)),
            Err(e) => break Err(ClientError::Protocol(addr, e)),
        };
        match state {
            State::ParamExchange => {
                if let Err(e) = control.send_frame(&iperf3::frame(&params), "the parameters") {
                    break Err(e);
                }
            }
            State::CreateStreams => {
                if let Err(e) = open_streams(spec, &cookie, &shared, &mut streams, &mut connected) {
                    break Err(e);
                }
            }
            State::TestStart => progress(Progress::Started {
                connected: &connected,
                cookie: cookie.as_str(),
            }),
            State::TestRunning => {
                let since = Instant::now();
                running_since = Some(since);
                let (ended, early) = run_the_test(
                    spec,
                    &mut control,
                    &streams,
                    &shared,
                    since,
                    stop,
                    progress,
                    &mut ticks,
                );
                ended_after = Some(ended);
                // Ended in time: the client says so.
                if let Err(e) = early.map_or_else(|| control.send_state(State::TestEnd), Err) {
                    break Err(e);
                }
            }
            State::ExchangeResults => {
                break exchange_results(
                    &mut control,
                    &streams,
                    ended_after.unwrap_or(0.0),
                    &usage0,
                    running_since,
                );
            }
            other => break Err(control.refused(other)),
        }
    };
    let outcome = outcome.and_then(|done| control.display_results(expect).map(|()| done));
    // A test that failed once running keeps netlab's counts up to then.
    let partial = match (&outcome, running_since) {
        (Err(_), Some(since)) => {
            let seconds =
                ended_after.unwrap_or_else(|| since.elapsed().as_secs_f64().min(f64::MAX));
            Some((
                settled(&streams, seconds),
                seconds,
                crate::measure::rusage::ProcessUsage::now().since(&usage0),
            ))
        }
        _ => None,
    };
    // Every stream closes now, whatever happened.
    shared.stop.store(true, Ordering::Relaxed);
    shared.finished.store(true, Ordering::Relaxed);
    let joined = join(streams);
    let (counted, client, server, seconds, usage, incomplete) = match (outcome, partial) {
        (Ok((counted, client, server, seconds, usage)), _) => {
            joined.map_err(|e| ClientError::Io(addr, format!("a data stream: {e}")))?;
            let expected = counted.len();
            if server.streams.len() != expected {
                return Err(ClientError::OldServer(
                    addr,
                    format!(
                        "the server reported {} stream(s) for the {expected} of this test: an iperf3 before 3.7 ignores --bidir",
                        server.streams.len()
                    ),
                ));
            }
            (counted, client, Some(server), seconds, usage, None)
        }
        (Err(e), Some((counted, seconds, usage))) => {
            let client = client_results(&counted, &usage, seconds.max(1e-9));
            (counted, client, None, seconds, usage, Some(e.to_string()))
        }
        (Err(e), None) => return Err(e),
    };
    Ok(Iperf3Run {
        params,
        cookie: cookie.as_str().into(),
        connected,
        streams: counted,
        intervals: ticks,
        client,
        server,
        seconds,
        usage,
        incomplete,
    })
}

/// The results' exchange: netlab's counts settled over the `seconds` the
/// test ran and its CPU since `usage0` sent, the server's read.
fn exchange_results(
    control: &mut Control,
    streams: &[Stream],
    seconds: f64,
    usage0: &crate::measure::rusage::ProcessUsage,
    running_since: Option<Instant>,
) -> Result<Exchanged, ClientError> {
    let counted = settled(streams, seconds);
    let usage = crate::measure::rusage::ProcessUsage::now().since(usage0);
    let wall = running_since.map_or(1.0, |s| s.elapsed().as_secs_f64().max(1e-9));
    let client = client_results(&counted, &usage, wall);
    control.send_frame(&iperf3::frame(&client), "netlab's results")?;
    let server = control.read_results()?;
    Ok((counted, client, server, seconds, usage))
}

/// A whole exchange: netlab's streams and results, the server's, the
/// test's seconds and netlab's CPU over it.
type Exchanged = (
    Vec<LocalStream>,
    Results,
    Results,
    f64,
    crate::measure::rusage::ProcessUsage,
);

/// Opens the test's data streams as iperf3 numbers them (1, 3, 4, ...):
/// `parallel` each way asked, no more; those opened before a failure are
/// kept in `streams` (so they are joined).
fn open_streams(
    spec: &Iperf3Spec,
    cookie: &Cookie,
    shared: &Shared,
    streams: &mut Vec<Stream>,
    connected: &mut Vec<Connected>,
) -> Result<(), ClientError> {
    let directions: Vec<bool> = match (spec.bidir, spec.reverse) {
        (true, _) => [true, false]
            .into_iter()
            .flat_map(|s| std::iter::repeat_n(s, spec.parallel as usize))
            .collect(),
        (false, reverse) => vec![!reverse; spec.parallel as usize],
    };
    for (i, sender) in directions.into_iter().enumerate() {
        let id = if i == 0 { 1 } else { i as i64 + 2 };
        let (stream, link) = open_stream(spec, cookie, id, sender, shared)?;
        streams.push(stream);
        connected.push(link);
    }
    Ok(())
}

/// The test while it runs, from `since`: until its time or its bytes (the
/// client ends it), the user's stop, or the server or a stream ending it
/// early; each interval's counts go to `progress` and `ticks`. Every
/// stream is told to stop. Returns the seconds it ran and why it ended
/// early, if it did.
#[allow(clippy::too_many_arguments)]
fn run_the_test(
    spec: &Iperf3Spec,
    control: &mut Control,
    streams: &[Stream],
    shared: &Shared,
    since: Instant,
    stop: &AtomicBool,
    progress: &mut dyn FnMut(Progress<'_>),
    ticks: &mut Vec<Tick>,
) -> (f64, Option<ClientError>) {
    let deadline = since + spec.duration;
    let mut tick_from = 0.0;
    let mut last_poll = since;
    loop {
        let done = match spec.bytes {
            Some(n) => shared.total.load(Ordering::Relaxed) >= n,
            None => Instant::now() >= deadline,
        };
        if done || Instant::now() >= deadline + spec.timeout {
            break;
        }
        if stop.load(Ordering::Relaxed) {
            shared.stop.store(true, Ordering::Relaxed);
            return (
                since.elapsed().as_secs_f64(),
                Some(ClientError::Interrupted(control.addr)),
            );
        }
        // The server may end the test early (a refusal on the control
        // connection), or a data stream may fail: looked at every 100 ms,
        // a system call each time, so netlab's own CPU on the measured
        // end stays small.
        let early = if last_poll.elapsed() >= POLL_EVERY {
            last_poll = Instant::now();
            ended_early(control, streams)
        } else {
            None
        };
        if let Some(e) = early {
            shared.stop.store(true, Ordering::Relaxed);
            return (since.elapsed().as_secs_f64(), Some(e));
        }
        let at = since.elapsed().as_secs_f64();
        if let Some(every) = spec.interval
            && at - tick_from >= every.as_secs_f64()
        {
            let tick = Tick {
                start_s: tick_from,
                end_s: at,
                streams: snapshot(streams, at, true),
            };
            progress(Progress::Interval(&tick));
            ticks.push(tick);
            tick_from = at;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let ended = since.elapsed().as_secs_f64();
    // iperf3's last, short interval: shown when it is at least a tenth of one.
    if let Some(every) = spec.interval
        && ended - tick_from >= every.as_secs_f64() / 10.0
    {
        let tick = Tick {
            start_s: tick_from,
            end_s: ended,
            streams: snapshot(streams, ended, true),
        };
        progress(Progress::Interval(&tick));
        ticks.push(tick);
    }
    shared.stop.store(true, Ordering::Relaxed);
    (ended, None)
}

/// Why the test ended before its time, if it did: the server said so on
/// the control connection (a refusal state), closed it, or a data stream
/// failed (the server's word, when it follows within 200 ms, is the
/// reason given).
fn ended_early(control: &mut Control, streams: &[Stream]) -> Option<ClientError> {
    match control.poll_state() {
        Ok(Some(state)) => Some(control.refused(state)),
        Err(e) => Some(e),
        Ok(None) => {
            let id = streams.iter().find(|s| s.thread.is_finished())?.id;
            std::thread::sleep(Duration::from_millis(200));
            Some(match control.poll_state() {
                Ok(Some(state)) => control.refused(state),
                Ok(None) => ClientError::Io(
                    control.addr,
                    format!("data stream {id} ended before the test did"),
                ),
                Err(e) => e,
            })
        }
    }
}

/// netlab's results as iperf3's client reports them: its CPU over the
/// test (percent of one CPU, all threads), and each stream's count.
fn client_results(
    counted: &[LocalStream],
    usage: &crate::measure::rusage::ProcessUsage,
    wall_s: f64,
) -> Results {
    Results {
        cpu_util_total: 100.0 * usage.cpu_s() / wall_s,
        cpu_util_user: 100.0 * usage.user_s / wall_s,
        cpu_util_system: 100.0 * usage.sys_s / wall_s,
        // As iperf3: 1 when the sender read its retransmits (TCP_INFO), 0
        // when it could not, -1 from a receiver.
        sender_has_retransmits: match (
            counted.iter().any(|s| s.sender),
            counted.iter().any(|s| s.sender && s.tcp_info.is_some()),
        ) {
            (false, _) => -1,
            (true, true) => 1,
            (true, false) => 0,
        },
        congestion_used: counted
            .iter()
            .find_map(|s| s.thread.as_ref()?.congestion_control.clone()),
        streams: counted
            .iter()
            .map(|s| StreamResult {
                id: s.id,
                bytes: s.bytes,
                retransmits: match (&s.tcp_info, s.sender) {
                    (Some(info), true) => i64::from(info.total_retrans),
                    _ => -1,
                },
                jitter: s.jitter_s,
                errors: s.lost,
                packets: s.packets as i64,
                start_time: 0.0,
                end_time: s.seconds,
            })
            .collect(),
        server_output_text: None,
    }
}

/// The socket's buffer size (`SO_SNDBUF` or `SO_RCVBUF`) as the kernel
/// reports it.
fn buffer_of(fd: std::os::fd::BorrowedFd<'_>, sender: bool) -> Option<u64> {
    let socket = socket2::SockRef::from(&fd);
    let size = if sender {
        socket.send_buffer_size()
    } else {
        socket.recv_buffer_size()
    };
    size.ok().map(|b| b as u64)
}

/// The socket's congestion control (`TCP_CONGESTION`).
fn congestion_of(fd: std::os::fd::BorrowedFd<'_>) -> Option<String> {
    socket2::SockRef::from(&fd)
        .tcp_congestion()
        .ok()
        .map(|name| {
            String::from_utf8_lossy(&name)
                .trim_end_matches('\0')
                .to_string()
        })
}

/// Opens one data connection (the cookie first) and starts its thread.
fn open_stream(
    spec: &Iperf3Spec,
    cookie: &Cookie,
    id: i64,
    sender: bool,
    shared: &Shared,
) -> Result<(Stream, Connected), ClientError> {
    use std::os::fd::{AsFd, AsRawFd};
    let addr = spec.server;
    if let Some(bps) = spec.udp_bps {
        return open_udp_stream(spec, id, sender, bps, shared);
    }
    let mut socket = TcpStream::connect_timeout(&addr, spec.timeout)
        .map_err(|e| ClientError::Io(addr, format!("opening data stream {id}: {e}")))?;
    debug_assert_eq!(cookie.as_bytes().len(), COOKIE_SIZE);
    socket
        .write_all(cookie.as_bytes())
        .and_then(|()| socket.set_read_timeout(Some(Duration::from_millis(100))))
        .and_then(|()| socket.set_write_timeout(Some(Duration::from_millis(100))))
        .map_err(|e| ClientError::Io(addr, format!("data stream {id}: {e}")))?;
    let link = Connected {
        id,
        socket: socket.as_raw_fd(),
        local: socket.local_addr().ok(),
        sender,
        mss: socket2::SockRef::from(&socket).tcp_mss().ok(),
        sndbuf: buffer_of(socket.as_fd(), true),
        rcvbuf: buffer_of(socket.as_fd(), false),
    };
    let socket = Arc::new(socket);
    let bytes = Arc::new(AtomicU64::new(0));
    let tcp_info = Arc::new(std::sync::Mutex::new(None));
    let account = Arc::new(std::sync::Mutex::new(None));
    let (info, own, data) = (tcp_info.clone(), account.clone(), socket.clone());
    let (count, shared, len) = (bytes.clone(), shared.clone(), spec.len);
    let thread = std::thread::Builder::new()
        .name(format!("iperf3-stream-{id}"))
        .spawn(move || -> io::Result<()> {
            let clock = ThreadClock::start();
            let mut buf = crate::endpoint::pattern::Pattern::new(len)
                .slice(0, len)
                .to_vec();
            let (mut open, mut calls) = (true, 0u64);
            while !shared.finished.load(Ordering::Relaxed) {
                let stopped = shared.stop.load(Ordering::Relaxed);
                // The kernel's account and the thread's own, once, as the
                // test ends.
                if stopped
                    && let Ok(mut slot) = info.lock()
                    && slot.is_none()
                {
                    let fd = data.as_fd();
                    *slot = crate::measure::tcpinfo::TcpInfo::read(fd).ok();
                    if let Ok(mut mine) = own.lock() {
                        *mine =
                            Some(clock.account(calls, buffer_of(fd, sender), congestion_of(fd)));
                    }
                }
                if !open || (sender && stopped) {
                    // Held open until the exchange is over.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                let moved = if sender {
                    (&*data).write(&buf)
                } else {
                    (&*data).read(&mut buf)
                };
                if !stopped {
                    calls += 1;
                }
                match moved {
                    Ok(0) => open = false,
                    Ok(n) if !stopped => {
                        count.fetch_add(n as u64, Ordering::Relaxed);
                        shared.total.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    Ok(_) => {}
                    Err(e)
                        if matches!(
                            e.kind(),
                            io::ErrorKind::WouldBlock
                                | io::ErrorKind::TimedOut
                                | io::ErrorKind::Interrupted
                        ) => {}
                    // The server may close its ends once the test is over.
                    Err(_) if shared.stop.load(Ordering::Relaxed) => open = false,
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })
        .map_err(|e| ClientError::Io(addr, format!("a thread for stream {id}: {e}")))?;
    Ok((
        Stream {
            id,
            sender,
            bytes,
            udp: Arc::default(),
            socket: Some(socket),
            tcp_info,
            account,
            thread,
        },
        link,
    ))
}

/// Opens one UDP stream: iperf3's connect datagram (host order, as iperf3
/// writes it) and the server's reply; then its thread, paced at `bps`
/// when it sends, counting as iperf3's receiver does when it receives.
fn open_udp_stream(
    spec: &Iperf3Spec,
    id: i64,
    sender: bool,
    bps: u64,
    shared: &Shared,
) -> Result<(Stream, Connected), ClientError> {
    use std::os::fd::{AsFd, AsRawFd};
    let addr = spec.server;
    let fail = |e: io::Error| ClientError::Io(addr, format!("UDP stream {id}: {e}"));
    let any: SocketAddr = if addr.is_ipv4() {
        "0.0.0.0:0".parse().expect("an address")
    } else {
        "[::]:0".parse().expect("an address")
    };
    let socket = std::net::UdpSocket::bind(any).map_err(fail)?;
    socket.connect(addr).map_err(fail)?;
    socket.set_read_timeout(Some(spec.timeout)).map_err(fail)?;
    socket
        .send(&iperf3::UDP_CONNECT_MSG.to_ne_bytes())
        .map_err(fail)?;
    // In reverse the server may send data before (or instead of) the
    // reply's turn: a few datagrams are let pass, as iperf3 does.
    let mut reply = vec![0u8; spec.len.max(4)];
    let mut answered = false;
    for _ in 0..4 {
        let n = socket.recv(&mut reply).map_err(fail)?;
        if n == 4 && reply[..4] == iperf3::UDP_CONNECT_REPLY.to_ne_bytes() {
            answered = true;
            break;
        }
    }
    if !answered {
        return Err(ClientError::Io(
            addr,
            format!("UDP stream {id}: no UDP_CONNECT_REPLY from the server"),
        ));
    }
    socket
        .set_read_timeout(Some(Duration::from_millis(100)))
        .map_err(fail)?;
    let link = Connected {
        id,
        socket: socket.as_raw_fd(),
        local: socket.local_addr().ok(),
        sender,
        mss: None,
        sndbuf: buffer_of(socket.as_fd(), true),
        rcvbuf: buffer_of(socket.as_fd(), false),
    };
    let bytes = Arc::new(AtomicU64::new(0));
    let udp = Arc::new(std::sync::Mutex::new(UdpCount::default()));
    let own = Arc::new(std::sync::Mutex::new(None));
    let (count, account, shared, mine) = (bytes.clone(), udp.clone(), shared.clone(), own.clone());
    let len = spec.len.max(UDP_HEADER);
    let thread = std::thread::Builder::new()
        .name(format!("iperf3-udp-{id}"))
        .spawn(move || -> io::Result<()> {
            let clock = ThreadClock::start();
            let mut buf = vec![0u8; len.max(65_536)];
            let started = Instant::now();
            let (mut seq, mut calls): (u32, u64) = (0, 0);
            while !shared.finished.load(Ordering::Relaxed) {
                let stopped = shared.stop.load(Ordering::Relaxed);
                if stopped
                    && let Ok(mut slot) = mine.lock()
                    && slot.is_none()
                {
                    *slot = Some(clock.account(calls, buffer_of(socket.as_fd(), sender), None));
                }
                if !stopped {
                    calls += 1;
                }
                if sender {
                    if stopped {
                        std::thread::sleep(Duration::from_millis(10));
                        continue;
                    }
                    // Paced: no further ahead than the rate allows.
                    let allowed = started.elapsed().as_secs_f64() * bps as f64 / 8.0;
                    if count.load(Ordering::Relaxed) as f64 >= allowed {
                        std::thread::sleep(Duration::from_micros(200));
                        continue;
                    }
                    seq = seq.wrapping_add(1);
                    let now = std::time::SystemTime::now()
                        .duration_since(std::time::UNIX_EPOCH)
                        .unwrap_or_default();
                    buf[..4].copy_from_slice(&(now.as_secs() as u32).to_be_bytes());
                    buf[4..8].copy_from_slice(&now.subsec_micros().to_be_bytes());
                    buf[8..12].copy_from_slice(&seq.to_be_bytes());
                    // A send that fails (a refusal by ICMP) costs its
                    // sequence number, as iperf3's does: the receiver
                    // counts it lost.
                    if let Ok(n) = socket.send(&buf[..len]) {
                        count.fetch_add(n as u64, Ordering::Relaxed);
                        shared.total.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    if let Ok(mut a) = account.lock() {
                        a.packets = u64::from(seq);
                    }
                } else {
                    match socket.recv(&mut buf) {
                        Ok(n) if n >= UDP_HEADER && !stopped => {
                            count.fetch_add(n as u64, Ordering::Relaxed);
                            shared.total.fetch_add(n as u64, Ordering::Relaxed);
                            let word = |i: usize| {
                                u32::from_be_bytes(buf[i..i + 4].try_into().expect("4 bytes"))
                            };
                            let sent = f64::from(word(0)) + f64::from(word(4)) / 1e6;
                            if let Ok(mut a) = account.lock() {
                                a.received(u64::from(word(8)), sent, epoch_s());
                            }
                        }
                        Ok(_) => {}
                        Err(e)
                            if matches!(
                                e.kind(),
                                io::ErrorKind::WouldBlock
                                    | io::ErrorKind::TimedOut
                                    | io::ErrorKind::Interrupted
                                    | io::ErrorKind::ConnectionRefused
                            ) => {}
                        Err(e) => return Err(e),
                    }
                }
            }
            Ok(())
        })
        .map_err(|e| ClientError::Io(addr, format!("a thread for stream {id}: {e}")))?;
    Ok((
        Stream {
            id,
            sender,
            bytes,
            udp,
            socket: None,
            tcp_info: Arc::default(),
            account: own,
            thread,
        },
        link,
    ))
}

/// Every stream's counts at `seconds`; `live`: TCP_INFO read now from
/// each socket (an interval's end), else as each thread read it when the
/// test stopped.
fn snapshot(streams: &[Stream], seconds: f64, live: bool) -> Vec<LocalStream> {
    use std::os::fd::AsFd;
    streams
        .iter()
        .map(|s| {
            let udp = s.udp.lock().map(|u| *u).unwrap_or_default();
            let tcp_info = if live {
                s.socket
                    .as_ref()
                    .and_then(|socket| crate::measure::tcpinfo::TcpInfo::read(socket.as_fd()).ok())
            } else {
                s.tcp_info.lock().ok().and_then(|i| i.clone())
            };
            LocalStream {
                id: s.id,
                sender: s.sender,
                bytes: s.bytes.load(Ordering::Relaxed),
                seconds,
                packets: udp.packets,
                lost: udp.lost,
                jitter_s: udp.jitter_s,
                tcp_info,
                thread: (!live)
                    .then(|| s.account.lock().ok().and_then(|a| a.clone()))
                    .flatten(),
            }
        })
        .collect()
}

/// Every stream's counts once the test stopped: each thread's own account
/// is waited for (briefly: a thread blocked in a call reads it within its
/// 100 ms timeout).
fn settled(streams: &[Stream], seconds: f64) -> Vec<LocalStream> {
    let deadline = Instant::now() + Duration::from_millis(500);
    while Instant::now() < deadline
        && streams
            .iter()
            .any(|s| s.account.lock().is_ok_and(|a| a.is_none()) && !s.thread.is_finished())
    {
        std::thread::sleep(Duration::from_millis(2));
    }
    snapshot(streams, seconds, false)
}

/// Joins every stream's thread (after `finished`): the first error.
fn join(streams: Vec<Stream>) -> io::Result<()> {
    let mut first_error = None;
    for s in streams {
        match s.thread.join() {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                first_error.get_or_insert(e);
            }
            Err(_) => {
                first_error.get_or_insert(io::Error::other("a stream thread panicked"));
            }
        }
    }
    first_error.map_or(Ok(()), Err)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_counts_gaps_late_arrivals_and_jitter_as_iperf3_does() {
        let mut c = UdpCount::default();
        // 1, 2, then 5: two missing.
        c.received(1, 0.0, 0.010);
        c.received(2, 0.001, 0.011);
        c.received(5, 0.004, 0.014);
        assert_eq!((c.packets, c.lost), (5, 2));
        // 3 arrives late: one fewer lost, the highest stays 5.
        c.received(3, 0.002, 0.020);
        assert_eq!((c.packets, c.lost), (5, 1));
        // Transit 10 ms three times, then 18 ms: jitter moves 1/16 of 8 ms.
        assert!((c.jitter_s - 0.008 / 16.0).abs() < 1e-9, "{c:?}");
    }

    #[test]
    fn the_parameters_say_tcp_or_udp_as_iperf3_does() {
        let mut spec = Iperf3Spec {
            server: "127.0.0.1:5201".parse().unwrap(),
            parallel: 2,
            reverse: true,
            bidir: false,
            duration: Duration::from_secs(3),
            bytes: None,
            len: 131_072,
            udp_bps: None,
            timeout: Duration::from_secs(1),
            interval: None,
        };
        let tcp = spec.params();
        assert_eq!(
            (tcp.tcp, tcp.udp, tcp.time, tcp.parallel),
            (Some(true), None, 3, 2)
        );
        assert_eq!(tcp.reverse, Some(true));
        spec.udp_bps = Some(10_000_000);
        spec.bytes = Some(1 << 20);
        let udp = spec.params();
        assert_eq!(
            (udp.tcp, udp.udp, udp.bandwidth),
            (None, Some(true), Some(10_000_000))
        );
        // By bytes, iperf3 sends time 0.
        assert_eq!((udp.time, udp.num), (0, 1 << 20));
    }

    /// A hostile iperf3 server on loopback: it takes the cookie on the
    /// control connection, then `script` plays it; data connections are
    /// accepted, read to their end and counted.
    fn hostile(
        script: impl FnOnce(&mut TcpStream) + Send + 'static,
    ) -> (SocketAddr, Arc<AtomicU64>) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let data = Arc::new(AtomicU64::new(0));
        let count = data.clone();
        std::thread::spawn(move || {
            let (mut control, _) = listener.accept().unwrap();
            let mut cookie = [0u8; COOKIE_SIZE];
            control.read_exact(&mut cookie).unwrap();
            std::thread::spawn(move || {
                for conn in listener.incoming().flatten() {
                    count.fetch_add(1, Ordering::Relaxed);
                    std::thread::spawn(move || io::copy(&mut &conn, &mut io::sink()));
                }
            });
            script(&mut control);
        });
        (addr, data)
    }

    fn say(control: &mut TcpStream, state: State) -> io::Result<()> {
        control.write_all(&[state.byte()])
    }

    /// Reads one JSON frame (the client's parameters or results).
    fn take_frame(control: &mut TcpStream) {
        let mut header = [0u8; 4];
        control.read_exact(&mut header).unwrap();
        let mut text = vec![0u8; u32::from_be_bytes(header) as usize];
        control.read_exact(&mut text).unwrap();
    }

    /// A stock server's part up to the client's TEST_END: the parameters
    /// taken, the streams made, the test started and run.
    fn run_a_test(control: &mut TcpStream) {
        say(control, State::ParamExchange).unwrap();
        take_frame(control);
        say(control, State::CreateStreams).unwrap();
        say(control, State::TestStart).unwrap();
        say(control, State::TestRunning).unwrap();
        let mut end = [0u8; 1];
        control.read_exact(&mut end).unwrap();
        assert_eq!(end[0], State::TestEnd.byte());
    }

    fn spec_for(server: SocketAddr) -> Iperf3Spec {
        Iperf3Spec {
            server,
            parallel: 1,
            reverse: false,
            bidir: false,
            duration: Duration::from_secs(1),
            bytes: None,
            len: 16 * 1024,
            udp_bps: None,
            timeout: Duration::from_secs(1),
            interval: None,
        }
    }

    #[test]
    fn create_streams_again_opens_no_more_streams() {
        let (addr, data) = hostile(|control| {
            say(control, State::ParamExchange).unwrap();
            take_frame(control);
            // As often as the client listens.
            for _ in 0..200 {
                if say(control, State::CreateStreams).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        });
        let error = run(&spec_for(addr), &mut |_| {}, &Arc::default()).expect_err("refused");
        assert!(
            error
                .to_string()
                .contains("CreateStreams where iperf3's exchange has TestStart next"),
            "{error}"
        );
        std::thread::sleep(Duration::from_millis(100));
        assert_eq!(
            data.load(Ordering::Relaxed),
            1,
            "one stream asked, one opened"
        );
    }

    #[test]
    fn a_second_test_running_ends_the_test_marked_incomplete() {
        let (addr, _) = hostile(|control| {
            run_a_test(control);
            let _ = say(control, State::TestRunning);
            std::thread::sleep(Duration::from_millis(500));
        });
        let test = run(&spec_for(addr), &mut |_| {}, &Arc::default()).expect("netlab's own counts");
        let why = test.incomplete.expect("marked incomplete");
        assert!(why.contains("TestRunning where"), "{why}");
        assert!(test.streams[0].bytes > 0);
    }

    #[test]
    fn results_that_trickle_meet_one_deadline() {
        let (addr, _) = hostile(|control| {
            run_a_test(control);
            say(control, State::ExchangeResults).unwrap();
            take_frame(control);
            // A 1 KB frame announced, its bytes one every 300 ms: each read
            // within the step's timeout (1 s), the whole never.
            let _ = control.write_all(&1024u32.to_be_bytes());
            while control.write_all(b" ").is_ok() {
                std::thread::sleep(Duration::from_millis(300));
            }
        });
        let test = run(&spec_for(addr), &mut |_| {}, &Arc::default()).expect("netlab's own counts");
        let why = test.incomplete.expect("marked incomplete");
        assert!(why.contains("reading the server's results"), "{why}");
        assert!(why.contains("timed out"), "{why}");
    }

    #[test]
    fn states_each_late_but_in_time_meet_the_whole_allowance() {
        let (addr, _) = hostile(|control| {
            let late = |control: &mut TcpStream, state| {
                std::thread::sleep(Duration::from_millis(900));
                say(control, state)
            };
            late(control, State::ParamExchange).unwrap();
            take_frame(control);
            late(control, State::CreateStreams).unwrap();
            late(control, State::TestStart).unwrap();
            late(control, State::TestRunning).unwrap();
            let mut end = [0u8; 1];
            control.read_exact(&mut end).unwrap();
            let _ = late(control, State::ExchangeResults);
            std::thread::sleep(Duration::from_secs(2));
        });
        // The whole exchange may take the test (1 s) and four steps (1 s
        // each): 0.9 s before each of five states is past it.
        let test = run(&spec_for(addr), &mut |_| {}, &Arc::default()).expect("netlab's own counts");
        let why = test.incomplete.expect("marked incomplete");
        assert!(why.contains("whole allowance of 5 s"), "{why}");
    }
}
