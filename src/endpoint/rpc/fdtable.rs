//! A serving thread's own file-descriptor table.
//!
//! Every system call on a descriptor looks it up in the calling task's file
//! table. When the table is shared (the threads of one process share it by
//! default), the lookup takes a reference on the file and drops it again at
//! the end of the call: two atomic read-modify-writes on a cache line the
//! other threads also touch. A table with a single user skips both (Linux's
//! `fdget`/`__fget_light` fast path). sockperf's and qperf's servers are
//! single-threaded processes and get the fast path for free; netlab's server
//! has a thread per connection, one for UDP and one accepting, so without
//! this every `recv` and `send` of a call paid for the shared table (about
//! 1.5% of a blocking UDP round trip, measured: docs/PERFORMANCE.md).
//!
//! [`own_socket`] gives the calling thread a private copy of the table
//! (`close_range(2)` with `CLOSE_RANGE_UNSHARE`, Linux 5.9) and closes in
//! that copy everything but the socket it serves and the standard streams
//! (its log goes to stderr). Closing the rest matters: a copy of another
//! connection's descriptor would keep that connection open after its own
//! thread closed it.
//!
//! Invariant for callers: the descriptor stays open in the shared table
//! (owned by someone else) until the thread has made its copy, and whoever
//! owns it there closes it there; the thread's copy is closed by the value
//! [`own_socket`] returns.

use std::io;
use std::os::fd::{BorrowedFd, FromRawFd, OwnedFd, RawFd};

/// Descriptors kept in a private table besides the socket: stdin, stdout,
/// stderr.
const STANDARD_STREAMS: RawFd = 3;

/// Gives the calling thread a file table of its own that holds `fd` and the
/// standard streams only. On failure the thread's table is unchanged
/// (an old kernel without `close_range` or its unshare flag) or private
/// with more descriptors than asked (the second close failed).
fn private_table_keeping(fd: RawFd) -> io::Result<()> {
    let fd = u32::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
    // Unshare, copying only descriptors up to `fd`, and close any above it
    // in the copy.
    // SAFETY: close_range takes plain integers; it closes descriptors of
    // the new private table only, which no Rust value of this thread owns
    // except `fd`, which is kept.
    if unsafe { libc::close_range(fd + 1, u32::MAX, libc::CLOSE_RANGE_UNSHARE as i32) } != 0 {
        return Err(io::Error::last_os_error());
    }
    let first = STANDARD_STREAMS as u32;
    // SAFETY: as above; the table is private now.
    if fd > first && unsafe { libc::close_range(first, fd - 1, 0) } != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// The calling thread's own handle on the socket `fd`, held in a private
/// file table when the kernel allows (see the module docs), otherwise a
/// duplicate in the shared one.
///
/// `fd` must be open, and stay open in the shared table until this returns.
pub fn own_socket<T: From<OwnedFd>>(fd: RawFd) -> io::Result<T> {
    if fd < 0 {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    if private_table_keeping(fd).is_ok() {
        // SAFETY: `fd` is open (caller's invariant) and this thread's
        // private table holds the only reference to this descriptor number
        // that anything in this thread owns.
        let owned = unsafe { OwnedFd::from_raw_fd(fd) };
        return Ok(T::from(owned));
    }
    // SAFETY: `fd` is open for the duration of this call (caller's invariant).
    let borrowed = unsafe { BorrowedFd::borrow_raw(fd) };
    Ok(T::from(borrowed.try_clone_to_owned()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::os::fd::AsRawFd;
    use std::os::unix::net::UnixStream;

    fn is_open(fd: RawFd) -> bool {
        // SAFETY: F_GETFD only reads the descriptor's flags.
        unsafe { libc::fcntl(fd, libc::F_GETFD) != -1 }
    }

    #[test]
    fn the_thread_keeps_its_socket_and_nothing_else_and_the_process_loses_nothing() {
        let (served, mut peer) = UnixStream::pair().unwrap();
        let (other, _other_peer) = UnixStream::pair().unwrap();
        let (served_fd, other_fd) = (served.as_raw_fd(), other.as_raw_fd());
        let thread = std::thread::spawn(move || {
            let mut mine: UnixStream = own_socket(served_fd).unwrap();
            // Open in the process's table, closed in this thread's: the
            // table is private (close_range(CLOSE_RANGE_UNSHARE) worked, not
            // the shared-table fallback) and holds no other socket.
            assert!(
                !is_open(other_fd),
                "no private table (close_range(CLOSE_RANGE_UNSHARE) failed?), or another socket left in it"
            );
            assert!(is_open(2), "stderr is kept for the log");
            let mut byte = [0u8; 1];
            mine.read_exact(&mut byte).unwrap();
            mine.write_all(&[byte[0] + 1]).unwrap();
            // `mine` closes the private copy here.
        });
        // A failed assertion in the thread must fail the test, not hang it.
        peer.set_read_timeout(Some(std::time::Duration::from_secs(5)))
            .unwrap();
        peer.write_all(&[41]).unwrap();
        let mut answer = [0u8; 1];
        peer.read_exact(&mut answer).unwrap();
        assert_eq!(answer[0], 42);
        thread.join().unwrap();
        // The process's own descriptors are untouched by the thread's copy
        // and its closing.
        assert!(is_open(served_fd) && is_open(other_fd));
        assert!(served.peer_addr().is_ok());
        // The served socket is still the process's: closing both handles
        // (the thread's is gone) ends the stream for the peer.
        drop(served);
        let mut rest = Vec::new();
        peer.read_to_end(&mut rest).unwrap();
        assert!(rest.is_empty());
    }

    #[test]
    fn a_bad_descriptor_is_refused() {
        assert!(own_socket::<UnixStream>(-1).is_err());
    }
}
