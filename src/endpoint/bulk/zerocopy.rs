//! The two zero-copy data paths: TCP_ZEROCOPY_RECEIVE, which maps the
//! socket's whole pages into the receiver (reading the remainder), and
//! MSG_ZEROCOPY, whose sends the kernel completes later on the socket's
//! error queue (`linux/errqueue.h`), each completion saying whether it
//! copied after all.

use super::read::{ProgressTicker, ReadSpec, Received, receive_read};
use super::schedule::Schedule;
use super::socket::{StreamError, check, io_err};
use super::types::ZerocopyReceiveStats;
use super::types::ZerocopyStats;
use super::write::SendTally;
use crate::endpoint::pattern::{AlignedBuf, Pattern};
use crate::endpoint::stall::StallBound;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsRawFd, RawFd};
use std::time::Instant;

/// `struct tcp_zerocopy_receive` of `<linux/tcp.h>` (Linux 5.11 layout;
/// older kernels read the prefix they know).
#[repr(C)]
#[derive(Default)]
struct TcpZerocopyReceive {
    address: u64,
    length: u32,
    recv_skip_hint: u32,
    inq: u32,
    err: i32,
    copybuf_address: u64,
    copybuf_len: i32,
    flags: u32,
    msg_control: u64,
    msg_controllen: u64,
    msg_flags: u32,
    reserved: u32,
}

/// A read-only mapping of a TCP socket, the window `TCP_ZEROCOPY_RECEIVE`
/// maps the receive queue's pages into; unmapped on drop.
struct SocketMapping {
    address: *mut libc::c_void,
    len: usize,
}

impl SocketMapping {
    fn new(fd: RawFd, len: usize) -> io::Result<SocketMapping> {
        // SAFETY: a fresh shared read-only mapping of the socket, at an
        // address the kernel chooses; nothing else refers to it.
        let address = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ,
                libc::MAP_SHARED,
                fd,
                0,
            )
        };
        if address == libc::MAP_FAILED {
            return Err(io::Error::last_os_error());
        }
        Ok(SocketMapping { address, len })
    }
}

impl Drop for SocketMapping {
    fn drop(&mut self) {
        // SAFETY: the mapping made in new, unmapped once.
        unsafe { libc::munmap(self.address, self.len) };
    }
}

/// The receive side with `TCP_ZEROCOPY_RECEIVE` (Linux 4.18+), as the
/// kernel's `tcp_mmap` selftest does it: each call maps whole, page-aligned
/// pages of payload into the socket's mapping; bytes that are not in such
/// pages (the kernel's skip hint) are read with read(2), and a tail under a
/// page is copied by the kernel into `buf` (its copybuf, 5.11+). Every byte
/// is counted as mapped or copied. With nothing queued the receiver sleeps
/// in poll(2); at end of stream read(2) returns 0. When the socket cannot be
/// mapped at all, the whole stream is read and the reason kept.
/// Maps whole pages of payload where it can; where the kernel refuses the
/// mapping or the option, reads the stream as `read` says instead.
pub(super) fn receive_zerocopy(
    stream: &TcpStream,
    read: ReadSpec,
    want_progress: bool,
    progress: &mut dyn FnMut(u64),
) -> Result<(Received, ZerocopyReceiveStats), StreamError> {
    let ReadSpec {
        buffer,
        verify,
        limit,
        ..
    } = read;
    let page = page_size();
    let window = buffer.max(page).div_ceil(page) * page;
    let fd = stream.as_raw_fd();
    let mapping = match SocketMapping::new(fd, window) {
        Ok(mapping) => mapping,
        Err(e) => {
            let why = format!("mmap of the socket refused: {e}");
            return read_instead(stream, read, (want_progress, progress), 0, why);
        }
    };
    let mut copy_memory = AlignedBuf::zeroed(buffer);
    let buf = copy_memory.as_mut_slice();
    let pattern = verify.then(|| Pattern::new(window.max(buffer)));
    let verified = |at: u64, bytes: &[u8]| match &pattern {
        Some(pattern) => pattern.verify(at, bytes).map_err(StreamError::Corrupt),
        None => Ok(()),
    };
    let (mut total, mut syscalls, mut first) = (0u64, 0u64, None);
    let mut stats = ZerocopyReceiveStats::default();
    let mut ticker = ProgressTicker::new(want_progress);
    let mut idle = false;
    loop {
        let call = zerocopy_call(fd, &mapping, window, buf, page);
        syscalls += 1;
        stats.calls += 1;
        let zc = match call {
            Ok(zc) => zc,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            // Nothing queued and the peer has closed: end of stream.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => break,
            Err(e) if total == 0 && stats.calls == 1 => {
                // The option itself is refused (a kernel without it): read
                // the whole stream and say why.
                drop(mapping);
                let why = format!("TCP_ZEROCOPY_RECEIVE refused: {e}");
                return read_instead(stream, read, (want_progress, progress), 1, why);
            }
            Err(e) => return Err(io_err("TCP_ZEROCOPY_RECEIVE")(e)),
        };
        if zc.err != 0 {
            return Err(io_err("receiving with TCP_ZEROCOPY_RECEIVE")(
                io::Error::from_raw_os_error(zc.err.abs()),
            ));
        }
        // The mapped pages come first in the stream, then the kernel's copy
        // or the bytes to read (never both in one call).
        let mapped = zc.length as usize;
        if mapped > 0 {
            // SAFETY: the kernel mapped zc.length bytes at the start of the
            // mapping, readable until the next call replaces them.
            verified(total, unsafe {
                std::slice::from_raw_parts(mapping.address as *const u8, mapped)
            })?;
        }
        let mut copied = 0;
        if zc.copybuf_len > 0 {
            copied = zc.copybuf_len as usize;
        } else if zc.recv_skip_hint > 0 || (mapped == 0 && idle) {
            // Bytes that cannot be mapped, or nothing queued twice over (the
            // peer closed, or the data is not yet here): read(2) blocks
            // until there is something, and returns 0 at end of stream.
            let want = if zc.recv_skip_hint > 0 {
                (zc.recv_skip_hint as usize).min(buf.len())
            } else {
                buf.len()
            };
            // SAFETY: buf is valid for want <= buf.len() bytes.
            let ret = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), want) };
            syscalls += 1;
            copied = match check(ret) {
                Ok(0) => break,
                Ok(n) => n,
                // The pages mapped before it still count.
                Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
                Err(e) => return Err(io_err("reading from the socket")(e)),
            };
        }
        verified(total + mapped as u64, &buf[..copied])?;
        if mapped + copied == 0 {
            // Nothing queued: sleep until something is, then map it.
            idle = true;
            syscalls += 1;
            wait_readable(fd, read.stall_ms)?;
            continue;
        }
        idle = false;
        first.get_or_insert_with(Instant::now);
        stats.mapped += mapped as u64;
        stats.copied += copied as u64;
        total += (mapped + copied) as u64;
        if total > limit {
            return Err(StreamError::Limit(limit));
        }
        ticker.tick(total, progress);
    }
    Ok(((total, syscalls, first), stats))
}

/// One TCP_ZEROCOPY_RECEIVE: whole pages of payload mapped at the start
/// of `mapping`, or a tail under a page copied into `copy`. An error of
/// the call is the option's; an error of the receive is in the answer's
/// `err`.
fn zerocopy_call(
    fd: RawFd,
    mapping: &SocketMapping,
    window: usize,
    copy: &mut [u8],
    page: usize,
) -> io::Result<TcpZerocopyReceive> {
    let mut zc = TcpZerocopyReceive {
        address: mapping.address as u64,
        length: window as u32,
        copybuf_address: copy.as_mut_ptr() as u64,
        // The kernel copies instead of mapping whenever all it holds fits
        // the copy buffer: offered only for tails under a page.
        copybuf_len: copy.len().min(page - 1) as i32,
        ..Default::default()
    };
    let mut len = std::mem::size_of::<TcpZerocopyReceive>() as libc::socklen_t;
    // SAFETY: zc is a live struct of len bytes; the kernel maps pages only
    // into `mapping` and copies at most copybuf_len bytes into `copy`.
    let ret = unsafe {
        libc::getsockopt(
            fd,
            libc::IPPROTO_TCP,
            libc::TCP_ZEROCOPY_RECEIVE,
            (&mut zc as *mut TcpZerocopyReceive).cast(),
            &mut len,
        )
    };
    if ret != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(zc)
}

/// The whole stream read with read(2) instead of mapped, after `calls`
/// zero-copy calls that were refused, and why.
fn read_instead(
    stream: &TcpStream,
    read: ReadSpec,
    (want_progress, progress): (bool, &mut dyn FnMut(u64)),
    calls: u64,
    why: String,
) -> Result<(Received, ZerocopyReceiveStats), StreamError> {
    let (bytes, syscalls, first) = receive_read(stream, read, want_progress, progress)?;
    let stats = ZerocopyReceiveStats {
        copied: bytes,
        calls,
        unavailable: Some(why),
        ..Default::default()
    };
    Ok(((bytes, syscalls + calls, first), stats))
}

/// Sleeps in poll(2) until the socket has something queued; a wait past
/// the progress bound is the stall it is.
fn wait_readable(fd: RawFd, stall_ms: i32) -> Result<(), StreamError> {
    let mut poll = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    // SAFETY: one live pollfd.
    let ret = unsafe { libc::poll(&mut poll, 1, stall_ms) };
    if ret == 0 {
        return Err(io_err("waiting for data")(io::ErrorKind::WouldBlock.into()));
    }
    if ret < 0 {
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(io_err("waiting for data")(e));
        }
    }
    Ok(())
}

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as usize } else { 4096 }
}

/// `SO_EE_ORIGIN_ZEROCOPY` and `SO_EE_CODE_ZEROCOPY_COPIED` of `linux/errqueue.h`.
const SO_EE_ORIGIN_ZEROCOPY: u8 = 5;
const SO_EE_CODE_ZEROCOPY_COPIED: u8 = 1;

/// `struct sock_extended_err` of `linux/errqueue.h`.
#[repr(C)]
#[derive(Clone, Copy)]
struct SockExtendedErr {
    ee_errno: u32,
    ee_origin: u8,
    ee_type: u8,
    ee_code: u8,
    ee_pad: u8,
    ee_info: u32,
    ee_data: u32,
}

/// Reads zerocopy completions from the socket's error queue. Returns how many
/// sends they covered; `wait` blocks until at least one arrives, for at
/// most its bound (then `WouldBlock`).
fn reap_completions(
    fd: RawFd,
    stats: &mut ZerocopyStats,
    wait: Option<StallBound>,
    syscalls: &mut u64,
) -> io::Result<u64> {
    let mut reaped = 0;
    let deadline = wait.map(|bound| Instant::now() + bound.duration());
    let wait = wait.is_some();
    loop {
        if deadline.is_some_and(|d| reaped == 0 && Instant::now() >= d) {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        if wait && reaped == 0 {
            let mut pfd = libc::pollfd {
                fd,
                events: 0,
                revents: 0,
            };
            // SAFETY: one valid pollfd. POLLERR is always reported.
            unsafe { libc::poll(&mut pfd, 1, 1000) };
            *syscalls += 1;
        }
        let mut control = [0u8; 128];
        // SAFETY: msghdr is plain data; zeroed is a valid empty header.
        let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
        msg.msg_control = control.as_mut_ptr().cast();
        msg.msg_controllen = control.len();
        // SAFETY: msg points at `control`, alive for the call.
        let ret = unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_ERRQUEUE | libc::MSG_DONTWAIT) };
        *syscalls += 1;
        if ret < 0 {
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::WouldBlock if wait && reaped == 0 => continue,
                io::ErrorKind::WouldBlock => return Ok(reaped),
                io::ErrorKind::Interrupted => continue,
                _ => return Err(e),
            }
        }
        // SAFETY: the kernel filled `control` with msg_controllen bytes of cmsgs.
        let mut cmsg = unsafe { libc::CMSG_FIRSTHDR(&msg) };
        while !cmsg.is_null() {
            let header = unsafe { &*cmsg };
            let is_recverr = (header.cmsg_level == libc::SOL_IP
                && header.cmsg_type == libc::IP_RECVERR)
                || (header.cmsg_level == libc::SOL_IPV6 && header.cmsg_type == libc::IPV6_RECVERR);
            if is_recverr {
                // SAFETY: an IP_RECVERR cmsg carries a sock_extended_err; read unaligned.
                let err: SockExtendedErr =
                    unsafe { std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast()) };
                if err.ee_origin == SO_EE_ORIGIN_ZEROCOPY {
                    let count = u64::from(err.ee_data.wrapping_sub(err.ee_info)) + 1;
                    stats.completed += count;
                    if err.ee_code & SO_EE_CODE_ZEROCOPY_COPIED != 0 {
                        stats.copied += count;
                    }
                    reaped += count;
                }
            }
            cmsg = unsafe { libc::CMSG_NXTHDR(&msg, cmsg) };
        }
    }
}

pub(super) fn send_zerocopy(
    stream: &TcpStream,
    schedule: &mut Schedule,
    record: usize,
    bound: StallBound,
) -> io::Result<SendTally> {
    let fd = stream.as_raw_fd();
    let one: libc::c_int = 1;
    // SAFETY: SO_ZEROCOPY takes an int.
    let rc = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_ZEROCOPY,
            (&one as *const libc::c_int).cast(),
            4,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    // The pattern is never written after creation, so the kernel may keep
    // referencing its pages until completion without any copy-on-write care.
    let pattern = Pattern::new(record);
    let mut stats = ZerocopyStats::default();
    let mut tally = SendTally::default();
    let mut issued = 0u64;
    while let Some((offset, len)) = schedule.next() {
        let mut data = pattern.slice(offset, len);
        while !data.is_empty() {
            // SAFETY: data is a valid slice that outlives the send's completion.
            let ret =
                unsafe { libc::send(fd, data.as_ptr().cast(), data.len(), libc::MSG_ZEROCOPY) };
            tally.syscalls += 1;
            match check(ret) {
                Ok(n) => {
                    data = &data[n..];
                    issued += 1;
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                // Too many pages pinned (optmem): wait for completions, then retry.
                Err(e) if e.raw_os_error() == Some(libc::ENOBUFS) => {
                    reap_completions(fd, &mut stats, Some(bound), &mut tally.syscalls)?;
                }
                Err(e) => return Err(e),
            }
        }
        tally.bytes += len as u64;
        if issued - stats.completed >= 64 {
            reap_completions(fd, &mut stats, None, &mut tally.syscalls)?;
        }
    }
    let deadline = Instant::now() + std::time::Duration::from_secs(10);
    while stats.completed < issued && Instant::now() < deadline {
        reap_completions(fd, &mut stats, Some(bound), &mut tally.syscalls)?;
    }
    tally.zerocopy = Some(stats);
    Ok(tally)
}
