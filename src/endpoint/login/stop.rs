//! A request to stop a login server's loop: a flag the loop checks, and an
//! eventfd that turns readable when the flag is set, so that a loop
//! waiting on descriptors (epoll, io_uring) wakes at once instead of at its
//! next timeout. A server that ends a cell promptly keeps a run's cells
//! back to back: with a one-second wait, each epoll, splice or io_uring
//! cell ended up to a second late.
//!
//! Invariant: once [`StopSignal::request`] has returned, [`StopSignal::requested`]
//! is true and [`StopSignal::fd`] stays readable (the counter is never read).

use nix::sys::eventfd::{EfdFlags, EventFd};
use std::io;
use std::os::fd::{AsFd, BorrowedFd};
use std::sync::atomic::{AtomicBool, Ordering};

#[derive(Debug)]
pub struct StopSignal {
    requested: AtomicBool,
    wake: EventFd,
}

impl StopSignal {
    pub fn new() -> io::Result<StopSignal> {
        Ok(StopSignal {
            requested: AtomicBool::new(false),
            wake: EventFd::from_flags(EfdFlags::EFD_CLOEXEC | EfdFlags::EFD_NONBLOCK)?,
        })
    }

    /// Asks the loop to stop and wakes it.
    pub fn request(&self) {
        self.requested.store(true, Ordering::Release);
        // Only a full counter (2^64 - 2 writes) refuses a write; the flag
        // is set either way and the loop's own timeout still ends it.
        let _ = self.wake.write(1);
    }

    pub fn requested(&self) -> bool {
        self.requested.load(Ordering::Acquire)
    }

    /// Readable once a stop is requested: for the loop's wait set.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.wake.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nix::poll::{PollFd, PollFlags, PollTimeout, poll};

    fn readable(signal: &StopSignal) -> bool {
        let mut fds = [PollFd::new(signal.fd(), PollFlags::POLLIN)];
        poll(&mut fds, PollTimeout::ZERO).unwrap() == 1
    }

    #[test]
    fn a_request_sets_the_flag_and_leaves_the_descriptor_readable() {
        let signal = StopSignal::new().unwrap();
        assert!(!signal.requested());
        assert!(!readable(&signal));
        signal.request();
        assert!(signal.requested());
        // Readable for every wait after it, not just the first.
        assert!(readable(&signal));
        assert!(readable(&signal));
        signal.request();
        assert!(readable(&signal));
    }
}
