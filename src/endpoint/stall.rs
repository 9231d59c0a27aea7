//! Every data path's progress bound (`--stall-timeout`).
//!
//! A cell whose bytes stop moving (a dead relay, a peer that stopped
//! reading, a frozen emulator) must end on its own, saying why. The bound
//! costs nothing on the data path: a blocking socket gets `SO_RCVTIMEO` and
//! `SO_SNDTIMEO`, so a `read`, `write`, `accept`, `sendfile` or `splice`
//! that waits longer than the bound without moving a byte returns `EAGAIN`
//! (socket(7)); loops that sleep in `poll` or `epoll_wait` pass the bound
//! as their timeout. Only then, off the data path, is the connection's
//! `TCP_INFO` read ([`crate::measure::tcpinfo::TcpState`]) so the reason
//! says what the kernel knew: "no progress for 10 s: the sender was
//! blocked writing to the socket; TCP_INFO: ESTABLISHED, 312 segments
//! unacknowledged, backoff 11, ...".
//!
//! Invariant: a bound is per wait, not per run, so a slow but moving
//! transfer never trips it; only a wait in which nothing moved does.

use crate::measure::tcpinfo::TcpState;
use serde::{Deserialize, Serialize};
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd};
use std::time::Duration;

/// The bound when none is given: long enough for a retransmission timer
/// backed off six times from its 200 ms floor (12.8 s would be the
/// seventh), short enough that a stuck grid is noticed.
pub const DEFAULT_STALL: Duration = Duration::from_secs(10);

/// The longest bound accepted (a day): beyond it a cell is not watched.
pub const MAX_STALL: Duration = Duration::from_secs(86_400);

/// A progress bound as endpoint specs carry it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StallBound {
    pub ms: u64,
}

impl Default for StallBound {
    fn default() -> Self {
        StallBound {
            ms: DEFAULT_STALL.as_millis() as u64,
        }
    }
}

impl StallBound {
    /// A bound of `duration`; refused when zero or above [`MAX_STALL`].
    pub fn new(duration: Duration) -> Result<StallBound, String> {
        if duration.is_zero() {
            return Err("--stall-timeout must be above zero".into());
        }
        if duration > MAX_STALL {
            return Err(format!(
                "--stall-timeout {} s is above the longest accepted, {} s (a day)",
                duration.as_secs_f64(),
                MAX_STALL.as_secs()
            ));
        }
        Ok(StallBound {
            ms: (duration.as_millis() as u64).max(1),
        })
    }

    pub fn duration(self) -> Duration {
        Duration::from_millis(self.ms).clamp(Duration::from_millis(1), MAX_STALL)
    }

    pub fn seconds(self) -> f64 {
        self.duration().as_secs_f64()
    }

    /// In milliseconds for `poll(2)` and `epoll_wait(2)`.
    pub fn millis(self) -> i32 {
        self.duration().as_millis().min(i32::MAX as u128) as i32
    }

    /// Bounds every blocking wait on `fd` (a socket) by this.
    pub fn arm(self, fd: BorrowedFd<'_>) -> io::Result<()> {
        let d = self.duration();
        let tv = libc::timeval {
            tv_sec: d.as_secs() as libc::time_t,
            tv_usec: d.subsec_micros() as libc::suseconds_t,
        };
        for option in [libc::SO_RCVTIMEO, libc::SO_SNDTIMEO] {
            // SAFETY: setsockopt reads a timeval from the pointer for its length.
            let rc = unsafe {
                libc::setsockopt(
                    fd.as_raw_fd(),
                    libc::SOL_SOCKET,
                    option,
                    (&tv as *const libc::timeval).cast(),
                    std::mem::size_of::<libc::timeval>() as libc::socklen_t,
                )
            };
            if rc != 0 {
                return Err(io::Error::last_os_error());
            }
        }
        Ok(())
    }
}

/// Whether a read's error only says that nothing came yet: its timeout
/// ran out ([`timed_out`]) or a signal interrupted it. The caller waits
/// again or moves on; any other error is the peer's or the socket's.
pub fn nothing_came(e: &io::Error) -> bool {
    timed_out(e) || e.kind() == io::ErrorKind::Interrupted
}

/// Whether `e` is an armed socket's wait running out (`EAGAIN`, which a
/// blocking socket returns only then).
pub fn timed_out(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
    )
}

/// A data path that gave up: which side, doing what, and the kernel's word
/// on the connection.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("no progress for {seconds} s: the {side} was blocked {doing}; {connection}")]
pub struct Stalled {
    pub side: &'static str,
    pub doing: &'static str,
    pub seconds: f64,
    pub connection: String,
}

/// The phrase every stall's reason begins with, so a controller can tell a
/// stall from other failures when it joins both ends' accounts.
pub const STALL_PHRASE: &str = "no progress for ";

impl Stalled {
    /// A stall of `side` while `doing`, on the TCP connection `fd`.
    pub fn on(
        side: &'static str,
        doing: &'static str,
        bound: StallBound,
        fd: BorrowedFd<'_>,
    ) -> Stalled {
        Stalled {
            side,
            doing,
            seconds: bound.seconds(),
            connection: connection_words(fd),
        }
    }
}

/// `TCP_INFO` in words, or why it could not be read.
pub fn connection_words(fd: BorrowedFd<'_>) -> String {
    match TcpState::read(fd) {
        Ok(state) => state.describe(),
        Err(e) => format!("TCP_INFO unreadable ({e})"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;
    use std::time::Instant;

    #[test]
    fn bounds_are_positive_and_at_most_a_day() {
        assert!(StallBound::new(Duration::ZERO).is_err());
        assert!(StallBound::new(Duration::from_secs(86_401)).is_err());
        assert_eq!(
            StallBound::new(Duration::from_millis(1500))
                .unwrap()
                .millis(),
            1500
        );
        assert_eq!(StallBound::default().duration(), DEFAULT_STALL);
    }

    #[test]
    fn an_armed_read_gives_up_when_nothing_comes_and_says_why() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let _peer = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut stream, _) = listener.accept().unwrap();
        let bound = StallBound::new(Duration::from_millis(300)).unwrap();
        bound.arm(stream.as_fd()).unwrap();
        let start = Instant::now();
        let e = stream.read(&mut [0u8; 16]).unwrap_err();
        assert!(timed_out(&e), "{e}");
        assert!(start.elapsed() >= Duration::from_millis(250));
        let stalled = Stalled::on("receiver", "waiting to read", bound, stream.as_fd());
        let words = stalled.to_string();
        assert!(words.starts_with("no progress for 0.3 s: the receiver was blocked waiting to read; TCP_INFO: ESTABLISHED"), "{words}");
    }

    #[test]
    fn an_armed_write_to_a_peer_that_never_reads_gives_up() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut stream = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (_peer, _) = listener.accept().unwrap();
        let bound = StallBound::new(Duration::from_millis(300)).unwrap();
        bound.arm(stream.as_fd()).unwrap();
        let chunk = vec![0u8; 1 << 20];
        let e = loop {
            if let Err(e) = stream.write_all(&chunk) {
                break e;
            }
        };
        assert!(timed_out(&e), "{e}");
        let words = connection_words(stream.as_fd());
        assert!(words.contains("not yet sent"), "{words}");
    }
}
