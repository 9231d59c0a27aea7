//! Busy polling in user space: before sleeping in a blocking receive, try
//! non-blocking ones (`MSG_DONTWAIT`) for up to a budget of microseconds.
//!
//! Why: on loopback, and between the cores of a VM, much of an RPC round
//! trip is neither TCP nor RPC work but the receiver going to sleep and
//! being woken again (the scheduler's wake-up, an inter-processor interrupt
//! to an idle vCPU, its exit from `HLT`). A receiver still spinning when the
//! reply lands skips all of that. The kernel's own busy polling
//! (`SO_BUSY_POLL`, `net.core.busy_read`, same unit and meaning) does this
//! for NIC queues with NAPI; loopback and veth have none, so on the paths
//! netlab measures it has to be done here.
//!
//! The price is a CPU spinning for up to the budget on every wait. The
//! budget bounds it: a connection with nothing to say sleeps in the kernel
//! as before, so a budget of a few round trips costs nothing when idle.
//! Budget 0 (the default everywhere) never spins.
//!
//! Invariant: a spin never loses data or an error. Whatever the first
//! receive that did not say "would block" returned is handed back as is,
//! including end of file and connection errors.

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use socket2::SockRef;
use std::io;
use std::mem::MaybeUninit;
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// `--busy-poll`'s microseconds as a spin's budget.
pub fn budget(us: u32) -> Duration {
    Duration::from_micros(us.into())
}

/// Calls `attempt` until it returns anything but "would block" (returned as
/// `Some`) or `budget` has passed (`None`: time to block). `empty` counts
/// the attempts that found nothing.
pub fn spin<T>(
    budget: Duration,
    empty: &mut u64,
    mut attempt: impl FnMut() -> io::Result<T>,
) -> Option<io::Result<T>> {
    if budget.is_zero() {
        return None;
    }
    let deadline = Instant::now() + budget;
    loop {
        match attempt() {
            Err(e)
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::Interrupted
                ) =>
            {
                *empty += 1;
            }
            other => return Some(other),
        }
        if Instant::now() >= deadline {
            return None;
        }
        std::hint::spin_loop();
    }
}

/// The bytes of `buf` as the uninitialised slice socket2's receives take.
fn as_uninit(buf: &mut [u8]) -> &mut [MaybeUninit<u8>] {
    // SAFETY: MaybeUninit<u8> has u8's layout, and the kernel only ever
    // writes initialised bytes into the buffer, so `buf` stays valid u8s.
    unsafe { &mut *(buf as *mut [u8] as *mut [MaybeUninit<u8>]) }
}

/// One receive on a TCP stream that does not wait.
///
/// It asks `poll` first and receives only when something is there. A TCP
/// receive takes the socket's lock even when it finds nothing, and a
/// segment that arrives while a spinning receiver holds the lock is parked
/// on the socket's backlog, to be processed only when the lock is released:
/// a receive per spin would keep the lock held much of the time and delay
/// the very reply it waits for. `poll` reads the socket's state without the
/// lock. (A UDP receive takes no socket lock, so UDP spins on receives.)
pub fn recv_now(stream: &TcpStream, buf: &mut [u8]) -> io::Result<usize> {
    // POLLIN is also reported for end of file; errors and hang-ups always
    // are: each is then handed back by the receive.
    let mut fds = [PollFd::new(stream.as_fd(), PollFlags::POLLIN)];
    if poll(&mut fds, PollTimeout::ZERO)? == 0 {
        return Err(io::ErrorKind::WouldBlock.into());
    }
    SockRef::from(stream).recv_with_flags(as_uninit(buf), libc::MSG_DONTWAIT)
}

/// One receive on a connected UDP socket that does not wait.
pub fn recv_datagram_now(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<usize> {
    SockRef::from(socket).recv_with_flags(as_uninit(buf), libc::MSG_DONTWAIT)
}

/// One receive on an unconnected UDP socket that does not wait, with the
/// sender's address.
pub fn recv_from_now(socket: &UdpSocket, buf: &mut [u8]) -> io::Result<(usize, SocketAddr)> {
    let (n, from) =
        SockRef::from(socket).recv_from_with_flags(as_uninit(buf), libc::MSG_DONTWAIT)?;
    let from = from
        .as_socket()
        .ok_or_else(|| io::Error::other("datagram from a non-IP address"))?;
    Ok((n, from))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;
    use std::net::TcpListener;

    #[test]
    fn zero_budget_never_tries() {
        let mut empty = 0;
        let mut tries = 0;
        let got: Option<io::Result<()>> = spin(Duration::ZERO, &mut empty, || {
            tries += 1;
            Ok(())
        });
        assert!(got.is_none());
        assert_eq!((tries, empty), (0, 0));
    }

    #[test]
    fn spinning_on_an_empty_socket_gives_up_after_the_budget() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let _server = listener.accept().unwrap();
        let mut buf = [0u8; 16];
        let mut empty = 0;
        let start = Instant::now();
        let got = spin(Duration::from_micros(500), &mut empty, || {
            recv_now(&client, &mut buf)
        });
        assert!(got.is_none(), "{got:?}");
        assert!(start.elapsed() >= Duration::from_micros(500));
        assert!(empty >= 1);
        // The socket is still a blocking one: spinning used a flag, not a mode.
        client
            .set_read_timeout(Some(Duration::from_millis(20)))
            .unwrap();
        let err = std::io::Read::read(&mut &client, &mut buf).unwrap_err();
        assert!(matches!(
            err.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ));
    }

    #[test]
    fn spinning_returns_data_end_of_file_and_datagrams_as_they_are() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let mut buf = [0u8; 16];
        let mut empty = 0;
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(5));
            server.write_all(b"reply").unwrap();
            server
        });
        let got = spin(Duration::from_secs(5), &mut empty, || {
            recv_now(&client, &mut buf)
        });
        assert_eq!(got.unwrap().unwrap(), 5);
        assert_eq!(&buf[..5], b"reply");
        drop(writer.join().unwrap());
        let got = spin(Duration::from_secs(5), &mut empty, || {
            recv_now(&client, &mut buf)
        });
        assert_eq!(got.unwrap().unwrap(), 0, "end of file passes through");

        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        b.send_to(b"call", a.local_addr().unwrap()).unwrap();
        let got = spin(Duration::from_secs(5), &mut empty, || {
            recv_from_now(&a, &mut buf)
        });
        let (n, from) = got.unwrap().unwrap();
        assert_eq!((&buf[..n], from), (&b"call"[..], b.local_addr().unwrap()));
    }

    #[test]
    fn spinning_hands_back_a_reset() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        // Closing with linger 0 sends a reset instead of a FIN.
        socket2::SockRef::from(&server)
            .set_linger(Some(Duration::ZERO))
            .unwrap();
        drop(server);
        let mut buf = [0u8; 16];
        let mut empty = 0;
        let got = spin(Duration::from_secs(5), &mut empty, || {
            recv_now(&client, &mut buf)
        });
        assert_eq!(
            got.unwrap().unwrap_err().kind(),
            io::ErrorKind::ConnectionReset
        );
    }
}
