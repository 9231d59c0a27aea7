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
use std::time::Duration;

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
fn same(a: &Token, b: &Token) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
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

/// Accepts connections until one passes the guard (the first, without
/// one); refused ones are closed and logged on stderr.
pub fn accept(listener: &TcpListener, guard: Option<&DataGuard>) -> io::Result<TcpStream> {
    loop {
        let (mut stream, peer) = listener.accept()?;
        let Some(guard) = guard else {
            return Ok(stream);
        };
        match check(&mut stream, peer, guard) {
            Ok(()) => return Ok(stream),
            Err(why) => eprintln!("netlab endpoint: refused a data connection {why}"),
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

    #[test]
    fn only_the_named_peer_with_the_token_is_served() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let good = guard("127.0.0.1");
        let acceptor = {
            let good = good.clone();
            std::thread::spawn(move || {
                let mut stream = accept(&listener, Some(&good)).unwrap();
                let mut byte = [0u8];
                stream.read_exact(&mut byte).unwrap();
                byte[0]
            })
        };
        // A wrong token first: refused, and the acceptor waits on.
        let mut wrong = TcpStream::connect(addr).unwrap();
        wrong.write_all(&[0; TOKEN_LEN]).unwrap();
        let mut right = TcpStream::connect(addr).unwrap();
        present(&mut right, Some(&good.token)).unwrap();
        right.write_all(&[7]).unwrap();
        assert_eq!(acceptor.join().unwrap(), 7);
        // The refused connection was closed.
        let mut buf = [0u8; 1];
        assert_eq!(wrong.read(&mut buf).unwrap_or(0), 0);
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
