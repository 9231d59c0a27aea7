//! The data port of a run through an agent: opened in the agent's
//! `--data-ports` range, served only to the peer the controller named, and
//! only to a connection whose first bytes are the run's token; and the
//! consent that the connecting end waits for before it sends anything more.
//!
//! ```text
//! connecting end                      guarded listener
//!   token (16 bytes)  ------------->  from the run's peer? the run's token?
//!                     <-------------  consent: "netlab-y" + token (24 bytes)
//!   data ...          ------------->
//! ```
//!
//! UDP has its consent too ([`ask_udp_consent`], [`udp_consent`]): a
//! sender through an agent says hello (a `wire::udpstream` handshake
//! datagram with the token) until the listener it sends to answers with
//! a consent carrying the same token, and sends nothing else before; the
//! stream's UDP test and RPC over UDP both start with it.
//!
//! TCP's consent is its counterpart: an agent told by a key holder to connect
//! to a third party's listener sends it the 16-byte token and nothing
//! more, since no listener but the run's answers the consent (an echo
//! service returns the token alone).
//!
//! Strangers cannot delay or fail the run's connection: the gate holds
//! connections awaiting their token on one thread with poll, reads every
//! one that has bytes before it accepts at most [`ACCEPT_BURST`] new ones,
//! and makes room by ending the *oldest* awaiting one. The run's own
//! connection sends its token in the flight after its handshake, so it is
//! judged before it could be the oldest; a silent stranger ages out.
//!
//! A local run has no guard, its listeners being on loopback or inside the
//! namespaces it made, with one exception: rpm's probe server is guarded
//! on this host too (`Launcher::guard_here_too`), since anyone on the host
//! can reach 127.0.0.1 and a stranger's downloads would change its
//! figures. The token is sent by the connecting end right after
//! `connect`, before `Go`, so it is outside every measured interval.

use crate::endpoint::protocol::{DataGuard, TOKEN_LEN, Token};
use crate::wire::udpstream::{HEADER_LEN, Kind, handshake, handshake_token};
use nix::poll::{PollFd, PollFlags, poll};
use nix::sys::eventfd::{EfdFlags, EventFd};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use super::ratelog::{RateLog, endpoint_line};
use super::waiting::{fill_by, poll_ready};

/// A guarded listener's queue: room for every connection a stranger could
/// open before the gate's thread takes them (it takes them at once).
pub const GUARDED_BACKLOG: i32 = 128;

/// Connections whose token the gate awaits at once; a new one ends the oldest.
pub const MAX_CHECKING: usize = 64;

/// New connections the gate takes between two readings of those awaiting
/// their token (well under [`MAX_CHECKING`]).
pub const ACCEPT_BURST: usize = 8;

/// How long a connecting peer has to send its token.
pub const TOKEN_TIME: Duration = Duration::from_secs(5);

/// How long a connecting end waits for the listener's consent.
pub const CONSENT_TIME: Duration = Duration::from_secs(5);

/// The consent's first bytes; its last are the token.
pub const CONSENT_TAG: [u8; 8] = *b"netlab-y";

/// The consent's length.
pub const CONSENT_LEN: usize = CONSENT_TAG.len() + TOKEN_LEN;

/// How long a UDP sender through an agent says hello before it gives up on
/// the listener's consent (within the controller's 10 s for set-up).
pub const UDP_CONSENT_TIME: Duration = Duration::from_secs(5);
/// How often it says hello meanwhile.
const HELLO_EVERY: Duration = Duration::from_millis(100);

/// What a guarded UDP listener answers `datagram` from `from` with: the
/// consent, when it is a hello carrying the run's token from the run's
/// peer (see [`ask_udp_consent`]); `None` for anything else.
pub fn udp_consent(datagram: &[u8], from: SocketAddr, guard: &DataGuard) -> Option<Vec<u8>> {
    let token = handshake_token(datagram, Kind::Hello)?;
    (admits(Some(guard), from.ip()) && same(token, &guard.token))
        .then(|| handshake(Kind::Consent, &guard.token))
}

/// Says hello with `token` on the connected `socket` every [`HELLO_EVERY`]
/// until the receiver's consent with the same token comes back (the
/// socket is connected, so only the receiver's datagrams reach it), for at
/// most [`UDP_CONSENT_TIME`].
pub fn ask_udp_consent(socket: &UdpSocket, token: &[u8]) -> io::Result<()> {
    let hello = handshake(Kind::Hello, token);
    let mut buf = [0u8; HEADER_LEN + 64];
    let start = Instant::now();
    let mut refused = false;
    socket.set_read_timeout(Some(HELLO_EVERY))?;
    while start.elapsed() < UDP_CONSENT_TIME {
        match socket.send(&hello) {
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => refused = true,
            Err(e) => return Err(e),
        }
        let asked_until = Instant::now() + HELLO_EVERY;
        while Instant::now() < asked_until {
            match socket.recv(&mut buf) {
                Ok(n)
                    if handshake_token(&buf[..n], Kind::Consent)
                        .is_some_and(|t| same(t, token)) =>
                {
                    socket.set_read_timeout(None)?;
                    return Ok(());
                }
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionRefused => refused = true,
                Err(e) if crate::endpoint::stall::nothing_came(&e) => {
                    break;
                }
                Err(e) => return Err(e),
            }
        }
    }
    let peer = socket.peer_addr()?;
    Err(io::Error::new(
        io::ErrorKind::TimedOut,
        format!(
            "the listener at {peer} did not consent within {} s{}; nothing was sent",
            UDP_CONSENT_TIME.as_secs(),
            if refused {
                " (its host answered that no socket listens there)"
            } else {
                " (no answer: its agent did not open the port, or a firewall drops UDP on the path)"
            }
        ),
    ))
}

/// What a guarded listener answers a connection with the run's token.
pub fn consent(token: &Token) -> [u8; CONSENT_LEN] {
    let mut bytes = [0u8; CONSENT_LEN];
    bytes[..CONSENT_TAG.len()].copy_from_slice(&CONSENT_TAG);
    bytes[CONSENT_TAG.len()..].copy_from_slice(token);
    bytes
}

/// The address as the same family-less IP (an IPv4-mapped IPv6 address is
/// its IPv4 address).
fn plain(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// The addresses to try binding, in order: `bind` itself, or with a guard
/// and port 0, each port of the guard's range.
pub fn candidates(bind: SocketAddr, guard: Option<&DataGuard>) -> Vec<SocketAddr> {
    match guard.and_then(|g| g.ports) {
        Some((lo, hi)) if bind.port() == 0 || bind.port() < lo || bind.port() > hi => (lo..=hi)
            .map(|port| SocketAddr::new(bind.ip(), port))
            .collect(),
        _ => vec![bind],
    }
}

/// Binds the first free address of [`candidates`] with `bind_one`.
pub fn bind_first<T>(
    bind: SocketAddr,
    guard: Option<&DataGuard>,
    mut bind_one: impl FnMut(SocketAddr) -> io::Result<T>,
) -> io::Result<T> {
    let addresses = candidates(bind, guard);
    let mut last = None;
    for address in &addresses {
        match bind_one(*address) {
            Ok(bound) => return Ok(bound),
            Err(e) if e.kind() == io::ErrorKind::AddrInUse && addresses.len() > 1 => last = Some(e),
            Err(e) => return Err(e),
        }
    }
    let (lo, hi) = guard.and_then(|g| g.ports).unwrap_or((0, 0));
    Err(io::Error::new(
        io::ErrorKind::AddrInUse,
        format!(
            "every data port {lo}-{hi} is in use ({})",
            last.map_or_else(String::new, |e| e.to_string())
        ),
    ))
}

/// Whether `ip` is the guard's peer (always, without a guard).
pub fn admits(guard: Option<&DataGuard>, ip: IpAddr) -> bool {
    guard.is_none_or(|g| plain(g.peer) == plain(ip))
}

/// Compares in time independent of where the tokens differ.
pub fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Checks a new connection against the guard: the peer's address, then the
/// token in its first bytes (all of it within [`TOKEN_TIME`], however it
/// trickles in); then answers the consent. `Err` says why it was refused.
pub fn check(stream: &mut TcpStream, peer: SocketAddr, guard: &DataGuard) -> Result<(), String> {
    if !admits(Some(guard), peer.ip()) {
        return Err(format!(
            "from {}, not the run's peer {}",
            peer.ip(),
            guard.peer
        ));
    }
    let mut token = [0u8; TOKEN_LEN];
    let until = std::time::Instant::now() + TOKEN_TIME;
    fill_by(stream, &mut token, Some(until)).map_err(|e| match e.kind() {
        io::ErrorKind::TimedOut => format!(
            "from {peer}: no run token within {} s",
            TOKEN_TIME.as_secs()
        ),
        io::ErrorKind::UnexpectedEof => format!("from {peer}: closed before its token"),
        _ => format!("from {peer}: {e}"),
    })?;
    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
    if !same(&token, &guard.token) {
        return Err(format!("from {peer}: wrong run token"));
    }
    stream
        .write_all(&consent(&guard.token))
        .map_err(|e| format!("from {peer}: lost before its consent: {e}"))
}

/// A guarded data port's gatekeeper. It accepts from the moment the port
/// opens, on a thread of its own: a connection from another address is
/// closed at once; one from the run's peer gets [`TOKEN_TIME`] to send the
/// token, at most [`MAX_CHECKING`] at a time (a new one ends the oldest).
/// Each that passes gets its consent and is handed over
/// ([`Gate::admitted`]); the gate closes when dropped.
pub struct Gate {
    admitted: mpsc::Receiver<(TcpStream, SocketAddr)>,
    /// Counts the connections handed over and not yet taken (an eventfd
    /// in semaphore mode): a server's event loop polls it as it would
    /// poll a listener ([`Door`]).
    ready: Arc<EventFd>,
    stop: Arc<AtomicBool>,
    local: SocketAddr,
}

impl Gate {
    /// Starts keeping `listener` (bound and listening) for `guard`.
    pub fn open(listener: TcpListener, guard: DataGuard) -> io::Result<Gate> {
        listener.set_nonblocking(true)?;
        let local = listener.local_addr()?;
        let (tx, admitted) = mpsc::channel();
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = stop.clone();
        let ready = Arc::new(EventFd::from_value_and_flags(
            0,
            EfdFlags::EFD_SEMAPHORE | EfdFlags::EFD_NONBLOCK | EfdFlags::EFD_CLOEXEC,
        )?);
        let signal = ready.clone();
        // The count is written before the connection is sent, so it
        // never lags the channel: whoever takes a connection finds its
        // count there to clear, and a count with nothing yet in the
        // channel is the moment between the two (a poll wakes, finds none,
        // and wakes again at once). Written after, a take could clear
        // nothing and the late count be left to signal a connection that
        // was gone, or an empty take clear the count of one just sent.
        let hand_over = move |admitted: (TcpStream, SocketAddr)| {
            let _ = signal.write(1);
            let _ = tx.send(admitted);
        };
        std::thread::Builder::new()
            .name("data-gate".into())
            .spawn(move || keep(&listener, &guard, &hand_over, &stopped))?;
        Ok(Gate {
            admitted,
            ready,
            stop,
            local,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// The next connection that passed, waiting at most `wait`
    /// (`WouldBlock` when none came).
    pub fn admitted(&self, wait: Duration) -> io::Result<TcpStream> {
        self.next(wait)?
            .map(|(stream, _)| stream)
            .ok_or_else(|| io::ErrorKind::WouldBlock.into())
    }

    /// As [`Gate::admitted`], with the peer's address; `None` when none
    /// came within `wait` (for a server that takes many connections).
    pub fn next(&self, wait: Duration) -> io::Result<Option<(TcpStream, SocketAddr)>> {
        match self.admitted.recv_timeout(wait) {
            Ok(admitted) => {
                // Taken: one less to signal (written before the send).
                let _ = self.ready.read();
                Ok(Some(admitted))
            }
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(io::Error::other("the data port's gate stopped"))
            }
        }
    }
}

impl Gate {
    /// The next connection that passed, if one is waiting now (else
    /// `WouldBlock`): for a server whose event loop polls [`Gate::ready_fd`].
    pub fn take(&self) -> io::Result<(TcpStream, SocketAddr)> {
        match self.admitted.try_recv() {
            Ok(admitted) => {
                let _ = self.ready.read();
                Ok(admitted)
            }
            // A count here belongs to a connection on its way into the
            // channel: left for its take to clear.
            Err(mpsc::TryRecvError::Empty) => Err(io::ErrorKind::WouldBlock.into()),
            Err(mpsc::TryRecvError::Disconnected) => {
                Err(io::Error::other("the data port's gate stopped"))
            }
        }
    }

    /// Readable while a connection that passed waits to be taken.
    pub fn ready_fd(&self) -> BorrowedFd<'_> {
        self.ready.as_fd()
    }
}

/// Where a server takes its connections from: its listener (a local run,
/// on loopback or in namespaces it made), or the gate in front of a
/// guarded port (a run through an agent), which checks each connection's
/// token on its own thread so that strangers cannot hold the server. Both
/// have a descriptor to poll, readable while a connection can be taken.
pub enum Door {
    Open(TcpListener),
    Gated(Gate),
}

impl Door {
    /// `listener` (bound and listening) as the door of a server with
    /// `guard`. An open door's listener keeps its blocking mode (io_uring
    /// accepts on a blocking one); see [`Door::nonblocking`].
    pub fn new(listener: TcpListener, guard: Option<DataGuard>) -> io::Result<Door> {
        match guard {
            None => Ok(Door::Open(listener)),
            Some(guard) => Ok(Door::Gated(Gate::open(listener, guard)?)),
        }
    }

    /// Makes [`Door::accept`] return at once (`WouldBlock`) when no
    /// connection waits: the listener non-blocking (a gate's door is so
    /// already).
    pub fn nonblocking(self) -> io::Result<Door> {
        if let Door::Open(listener) = &self {
            listener.set_nonblocking(true)?;
        }
        Ok(self)
    }

    /// A connection now, or `WouldBlock` (on a [`Door::nonblocking`] door).
    pub fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        match self {
            Door::Open(listener) => listener.accept(),
            Door::Gated(gate) => gate.take(),
        }
    }

    /// Readable while [`Door::accept`] has a connection to give.
    pub fn fd(&self) -> BorrowedFd<'_> {
        match self {
            Door::Open(listener) => listener.as_fd(),
            Door::Gated(gate) => gate.ready_fd(),
        }
    }

    /// Waits up to `wait` for a connection (a poll on [`Door::fd`]), then
    /// takes it: `WouldBlock` when none came.
    /// A gate's count can lead its connection by a moment, so a wake-up
    /// that finds none polls again until `wait` is spent.
    pub fn accept_within(&self, wait: Duration) -> io::Result<(TcpStream, SocketAddr)> {
        let deadline = Instant::now() + wait;
        loop {
            match self.accept() {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let left = deadline.saturating_duration_since(Instant::now());
                    if left.is_zero() {
                        return Err(e);
                    }
                    let mut fds = [PollFd::new(self.fd(), PollFlags::POLLIN)];
                    let millis = u16::try_from(left.as_millis().max(1)).unwrap_or(u16::MAX);
                    match poll(&mut fds, millis) {
                        Ok(0) => return self.accept(),
                        Ok(_) | Err(nix::errno::Errno::EINTR) => {}
                        Err(e) => return Err(e.into()),
                    }
                }
                other => return other,
            }
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Refused data connections, rate-limited per cause.
static REFUSED: RateLog = RateLog::new("refused data connections", endpoint_line);

/// A connection from the run's peer whose token has not arrived whole.
struct Awaiting {
    stream: TcpStream,
    peer: SocketAddr,
    since: std::time::Instant,
    token: Token,
    got: usize,
}

/// What reading an awaiting connection found.
enum TokenRead {
    Partial,
    Whole,
    Closed,
}

impl Awaiting {
    fn read(&mut self) -> TokenRead {
        while self.got < TOKEN_LEN {
            match self.stream.read(&mut self.token[self.got..]) {
                Ok(0) => return TokenRead::Closed,
                Ok(n) => self.got += n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return TokenRead::Partial,
                Err(_) => return TokenRead::Closed,
            }
        }
        TokenRead::Whole
    }
}

fn keep(
    listener: &TcpListener,
    guard: &DataGuard,
    hand_over: &dyn Fn((TcpStream, SocketAddr)),
    stop: &AtomicBool,
) {
    let mut awaiting: Vec<Awaiting> = Vec::new();
    while !stop.load(Ordering::Relaxed) {
        let (listener_ready, ready) = wait(listener, &awaiting);
        // First those already here: the run's token, once arrived, is
        // judged before anyone new can push its connection out.
        let mut still = Vec::with_capacity(awaiting.len());
        for (mut a, readable) in awaiting.drain(..).zip(ready) {
            if !readable {
                still.push(a);
                continue;
            }
            match a.read() {
                TokenRead::Partial => still.push(a),
                TokenRead::Closed => {
                    REFUSED.line_about(
                        "closed before its token",
                        format_args!(
                            "refused a data connection from {}: closed before its token",
                            a.peer
                        ),
                    );
                }
                TokenRead::Whole if same(&a.token, &guard.token) => {
                    let mut stream = a.stream;
                    let answered = stream
                        .set_nonblocking(false)
                        .and_then(|()| stream.write_all(&consent(&guard.token)));
                    match answered {
                        Ok(()) => {
                            hand_over((stream, a.peer));
                        }
                        Err(e) => {
                            REFUSED.line_about(
                                "lost before its consent",
                                format_args!(
                                    "a data connection from {} was lost before its consent: {e}",
                                    a.peer
                                ),
                            );
                        }
                    }
                }
                TokenRead::Whole => {
                    REFUSED.line_about(
                        "wrong run token",
                        format_args!("refused a data connection from {}: wrong run token", a.peer),
                    );
                }
            }
        }
        awaiting = still;
        let now = std::time::Instant::now();
        awaiting.retain(|a| {
            let late = now.duration_since(a.since) >= TOKEN_TIME;
            if late {
                REFUSED.line_about(
                    "no run token in time",
                    format_args!(
                        "refused a data connection from {}: no run token within {} s",
                        a.peer,
                        TOKEN_TIME.as_secs()
                    ),
                );
            }
            !late
        });
        if listener_ready {
            accept_some(listener, guard, &mut awaiting);
        }
    }
}

/// Polls the listener and every awaiting connection until one is ready or
/// 100 ms pass (to look at the stop flag and the deadlines).
fn wait(listener: &TcpListener, awaiting: &[Awaiting]) -> (bool, Vec<bool>) {
    poll_ready(
        listener,
        awaiting.iter().map(|a| &a.stream),
        Duration::from_millis(100),
    )
}

/// Takes at most [`ACCEPT_BURST`] new connections: another address's
/// closed at once, the peer's kept to await their token, the oldest
/// awaiting one ended when [`MAX_CHECKING`] are.
fn accept_some(listener: &TcpListener, guard: &DataGuard, awaiting: &mut Vec<Awaiting>) {
    for _ in 0..ACCEPT_BURST {
        match listener.accept() {
            Ok((stream, peer)) => {
                if !admits(Some(guard), peer.ip()) {
                    REFUSED.line_about(
                        "not the run's peer",
                        format_args!(
                            "refused a data connection from {}, not the run's peer {}",
                            peer.ip(),
                            guard.peer
                        ),
                    );
                    continue;
                }
                if stream.set_nonblocking(true).is_err() {
                    continue;
                }
                if awaiting.len() >= MAX_CHECKING {
                    let oldest = awaiting.remove(0);
                    REFUSED.line_about(
                        "ended awaiting its token",
                        format_args!(
                            "ended a data connection from {} awaiting its token: {MAX_CHECKING} others came after it",
                            oldest.peer
                        ),
                    );
                }
                awaiting.push(Awaiting {
                    stream,
                    peer,
                    since: std::time::Instant::now(),
                    token: [0; TOKEN_LEN],
                    got: 0,
                });
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Sends the run's token, if any, as a connection's first bytes, then waits
/// (at most [`CONSENT_TIME`] in all) for the listener's consent: without
/// it nothing more is sent, and the error says the listener is not the run's.
pub fn present(stream: &mut TcpStream, token: Option<&Token>) -> io::Result<()> {
    present_within(stream, token, CONSENT_TIME)
}

/// [`present`], awaiting the consent for at most `wait`.
fn present_within(stream: &mut TcpStream, token: Option<&Token>, wait: Duration) -> io::Result<()> {
    let Some(token) = token else {
        return Ok(());
    };
    stream.write_all(token)?;
    let refused = |why: String| {
        io::Error::new(
            io::ErrorKind::PermissionDenied,
            format!("the listener did not consent as the run's receiver ({why}): no data sent"),
        )
    };
    let mut got = [0u8; CONSENT_LEN];
    let until = std::time::Instant::now() + wait;
    fill_by(stream, &mut got, Some(until)).map_err(|e| {
        refused(match e.kind() {
            io::ErrorKind::TimedOut => {
                format!("no consent within {}", humantime::format_duration(wait))
            }
            io::ErrorKind::UnexpectedEof => "it closed the connection".into(),
            _ => e.to_string(),
        })
    })?;
    stream.set_read_timeout(None)?;
    if !same(&got, &consent(token)) {
        return Err(refused("it answered something else".into()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guard(peer: &str) -> DataGuard {
        DataGuard {
            peer: peer.parse().unwrap(),
            token: [42; TOKEN_LEN],
            ports: None,
        }
    }

    /// A listener on a fresh loopback port with a guarded port's backlog.
    fn listening() -> TcpListener {
        let listener =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        listener
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        listener.listen(GUARDED_BACKLOG).unwrap();
        listener.into()
    }

    /// A gate on a fresh loopback port for the peer 127.0.0.1.
    fn gate() -> (Gate, SocketAddr, DataGuard) {
        let good = guard("127.0.0.1");
        let gate = Gate::open(listening(), good.clone()).unwrap();
        let addr = gate.local_addr();
        (gate, addr, good)
    }

    #[test]
    fn a_udp_sender_sends_after_the_consent_only_its_peer_with_its_token_gets() {
        let listener = UdpSocket::bind("127.0.0.1:0").unwrap();
        let at = listener.local_addr().unwrap();
        let good = guard("127.0.0.1");
        let hello = handshake(Kind::Hello, &good.token);
        let from: SocketAddr = "127.0.0.1:40000".parse().unwrap();
        assert!(udp_consent(&hello, from, &good).is_some());
        // Another peer, another token, another kind, a data datagram.
        let stranger: SocketAddr = "127.0.0.2:40000".parse().unwrap();
        assert!(udp_consent(&hello, stranger, &good).is_none());
        assert!(udp_consent(&handshake(Kind::Hello, &[1; TOKEN_LEN]), from, &good).is_none());
        assert!(udp_consent(&handshake(Kind::Consent, &good.token), from, &good).is_none());
        assert!(udp_consent(&[0u8; 64], from, &good).is_none());
        // A listener that answers: the sender's hellos get their consent.
        let answering = std::thread::spawn(move || {
            let mut buf = [0u8; 128];
            let (n, peer) = listener.recv_from(&mut buf).unwrap();
            let consent = udp_consent(&buf[..n], peer, &good).unwrap();
            listener.send_to(&consent, peer).unwrap();
        });
        let sender = UdpSocket::bind("127.0.0.1:0").unwrap();
        sender.connect(at).unwrap();
        ask_udp_consent(&sender, &[42; TOKEN_LEN]).unwrap();
        answering.join().unwrap();
    }

    #[test]
    fn a_gated_door_is_readable_while_a_connection_waits_to_be_taken() {
        let good = guard("127.0.0.1");
        let door = Door::new(listening(), Some(good.clone())).unwrap();
        let Door::Gated(gate) = &door else {
            panic!("a guard makes a gated door");
        };
        let addr = gate.local_addr();
        let readable = |door: &Door| {
            let mut fds = [PollFd::new(door.fd(), PollFlags::POLLIN)];
            poll(&mut fds, 0u16).unwrap() > 0
        };
        assert!(!readable(&door));
        assert_eq!(door.accept().unwrap_err().kind(), io::ErrorKind::WouldBlock);
        let mut right = TcpStream::connect(addr).unwrap();
        present(&mut right, Some(&good.token)).unwrap();
        let (stream, peer) = door.accept_within(Duration::from_secs(10)).unwrap();
        assert_eq!(peer.ip(), stream.peer_addr().unwrap().ip());
        assert!(!readable(&door), "taken: nothing left to signal");
    }

    #[test]
    fn only_the_named_peer_with_the_token_is_served() {
        let (gate, addr, good) = gate();
        // A wrong token first: refused, and the gate waits on.
        let mut wrong = TcpStream::connect(addr).unwrap();
        wrong.write_all(&[0; TOKEN_LEN]).unwrap();
        let mut right = TcpStream::connect(addr).unwrap();
        present(&mut right, Some(&good.token)).unwrap();
        right.write_all(&[7]).unwrap();
        let mut stream = gate.admitted(Duration::from_secs(10)).unwrap();
        let mut byte = [0u8];
        stream.read_exact(&mut byte).unwrap();
        assert_eq!(byte[0], 7);
        // The refused connection was closed.
        let mut buf = [0u8; 1];
        wrong
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        assert_eq!(wrong.read(&mut buf).unwrap_or(0), 0);
    }

    #[test]
    fn strangers_that_come_first_and_say_nothing_do_not_keep_the_peer_out() {
        let (gate, addr, good) = gate();
        // More silent connections and wrong tokens than any listen queue
        // of old held, from the peer's own address and from another.
        let mut strangers = Vec::new();
        for i in 0..40 {
            let mut s = TcpStream::connect(addr).unwrap();
            if i % 2 == 0 {
                s.write_all(&[1; TOKEN_LEN]).unwrap();
            }
            strangers.push(s);
        }
        let elsewhere =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        elsewhere
            .bind(&"127.0.0.2:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        elsewhere.connect(&addr.into()).unwrap();
        let mut elsewhere: TcpStream = elsewhere.into();
        // The peer comes last, and is in well before any stranger's time is up.
        let mut right = TcpStream::connect(addr).unwrap();
        present(&mut right, Some(&good.token)).unwrap();
        let admitted = gate.admitted(TOKEN_TIME / 2).unwrap();
        assert_eq!(admitted.peer_addr().unwrap(), right.local_addr().unwrap());
        // Another address is closed at once, unread.
        elsewhere
            .set_read_timeout(Some(Duration::from_secs(2)))
            .unwrap();
        assert_eq!(elsewhere.read(&mut [0u8; 1]).unwrap_or(0), 0);
    }

    #[test]
    fn more_silent_strangers_than_slots_do_not_keep_the_peer_out() {
        let (gate, addr, good) = gate();
        // Twice the slots, silent, from the peer's own address.
        let strangers: Vec<TcpStream> = (0..2 * MAX_CHECKING)
            .map(|_| TcpStream::connect(addr).unwrap())
            .collect();
        std::thread::sleep(Duration::from_millis(100));
        let mut right = TcpStream::connect(addr).unwrap();
        present(&mut right, Some(&good.token)).unwrap();
        let admitted = gate.admitted(TOKEN_TIME / 2).unwrap();
        assert_eq!(admitted.peer_addr().unwrap(), right.local_addr().unwrap());
        drop(strangers);
    }

    #[test]
    fn no_consent_no_data() {
        // A listener that echoes what it is sent (as an echo service
        // would), and one that says nothing: neither consents.
        let echo = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = echo.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = echo.accept().unwrap();
            let mut buf = [0u8; 64];
            let n = s.read(&mut buf).unwrap();
            s.write_all(&buf[..n]).unwrap();
            // Whatever else arrives, counted.
            let mut rest = Vec::new();
            let _ = s.read_to_end(&mut rest);
            rest.len()
        });
        // The wait shortened from CONSENT_TIME: the same code path, in a
        // fraction of the unit tests' time.
        let wait = Duration::from_millis(300);
        let mut stream = TcpStream::connect(addr).unwrap();
        let e = present_within(&mut stream, Some(&[9; TOKEN_LEN]), wait).unwrap_err();
        assert!(e.to_string().contains("did not consent"), "{e}");
        drop(stream);
        assert_eq!(server.join().unwrap(), 0, "data followed the token");
        let silent = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut stream = TcpStream::connect(silent.local_addr().unwrap()).unwrap();
        let started = std::time::Instant::now();
        let e = present_within(&mut stream, Some(&[9; TOKEN_LEN]), wait).unwrap_err();
        assert!(e.to_string().contains("no consent within 300ms"), "{e}");
        assert!(started.elapsed() >= wait);
        // No token, no consent asked (a local run).
        present(&mut stream, None).unwrap();
    }

    #[test]
    fn another_address_is_refused_before_reading() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let mut stream = TcpStream::connect(addr).unwrap();
        let (mut accepted, peer) = listener.accept().unwrap();
        stream.write_all(&[42; TOKEN_LEN]).unwrap();
        let why = check(&mut accepted, peer, &guard("10.9.9.9")).unwrap_err();
        assert!(why.contains("not the run's peer"), "{why}");
    }

    #[test]
    fn a_range_is_tried_port_by_port() {
        let g = DataGuard {
            ports: Some((6000, 6002)),
            ..guard("127.0.0.1")
        };
        let bind: SocketAddr = "127.0.0.1:0".parse().unwrap();
        assert_eq!(candidates(bind, Some(&g)).len(), 3);
        assert_eq!(candidates(bind, None), vec![bind]);
        let mut tried = Vec::new();
        let got = bind_first(bind, Some(&g), |a| {
            tried.push(a.port());
            if a.port() < 6002 {
                Err(io::ErrorKind::AddrInUse.into())
            } else {
                Ok(a.port())
            }
        });
        assert_eq!(got.unwrap(), 6002);
        assert_eq!(tried, [6000, 6001, 6002]);
        let none = bind_first(bind, Some(&g), |_| -> io::Result<()> {
            Err(io::ErrorKind::AddrInUse.into())
        });
        assert!(none.unwrap_err().to_string().contains("6000-6002"));
    }

    #[test]
    fn mapped_addresses_match_their_ipv4() {
        assert!(admits(
            Some(&guard("10.0.0.1")),
            "::ffff:10.0.0.1".parse().unwrap()
        ));
        assert!(!admits(
            Some(&guard("10.0.0.1")),
            "10.0.0.3".parse().unwrap()
        ));
        assert!(admits(None, "10.0.0.3".parse().unwrap()));
    }
}
