//! The two ends of a UDP test (`netlab stream --udp`): a sender that paces
//! datagrams of a fixed length at a rate, each with a sequence number and
//! its send time ([`crate::wire::udpstream`]) and the stream's pattern as
//! payload; and a receiver that counts what came: loss, duplicates,
//! reordering, RFC 3550's interarrival jitter and, when both ends read the
//! same clock, one-way latency.
//!
//! Invariants: the sender keeps to an absolute schedule (datagram i is due
//! at i x length x 8 / rate seconds), so a late send is followed by quicker
//! ones rather than drifting; a datagram the kernel refuses (ENOBUFS) is
//! counted as a send error and takes no sequence number, so the receiver's
//! loss is loss after the sender's socket. The receiver stops at the end
//! marker once every datagram before it has come, or after a grace for
//! stragglers that overtook the marker on a reordering path (twice the
//! spread of transit times seen, see [`Counts::straggler_grace`]), or after
//! [`IDLE_END`] without a datagram. It reads with `recvmsg` and
//! `SO_RXQ_OVFL`, so loss in its own full socket buffer is told apart from
//! loss on the path (iperf3 counts both as loss).
//!
//! Through agents a UDP test starts with consent, so that no agent can be
//! made to flood an address that did not ask (iperf3 #1072): the receiver
//! binds on the agent's data ports only on the controller's authenticated
//! instruction, answers only a hello that carries the run's token and
//! comes from the peer the controller named, and then `connect()`s its
//! socket to that source; the sender sends no data before a consent with
//! its token has come back from the address it sends to.

use super::types::EndpointReport;
use super::types::{Amount, Latency, UdpPace, UdpStats};
use crate::endpoint::bulk::socket::Before;
use crate::endpoint::bulk::spec::{ReceiveSpec, SendSpec};
use crate::endpoint::guard;
use crate::endpoint::pattern::Pattern;
use crate::endpoint::protocol::DataGuard;
use crate::endpoint::ratelog::{RateLog, endpoint_line};
use crate::measure::netstat::Counters;
use crate::wire::udpstream::{HEADER_LEN, Header, Kind, handshake, handshake_token};
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsFd, AsRawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How often the receiver's wait for a hello looks at its stop flag.
const CONSENT_TICK: Duration = Duration::from_millis(20);

/// The receiver ends a run this long after its last datagram when the end
/// marker never came.
pub const IDLE_END: Duration = Duration::from_secs(2);
/// How long the receiver waits for the first datagram.
const FIRST_WAIT: Duration = Duration::from_secs(30);
/// The shortest wait for stragglers after the end marker.
const MIN_STRAGGLER_GRACE: Duration = Duration::from_millis(50);
/// Socket buffers asked for on both ends (the kernel may grant less), so
/// that what is lost is lost on the path, not in a small buffer.
const SOCKET_BUFFER: usize = 4 << 20;
use super::types::MAX_LENGTH;

/// CLOCK_MONOTONIC in nanoseconds: shared by every process of one host
/// (network namespaces included), not between hosts.
fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: clock_gettime writes one timespec.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

fn udp_socket(addr: &SocketAddr) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(*addr), Type::DGRAM, Some(Protocol::UDP))?;
    // What the kernel grants is what we get: a smaller buffer only moves
    // loss into it, and the receiver's count says so either way.
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    Ok(socket)
}

/// A bound receiver, not yet started.
pub struct UdpReceiver {
    socket: UdpSocket,
    spec: ReceiveSpec,
    /// Through an agent: the wait for the sender's hello, from the moment
    /// the port is bound until the run starts.
    consent: Option<Consent>,
}

/// Datagrams a receiver through an agent refused before its consent.
static REFUSED: RateLog = RateLog::new("refused UDP datagrams", endpoint_line);

/// A receiver's wait for its sender's hello, on a thread of its own, so
/// that the sender's set-up (which waits for the consent) finishes before
/// the controller says `Go`. It answers every hello of the run's peer with
/// the run's token (a lost consent is asked for again), connects the
/// socket to the first, and refuses everything else.
struct Consent {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<Result<SocketAddr, String>>>,
}

impl Drop for Consent {
    /// A receiver that never runs (its cell failed) stops waiting.
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

impl Consent {
    fn start(socket: UdpSocket, guard: DataGuard) -> io::Result<Consent> {
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let thread = std::thread::Builder::new()
            .name("udp-consent".into())
            .spawn(move || await_hello(&socket, &guard, &stopped))?;
        Ok(Consent {
            stop,
            thread: Some(thread),
        })
    }

    /// The sender it consented to, or why there is none.
    fn finish(mut self) -> Result<SocketAddr, String> {
        self.stop.store(true, Ordering::Relaxed);
        match self.thread.take().map(JoinHandle::join) {
            Some(Ok(answer)) => answer,
            _ => Err("the wait for the sender's hello failed".into()),
        }
    }
}

fn await_hello(
    socket: &UdpSocket,
    guard: &DataGuard,
    stop: &AtomicBool,
) -> Result<SocketAddr, String> {
    socket
        .set_read_timeout(Some(CONSENT_TICK))
        .map_err(|e| e.to_string())?;
    let consent = handshake(Kind::Consent, &guard.token);
    // A hello is a header and a token; anything longer is not one.
    let mut buf = [0u8; HEADER_LEN + 64];
    let (mut peer, mut refused) = (None::<SocketAddr>, 0u64);
    while !stop.load(Ordering::Relaxed) {
        // Looked at first, taken only if it is ours to take: once the
        // sender has its consent, its first data datagram is the run's,
        // and the wait ends there, leaving it in the socket.
        let (n, from) = match socket.peek_from(&mut buf) {
            Ok((n, _)) if peer.is_some() && handshake_token(&buf[..n], Kind::Hello).is_none() => {
                break;
            }
            Ok(_) => match socket.recv_from(&mut buf) {
                Ok(got) => got,
                Err(e) => return Err(format!("waiting for the sender's hello: {e}")),
            },
            Err(e) if crate::endpoint::stall::nothing_came(&e) => {
                continue;
            }
            // An ICMP error for an earlier consent: the sender is gone or
            // not yet there; it says hello again if it wants one.
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => continue,
            Err(e) => return Err(format!("waiting for the sender's hello: {e}")),
        };
        let asked =
            handshake_token(&buf[..n], Kind::Hello).is_some_and(|t| guard::same(t, &guard.token));
        let why = if !guard::admits(Some(guard), from.ip()) {
            Some(format!(
                "from {}, not the run's peer {}",
                from.ip(),
                guard.peer
            ))
        } else if !asked {
            Some(format!("from {from}: not a hello with the run's token"))
        } else if peer.is_some_and(|p| p != from) {
            Some(format!("from {from}: a second sender"))
        } else {
            None
        };
        if let Some(why) = why {
            refused += 1;
            REFUSED.line(format_args!("refused a UDP datagram {why}"));
            continue;
        }
        if peer.is_none() {
            socket
                .connect(from)
                .map_err(|e| format!("connecting to the sender {from}: {e}"))?;
            peer = Some(from);
        }
        let _ = socket.send_to(&consent, from);
    }
    peer.ok_or_else(|| {
        format!(
            "no hello with the run's token came from the run's peer {} ({refused} other datagrams refused)",
            guard.peer
        )
    })
}

impl UdpReceiver {
    /// Binds `spec.bind` (through an agent, the first free port of its
    /// data ports) and, through an agent, starts waiting for the hello.
    pub fn bind(spec: ReceiveSpec) -> io::Result<UdpReceiver> {
        let socket: UdpSocket = guard::bind_first(spec.bind, spec.guard.as_ref(), |address| {
            let socket = udp_socket(&address)?;
            socket.bind(&address.into())?;
            Ok(socket)
        })?
        .into();
        let consent = match &spec.guard {
            Some(guard) => Some(Consent::start(socket.try_clone()?, guard.clone())?),
            None => None,
        };
        Ok(UdpReceiver {
            socket,
            spec,
            consent,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Receives until the end marker (or [`IDLE_END`] of silence) and
    /// reports what came.
    pub fn run(mut self) -> io::Result<EndpointReport> {
        let consented = match self.consent.take() {
            Some(consent) => Some(consent.finish().map_err(io::Error::other)?),
            None => None,
        };
        let limit = self.spec.limit_bytes.unwrap_or(u64::MAX);
        let before = Before::now(self.spec.interface.as_deref());
        let mut buf = vec![0u8; MAX_LENGTH + 1];
        let mut counts = Counts::new(self.spec.udp_clock_shared);
        let mut pattern: Option<Pattern> = None;
        let (mut first, mut last) = (None::<Instant>, None::<Instant>);
        let mut bytes = 0u64;
        let mut syscalls = 0u64;
        // After the end marker: when the wait for stragglers ends at most.
        let mut end_deadline: Option<Instant> = None;
        let fd = self.socket.as_fd();
        let drops_counted =
            nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::RxqOvfl, &1).is_ok();
        let mut drops = drops_counted.then_some(0u64);
        // Room for the one control message, allocated once, not per datagram.
        let mut control = nix::cmsg_space!(u32);
        self.socket.set_read_timeout(Some(FIRST_WAIT))?;
        loop {
            if let Some(deadline) = end_deadline {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                self.socket.set_read_timeout(Some(left))?;
            }
            let n = match recv_counting_drops(fd, &mut buf, &mut control, &mut drops) {
                Ok(n) => n,
                Err(e) if crate::endpoint::stall::timed_out(&e) => {
                    break;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            syscalls += 1;
            let arrived_ns = monotonic_ns();
            let now = Instant::now();
            let Ok(header) = Header::parse(&buf[..n]) else {
                counts.stats.malformed += 1;
                continue;
            };
            match header.kind {
                // The sender's consent was lost and it asks again (only the
                // consented sender reaches a connected socket).
                Kind::Hello if consented.is_some() => {
                    let _ = self
                        .socket
                        .send(&handshake(Kind::Consent, &buf[HEADER_LEN..n]));
                }
                Kind::Hello | Kind::Consent => counts.stats.malformed += 1,
                Kind::End if end_deadline.is_some() => {} // the marker's copies
                Kind::End => {
                    counts.stats.sent = Some(header.sequence);
                    counts.stats.end_seen = true;
                    if counts.stats.received >= header.sequence {
                        break;
                    }
                    end_deadline = Some(Instant::now() + counts.straggler_grace());
                }
                Kind::Data => {
                    let payload = &buf[HEADER_LEN..n];
                    let pattern = pattern.get_or_insert_with(|| Pattern::new(payload.len()));
                    let offset = header.sequence.wrapping_mul(payload.len() as u64);
                    if payload.len() > pattern.max_len() || pattern.verify(offset, payload).is_err()
                    {
                        counts.stats.malformed += 1;
                        continue;
                    }
                    if first.is_none() {
                        first = Some(now);
                        self.socket.set_read_timeout(Some(IDLE_END))?;
                    }
                    last = Some(now);
                    if counts.arrive(header.sequence, header.sent_ns, arrived_ns) {
                        bytes += n as u64;
                        if bytes > limit {
                            return Err(io::Error::other(format!(
                                "the sender passed the agent's limit of {limit} bytes a cell"
                            )));
                        }
                        if let Some(sent) = counts.stats.sent {
                            counts.stats.after_end += 1;
                            if counts.stats.received >= sent {
                                break;
                            }
                        }
                    }
                }
            }
        }
        counts.stats.socket_drops = drops;
        // One read of the stack's counters for its drops and the report.
        let now = Counters::read();
        counts.stats.stack_drops = before.udp_receive_drops(&now);
        let wall_s = match (first, last) {
            (Some(first), Some(last)) => (last - first).as_secs_f64(),
            _ => 0.0,
        };
        Ok(EndpointReport {
            verified: true,
            udp: Some(counts.finish()),
            ..before
                .end_at(now)
                .report("receiver", (bytes, syscalls, wall_s))
        })
    }
}

/// One datagram into `buf` with `recvmsg`; `drops`, when counted, takes
/// the socket's drop counter from the `SO_RXQ_OVFL` control message (the
/// kernel's count of datagrams it dropped on this socket so far; it sends
/// none while that count is zero), and becomes None if the control data
/// could not be read. `control` is the caller's buffer for the control
/// message (`nix::cmsg_space!(u32)`), reused from datagram to datagram.
fn recv_counting_drops(
    fd: std::os::fd::BorrowedFd<'_>,
    buf: &mut [u8],
    control: &mut [u8],
    drops: &mut Option<u64>,
) -> io::Result<usize> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, SockaddrStorage, recvmsg};
    let mut iov = [io::IoSliceMut::new(buf)];
    let msg =
        recvmsg::<SockaddrStorage>(fd.as_raw_fd(), &mut iov, Some(control), MsgFlags::empty())
            .map_err(io::Error::from)?;
    if drops.is_some() {
        match msg.cmsgs() {
            Ok(cmsgs) => {
                for cmsg in cmsgs {
                    if let ControlMessageOwned::RxqOvfl(dropped) = cmsg {
                        *drops = Some(u64::from(dropped));
                    }
                }
            }
            // A control message that did not fit: the count is no longer
            // known, and the datagram itself is still good.
            Err(_) => *drops = None,
        }
    }
    Ok(msg.bytes)
}

/// The receiver's bookkeeping, apart from the socket (unit-tested).
struct Counts {
    stats: UdpStats,
    seen: Vec<u64>,
    highest: Option<u64>,
    last_transit_ns: Option<i128>,
    /// The least and greatest transit time seen (any clock: their
    /// difference does not depend on the offset between the ends' clocks).
    transit_range_ns: Option<(i128, i128)>,
    jitter_ns: f64,
    latency: Option<hdrhistogram::Histogram<u64>>,
}

impl Counts {
    fn new(clock_shared: bool) -> Counts {
        Counts {
            stats: UdpStats::default(),
            seen: Vec::new(),
            highest: None,
            last_transit_ns: None,
            transit_range_ns: None,
            jitter_ns: 0.0,
            latency: clock_shared
                .then(|| hdrhistogram::Histogram::new_with_bounds(1, 60_000_000, 3).ok())
                .flatten(),
        }
    }

    /// Counts datagram `sequence`, sent at `sent_ns` and here at
    /// `arrived_ns`. False for a duplicate.
    fn arrive(&mut self, sequence: u64, sent_ns: u64, arrived_ns: u64) -> bool {
        let (word, bit) = ((sequence / 64) as usize, sequence % 64);
        if word >= self.seen.len() {
            // Sequence numbers come from the peer: grow only as far as a
            // run could plausibly reach (2^32 datagrams).
            if sequence >= 1 << 32 {
                self.stats.malformed += 1;
                return false;
            }
            self.seen.resize(word + 1, 0);
        }
        if self.seen[word] & (1 << bit) != 0 {
            self.stats.duplicates += 1;
            return false;
        }
        self.seen[word] |= 1 << bit;
        self.stats.received += 1;
        match self.highest {
            Some(high) if sequence < high => self.stats.reordered += 1,
            _ => self.highest = Some(sequence),
        }
        // RFC 3550 6.4.1: D from consecutive arrivals' transit times, in
        // any clock (an offset between clocks cancels).
        let transit = i128::from(arrived_ns) - i128::from(sent_ns);
        if let Some(previous) = self.last_transit_ns {
            let d = (transit - previous).abs() as f64;
            self.jitter_ns += (d - self.jitter_ns) / 16.0;
        }
        self.last_transit_ns = Some(transit);
        self.transit_range_ns = Some(match self.transit_range_ns {
            Some((least, most)) => (least.min(transit), most.max(transit)),
            None => (transit, transit),
        });
        if let Some(h) = &mut self.latency {
            let _ = h.record((transit.max(0) / 1000).max(1) as u64);
        }
        true
    }

    /// How long to wait after the end marker for datagrams sent before it
    /// and still on the path: a datagram sent just before the marker
    /// arrives at most (greatest - least transit seen) after it, so twice
    /// that spread, at least [`MIN_STRAGGLER_GRACE`] and at most [`IDLE_END`].
    fn straggler_grace(&self) -> Duration {
        let spread_ns = self
            .transit_range_ns
            .map_or(0, |(least, most)| (most - least).max(0));
        let grace = Duration::from_nanos(u64::try_from(2 * spread_ns).unwrap_or(u64::MAX));
        grace.clamp(MIN_STRAGGLER_GRACE, IDLE_END)
    }

    fn finish(mut self) -> UdpStats {
        self.stats.jitter_ms = self.jitter_ns / 1e6;
        if let Some(sent) = self.stats.sent {
            count_losses(&mut self.stats, sent);
        }
        self.stats.latency = self.latency.filter(|h| !h.is_empty()).map(|h| Latency {
            p50_us: h.value_at_quantile(0.5) as f64,
            p90_us: h.value_at_quantile(0.9) as f64,
            p99_us: h.value_at_quantile(0.99) as f64,
            max_us: h.max() as f64,
        });
        self.stats
    }
}

/// `lost` and `lost_pct` of a receiver's counts, against `sent`.
fn count_losses(stats: &mut UdpStats, sent: u64) {
    let lost = sent.saturating_sub(stats.received);
    stats.sent = Some(sent);
    stats.lost = Some(lost);
    stats.lost_pct = (sent > 0).then(|| 100.0 * lost as f64 / sent as f64);
}

/// A receiver that missed every copy of the end marker (a path that
/// dropped them, as a full queue drops anything) stopped after
/// [`IDLE_END`] of silence, by when whatever was still on the path had
/// arrived or was lost: its losses are then counted against the sender's
/// own count, which the controller has from the sender's report.
/// `end_seen` stays false, saying where `sent` came from.
pub fn count_losses_from_sender(receiver: &mut EndpointReport, sender: &EndpointReport) {
    let sent = sender.udp.as_ref().and_then(|u| u.sent);
    if let (Some(got), Some(sent)) = (receiver.udp.as_mut(), sent)
        && got.sent.is_none()
    {
        count_losses(got, sent);
    }
}

/// A connected sender, not yet started.
pub struct UdpSender {
    socket: UdpSocket,
    spec: SendSpec,
    pace: UdpPace,
}

impl UdpSender {
    pub fn connect(spec: SendSpec, pace: UdpPace) -> io::Result<UdpSender> {
        let bind: SocketAddr = match spec.connect {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = udp_socket(&spec.connect)?;
        socket.bind(&bind.into())?;
        socket.connect(&spec.connect.into())?;
        let socket: UdpSocket = socket.into();
        if let Some(token) = &spec.token {
            guard::ask_udp_consent(&socket, token)?;
        }
        Ok(UdpSender { socket, spec, pace })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Sends on schedule until the amount is sent or the time is up, then
    /// the end marker three times.
    pub fn run(self) -> io::Result<EndpointReport> {
        let before = Before::now(self.spec.interface.as_deref());
        let length = self.pace.length;
        let payload = length - HEADER_LEN;
        let pattern = Pattern::new(payload);
        let gap_ns = (length as f64 * 8.0 * 1e9 / self.pace.rate_bps as f64).max(1.0);
        let count = match self.spec.amount {
            Amount::Bytes(total) => Some(total.div_ceil(length as u64)),
            Amount::Seconds(_) => None,
        };
        let mut buf = vec![0u8; length];
        let (mut sent, mut errors, mut syscalls, mut slot) = (0u64, 0u64, 0u64, 0u64);
        let start = Instant::now();
        loop {
            if count.is_some_and(|c| sent >= c) {
                break;
            }
            let due = Duration::from_nanos((slot as f64 * gap_ns) as u64);
            let mut now = start.elapsed();
            if let Amount::Seconds(limit) = self.spec.amount
                && now.as_secs_f64() >= limit
            {
                break;
            }
            // Sleep when well ahead, spin the last stretch.
            while now < due {
                let ahead = due - now;
                if ahead > Duration::from_micros(200) {
                    std::thread::sleep(ahead - Duration::from_micros(100));
                } else {
                    std::hint::spin_loop();
                }
                now = start.elapsed();
            }
            slot += 1;
            Header {
                kind: Kind::Data,
                sequence: sent,
                sent_ns: monotonic_ns(),
            }
            .emit(&mut buf);
            buf[HEADER_LEN..].copy_from_slice(pattern.slice(sent * payload as u64, payload));
            syscalls += 1;
            match self.socket.send(&buf) {
                Ok(_) => sent += 1,
                Err(e)
                    if matches!(e.raw_os_error(), Some(libc::ENOBUFS | libc::ECONNREFUSED))
                        || e.kind() == io::ErrorKind::ConnectionRefused =>
                {
                    errors += 1
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        let wall_s = start.elapsed().as_secs_f64();
        let mut end = [0u8; HEADER_LEN];
        Header {
            kind: Kind::End,
            sequence: sent,
            sent_ns: monotonic_ns(),
        }
        .emit(&mut end);
        for _ in 0..3 {
            // A marker the receiver does not get costs it IDLE_END only.
            let _ = self.socket.send(&end);
            syscalls += 1;
            std::thread::sleep(Duration::from_millis(1));
        }
        Ok(EndpointReport {
            udp: Some(UdpStats {
                sent: Some(sent),
                send_errors: errors,
                ..Default::default()
            }),
            ..before
                .end()
                .report("sender", (sent * length as u64, syscalls, wall_s))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_receiver_that_missed_the_end_marker_counts_its_losses_against_the_senders_report() {
        let report = |udp: UdpStats| EndpointReport {
            udp: Some(udp),
            ..Default::default()
        };
        let sender = report(UdpStats {
            sent: Some(10),
            ..Default::default()
        });
        let mut receiver = report(UdpStats {
            received: 7,
            ..Default::default()
        });
        count_losses_from_sender(&mut receiver, &sender);
        let got = receiver.udp.as_ref().unwrap();
        assert_eq!(
            (got.sent, got.lost, got.lost_pct),
            (Some(10), Some(3), Some(30.0))
        );
        assert!(!got.end_seen, "the marker still reads as missed");
        // A marker that came is the receiver's own count, left alone.
        let mut receiver = report(UdpStats {
            sent: Some(9),
            received: 7,
            lost: Some(2),
            end_seen: true,
            ..Default::default()
        });
        count_losses_from_sender(&mut receiver, &sender);
        assert_eq!(receiver.udp.unwrap().sent, Some(9));
    }

    #[test]
    fn loss_duplicates_reordering_and_jitter_are_counted_as_rfc_3550_says() {
        let mut c = Counts::new(true);
        // Sent every 1 ms; transit 100 µs, except datagram 2 (300 µs).
        let ms = 1_000_000u64;
        for (seq, transit) in [(0, 100_000), (1, 100_000), (3, 100_000), (2, 300_000)] {
            assert!(c.arrive(seq, seq * ms, seq * ms + transit));
        }
        assert!(!c.arrive(3, 3 * ms, 3 * ms + 100_000), "a duplicate");
        c.stats.sent = Some(5);
        let stats = c.finish();
        assert_eq!(stats.received, 4);
        assert_eq!(stats.duplicates, 1);
        assert_eq!(stats.reordered, 1, "2 came after 3");
        assert_eq!(stats.lost, Some(1), "4 never came");
        assert_eq!(stats.lost_pct, Some(20.0));
        // D: 0, 0, 200 µs: J = 200000/16 = 12500 ns.
        assert!(
            (stats.jitter_ms - 0.0125).abs() < 1e-12,
            "{}",
            stats.jitter_ms
        );
        let latency = stats.latency.unwrap();
        assert_eq!(latency.p50_us, 100.0);
        assert!((latency.max_us - 300.0).abs() < 1.0);
        // Between hosts no latency is claimed.
        let mut apart = Counts::new(false);
        apart.arrive(0, 5, 10);
        assert_eq!(apart.finish().latency, None);
    }

    #[test]
    fn the_wait_for_stragglers_is_twice_the_transit_spread_within_bounds() {
        let ms = 1_000_000u64;
        let mut c = Counts::new(false);
        assert_eq!(c.straggler_grace(), MIN_STRAGGLER_GRACE, "nothing seen yet");
        // Clock offset 1 s between the ends: only the spread matters.
        c.arrive(0, 0, 1000 * ms + 10 * ms);
        c.arrive(1, ms, 1000 * ms + ms + 40 * ms);
        assert_eq!(c.straggler_grace(), Duration::from_millis(60));
        c.arrive(2, 2 * ms, 1000 * ms + 2 * ms + 5000 * ms);
        assert_eq!(c.straggler_grace(), IDLE_END);
    }

    /// One data datagram of `payload` bytes as the sender makes it,
    /// stamped `sent_ns`.
    fn datagram(sequence: u64, payload: usize, sent_ns: u64) -> Vec<u8> {
        let mut buf = vec![0u8; HEADER_LEN + payload];
        Header {
            kind: Kind::Data,
            sequence,
            sent_ns,
        }
        .emit(&mut buf);
        let pattern = Pattern::new(payload);
        buf[HEADER_LEN..].copy_from_slice(pattern.slice(sequence * payload as u64, payload));
        buf
    }

    fn end_marker(sent: u64) -> Vec<u8> {
        let mut end = vec![0u8; HEADER_LEN];
        Header {
            kind: Kind::End,
            sequence: sent,
            sent_ns: monotonic_ns(),
        }
        .emit(&mut end);
        end
    }

    fn receiver_spec() -> ReceiveSpec {
        ReceiveSpec {
            tls: None,
            quic: None,
            bind: "127.0.0.1:0".parse().unwrap(),
            options: Default::default(),
            strategy: crate::endpoint::bulk::types::RecvStrategy::Read { buffer: 65536 },
            verify: true,
            progress: false,
            interface: None,
            guard: None,
            limit_bytes: None,
            udp: true,
            udp_clock_shared: true,
        }
    }

    fn receiver() -> UdpReceiver {
        UdpReceiver::bind(receiver_spec()).unwrap()
    }

    #[test]
    fn a_datagram_that_overtook_the_end_marker_is_received_not_lost() {
        let receiver = receiver();
        let addr = receiver.local_addr().unwrap();
        let thread = std::thread::spawn(move || receiver.run().unwrap());
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        // Datagrams 0..10, 7 held back on the "path" and delivered after
        // the marker; 9 never delivered.
        let late = datagram(7, 100, monotonic_ns());
        for sequence in (0..10).filter(|s| ![7, 9].contains(s)) {
            peer.send_to(&datagram(sequence, 100, monotonic_ns()), addr)
                .unwrap();
        }
        peer.send_to(&end_marker(10), addr).unwrap();
        std::thread::sleep(Duration::from_millis(10));
        peer.send_to(&late, addr).unwrap();
        let udp = thread.join().unwrap().udp.unwrap();
        assert!(udp.end_seen);
        assert_eq!(udp.received, 9);
        assert_eq!(udp.after_end, 1);
        assert_eq!(udp.lost, Some(1), "only 9 is lost");
        assert_eq!(udp.socket_drops, Some(0));
    }

    #[test]
    fn a_full_socket_buffer_reports_its_drops() {
        let socket = udp_socket(&"127.0.0.1:0".parse().unwrap()).unwrap();
        socket.set_recv_buffer_size(16 << 10).unwrap();
        socket
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        let socket: UdpSocket = socket.into();
        let fd = socket.as_fd();
        nix::sys::socket::setsockopt(&fd, nix::sys::socket::sockopt::RxqOvfl, &1).unwrap();
        let peer = UdpSocket::bind("127.0.0.1:0").unwrap();
        let addr = socket.local_addr().unwrap();
        let burst = 500;
        for sequence in 0..burst {
            peer.send_to(&datagram(sequence, 1000, 0), addr).unwrap();
        }
        // One more after the burst carries the count of every drop before it.
        let read_all = |drops: &mut Option<u64>| {
            socket.set_nonblocking(true).unwrap();
            let mut buf = vec![0u8; 2048];
            let mut control = nix::cmsg_space!(u32);
            let mut read = 0u64;
            while recv_counting_drops(fd, &mut buf, &mut control, drops).is_ok() {
                read += 1;
            }
            read
        };
        let mut drops = Some(0);
        let first = read_all(&mut drops);
        peer.send_to(&datagram(burst, 1000, 0), addr).unwrap();
        let second = read_all(&mut drops);
        assert_eq!(second, 1);
        let dropped = drops.unwrap();
        assert!(dropped > 0, "a 16 KB buffer held all {burst} datagrams");
        assert_eq!(first + second + dropped, burst + 1);
    }

    #[test]
    fn a_hostile_sequence_number_does_not_allocate() {
        let mut c = Counts::new(false);
        assert!(!c.arrive(u64::MAX, 0, 0));
        assert_eq!(c.stats.malformed, 1);
        assert!(c.seen.is_empty());
    }

    #[test]
    fn datagrams_paced_over_loopback_all_arrive_verified() {
        let receiver = receiver();
        let addr = receiver.local_addr().unwrap();
        let thread = std::thread::spawn(move || receiver.run().unwrap());
        let pace = UdpPace {
            rate_bps: 50_000_000,
            length: 1000,
        };
        let sender = UdpSender::connect(
            SendSpec {
                tls: None,
                quic: None,
                connect: addr,
                options: Default::default(),
                strategy: crate::endpoint::bulk::types::SendStrategy::Write,
                record: 1000,
                amount: Amount::Bytes(1_000_000),
                interface: None,
                token: None,
                interval_s: None,
                udp: Some(pace),
            },
            pace,
        )
        .unwrap();
        let sent = sender.run().unwrap();
        let got = thread.join().unwrap();
        let (s, r) = (sent.udp.unwrap(), got.udp.unwrap());
        assert_eq!(s.sent, Some(1000));
        assert!(r.end_seen);
        assert_eq!(r.sent, Some(1000));
        assert_eq!(r.received + r.lost.unwrap(), 1000);
        assert_eq!(r.malformed, 0);
        // 1000 datagrams of 8000 bits at 50 Mbit/s: 160 ms on schedule.
        assert!(sent.wall_s >= 0.15, "{}", sent.wall_s);
        assert!(r.latency.is_some());
    }

    fn guarded_receiver(token: [u8; 16]) -> UdpReceiver {
        UdpReceiver::bind(ReceiveSpec {
            guard: Some(DataGuard {
                peer: "127.0.0.1".parse().unwrap(),
                token,
                ports: None,
            }),
            udp_clock_shared: false,
            ..receiver_spec()
        })
        .unwrap()
    }

    fn sender_spec(connect: SocketAddr, token: Option<[u8; 16]>, pace: UdpPace) -> SendSpec {
        SendSpec {
            tls: None,
            quic: None,
            connect,
            options: Default::default(),
            strategy: crate::endpoint::bulk::types::SendStrategy::Write,
            record: 1000,
            amount: Amount::Bytes(100_000),
            interface: None,
            token,
            interval_s: None,
            udp: Some(pace),
        }
    }

    /// Waits briefly for any datagram on `socket`.
    fn answered(socket: &UdpSocket) -> bool {
        socket
            .set_read_timeout(Some(Duration::from_millis(300)))
            .unwrap();
        socket.recv(&mut [0u8; 128]).is_ok()
    }

    #[test]
    fn a_guarded_receiver_consents_only_to_its_peer_with_the_token() {
        let token = [7u8; 16];
        let receiver = guarded_receiver(token);
        let addr = receiver.local_addr().unwrap();
        // Another address with the right token, and the peer's address
        // with a wrong one: neither gets an answer.
        let elsewhere = UdpSocket::bind("127.0.0.2:0").unwrap();
        elsewhere.connect(addr).unwrap();
        elsewhere.send(&handshake(Kind::Hello, &token)).unwrap();
        assert!(!answered(&elsewhere), "a stranger got a consent");
        let wrong = UdpSocket::bind("127.0.0.1:0").unwrap();
        wrong.connect(addr).unwrap();
        wrong.send(&handshake(Kind::Hello, &[8u8; 16])).unwrap();
        assert!(!answered(&wrong), "a wrong token got a consent");
        // The peer with the token is answered.
        let pace = UdpPace {
            rate_bps: 50_000_000,
            length: 1000,
        };
        let sender = UdpSender::connect(sender_spec(addr, Some(token), pace), pace).unwrap();
        // The stranger's data after the consent does not reach the
        // connected socket.
        elsewhere.send(&datagram(0, 100, 0)).unwrap();
        // The sender's Go may come before the receiver's: its data waits
        // in the socket, none taken by the wait for a hello.
        let sent = sender.run().unwrap();
        let got = receiver.run().unwrap().udp.unwrap();
        assert_eq!(sent.udp.unwrap().sent, Some(100));
        // All of them: the wait for the hello takes none of the run's
        // datagrams (100 of 1000 bytes fit loopback's buffers whole).
        assert_eq!((got.received, got.lost), (100, Some(0)));
        assert_eq!(got.malformed, 0);
    }

    #[test]
    fn a_sender_without_consent_sends_nothing_but_hellos() {
        let silent = UdpSocket::bind("127.0.0.1:0").unwrap();
        let pace = UdpPace {
            rate_bps: 50_000_000,
            length: 1000,
        };
        let refused = UdpSender::connect(
            sender_spec(silent.local_addr().unwrap(), Some([3u8; 16]), pace),
            pace,
        )
        .err()
        .expect("no consent, no sender");
        assert!(refused.to_string().contains("did not consent"), "{refused}");
        silent.set_nonblocking(true).unwrap();
        let mut buf = [0u8; 2048];
        let mut hellos = 0;
        while let Ok(n) = silent.recv(&mut buf) {
            assert_eq!(
                handshake_token(&buf[..n], Kind::Hello),
                Some(&[3u8; 16][..])
            );
            hellos += 1;
        }
        // One every 100 ms for 5 s.
        assert!((10..=60).contains(&hellos), "{hellos} hellos");
    }
}
