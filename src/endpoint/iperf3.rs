//! netlab as an iperf3 client: a TCP or UDP test against any stock `iperf3 -s`
//! through iperf3's own control protocol ([`crate::wire::iperf3`]), with
//! `-P`, `-R` and `--bidir`, by time or by bytes. The data streams run on
//! threads of this process, so netlab's end measures what it always does;
//! the server's figures come back in its results.
//!
//! Invariant: every wait on the server is bounded (`Iperf3Spec::timeout`),
//! and every stream thread is joined before [`run`] returns.

use crate::wire::iperf3::{
    self, COOKIE_SIZE, Cookie, Iperf3Error, Params, Results, State, StreamResult,
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
    /// TCP: the kernel's account of netlab's socket when the test ended
    /// (retransmits, congestion window, smoothed RTT and its variation).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<crate::measure::tcpinfo::TcpInfo>,
}

/// A finished test: both ends' accounts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Iperf3Run {
    pub params: Params,
    pub streams: Vec<LocalStream>,
    /// What netlab reported to the server.
    pub client: Results,
    /// What the server reported.
    pub server: Results,
    /// From TEST_RUNNING to TEST_END.
    pub seconds: f64,
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
}

/// A control connection and where it is in the test.
struct Control {
    socket: TcpStream,
    addr: SocketAddr,
}

impl Control {
    fn io(&self, what: &str) -> impl Fn(io::Error) -> ClientError + '_ {
        let what = what.to_string();
        move |e| ClientError::Io(self.addr, format!("{what}: {e}"))
    }

    /// The server's next state; `first` says what an unexpected answer
    /// to the cookie means.
    fn state(&mut self, first: bool) -> Result<State, ClientError> {
        let mut byte = [0u8; 1];
        match self.socket.read(&mut byte) {
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

    fn send_state(&mut self, state: State) -> Result<(), ClientError> {
        self.socket
            .write_all(&[state.byte()])
            .map_err(self.io("writing a state"))
    }

    fn read_results(&mut self) -> Result<Results, ClientError> {
        let mut header = [0u8; 4];
        self.socket
            .read_exact(&mut header)
            .map_err(self.io("reading the server's results"))?;
        let len = iperf3::frame_length(header).map_err(|e| ClientError::Protocol(self.addr, e))?;
        let mut text = vec![0u8; len];
        self.socket
            .read_exact(&mut text)
            .map_err(self.io("reading the server's results"))?;
        iperf3::parse_json(&text, "results").map_err(|e| ClientError::Protocol(self.addr, e))
    }

    /// What a refusal state means.
    fn refused(&mut self, state: State) -> ClientError {
        match state {
            State::AccessDenied => ClientError::Busy(self.addr),
            State::ServerTerminate => ClientError::Terminated(self.addr),
            State::ServerError => {
                let mut numbers = [0u8; 8];
                match self.socket.read_exact(&mut numbers) {
                    Ok(()) => {
                        let i_errno = i32::from_be_bytes(numbers[..4].try_into().unwrap());
                        let errno = i32::from_be_bytes(numbers[4..].try_into().unwrap());
                        ClientError::Server {
                            addr: self.addr,
                            text: iperf3::server_error_text(i_errno),
                            errno,
                        }
                    }
                    Err(e) => ClientError::Io(self.addr, format!("reading a server error: {e}")),
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
    tcp_info: Arc<std::sync::Mutex<Option<crate::measure::tcpinfo::TcpInfo>>>,
    thread: std::thread::JoinHandle<io::Result<()>>,
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

/// iperf3's UDP header (`iperf_udp_send`, 32-bit counters): send time,
/// seconds and microseconds, and the sequence number, big-endian.
const UDP_HEADER: usize = 12;

/// Runs one test as `spec` says.
pub fn run(spec: &Iperf3Spec) -> Result<Iperf3Run, ClientError> {
    let addr = spec.server;
    let socket = TcpStream::connect_timeout(&addr, spec.timeout)
        .map_err(|e| ClientError::Connect(addr, e))?;
    socket
        .set_read_timeout(Some(spec.timeout))
        .and_then(|()| socket.set_nodelay(true))
        .map_err(|e| ClientError::Io(addr, e.to_string()))?;
    let mut control = Control { socket, addr };
    let cookie = Cookie::new().map_err(|e| ClientError::Io(addr, e.to_string()))?;
    control
        .socket
        .write_all(cookie.as_bytes())
        .map_err(control.io("writing the cookie"))?;
    let params = spec.params();
    let cpu0 = crate::measure::rusage::process_cpu_ns();
    let (mut streams, mut running_since, mut ended_after) = (Vec::new(), None, None);
    // `stop`: the test is over, senders stop writing and receivers stop
    // counting; `finished`: the exchange is over and the streams close.
    // Between the two every socket stays open and receivers drain, as
    // iperf3's client does: a server still sending when its peer closes
    // fails the test ("unable to write to stream socket").
    let stop = Arc::new(AtomicBool::new(false));
    let finished = Arc::new(AtomicBool::new(false));
    let total = Arc::new(AtomicU64::new(0));
    let mut first = true;
    let outcome: Result<_, ClientError> = loop {
        let state = match control.state(first) {
            Ok(state) => state,
            Err(e) => break Err(e),
        };
        first = false;
        match state {
            State::ParamExchange => {
                if let Err(e) = control
                    .socket
                    .write_all(&iperf3::frame(&params))
                    .map_err(control.io("writing the parameters"))
                {
                    break Err(e);
                }
            }
            State::CreateStreams => {
                let directions: Vec<bool> = match (spec.bidir, spec.reverse) {
                    (true, _) => [true, false]
                        .into_iter()
                        .flat_map(|s| std::iter::repeat_n(s, spec.parallel as usize))
                        .collect(),
                    (false, reverse) => vec![!reverse; spec.parallel as usize],
                };
                let mut opened = Ok(());
                for (i, sender) in directions.into_iter().enumerate() {
                    let id = if i == 0 { 1 } else { i as i64 + 2 };
                    match open_stream(spec, &cookie, id, sender, &stop, &finished, &total) {
                        Ok(stream) => streams.push(stream),
                        Err(e) => {
                            opened = Err(e);
                            break;
                        }
                    }
                }
                if let Err(e) = opened {
                    break Err(e);
                }
            }
            State::TestStart => {}
            State::TestRunning => {
                let since = Instant::now();
                running_since = Some(since);
                // The client ends the test: by time, or once the bytes
                // asked for went either way.
                let deadline = since + spec.duration;
                loop {
                    let done = match spec.bytes {
                        Some(n) => total.load(Ordering::Relaxed) >= n,
                        None => Instant::now() >= deadline,
                    };
                    if done || Instant::now() >= deadline + spec.timeout {
                        break;
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
                stop.store(true, Ordering::Relaxed);
                ended_after = Some(since.elapsed().as_secs_f64());
                if let Err(e) = control.send_state(State::TestEnd) {
                    break Err(e);
                }
            }
            State::ExchangeResults => {
                let seconds = ended_after.unwrap_or(0.0);
                let counted = snapshot(&streams, seconds);
                let cpu_s = match (cpu0, crate::measure::rusage::process_cpu_ns()) {
                    (Some(a), Some(b)) => b.saturating_sub(a) as f64 / 1e9,
                    _ => 0.0,
                };
                let wall = running_since.map_or(1.0, |s| s.elapsed().as_secs_f64().max(1e-9));
                let client = Results {
                    cpu_util_total: 100.0 * cpu_s / wall,
                    cpu_util_user: 0.0,
                    cpu_util_system: 0.0,
                    // As iperf3: 1 when the sender read its retransmits
                    // (TCP_INFO), 0 when it could not, -1 from a receiver.
                    sender_has_retransmits: match (
                        counted.iter().any(|s| s.sender),
                        counted.iter().any(|s| s.sender && s.tcp_info.is_some()),
                    ) {
                        (false, _) => -1,
                        (true, true) => 1,
                        (true, false) => 0,
                    },
                    congestion_used: None,
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
                };
                if let Err(e) = control
                    .socket
                    .write_all(&iperf3::frame(&client))
                    .map_err(control.io("writing netlab's results"))
                {
                    break Err(e);
                }
                break control
                    .read_results()
                    .map(|server| (counted, client, server, seconds));
            }
            State::TestEnd | State::IperfStart | State::IperfDone => {}
            refusal => break Err(control.refused(refusal)),
        }
    };
    let outcome = outcome.and_then(|done| match control.state(false)? {
        State::DisplayResults => {
            control.send_state(State::IperfDone)?;
            Ok(done)
        }
        other => Err(control.refused(other)),
    });
    // Every stream closes now, whatever happened.
    stop.store(true, Ordering::Relaxed);
    finished.store(true, Ordering::Relaxed);
    let joined = join(streams);
    let (counted, client, server, seconds) = outcome?;
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
    Ok(Iperf3Run {
        params,
        streams: counted,
        client,
        server,
        seconds,
    })
}

/// Opens one data connection (the cookie first) and starts its thread.
fn open_stream(
    spec: &Iperf3Spec,
    cookie: &Cookie,
    id: i64,
    sender: bool,
    stop: &Arc<AtomicBool>,
    finished: &Arc<AtomicBool>,
    total: &Arc<AtomicU64>,
) -> Result<Stream, ClientError> {
    let addr = spec.server;
    if let Some(bps) = spec.udp_bps {
        return open_udp_stream(spec, id, sender, bps, stop, finished, total);
    }
    let mut socket = TcpStream::connect_timeout(&addr, spec.timeout)
        .map_err(|e| ClientError::Io(addr, format!("opening data stream {id}: {e}")))?;
    debug_assert_eq!(cookie.as_bytes().len(), COOKIE_SIZE);
    socket
        .write_all(cookie.as_bytes())
        .and_then(|()| socket.set_read_timeout(Some(Duration::from_millis(100))))
        .and_then(|()| socket.set_write_timeout(Some(Duration::from_millis(100))))
        .map_err(|e| ClientError::Io(addr, format!("data stream {id}: {e}")))?;
    let bytes = Arc::new(AtomicU64::new(0));
    let tcp_info = Arc::new(std::sync::Mutex::new(None));
    let info = tcp_info.clone();
    let (count, stop, finished, total, len) = (
        bytes.clone(),
        stop.clone(),
        finished.clone(),
        total.clone(),
        spec.len,
    );
    let thread = std::thread::Builder::new()
        .name(format!("iperf3-stream-{id}"))
        .spawn(move || -> io::Result<()> {
            let mut buf = crate::endpoint::pattern::Pattern::new(len)
                .slice(0, len)
                .to_vec();
            let mut open = true;
            while !finished.load(Ordering::Relaxed) {
                let stopped = stop.load(Ordering::Relaxed);
                // The kernel's account once, as the test ends.
                if stopped
                    && let Ok(mut slot) = info.lock()
                    && slot.is_none()
                {
                    use std::os::fd::AsFd;
                    *slot = crate::measure::tcpinfo::TcpInfo::read(socket.as_fd()).ok();
                }
                if !open || (sender && stopped) {
                    // Held open until the exchange is over.
                    std::thread::sleep(Duration::from_millis(10));
                    continue;
                }
                let moved = if sender {
                    socket.write(&buf)
                } else {
                    socket.read(&mut buf)
                };
                match moved {
                    Ok(0) => open = false,
                    Ok(n) if !stopped => {
                        count.fetch_add(n as u64, Ordering::Relaxed);
                        total.fetch_add(n as u64, Ordering::Relaxed);
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
                    Err(_) if stop.load(Ordering::Relaxed) => open = false,
                    Err(e) => return Err(e),
                }
            }
            Ok(())
        })
        .map_err(|e| ClientError::Io(addr, format!("a thread for stream {id}: {e}")))?;
    Ok(Stream {
        id,
        sender,
        bytes,
        udp: Arc::default(),
        tcp_info,
        thread,
    })
}

/// Opens one UDP stream: iperf3's connect datagram (host order, as iperf3
/// writes it) and the server's reply; then its thread, paced at `bps`
/// when it sends, counting as iperf3's receiver does when it receives.
fn open_udp_stream(
    spec: &Iperf3Spec,
    id: i64,
    sender: bool,
    bps: u64,
    stop: &Arc<AtomicBool>,
    finished: &Arc<AtomicBool>,
    total: &Arc<AtomicU64>,
) -> Result<Stream, ClientError> {
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
    let bytes = Arc::new(AtomicU64::new(0));
    let udp = Arc::new(std::sync::Mutex::new(UdpCount::default()));
    let (count, account, stop, finished, total) = (
        bytes.clone(),
        udp.clone(),
        stop.clone(),
        finished.clone(),
        total.clone(),
    );
    let len = spec.len.max(UDP_HEADER);
    let thread = std::thread::Builder::new()
        .name(format!("iperf3-udp-{id}"))
        .spawn(move || -> io::Result<()> {
            let mut buf = vec![0u8; len.max(65_536)];
            let started = Instant::now();
            let mut seq: u32 = 0;
            while !finished.load(Ordering::Relaxed) {
                let stopped = stop.load(Ordering::Relaxed);
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
                        total.fetch_add(n as u64, Ordering::Relaxed);
                    }
                    if let Ok(mut a) = account.lock() {
                        a.packets = u64::from(seq);
                    }
                } else {
                    match socket.recv(&mut buf) {
                        Ok(n) if n >= UDP_HEADER && !stopped => {
                            count.fetch_add(n as u64, Ordering::Relaxed);
                            total.fetch_add(n as u64, Ordering::Relaxed);
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
    Ok(Stream {
        id,
        sender,
        bytes,
        udp,
        tcp_info: Arc::default(),
        thread,
    })
}

/// Every stream's count so far.
fn snapshot(streams: &[Stream], seconds: f64) -> Vec<LocalStream> {
    streams
        .iter()
        .map(|s| {
            let udp = s.udp.lock().map(|u| *u).unwrap_or_default();
            LocalStream {
                id: s.id,
                sender: s.sender,
                bytes: s.bytes.load(Ordering::Relaxed),
                seconds,
                packets: udp.packets,
                lost: udp.lost,
                jitter_s: udp.jitter_s,
                tcp_info: s.tcp_info.lock().ok().and_then(|i| i.clone()),
            }
        })
        .collect()
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
}
