//! The receive strategies that take the stream from the socket: read(2)
//! into one buffer (verifying every byte against the pattern, with an
//! optional low-water mark), or splice(2) through a pipe into /dev/null
//! (counting only). Each counts the calls it makes.

use super::socket::{MAX_PIPE, Pipe, StreamError, check, io_err, splice};
use crate::endpoint::pattern::{AlignedBuf, Pattern};
use std::io;
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::Instant;

/// Calls `progress` at most about four times a second, looking at the clock
/// only every 64 calls.
pub(super) struct ProgressTicker {
    enabled: bool,
    calls: u32,
    last: Instant,
}

impl ProgressTicker {
    pub(super) fn new(enabled: bool) -> Self {
        ProgressTicker {
            enabled,
            calls: 0,
            last: Instant::now(),
        }
    }

    pub(super) fn tick(&mut self, bytes: u64, progress: &mut dyn FnMut(u64)) {
        if !self.enabled {
            return;
        }
        self.calls += 1;
        if self.calls.is_multiple_of(64) && self.last.elapsed().as_millis() >= 250 {
            self.last = Instant::now();
            progress(bytes);
        }
    }
}

/// What a receive loop returns: bytes, data-path system calls, and when
/// the first byte came.
pub(super) type Received = (u64, u64, Option<Instant>);

/// How a read receiver reads.
#[derive(Clone, Copy)]
pub(super) struct ReadSpec {
    pub(super) buffer: usize,
    pub(super) verify: bool,
    pub(super) limit: u64,
    /// `SO_RCVLOWAT`, set once the first byte is in.
    pub(super) lowat: Option<u32>,
    /// The progress bound, for waits in `poll` (reads are armed already).
    pub(super) stall_ms: i32,
}

pub(super) fn receive_read(
    stream: &TcpStream,
    spec: ReadSpec,
    want_progress: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<Received, StreamError> {
    let ReadSpec {
        buffer,
        verify,
        limit,
        lowat,
        ..
    } = spec;
    let mut buffer_memory = AlignedBuf::zeroed(buffer);
    let buf = buffer_memory.as_mut_slice();
    let pattern = verify.then(|| Pattern::new(buffer));
    let fd = stream.as_raw_fd();
    let (mut total, mut syscalls, mut first) = (0u64, 0u64, None);
    let mut ticker = ProgressTicker::new(want_progress);
    loop {
        // SAFETY: buf is valid for buffer bytes.
        let ret = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        syscalls += 1;
        let n = match check(ret) {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(io_err("reading from the socket")(e)),
        };
        if first.is_none() {
            first = Some(Instant::now());
            if let Some(lowat) = lowat {
                let lowat = libc::c_int::try_from(lowat).unwrap_or(libc::c_int::MAX);
                // SAFETY: one c_int option value of its own size.
                let ret = unsafe {
                    libc::setsockopt(
                        fd,
                        libc::SOL_SOCKET,
                        libc::SO_RCVLOWAT,
                        (&lowat as *const libc::c_int).cast(),
                        std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                    )
                };
                if ret != 0 {
                    return Err(io_err("setting SO_RCVLOWAT")(io::Error::last_os_error()));
                }
            }
        }
        if let Some(pattern) = &pattern {
            pattern
                .verify(total, &buf[..n])
                .map_err(StreamError::Corrupt)?;
        }
        total += n as u64;
        if total > limit {
            return Err(StreamError::Limit(limit));
        }
        ticker.tick(total, progress);
    }
    Ok((total, syscalls, first))
}

pub(super) fn receive_splice(
    stream: &TcpStream,
    limit: u64,
    want_progress: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<(u64, u64, Option<Instant>), StreamError> {
    let pipe = Pipe::new(MAX_PIPE).map_err(io_err("creating a pipe"))?;
    let devnull = std::fs::OpenOptions::new()
        .write(true)
        .open("/dev/null")
        .map_err(io_err("opening /dev/null"))?;
    let (mut total, mut syscalls, mut first) = (0u64, 0u64, None);
    let mut ticker = ProgressTicker::new(want_progress);
    loop {
        let n = splice(
            stream.as_raw_fd(),
            None,
            pipe.write.as_raw_fd(),
            pipe.capacity,
        )
        .map_err(io_err("splicing from the socket"))?;
        syscalls += 1;
        if n == 0 {
            break;
        }
        if first.is_none() {
            first = Some(Instant::now());
        }
        let mut left = n;
        while left > 0 {
            left -= splice(pipe.read.as_raw_fd(), None, devnull.as_raw_fd(), left)
                .map_err(io_err("splicing to /dev/null"))?;
            syscalls += 1;
        }
        total += n as u64;
        if total > limit {
            return Err(StreamError::Limit(limit));
        }
        ticker.tick(total, progress);
    }
    Ok((total, syscalls, first))
}
