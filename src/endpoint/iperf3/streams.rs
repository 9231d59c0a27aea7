//! The data streams of a test against an iperf3 server: each TCP or UDP
//! stream a thread of this process, opened with the test's cookie, timed
//! by its own thread's CPU clock, counted as iperf3 counts (UDP's
//! sequence numbers, gaps, late arrivals and jitter), read in snapshots
//! for the intervals and joined before the run returns.

use super::types::{ClientError, Connected, Iperf3Spec, LocalStream, ThreadAccount};
use crate::wire::iperf3::{self, COOKIE_SIZE, Cookie};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A data stream's thread and its counts.
pub(super) struct Stream {
    pub(super) id: i64,
    pub(super) sender: bool,
    pub(super) bytes: Arc<AtomicU64>,
    pub(super) udp: Arc<std::sync::Mutex<UdpCount>>,
    /// TCP: the socket, for TCP_INFO at each interval's end.
    pub(super) socket: Option<Arc<TcpStream>>,
    pub(super) tcp_info: Arc<std::sync::Mutex<Option<crate::measure::tcpinfo::TcpInfo>>>,
    pub(super) account: Arc<std::sync::Mutex<Option<ThreadAccount>>>,
    pub(super) thread: std::thread::JoinHandle<io::Result<()>>,
}

/// What the threads and the control loop share: `stop`, the test is over,
/// senders stop writing and receivers stop counting; `finished`, the
/// exchange is over and the streams close. Between the two every socket
/// stays open and receivers drain, as iperf3's client does: a server still
/// sending when its peer closes fails the test ("unable to write to stream
/// socket"). `total`: bytes moved either way, for `--bytes`.
#[derive(Clone, Default)]
pub(super) struct Shared {
    pub(super) stop: Arc<AtomicBool>,
    pub(super) finished: Arc<AtomicBool>,
    pub(super) total: Arc<AtomicU64>,
}

/// A stream thread's own account, begun as the thread starts and read by
/// it once when the test stops.
pub(super) struct ThreadClock {
    pub(super) usage: crate::measure::rusage::ProcessUsage,
    pub(super) run_delay_ns: Option<u64>,
}

impl ThreadClock {
    pub(super) fn start() -> ThreadClock {
        ThreadClock {
            usage: crate::measure::rusage::ProcessUsage::thread_now(),
            run_delay_ns: crate::measure::schedstat::thread_run_delay_ns(),
        }
    }

    pub(super) fn account(
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
pub(super) struct UdpCount {
    pub(super) packets: u64,
    pub(super) lost: i64,
    pub(super) jitter_s: f64,
    pub(super) prev_transit: Option<f64>,
}

impl UdpCount {
    /// One datagram received: its sequence number and send time (s since
    /// the epoch), and when it arrived.
    pub(super) fn received(&mut self, seq: u64, sent_s: f64, arrived_s: f64) {
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
pub(super) fn epoch_s() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0.0, |d| d.as_secs_f64())
}

/// How often the running test looks at the control connection and the
/// stream threads.
pub(super) const POLL_EVERY: Duration = Duration::from_millis(100);

/// iperf3's UDP header (`iperf_udp_send`, 32-bit counters): send time,
/// seconds and microseconds, and the sequence number, big-endian.
pub(super) const UDP_HEADER: usize = 12;

/// Opens the test's data streams as iperf3 numbers them (1, 3, 4, ...):
/// `parallel` each way asked, no more; those opened before a failure are
/// kept in `streams` (so they are joined).
pub(super) fn open_streams(
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

/// The socket's buffer size (`SO_SNDBUF` or `SO_RCVBUF`) as the kernel
/// reports it.
pub(super) fn buffer_of(fd: std::os::fd::BorrowedFd<'_>, sender: bool) -> Option<u64> {
    let socket = socket2::SockRef::from(&fd);
    let size = if sender {
        socket.send_buffer_size()
    } else {
        socket.recv_buffer_size()
    };
    size.ok().map(|b| b as u64)
}

/// The socket's congestion control (`TCP_CONGESTION`).
pub(super) fn congestion_of(fd: std::os::fd::BorrowedFd<'_>) -> Option<String> {
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
pub(super) fn open_stream(
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
                    Err(e) if crate::endpoint::stall::nothing_came(&e) => {}
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
pub(super) fn open_udp_stream(
    spec: &Iperf3Spec,
    id: i64,
    sender: bool,
    bps: u64,
    shared: &Shared,
) -> Result<(Stream, Connected), ClientError> {
    use std::os::fd::{AsFd, AsRawFd};
    let addr = spec.server;
    let fail = |e: io::Error| ClientError::Io(addr, format!("UDP stream {id}: {e}"));
    let socket = udp_connect(spec, id)?;
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
                if !sender {
                    receive_datagram(&socket, &mut buf, stopped, &count, &shared, &account)?;
                    continue;
                }
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
                send_datagram(&socket, &mut buf[..len], seq, &count, &shared);
                if let Ok(mut a) = account.lock() {
                    a.packets = u64::from(seq);
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

/// A UDP socket connected to the server, which has answered iperf3's
/// connect datagram; reads then wait up to the spec's timeout.
fn udp_connect(spec: &Iperf3Spec, id: i64) -> Result<std::net::UdpSocket, ClientError> {
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
    for _ in 0..4 {
        let n = socket.recv(&mut reply).map_err(fail)?;
        if n == 4 && reply[..4] == iperf3::UDP_CONNECT_REPLY.to_ne_bytes() {
            return Ok(socket);
        }
    }
    Err(ClientError::Io(
        addr,
        format!("UDP stream {id}: no UDP_CONNECT_REPLY from the server"),
    ))
}

/// Sends one datagram of iperf3's UDP stream: the time sent (seconds and
/// microseconds) and the sequence number `seq`, big-endian, at its head.
fn send_datagram(
    socket: &std::net::UdpSocket,
    datagram: &mut [u8],
    seq: u32,
    count: &AtomicU64,
    shared: &Shared,
) {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    datagram[..4].copy_from_slice(&(now.as_secs() as u32).to_be_bytes());
    datagram[4..8].copy_from_slice(&now.subsec_micros().to_be_bytes());
    datagram[8..12].copy_from_slice(&seq.to_be_bytes());
    // A send that fails (a refusal by ICMP) costs its sequence number, as
    // iperf3's does: the receiver counts it lost.
    if let Ok(n) = socket.send(datagram) {
        count.fetch_add(n as u64, Ordering::Relaxed);
        shared.total.fetch_add(n as u64, Ordering::Relaxed);
    }
}

/// Receives one datagram (or none within the read timeout) and counts it
/// as iperf3's receiver does: bytes, and the sequence and send time for
/// loss, order and jitter; after the stop, datagrams are drained uncounted.
fn receive_datagram(
    socket: &std::net::UdpSocket,
    buf: &mut [u8],
    stopped: bool,
    count: &AtomicU64,
    shared: &Shared,
    account: &std::sync::Mutex<UdpCount>,
) -> io::Result<()> {
    match socket.recv(buf) {
        Ok(n) if n >= UDP_HEADER && !stopped => {
            count.fetch_add(n as u64, Ordering::Relaxed);
            shared.total.fetch_add(n as u64, Ordering::Relaxed);
            let word = |i: usize| u32::from_be_bytes(buf[i..i + 4].try_into().expect("4 bytes"));
            let sent = f64::from(word(0)) + f64::from(word(4)) / 1e6;
            if let Ok(mut a) = account.lock() {
                a.received(u64::from(word(8)), sent, epoch_s());
            }
            Ok(())
        }
        Ok(_) => Ok(()),
        Err(e)
            if crate::endpoint::stall::nothing_came(&e)
                || e.kind() == io::ErrorKind::ConnectionRefused =>
        {
            Ok(())
        }
        Err(e) => Err(e),
    }
}

/// Every stream's counts at `seconds`; `live`: TCP_INFO read now from
/// each socket (an interval's end), else as each thread read it when the
/// test stopped.
pub(super) fn snapshot(streams: &[Stream], seconds: f64, live: bool) -> Vec<LocalStream> {
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
pub(super) fn settled(streams: &[Stream], seconds: f64) -> Vec<LocalStream> {
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
pub(super) fn join(streams: Vec<Stream>) -> io::Result<()> {
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
