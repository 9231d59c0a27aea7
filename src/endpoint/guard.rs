//! The data port of a run through an agent: opened in the agent's
//! `--data-ports` range, served only to the peer the controller named, and
//! only to a connection whose first bytes are the run's token.
//!
//! A local run has no guard: its listeners are on loopback or inside the
//! namespaces it made. The token is sent by the connecting end right after
//! `connect`, before `Go`, so it is outside every measured interval.

use crate::endpoint::protocol::{DataGuard, TOKEN_LEN, Token};
use std::io::{self, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, mpsc};
use std::time::Duration;

use super::ratelog::{RateLog, endpoint_line};

/// A guarded listener's queue: room for every connection a stranger could
/// open before the gate's thread takes them (it takes them at once).
pub const GUARDED_BACKLOG: i32 = 128;

/// Connections whose token the gate awaits at once; more are closed.
pub const MAX_CHECKING: usize = 64;

/// How long a connecting peer has to send its token.
pub const TOKEN_TIME: Duration = Duration::from_secs(5);

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
/// token in its first bytes. `Err` says why it was refused.
pub fn check(stream: &mut TcpStream, peer: SocketAddr, guard: &DataGuard) -> Result<(), String> {
    if !admits(Some(guard), peer.ip()) {
        return Err(format!(
            "from {}, not the run's peer {}",
            peer.ip(),
            guard.peer
        ));
    }
    let mut token = [0u8; TOKEN_LEN];
    stream
        .set_read_timeout(Some(TOKEN_TIME))
        .map_err(|e| e.to_string())?;
    let read = stream.read_exact(&mut token);
    stream.set_read_timeout(None).map_err(|e| e.to_string())?;
    match read {
        Ok(()) if same(&token, &guard.token) => Ok(()),
        Ok(()) => Err(format!("from {peer}: wrong run token")),
        Err(e) => Err(format!("from {peer}: no run token ({e})")),
    }
}

/// A guarded data port's gatekeeper. It accepts from the moment the port
/// opens, on a thread of its own, so strangers can neither fill the
/// listen queue nor hold the acceptor: a connection from another address
/// is closed at once; one from the run's peer gets [`TOKEN_TIME`] to send
/// the token, each on its own short thread, at most [`MAX_CHECKING`] at a
/// time. The first that passes is handed over ([`Gate::admitted`]); the
/// gate closes when dropped.
pub struct Gate {
    admitted: mpsc::Receiver<(TcpStream, SocketAddr)>,
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
        std::thread::Builder::new()
            .name("data-gate".into())
            .spawn(move || keep(&listener, &guard, &tx, &stopped))?;
        Ok(Gate {
            admitted,
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
            Ok(admitted) => Ok(Some(admitted)),
            Err(mpsc::RecvTimeoutError::Timeout) => Ok(None),
            Err(mpsc::RecvTimeoutError::Disconnected) => {
                Err(io::Error::other("the data port's gate stopped"))
            }
        }
    }
}

impl Drop for Gate {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// Refused data connections, rate-limited.
static REFUSED: RateLog = RateLog::new("refused data connections", endpoint_line);

fn keep(
    listener: &TcpListener,
    guard: &DataGuard,
    tx: &mpsc::Sender<(TcpStream, SocketAddr)>,
    stop: &AtomicBool,
) {
    let checking = Arc::new(AtomicUsize::new(0));
    while !stop.load(Ordering::Relaxed) {
        match listener.accept() {
            Ok((mut stream, peer)) => {
                if !admits(Some(guard), peer.ip()) {
                    REFUSED.line(format_args!(
                        "refused a data connection from {}, not the run's peer {}",
                        peer.ip(),
                        guard.peer
                    ));
                    continue;
                }
                if checking.load(Ordering::Relaxed) >= MAX_CHECKING {
                    REFUSED.line(format_args!(
                        "refused a data connection from {peer}: {MAX_CHECKING} others await their token"
                    ));
                    continue;
                }
                let _ = stream.set_nonblocking(false);
                checking.fetch_add(1, Ordering::Relaxed);
                let (tx, guard, done) = (tx.clone(), guard.clone(), checking.clone());
                let spawned =
                    std::thread::Builder::new()
                        .name("data-token".into())
                        .spawn(move || {
                            match check(&mut stream, peer, &guard) {
                                Ok(()) => {
                                    let _ = tx.send((stream, peer));
                                }
                                Err(why) => {
                                    REFUSED.line(format_args!("refused a data connection {why}"));
                                }
                            }
                            done.fetch_sub(1, Ordering::Relaxed);
                        });
                if spawned.is_err() {
                    checking.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                let mut ready = libc::pollfd {
                    fd: std::os::fd::AsRawFd::as_raw_fd(listener),
                    events: libc::POLLIN,
                    revents: 0,
                };
                // SAFETY: one valid pollfd; woken by a connection or after
                // 100 ms to look at the stop flag.
                unsafe { libc::poll(&mut ready, 1, 100) };
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => std::thread::sleep(Duration::from_millis(50)),
        }
    }
}

/// Sends the run's token, if any, as a connection's first bytes.
pub fn present(stream: &mut TcpStream, token: Option<&Token>) -> io::Result<()> {
    match token {
        Some(token) => stream.write_all(token),
        None => Ok(()),
    }
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

    /// A gate on a fresh loopback port for the peer 127.0.0.1.
    fn gate() -> (Gate, SocketAddr, DataGuard) {
        let listener =
            socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
        listener
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        listener.listen(GUARDED_BACKLOG).unwrap();
        let good = guard("127.0.0.1");
        let gate = Gate::open(listener.into(), good.clone()).unwrap();
        let addr = gate.local_addr();
        (gate, addr, good)
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
