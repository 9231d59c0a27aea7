//! Waiting on peers that may never finish: one deadline for a whole read,
//! however the bytes trickle in, and one poll over a listener and the
//! connections it keeps. Shared by the agent's handshake, the data ports'
//! tokens and consents, and a mesh's DNS over TCP.

use crate::measure::stop;
use std::io::{self, Read};
use std::net::{TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

/// A byte stream whose reads can be bounded by a deadline: TCP here,
/// memory in tests and fuzzing.
pub trait Link: Read + io::Write {
    /// Makes the next reads fail with `TimedOut`/`WouldBlock` at `deadline`
    /// (`None`: wait for ever).
    fn read_deadline(&mut self, deadline: Option<Instant>) -> io::Result<()>;
}

impl Link for TcpStream {
    fn read_deadline(&mut self, deadline: Option<Instant>) -> io::Result<()> {
        let timeout = deadline.map(|d| {
            d.saturating_duration_since(Instant::now())
                .max(Duration::from_millis(1))
        });
        self.set_read_timeout(timeout)
    }
}

/// Fills `buf` by `deadline` (`None`: no deadline). Fails with
/// `TimedOut` when the deadline passes first and `UnexpectedEof` when the
/// peer closes first, so callers name the two apart, and with
/// [`stop::Stopped`] once the user asks this process to stop: each read
/// waits at most [`stop::POLL`] before the flag is looked at again.
pub fn fill_by(link: &mut impl Link, buf: &mut [u8], deadline: Option<Instant>) -> io::Result<()> {
    let mut got = 0;
    while got < buf.len() {
        stop::check()?;
        if deadline.is_some_and(|d| Instant::now() >= d) {
            return Err(io::ErrorKind::TimedOut.into());
        }
        link.read_deadline(Some(Instant::now() + stop::slice(deadline)))?;
        match link.read(&mut buf[got..]) {
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            // A slice ended (or a signal woke the read): the loop looks at
            // the flag and the deadline again.
            Err(e) if is_a_wake_up(&e) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// A read or wait that ended without data and without a fault: its
/// timeout (`WouldBlock` or `TimedOut`, as the kernel words it) or a
/// signal (`Interrupted`).
fn is_a_wake_up(error: &io::Error) -> bool {
    matches!(
        error.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut | io::ErrorKind::Interrupted
    )
}

/// Polls `listener` and `connections` until one is readable (or closed),
/// or `timeout` passes; returns whether the listener is ready and, in
/// order, which connections are. An interrupted poll reports none ready.
pub fn poll_ready<'a>(
    listener: &TcpListener,
    connections: impl Iterator<Item = &'a TcpStream>,
    timeout: Duration,
) -> (bool, Vec<bool>) {
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
    let mut fds = vec![PollFd::new(listener.as_fd(), PollFlags::POLLIN)];
    fds.extend(connections.map(|c| PollFd::new(c.as_fd(), PollFlags::POLLIN)));
    let timeout = PollTimeout::try_from(timeout).unwrap_or(PollTimeout::MAX);
    if poll(&mut fds, timeout).is_err() {
        return (false, vec![false; fds.len() - 1]);
    }
    let ready = |fd: &PollFd| fd.revents().is_some_and(|r| !r.is_empty());
    (ready(&fds[0]), fds[1..].iter().map(ready).collect())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Write;

    #[test]
    fn a_trickle_gets_one_deadline_and_a_close_is_told_apart() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        let writer = std::thread::spawn(move || {
            for _ in 0..20 {
                if client.write_all(&[1]).is_err() {
                    break;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            client
        });
        let started = Instant::now();
        let mut buf = [0u8; 16];
        let e = fill_by(
            &mut server,
            &mut buf,
            Some(started + Duration::from_millis(300)),
        )
        .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut);
        assert!(started.elapsed() < Duration::from_millis(600));
        drop(writer.join().unwrap());
        let e = fill_by(&mut server, &mut [0u8; 64], None).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
        let (ready, connections) = poll_ready(&listener, [&server].into_iter(), Duration::ZERO);
        assert_eq!((ready, connections), (false, vec![true]));
    }
}
