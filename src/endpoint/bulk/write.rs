//! The send strategies that copy or hand over whole records: write(2)
//! (chunked as asked), writev(2) of several records a call, and sendfile(2)
//! or splice(2) from a page-cached file holding the pattern. Each counts
//! the calls it makes.

use super::schedule::Schedule;
use super::socket::{Pipe, StreamError, check, io_err, splice};
use super::types::ZerocopyStats;
use crate::endpoint::pattern::{PERIOD, Pattern};
use std::io;
use std::os::fd::{AsRawFd, RawFd};

/// Size of the file that sendfile and splice read from (a multiple of the pattern period).
pub(super) const PATTERN_FILE_PERIODS: usize = 64;

/// What a send loop did.
#[derive(Default)]
pub(super) struct SendTally {
    pub(super) bytes: u64,
    pub(super) syscalls: u64,
    pub(super) zerocopy: Option<ZerocopyStats>,
}

pub(super) fn write_all(fd: RawFd, mut data: &[u8], tally: &mut SendTally) -> io::Result<()> {
    while !data.is_empty() {
        // SAFETY: data is a valid slice for its length.
        let ret = unsafe { libc::write(fd, data.as_ptr().cast(), data.len()) };
        tally.syscalls += 1;
        match check(ret) {
            Ok(n) => data = &data[n..],
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

/// One `write(2)` per record, or with `chunk` (sosend's style) records
/// handed over `chunk` bytes a call.
pub(super) fn send_write(
    fd: RawFd,
    schedule: &mut Schedule,
    record: usize,
    chunk: Option<usize>,
) -> io::Result<SendTally> {
    let pattern = Pattern::new(record);
    let mut tally = SendTally::default();
    let chunk = chunk.unwrap_or(record).max(1);
    while let Some((offset, len)) = schedule.next() {
        for piece in pattern.slice(offset, len).chunks(chunk) {
            write_all(fd, piece, &mut tally)?;
        }
        tally.bytes += len as u64;
    }
    Ok(tally)
}

pub(super) fn send_writev(
    fd: RawFd,
    schedule: &mut Schedule,
    record: usize,
    per_call: usize,
) -> io::Result<SendTally> {
    let per_call = per_call.min(libc::UIO_MAXIOV as usize);
    let pattern = Pattern::new(record);
    let mut tally = SendTally::default();
    let mut iov: Vec<libc::iovec> = Vec::with_capacity(per_call);
    loop {
        iov.clear();
        let mut batch_offset = None;
        let mut batch_len = 0usize;
        while iov.len() < per_call {
            let Some((offset, len)) = schedule.next() else {
                break;
            };
            batch_offset.get_or_insert(offset);
            let slice = pattern.slice(offset, len);
            iov.push(libc::iovec {
                iov_base: slice.as_ptr() as *mut libc::c_void,
                iov_len: len,
            });
            batch_len += len;
        }
        let Some(batch_offset) = batch_offset else {
            break;
        };
        // SAFETY: every iovec points into `pattern`, alive for this call.
        let ret = loop {
            let ret = unsafe { libc::writev(fd, iov.as_ptr(), iov.len() as libc::c_int) };
            tally.syscalls += 1;
            match check(ret) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        // A short writev leaves a contiguous tail of the stream to finish.
        let mut done = ret;
        while done < batch_len {
            let len = (batch_len - done).min(pattern.max_len());
            write_all(
                fd,
                pattern.slice(batch_offset + done as u64, len),
                &mut tally,
            )?;
            done += len;
        }
        tally.bytes += batch_len as u64;
    }
    Ok(tally)
}

/// A page-cached, already-unlinked file holding the pattern, for sendfile and splice.
fn pattern_file(record: usize) -> Result<(std::fs::File, u64), StreamError> {
    use std::io::Write;
    let dir = if std::path::Path::new("/dev/shm").is_dir() {
        std::path::PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let mut file = tempfile::tempfile_in(dir).map_err(io_err("creating the pattern file"))?;
    let periods = PATTERN_FILE_PERIODS.max(record.div_ceil(PERIOD));
    let pattern = Pattern::new(PERIOD);
    for _ in 0..periods {
        file.write_all(pattern.slice(0, PERIOD))
            .map_err(io_err("writing the pattern file"))?;
    }
    Ok((file, (periods * PERIOD) as u64))
}

pub(super) fn send_from_file(
    sock: RawFd,
    schedule: &mut Schedule,
    record: usize,
    via_pipe: bool,
) -> Result<SendTally, StreamError> {
    let (file, file_len) = pattern_file(record)?;
    let file_fd = file.as_raw_fd();
    let pipe = if via_pipe {
        Some(Pipe::new(record.max(65536)).map_err(io_err("creating a pipe"))?)
    } else {
        None
    };
    let mut tally = SendTally::default();
    while let Some((offset, len)) = schedule.next() {
        let mut sent = 0usize;
        while sent < len {
            let mut file_off = ((offset + sent as u64) % file_len) as i64;
            let want = (len - sent).min((file_len - file_off as u64) as usize);
            let moved = match &pipe {
                None => {
                    // SAFETY: file_off is a live i64; sendfile touches no other memory.
                    let ret = unsafe { libc::sendfile(sock, file_fd, &mut file_off, want) };
                    tally.syscalls += 1;
                    match check(ret) {
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        other => other.map_err(io_err("sendfile to the socket"))?,
                    }
                }
                Some(pipe) => {
                    let into_pipe = splice(
                        file_fd,
                        Some(&mut file_off),
                        pipe.write.as_raw_fd(),
                        want.min(pipe.capacity),
                    )
                    .map_err(io_err("splicing the file into the pipe"))?;
                    tally.syscalls += 1;
                    let mut out = 0;
                    while out < into_pipe {
                        out += splice(pipe.read.as_raw_fd(), None, sock, into_pipe - out)
                            .map_err(io_err("splicing the pipe into the socket"))?;
                        tally.syscalls += 1;
                    }
                    into_pipe
                }
            };
            sent += moved;
        }
        tally.bytes += len as u64;
    }
    Ok(tally)
}
