//! The two ends of a bulk transfer (ttcp-style): a sender that hands records
//! to the kernel with one of several strategies, and a receiver that drains
//! and verifies them.
//!
//! Invariants:
//! - the data path makes only the system calls it counts in `syscalls`, and
//!   reads the clock at most once per [`CLOCK_EVERY_BYTES`] of records in
//!   duration mode, so the measuring does not perturb what is measured;
//! - the sender's bytes are borrowed slices of the shared [`Pattern`] (or a
//!   file holding it, for sendfile and splice), so every strategy sends the
//!   same stream and the receiver can verify any of them;
//! - the sender's wall time runs until the receiver has closed, i.e. until
//!   every byte was delivered to the receiving application, like ttcp.

use super::types::Amount;
use super::types::EndpointReport;
use super::types::RecvStrategy;
use super::types::SendStrategy;
use super::types::SocketBuffer;
use super::types::SocketOptions;
use super::types::ZerocopyReceiveStats;
use super::types::ZerocopyStats;
use super::types::{ChronoShares, IntervalSample};
use crate::endpoint::bulk::spec::{ReceiveSpec, SendSpec};
use crate::endpoint::guard;
use crate::endpoint::pattern::{AlignedBuf, PERIOD, Pattern};
#[cfg(test)]
use crate::endpoint::protocol::DataGuard;
use crate::endpoint::protocol::current_cpu;
use crate::endpoint::stall::{self, StallBound, Stalled};
use crate::measure::procstat::{CoreLoad, StatSnapshot, core_load};
use crate::measure::schedstat::thread_run_delay_ns;
use crate::measure::{
    ifstat::InterfaceCounters, netstat::Counters, rusage::ProcessUsage, tcpinfo::TcpInfo,
};
use socket2::{Domain, Protocol, Socket, Type};
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Instant;
use thiserror::Error;

/// In duration mode the sender looks at the clock after about this many bytes.
pub const CLOCK_EVERY_BYTES: u64 = 256 * 1024;

/// Without `--interval`, the sender samples TCP_INFO for the limits
/// verdict this often (seconds), on a thread of its own: 100 samples
/// over a 2 s run, a getsockopt each.
pub const VERDICT_SAMPLE_S: f64 = 0.02;
/// Size of the file that sendfile and splice read from (a multiple of the pattern period).
const PATTERN_FILE_PERIODS: usize = 64;
/// Largest pipe netlab asks for (the default `fs.pipe-max-size`).
const MAX_PIPE: usize = 1 << 20;

#[derive(Debug, Error)]
pub enum StreamError {
    #[error("port {port} is in use (address {addr})")]
    PortInUse { port: u16, addr: SocketAddr },
    #[error("{what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
    #[error("data corrupted: byte at stream offset {0} differs from what was sent")]
    Corrupt(u64),
    #[error("congestion control \"{name}\" is not available: {source}")]
    CongestionControl { name: String, source: io::Error },
    #[error("the sender passed the agent's limit of {0} bytes a cell")]
    Limit(u64),
    #[error(transparent)]
    Stalled(#[from] Stalled),
}

impl StreamError {
    /// An armed wait that ran out becomes the stall it is, with `side`'s
    /// connection as the kernel sees it; other errors pass unchanged.
    fn stalled(self, side: &'static str, bound: StallBound, stream: &TcpStream) -> StreamError {
        match self {
            StreamError::Io { what, source } if stall::timed_out(&source) => {
                StreamError::Stalled(Stalled::on(side, what, bound, stream.as_fd()))
            }
            other => other,
        }
    }
}

fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> StreamError {
    move |source| StreamError::Io { what, source }
}

/// Turns a libc return value into a count, retrying on EINTR via the caller's loop.
fn check(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

fn new_socket(addr: &SocketAddr, options: &SocketOptions) -> Result<Socket, StreamError> {
    let socket = Socket::new(
        Domain::for_address(*addr),
        Type::STREAM,
        Some(Protocol::TCP),
    )
    .map_err(io_err("creating the socket"))?;
    if let Some(size) = options.sndbuf {
        socket
            .set_send_buffer_size(size)
            .map_err(io_err("setting SO_SNDBUF"))?;
    }
    if let Some(size) = options.rcvbuf {
        socket
            .set_recv_buffer_size(size)
            .map_err(io_err("setting SO_RCVBUF"))?;
    }
    if options.nodelay {
        socket
            .set_tcp_nodelay(true)
            .map_err(io_err("setting TCP_NODELAY"))?;
    }
    if let Some(mss) = options.mss {
        socket
            .set_tcp_mss(mss)
            .map_err(io_err("setting TCP_MAXSEG"))?;
    }
    if let Some(name) = &options.congestion_control {
        socket
            .set_tcp_congestion(name.as_bytes())
            .map_err(|source| StreamError::CongestionControl {
                name: name.clone(),
                source,
            })?;
    }
    Ok(socket)
}

fn congestion_control_of(socket: &Socket) -> Option<String> {
    socket.tcp_congestion().ok().map(|name| {
        String::from_utf8_lossy(&name)
            .trim_end_matches('\0')
            .to_string()
    })
}

pub(super) fn interface_delta(
    name: Option<&str>,
    before: Option<InterfaceCounters>,
) -> Option<InterfaceCounters> {
    Some(InterfaceCounters::read(name?)?.since(&before?))
}

/// A receiver that is listening, not yet started.
pub struct Receiver {
    door: Door,
    spec: ReceiveSpec,
}

/// How the sender's connection comes in: a plain listener on this host's
/// loopback or namespaces, or through an agent a guarded port's gate,
/// which takes connections from the moment the port opens.
enum Door {
    Open(TcpListener),
    Gated(guard::Gate),
}

impl Receiver {
    /// Binds and listens as `spec` says.
    pub fn listen(spec: ReceiveSpec) -> Result<Receiver, StreamError> {
        let listener = guard::bind_first(spec.bind, spec.guard.as_ref(), |addr| {
            let socket = new_socket(&addr, &spec.options).map_err(io::Error::other)?;
            socket.set_reuse_address(true)?;
            socket.bind(&addr.into())?;
            Ok(socket)
        })
        .map_err(|e| {
            if e.kind() == io::ErrorKind::AddrInUse && spec.guard.is_none() {
                StreamError::PortInUse {
                    port: spec.bind.port(),
                    addr: spec.bind,
                }
            } else {
                StreamError::Io {
                    what: "binding the receiver",
                    source: e,
                }
            }
        })?;
        let door = match &spec.guard {
            None => {
                listener.listen(4).map_err(io_err("listening"))?;
                Door::Open(listener.into())
            }
            Some(guard) => {
                listener
                    .listen(guard::GUARDED_BACKLOG)
                    .map_err(io_err("listening"))?;
                Door::Gated(
                    guard::Gate::open(listener.into(), guard.clone())
                        .map_err(io_err("opening the data port's gate"))?,
                )
            }
        };
        Ok(Receiver { door, spec })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        match &self.door {
            Door::Open(listener) => listener.local_addr(),
            Door::Gated(gate) => Ok(gate.local_addr()),
        }
    }

    /// Accepts the sender's connection and drains it to end of stream,
    /// calling `progress` with the byte count now and then.
    pub fn run(self, progress: &mut dyn FnMut(u64)) -> Result<EndpointReport, StreamError> {
        let bound = self.spec.options.stall_bound();
        // Read before the sender is in, not between its first write and
        // this end's first read.
        let shaping = Shaping::start(crate::measure::qdisc::ifb_devices());
        let accepted = match &self.door {
            Door::Open(listener) => bound
                .arm(listener.as_fd())
                .and_then(|()| listener.accept().map(|(stream, _)| stream)),
            Door::Gated(gate) => gate.admitted(bound.duration()),
        };
        let stream = accepted.map_err(|e| {
            if stall::timed_out(&e) {
                StreamError::Stalled(Stalled {
                    side: "receiver",
                    doing: "waiting for the sender to connect",
                    seconds: bound.seconds(),
                    connection: "no connection".into(),
                })
            } else {
                io_err("accepting")(e)
            }
        })?;
        bound
            .arm(stream.as_fd())
            .map_err(io_err("bounding the waits (--stall-timeout)"))?;
        // The data port closes as soon as the sender is in.
        drop(self.door);
        let limit = self.spec.limit_bytes.unwrap_or(u64::MAX);
        if self.spec.options.nodelay {
            stream
                .set_nodelay(true)
                .map_err(io_err("setting TCP_NODELAY"))?;
        }
        // Off a namespace netlab built, the interface the flow came in by.
        let interface = self
            .spec
            .interface
            .clone()
            .or_else(|| egress_interface(&stream));
        let before = Before::now(interface.as_deref());
        let mut zerocopy_receive = None;
        let received = match self.spec.strategy {
            RecvStrategy::Read { buffer } => receive_read(
                &stream,
                ReadSpec {
                    buffer,
                    verify: self.spec.verify,
                    limit,
                    lowat: self.spec.options.rcvlowat,
                    stall_ms: bound.millis(),
                },
                self.spec.progress,
                progress,
            ),
            RecvStrategy::Splice => receive_splice(&stream, limit, self.spec.progress, progress),
            RecvStrategy::Zerocopy { buffer } => {
                let read = ReadSpec {
                    buffer,
                    verify: self.spec.verify,
                    limit,
                    lowat: None,
                    stall_ms: bound.millis(),
                };
                receive_zerocopy(&stream, read, self.spec.progress, progress).map(
                    |(received, stats)| {
                        zerocopy_receive = Some(stats);
                        received
                    },
                )
            }
        };
        let (bytes, syscalls, first_byte) =
            received.map_err(|e| e.stalled("receiver", bound, &stream))?;
        let wall_s = first_byte.map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0);
        let over = before.end();
        let (shapers, shapers_unread) = shaping.finish();
        let tcp_info = TcpInfo::read(stream.as_fd()).ok();
        let socket = Socket::from(stream);
        let buffer = socket_buffer(
            socket.recv_buffer_size(),
            self.spec.options.rcvbuf.is_some(),
            "tcp_rmem",
        );
        Ok(EndpointReport {
            role: "receiver".into(),
            pid: std::process::id(),
            bytes,
            syscalls,
            wall_s,
            usage: over.usage,
            tcp_info,
            counters: over.counters,
            congestion_control: congestion_control_of(&socket),
            mss: socket.tcp_mss().ok(),
            verified: self.spec.verify && self.spec.strategy.sees_bytes(),
            zerocopy: None,
            zerocopy_receive,
            intervals: Vec::new(),
            samples: Vec::new(),
            handshake_s: None,
            bbr_bw_bps: None,
            shapers,
            shapers_unread,
            udp: None,
            cpus: over.cpus,
            interface: over.interface,
            run_delay_s: over.run_delay_s,
            buffer,
            cpu_budget: None,
            core: over.core,
            link_speed: link_speed_of(&socket),
        })
    }
}

/// Calls `progress` at most about four times a second, looking at the clock
/// only every 64 calls.
struct ProgressTicker {
    enabled: bool,
    calls: u32,
    last: Instant,
}

impl ProgressTicker {
    fn new(enabled: bool) -> Self {
        ProgressTicker {
            enabled,
            calls: 0,
            last: Instant::now(),
        }
    }

    fn tick(&mut self, bytes: u64, progress: &mut dyn FnMut(u64)) {
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
type Received = (u64, u64, Option<Instant>);

/// How a read receiver reads.
#[derive(Clone, Copy)]
struct ReadSpec {
    buffer: usize,
    verify: bool,
    limit: u64,
    /// `SO_RCVLOWAT`, set once the first byte is in.
    lowat: Option<u32>,
    /// The progress bound, for waits in `poll` (reads are armed already).
    stall_ms: i32,
}

fn receive_read(
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
fn receive_zerocopy(
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
            let received = receive_read(stream, read, want_progress, progress)?;
            let stats = ZerocopyReceiveStats {
                copied: received.0,
                unavailable: Some(format!("mmap of the socket refused: {e}")),
                ..Default::default()
            };
            return Ok((received, stats));
        }
    };
    let mut copy_memory = AlignedBuf::zeroed(buffer);
    let buf = copy_memory.as_mut_slice();
    let pattern = verify.then(|| Pattern::new(window.max(buffer)));
    let (mut total, mut syscalls, mut first) = (0u64, 0u64, None);
    let mut stats = ZerocopyReceiveStats::default();
    let mut ticker = ProgressTicker::new(want_progress);
    let mut idle = false;
    loop {
        let mut zc = TcpZerocopyReceive {
            address: mapping.address as u64,
            length: window as u32,
            copybuf_address: buf.as_mut_ptr() as u64,
            // The kernel copies instead of mapping whenever all it holds
            // fits the copy buffer: offered only for tails under a page.
            copybuf_len: buf.len().min(page - 1) as i32,
            ..Default::default()
        };
        let mut len = std::mem::size_of::<TcpZerocopyReceive>() as libc::socklen_t;
        // SAFETY: zc is a live struct of len bytes; the kernel maps pages
        // only into `mapping` and copies at most copybuf_len bytes into buf.
        let ret = unsafe {
            libc::getsockopt(
                fd,
                libc::IPPROTO_TCP,
                libc::TCP_ZEROCOPY_RECEIVE,
                (&mut zc as *mut TcpZerocopyReceive).cast(),
                &mut len,
            )
        };
        syscalls += 1;
        stats.calls += 1;
        if ret != 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            if e.raw_os_error() == Some(libc::EIO) {
                // Nothing queued and the peer has closed: end of stream.
                break;
            }
            if total == 0 && stats.calls == 1 {
                // The option itself is refused (a kernel without it): read
                // the whole stream and say why.
                drop(mapping);
                let received = receive_read(stream, read, want_progress, progress)?;
                let stats = ZerocopyReceiveStats {
                    copied: received.0,
                    calls: 1,
                    unavailable: Some(format!("TCP_ZEROCOPY_RECEIVE refused: {e}")),
                    ..Default::default()
                };
                return Ok(((received.0, received.1 + 1, received.2), stats));
            }
            return Err(io_err("TCP_ZEROCOPY_RECEIVE")(e));
        }
        if zc.err != 0 {
            return Err(io_err("receiving with TCP_ZEROCOPY_RECEIVE")(
                io::Error::from_raw_os_error(zc.err.abs()),
            ));
        }
        // The mapped pages come first in the stream, then the kernel's copy
        // or the bytes to read (never both in one call).
        let mut chunks: [(usize, bool); 2] = [(0, true), (0, false)];
        if zc.length > 0 {
            // SAFETY: the kernel mapped zc.length bytes at the start of the
            // mapping, readable until the next call replaces them.
            let mapped = unsafe {
                std::slice::from_raw_parts(mapping.address as *const u8, zc.length as usize)
            };
            if let Some(pattern) = &pattern {
                pattern
                    .verify(total, mapped)
                    .map_err(StreamError::Corrupt)?;
            }
            chunks[0].0 = zc.length as usize;
        }
        if zc.copybuf_len > 0 {
            let n = zc.copybuf_len as usize;
            if let Some(pattern) = &pattern {
                pattern
                    .verify(total + chunks[0].0 as u64, &buf[..n])
                    .map_err(StreamError::Corrupt)?;
            }
            chunks[1].0 = n;
        } else if zc.recv_skip_hint > 0 || (chunks[0].0 == 0 && idle) {
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
            let n = match check(ret) {
                Ok(0) => break,
                Ok(n) => n,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(io_err("reading from the socket")(e)),
            };
            if let Some(pattern) = &pattern {
                pattern
                    .verify(total + chunks[0].0 as u64, &buf[..n])
                    .map_err(StreamError::Corrupt)?;
            }
            chunks[1].0 = n;
        }
        let got = chunks[0].0 + chunks[1].0;
        if got == 0 {
            // Nothing queued: sleep until something is, then map it.
            idle = true;
            let mut poll = libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one live pollfd.
            let ret = unsafe { libc::poll(&mut poll, 1, read.stall_ms) };
            syscalls += 1;
            if ret == 0 {
                return Err(io_err("waiting for data")(io::ErrorKind::WouldBlock.into()));
            }
            if ret < 0 {
                let e = io::Error::last_os_error();
                if e.kind() != io::ErrorKind::Interrupted {
                    return Err(io_err("waiting for data")(e));
                }
            }
            continue;
        }
        idle = false;
        if first.is_none() {
            first = Some(Instant::now());
        }
        stats.mapped += chunks[0].0 as u64;
        stats.copied += chunks[1].0 as u64;
        total += got as u64;
        if total > limit {
            return Err(StreamError::Limit(limit));
        }
        ticker.tick(total, progress);
    }
    Ok(((total, syscalls, first), stats))
}

fn page_size() -> usize {
    // SAFETY: sysconf reads a constant.
    let size = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if size > 0 { size as usize } else { 4096 }
}

/// A pipe, closed on drop.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
}

impl Pipe {
    fn new(want: usize) -> io::Result<Pipe> {
        let mut fds = [0 as RawFd; 2];
        // SAFETY: fds has room for the two descriptors pipe2 writes.
        if unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) } != 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: pipe2 succeeded, so both descriptors are open and ours.
        let (read, write) = unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) };
        // Ask for a bigger pipe; keep whatever the kernel grants.
        // SAFETY: F_SETPIPE_SZ/F_GETPIPE_SZ take an int and touch no memory.
        unsafe {
            libc::fcntl(
                write.as_raw_fd(),
                libc::F_SETPIPE_SZ,
                want.min(MAX_PIPE) as libc::c_int,
            )
        };
        let capacity = unsafe { libc::fcntl(write.as_raw_fd(), libc::F_GETPIPE_SZ) };
        Ok(Pipe {
            read,
            write,
            capacity: capacity.max(4096) as usize,
        })
    }
}

fn splice(from: RawFd, from_off: Option<&mut i64>, to: RawFd, len: usize) -> io::Result<usize> {
    let off_ptr = from_off.map_or(std::ptr::null_mut(), |o| o as *mut i64);
    loop {
        // SAFETY: off_ptr is null or points to a live i64; splice touches no other memory.
        let ret = unsafe {
            libc::splice(
                from,
                off_ptr,
                to,
                std::ptr::null_mut(),
                len,
                libc::SPLICE_F_MOVE,
            )
        };
        match check(ret) {
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            other => return other,
        }
    }
}

fn receive_splice(
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

/// A sender that is connected, not yet started.
pub struct Sender {
    stream: TcpStream,
    spec: SendSpec,
    /// How long `connect` took: the TCP handshake.
    handshake_s: f64,
}

/// Yields record lengths until the amount is sent.
struct Schedule<'a> {
    amount: Amount,
    record: usize,
    offset: u64,
    start: Instant,
    next_clock_at: u64,
    done: bool,
    intervals: Option<Intervals<'a>>,
}

/// TCP_INFO read at each sample, kept with what the last one read so
/// that each sample covers the time since it.
struct Sampler {
    fd: RawFd,
    last_s: f64,
    last_bytes: u64,
    last_retransmits: u32,
    /// The chrono counters (busy, rwnd-limited, sndbuf-limited, µs) at
    /// the last sample.
    last_chrono: Option<[u64; 3]>,
    samples: Vec<IntervalSample>,
}

impl Sampler {
    /// Starts sampling `fd`, whose socket must outlive the sampler.
    fn new(fd: RawFd) -> Sampler {
        // SAFETY: the caller's socket is open for the sampler's life.
        let info = TcpInfo::read(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) }).ok();
        Sampler {
            fd,
            last_s: 0.0,
            last_bytes: info.as_ref().and_then(|i| i.bytes_acked).unwrap_or(0),
            last_retransmits: info.as_ref().map_or(0, |i| i.total_retrans),
            last_chrono: info.as_ref().and_then(TcpInfo::chrono_us),
            samples: Vec::new(),
        }
    }

    /// Closes the sample now, `offset` bytes handed to the kernel so far
    /// (used only where TCP_INFO lacks `bytes_acked`).
    fn sample(&mut self, now_s: f64, offset: u64) -> &IntervalSample {
        // SAFETY: the socket outlives the sampler.
        let fd = unsafe { std::os::fd::BorrowedFd::borrow_raw(self.fd) };
        let info = TcpInfo::read(fd).ok();
        let acked = info.as_ref().and_then(|i| i.bytes_acked).unwrap_or(offset);
        let retransmits = info
            .as_ref()
            .map_or(self.last_retransmits, |i| i.total_retrans);
        let bytes = acked.saturating_sub(self.last_bytes);
        let seconds = now_s - self.last_s;
        let chrono_now = info.as_ref().and_then(TcpInfo::chrono_us);
        let chrono = chrono_now.zip(self.last_chrono).and_then(|(now, last)| {
            let share = |k: usize| (now[k].saturating_sub(last[k]) as f64 / 1e6 / seconds).min(1.0);
            (seconds > 0.0).then(|| ChronoShares {
                busy: share(0),
                rwnd_limited: share(1),
                sndbuf_limited: share(2),
            })
        });
        self.samples.push(IntervalSample {
            start_s: self.last_s,
            end_s: now_s,
            bytes,
            mbit_s: if seconds > 0.0 {
                bytes as f64 * 8.0 / seconds / 1e6
            } else {
                0.0
            },
            retransmits: retransmits.saturating_sub(self.last_retransmits),
            cwnd: info.as_ref().map_or(0, |i| i.snd_cwnd),
            rtt_us: info.as_ref().map_or(0, |i| i.rtt_us),
            delivery_rate_mbit_s: info
                .as_ref()
                .and_then(|i| i.delivery_rate_bps)
                .map(|bps| bps as f64 * 8.0 / 1e6),
            chrono,
            app_limited: info.as_ref().and_then(|i| i.delivery_rate_app_limited),
            ca_state: info.as_ref().and_then(|i| i.ca_state),
            bbr_bw_mbit_s: crate::measure::tcpinfo::bbr_bandwidth(fd).map(|b| b as f64 / 1e6),
            rttvar_us: info.as_ref().map(|i| i.rttvar_us),
            pmtu: info.as_ref().map(|i| i.pmtu),
            mss: info.as_ref().map(|i| i.snd_mss),
            snd_wnd: info.as_ref().and_then(|i| i.snd_wnd),
        });
        self.last_s = now_s;
        self.last_bytes = acked;
        self.last_retransmits = retransmits;
        self.last_chrono = chrono_now.or(self.last_chrono);
        self.samples.last().expect("just pushed")
    }
}

/// `--interval`: TCP_INFO read at each interval's end (at the sender's
/// clock checks, every [`CLOCK_EVERY_BYTES`]), each interval kept and
/// handed to `sink` as it ends.
struct Intervals<'a> {
    every_s: f64,
    next_at_s: f64,
    sampler: Sampler,
    sink: &'a mut dyn FnMut(&IntervalSample),
}

impl Intervals<'_> {
    /// Closes the interval now, `offset` bytes handed to the kernel so far.
    fn sample(&mut self, now_s: f64, offset: u64) {
        let sample = self.sampler.sample(now_s, offset);
        (self.sink)(sample);
        while self.next_at_s <= now_s {
            self.next_at_s += self.every_s;
        }
    }
}

/// Without `--interval`, the verdict's quiet samples: a thread of its own
/// reads TCP_INFO on a second descriptor of the connection every
/// [`VERDICT_SAMPLE_S`], so that nothing is added to the write loop and a
/// write blocked on a slow path delays no sample.
struct QuietSamples {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Vec<IntervalSample>>,
}

impl QuietSamples {
    /// Starts on a duplicate of `stream`'s descriptor; `None` if it
    /// cannot be had (the verdict then says it had no samples).
    fn start(stream: &TcpStream, start: Instant) -> Option<QuietSamples> {
        let fd: OwnedFd = stream.as_fd().try_clone_to_owned().ok()?;
        let (stop, stopped) = std::sync::mpsc::channel::<()>();
        let every = std::time::Duration::from_secs_f64(VERDICT_SAMPLE_S);
        let thread = std::thread::Builder::new()
            .name("verdict-samples".into())
            .spawn(move || {
                let mut sampler = Sampler::new(fd.as_raw_fd());
                loop {
                    let end = !matches!(
                        stopped.recv_timeout(every),
                        Err(std::sync::mpsc::RecvTimeoutError::Timeout)
                    );
                    sampler.sample(start.elapsed().as_secs_f64(), 0);
                    if end {
                        break;
                    }
                }
                drop(fd);
                sampler.samples
            })
            .ok()?;
        Some(QuietSamples { stop, thread })
    }

    /// Takes a last sample and returns them all.
    fn finish(self) -> Vec<IntervalSample> {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

impl<'a> Schedule<'a> {
    fn new(amount: Amount, record: usize) -> Schedule<'a> {
        Schedule {
            amount,
            record,
            offset: 0,
            start: Instant::now(),
            next_clock_at: CLOCK_EVERY_BYTES,
            done: false,
            intervals: None,
        }
    }

    /// Samples every `every_s` seconds on `fd`, each interval to `sink`.
    fn with_intervals(
        mut self,
        every_s: f64,
        fd: RawFd,
        sink: &'a mut dyn FnMut(&IntervalSample),
    ) -> Schedule<'a> {
        self.intervals = Some(Intervals {
            every_s,
            next_at_s: every_s,
            sampler: Sampler::new(fd),
            sink,
        });
        self
    }

    /// The stream offset and length of the next record, or `None` when done.
    fn next(&mut self) -> Option<(u64, usize)> {
        if self.done {
            return None;
        }
        let timed = matches!(self.amount, Amount::Seconds(_));
        if (timed || self.intervals.is_some()) && self.offset >= self.next_clock_at {
            self.next_clock_at = self.offset + CLOCK_EVERY_BYTES;
            let now = self.start.elapsed().as_secs_f64();
            if let Some(intervals) = &mut self.intervals
                && now >= intervals.next_at_s
            {
                intervals.sample(now, self.offset);
            }
            if let Amount::Seconds(limit) = self.amount
                && now >= limit
            {
                self.done = true;
                return None;
            }
        }
        let len = match self.amount {
            Amount::Bytes(total) => {
                let left = total - self.offset;
                if left == 0 {
                    self.done = true;
                    return None;
                }
                left.min(self.record as u64) as usize
            }
            Amount::Seconds(_) => self.record,
        };
        let offset = self.offset;
        self.offset += len as u64;
        Some((offset, len))
    }

    /// Closes the last interval (after every byte was acknowledged) and
    /// returns them all.
    fn finish_intervals(&mut self) -> Vec<IntervalSample> {
        let now = self.start.elapsed().as_secs_f64();
        let offset = self.offset;
        match &mut self.intervals {
            Some(intervals) => {
                if now > intervals.sampler.last_s {
                    intervals.sample(now, offset);
                }
                // A last sliver (the stream's tail and its FIN, after the
                // last full interval) joins the interval before it.
                let every_s = intervals.every_s;
                let samples = &mut intervals.sampler.samples;
                let n = samples.len();
                if n >= 2 && samples[n - 1].end_s - samples[n - 1].start_s < every_s / 4.0 {
                    let tail = samples.pop().expect("n >= 2");
                    let last = samples.last_mut().expect("n >= 2");
                    last.bytes += tail.bytes;
                    last.retransmits += tail.retransmits;
                    last.end_s = tail.end_s;
                    last.cwnd = tail.cwnd;
                    last.rtt_us = tail.rtt_us;
                    last.delivery_rate_mbit_s = tail.delivery_rate_mbit_s;
                    let seconds = last.end_s - last.start_s;
                    last.mbit_s = if seconds > 0.0 {
                        last.bytes as f64 * 8.0 / seconds / 1e6
                    } else {
                        0.0
                    };
                }
                std::mem::take(samples)
            }
            None => Vec::new(),
        }
    }
}

/// What a send loop did.
#[derive(Default)]
struct SendTally {
    bytes: u64,
    syscalls: u64,
    zerocopy: Option<ZerocopyStats>,
}

fn write_all(fd: RawFd, mut data: &[u8], tally: &mut SendTally) -> io::Result<()> {
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

impl Sender {
    /// Connects to the receiver as `spec` says.
    pub fn connect(spec: SendSpec) -> Result<Sender, StreamError> {
        let socket = new_socket(&spec.connect, &spec.options)?;
        if let Some(bps) = spec.options.pacing_bps {
            let bytes_per_s: u64 = (bps / 8).max(1);
            // SAFETY: setsockopt reads a u64 from the pointer for its length.
            let set = unsafe {
                libc::setsockopt(
                    socket.as_raw_fd(),
                    libc::SOL_SOCKET,
                    libc::SO_MAX_PACING_RATE,
                    (&bytes_per_s as *const u64).cast(),
                    std::mem::size_of::<u64>() as libc::socklen_t,
                )
            };
            if set != 0 {
                return Err(io_err("setting SO_MAX_PACING_RATE (--rate)")(
                    io::Error::last_os_error(),
                ));
            }
        }
        let connecting = Instant::now();
        socket
            .connect(&spec.connect.into())
            .map_err(io_err("connecting to the receiver"))?;
        let handshake_s = connecting.elapsed().as_secs_f64();
        let mut stream: TcpStream = socket.into();
        spec.options
            .stall_bound()
            .arm(stream.as_fd())
            .map_err(io_err("bounding the waits (--stall-timeout)"))?;
        guard::present(&mut stream, spec.token.as_ref())
            .map_err(io_err("sending the run token"))?;
        Ok(Sender {
            stream,
            spec,
            handshake_s,
        })
    }

    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.stream.local_addr()
    }

    /// Sends the whole amount, then waits for the receiver to close.
    /// Sends, then waits for the receiver to close; with `--interval`,
    /// hands each interval to `on_interval` as it ends.
    pub fn run(
        self,
        on_interval: &mut dyn FnMut(&IntervalSample),
    ) -> Result<EndpointReport, StreamError> {
        // A second descriptor of the connection, to read its TCP_INFO if a
        // wait runs out after the data path has dropped its own.
        let watch = self
            .stream
            .try_clone()
            .map_err(io_err("duplicating the socket"))?;
        let bound = self.spec.options.stall_bound();
        self.transfer(on_interval)
            .map_err(|e| e.stalled("sender", bound, &watch))
    }

    fn transfer(
        self,
        on_interval: &mut dyn FnMut(&IntervalSample),
    ) -> Result<EndpointReport, StreamError> {
        let spec = &self.spec;
        let fd = self.stream.as_raw_fd();
        let egress = egress_interface(&self.stream);
        let shaping = Shaping::start(egress.clone().into_iter().collect());
        let before = Before::now(spec.interface.as_deref().or(egress.as_deref()));
        let start = Instant::now();
        let mut schedule = Schedule::new(spec.amount, spec.record);
        if let Some(every) = spec.interval_s {
            schedule = schedule.with_intervals(every, fd, on_interval);
        }
        let quiet = match spec.interval_s {
            None => QuietSamples::start(&self.stream, schedule.start),
            Some(_) => None,
        };
        let tally = match spec.strategy {
            SendStrategy::Write => {
                let pattern = Pattern::new(spec.record);
                let mut tally = SendTally::default();
                while let Some((offset, len)) = schedule.next() {
                    write_all(fd, pattern.slice(offset, len), &mut tally)
                        .map_err(io_err("writing to the socket"))?;
                    tally.bytes += len as u64;
                }
                tally
            }
            SendStrategy::Chunked { chunk } => {
                let pattern = Pattern::new(spec.record);
                let mut tally = SendTally::default();
                while let Some((offset, len)) = schedule.next() {
                    for piece in pattern.slice(offset, len).chunks(chunk.max(1)) {
                        write_all(fd, piece, &mut tally)
                            .map_err(io_err("writing to the socket"))?;
                    }
                    tally.bytes += len as u64;
                }
                tally
            }
            SendStrategy::Writev { records } => {
                send_writev(fd, &mut schedule, spec.record, records.max(1))
                    .map_err(io_err("writev to the socket"))?
            }
            SendStrategy::Sendfile => send_from_file(fd, &mut schedule, spec.record, false)?,
            SendStrategy::Splice => send_from_file(fd, &mut schedule, spec.record, true)?,
            SendStrategy::Zerocopy => send_zerocopy(
                &self.stream,
                &mut schedule,
                spec.record,
                spec.options.stall_bound(),
            )
            .map_err(io_err("MSG_ZEROCOPY send"))?,
        };
        // Wait until the receiver has read everything and closed.
        self.stream
            .shutdown(Shutdown::Write)
            .map_err(io_err("shutting down the send side"))?;
        let mut sink = [0u8; 64];
        loop {
            match (&self.stream).read(&mut sink) {
                Ok(0) => break,
                Ok(_) => {}
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) if e.kind() == io::ErrorKind::ConnectionReset => break,
                Err(e) => return Err(io_err("waiting for the receiver to close")(e)),
            }
        }
        let wall_s = start.elapsed().as_secs_f64();
        let over = before.end();
        let (shapers, shapers_unread) = shaping.finish();
        let intervals = schedule.finish_intervals();
        let samples = quiet.map_or_else(Vec::new, QuietSamples::finish);
        let tcp_info = TcpInfo::read(self.stream.as_fd()).ok();
        let bbr_bw_bps = crate::measure::tcpinfo::bbr_bandwidth(self.stream.as_fd());
        let socket = Socket::from(self.stream);
        let buffer = socket_buffer(
            socket.send_buffer_size(),
            spec.options.sndbuf.is_some(),
            "tcp_wmem",
        );
        Ok(EndpointReport {
            role: "sender".into(),
            pid: std::process::id(),
            bytes: tally.bytes,
            syscalls: tally.syscalls,
            wall_s,
            usage: over.usage,
            tcp_info,
            counters: over.counters,
            congestion_control: congestion_control_of(&socket),
            mss: socket.tcp_mss().ok(),
            verified: false,
            zerocopy: tally.zerocopy,
            zerocopy_receive: None,
            intervals,
            samples,
            handshake_s: Some(self.handshake_s),
            bbr_bw_bps,
            shapers,
            shapers_unread,
            udp: None,
            cpus: over.cpus,
            interface: over.interface,
            run_delay_s: over.run_delay_s,
            buffer,
            cpu_budget: None,
            core: over.core,
            link_speed: link_speed_of(&socket),
        })
    }
}

/// The interface the connection's local address is on: the one its data
/// leaves by.
fn egress_interface(stream: &TcpStream) -> Option<String> {
    crate::measure::ifstat::interface_with(stream.local_addr().ok()?.ip())
}

/// The shapers on this end's side of the path (the sender's egress
/// interface; the receiver's ifb devices, where ingress shaping is
/// redirected), read before the data path and again after it: what they
/// dropped and held back over the flow. Read outside the data path.
pub struct Shaping {
    interfaces: Vec<String>,
    before: Result<Vec<crate::measure::qdisc::Shaper>, String>,
}

impl Shaping {
    pub fn start(interfaces: Vec<String>) -> Shaping {
        let before = Shaping::read(&interfaces);
        Shaping { interfaces, before }
    }

    /// Nothing to read (no ifb device) costs no netlink socket.
    fn read(interfaces: &[String]) -> Result<Vec<crate::measure::qdisc::Shaper>, String> {
        if interfaces.is_empty() {
            return Ok(Vec::new());
        }
        crate::measure::qdisc::read(interfaces).map_err(|e| e.to_string())
    }

    /// The shapers over the flow, and what could not be read.
    pub fn finish(self) -> (Vec<crate::measure::qdisc::Shaper>, Option<String>) {
        let after = Shaping::read(&self.interfaces);
        match (self.before, after) {
            (Ok(before), Ok(after)) => (
                after
                    .iter()
                    .map(|s| {
                        s.since(
                            before
                                .iter()
                                .find(|b| b.interface == s.interface && b.kind == s.kind),
                        )
                    })
                    .collect(),
                None,
            ),
            (Err(e), _) | (_, Err(e)) => (
                Vec::new(),
                Some(format!(
                    "the qdiscs of {} ({e})",
                    self.interfaces.join(", ")
                )),
            ),
        }
    }
}

/// The speed of the interface the connection's local address is on.
fn link_speed_of(socket: &Socket) -> Option<crate::measure::ifstat::LinkSpeed> {
    let local = socket.local_addr().ok()?.as_socket()?;
    let interface = crate::measure::ifstat::interface_with(local.ip())?;
    crate::measure::ifstat::link_speed(&interface)
}

/// What an endpoint reads as its data path starts, to difference at its
/// end. Read outside the measured interval: nothing here runs per record.
struct Before {
    interface_name: Option<String>,
    interface: Option<InterfaceCounters>,
    counters: Counters,
    usage: ProcessUsage,
    cpu: u32,
    run_delay_ns: Option<u64>,
    stat: Option<StatSnapshot>,
}

/// The data path's own accounting, differenced over it.
struct Over {
    usage: ProcessUsage,
    /// The CPU it started and ended on.
    cpus: Option<(u32, u32)>,
    run_delay_s: Option<f64>,
    /// The core it ended on, and that core's load over the data path.
    core: Option<CoreLoad>,
    counters: Counters,
    interface: Option<InterfaceCounters>,
}

impl Before {
    fn now(interface: Option<&str>) -> Before {
        Before {
            interface_name: interface.map(String::from),
            interface: interface.and_then(InterfaceCounters::read),
            counters: Counters::read(),
            usage: ProcessUsage::now(),
            cpu: current_cpu(),
            run_delay_ns: thread_run_delay_ns(),
            stat: StatSnapshot::read().ok(),
        }
    }

    fn end(self) -> Over {
        let usage = ProcessUsage::now().since(&self.usage);
        let last = current_cpu();
        let run_delay_s = self
            .run_delay_ns
            .zip(thread_run_delay_ns())
            .map(|(before, after)| after.saturating_sub(before) as f64 / 1e9);
        let core = self
            .stat
            .zip(StatSnapshot::read().ok())
            .and_then(|(before, after)| core_load(&before, &after, last));
        Over {
            usage,
            cpus: Some((self.cpu, last)),
            run_delay_s,
            core,
            counters: Counters::read().delta_reported(&self.counters),
            interface: interface_delta(self.interface_name.as_deref(), self.interface),
        }
    }
}

/// A socket's buffer at the end, with the namespace's autotuning maximum
/// (`/proc/sys/net/ipv4/NAME`'s third field; per namespace since 4.15).
fn socket_buffer(size: io::Result<usize>, set: bool, sysctl: &str) -> Option<SocketBuffer> {
    size.ok().map(|bytes| SocketBuffer {
        bytes: bytes as u64,
        set,
        autotune_max: autotune_max(sysctl),
    })
}

/// The largest buffer autotuning may grow a socket's to: `tcp_wmem`'s or
/// `tcp_rmem`'s third field.
pub fn autotune_max(sysctl: &str) -> Option<u64> {
    std::fs::read_to_string(format!("/proc/sys/net/ipv4/{sysctl}"))
        .ok()
        .and_then(|t| t.split_whitespace().nth(2)?.parse().ok())
}

fn send_writev(
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

fn send_from_file(
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

fn send_zerocopy(
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::thread;

    fn transfer(
        strategy: SendStrategy,
        recv: RecvStrategy,
        record: usize,
        amount: Amount,
    ) -> (EndpointReport, EndpointReport) {
        transfer_with(SocketOptions::default(), strategy, recv, record, amount)
    }

    fn transfer_with(
        options: SocketOptions,
        strategy: SendStrategy,
        recv: RecvStrategy,
        record: usize,
        amount: Amount,
    ) -> (EndpointReport, EndpointReport) {
        let receiver = Receiver::listen(ReceiveSpec {
            bind: "127.0.0.1:0".parse().unwrap(),
            options: options.clone(),
            strategy: recv,
            verify: true,
            progress: false,
            interface: None,
            guard: None,
            limit_bytes: None,
            udp: false,
            udp_clock_shared: false,
        })
        .unwrap();
        let addr = receiver.local_addr().unwrap();
        let recv_thread = thread::spawn(move || receiver.run(&mut |_| {}).unwrap());
        let sender = Sender::connect(SendSpec {
            connect: addr,
            options,
            strategy,
            record,
            amount,
            interface: None,
            token: None,
            interval_s: None,
            udp: None,
        })
        .unwrap();
        let sent = sender.run(&mut |_| {}).unwrap();
        (sent, recv_thread.join().unwrap())
    }

    #[test]
    fn a_low_water_mark_makes_every_read_but_the_last_whole() {
        // 16 KB writes with TCP_NODELAY: without the mark a read returns
        // whatever the last segments brought; with 64 KB it waits for 64 KB.
        let total = 8u64 << 20;
        let lowat: u32 = 64 << 10;
        let options = SocketOptions {
            nodelay: true,
            rcvlowat: Some(lowat),
            ..Default::default()
        };
        let recv = RecvStrategy::Read { buffer: 128 << 10 };
        let (sent, got) = transfer_with(
            options,
            SendStrategy::Write,
            recv,
            16 << 10,
            Amount::Bytes(total),
        );
        assert_eq!(sent.bytes, total);
        assert_eq!(got.bytes, total);
        assert!(got.verified);
        // The first read (before the mark is set), the full ones, the
        // tail and the end of stream.
        let most = total.div_ceil(lowat as u64) + 3;
        assert!(
            got.syscalls <= most,
            "{} reads for {total} bytes: some returned less than {lowat}",
            got.syscalls
        );
    }

    #[test]
    fn a_guarded_receiver_serves_the_token_and_holds_the_byte_limit() {
        let token = [9u8; crate::endpoint::protocol::TOKEN_LEN];
        let spec = |limit_bytes| ReceiveSpec {
            bind: "127.0.0.1:0".parse().unwrap(),
            options: SocketOptions::default(),
            strategy: RecvStrategy::Read { buffer: 4096 },
            verify: true,
            progress: false,
            interface: None,
            guard: Some(DataGuard {
                peer: "127.0.0.1".parse().unwrap(),
                token,
                ports: None,
            }),
            limit_bytes,
            udp: false,
            udp_clock_shared: false,
        };
        let send = |addr, bytes| {
            Sender::connect(SendSpec {
                connect: addr,
                options: SocketOptions::default(),
                strategy: SendStrategy::Write,
                record: 1000,
                amount: Amount::Bytes(bytes),
                interface: None,
                token: Some(token),
                interval_s: None,
                udp: None,
            })
            .unwrap()
            .run(&mut |_| {})
        };
        for (limit, bytes, ok) in [(Some(10_000), 10_000, true), (Some(10_000), 50_000, false)] {
            let receiver = Receiver::listen(spec(limit)).unwrap();
            let addr = receiver.local_addr().unwrap();
            let recv_thread = thread::spawn(move || receiver.run(&mut |_| {}));
            // A connection without the token is refused; the run goes on.
            drop(TcpStream::connect(addr).unwrap());
            let _ = send(addr, bytes);
            let received = recv_thread.join().unwrap();
            match (ok, received) {
                (true, Ok(report)) => assert_eq!(report.bytes, bytes),
                (false, Err(StreamError::Limit(10_000))) => {}
                (_, other) => panic!("limit {limit:?}, {bytes} bytes: {other:?}"),
            }
        }
    }

    #[test]
    fn every_strategy_delivers_the_exact_stream() {
        let total = 3 * PERIOD as u64 * PATTERN_FILE_PERIODS as u64 / 2 + 12_345; // wraps the file
        for strategy in [
            SendStrategy::Write,
            SendStrategy::Chunked { chunk: 1000 },
            SendStrategy::Writev { records: 7 },
            SendStrategy::Sendfile,
            SendStrategy::Splice,
            SendStrategy::Zerocopy,
        ] {
            let (sent, got) = transfer(
                strategy,
                RecvStrategy::Read { buffer: 8191 },
                70_001,
                Amount::Bytes(total),
            );
            assert_eq!(sent.bytes, total, "{strategy:?}");
            assert_eq!(got.bytes, total, "{strategy:?}");
            assert!(got.verified);
            let records_per_call = if let SendStrategy::Writev { records } = strategy {
                records
            } else {
                1
            };
            assert!(
                sent.syscalls >= total / 70_001 / records_per_call as u64,
                "{strategy:?}"
            );
        }
    }

    #[test]
    fn zero_copy_receive_maps_whole_pages_and_counts_every_byte() {
        // Segments of exactly one page of payload (4096 + the 12-byte
        // timestamp option) from the sender's own pages: the kernel maps
        // them. From write(2)'s copies it maps nothing and every byte is
        // read; either way every byte arrives, verified, counted once.
        let total = 8 << 20;
        let options = SocketOptions {
            mss: Some(4108),
            ..Default::default()
        };
        let mut mapped_share = Vec::new();
        for strategy in [SendStrategy::Write, SendStrategy::Zerocopy] {
            let (_, got) = transfer_with(
                options.clone(),
                strategy,
                RecvStrategy::Zerocopy { buffer: 128 << 10 },
                64 << 10,
                Amount::Bytes(total),
            );
            assert_eq!(got.bytes, total, "{strategy:?}");
            assert!(got.verified);
            assert_eq!(got.mss, Some(4096), "{strategy:?}");
            let zc = got.zerocopy_receive.expect("zero-copy receive stats");
            assert_eq!(zc.unavailable, None);
            assert_eq!(zc.mapped + zc.copied, total, "{strategy:?}: {zc:?}");
            mapped_share.push(zc.mapped_pct());
        }
        assert_eq!(mapped_share[0], 0.0, "write(2)'s pages never map");
        assert!(
            mapped_share[1] > 50.0,
            "MSG_ZEROCOPY's pages map: {mapped_share:?}"
        );
    }

    #[test]
    fn zerocopy_reports_completions() {
        let (sent, _) = transfer(
            SendStrategy::Zerocopy,
            RecvStrategy::Read { buffer: 65536 },
            65536,
            Amount::Bytes(4 << 20),
        );
        let zc = sent.zerocopy.unwrap();
        // One completion per successful send of a whole 64 KiB record at least.
        assert!(zc.completed >= (4 << 20) / 65536, "{zc:?}");
        // On loopback the kernel must copy the pages after all, and says so.
        assert_eq!(zc.copied, zc.completed, "{zc:?}");
    }

    #[test]
    fn splice_receiver_counts_bytes_without_verifying() {
        let (_, got) = transfer(
            SendStrategy::Write,
            RecvStrategy::Splice,
            4096,
            Amount::Bytes(1 << 20),
        );
        assert_eq!(got.bytes, 1 << 20);
        assert!(!got.verified);
    }

    #[test]
    fn duration_mode_stops_on_time() {
        let start = Instant::now();
        let (sent, got) = transfer(
            SendStrategy::Write,
            RecvStrategy::Read { buffer: 65536 },
            16384,
            Amount::Seconds(0.3),
        );
        let took = start.elapsed().as_secs_f64();
        assert!((0.3..5.0).contains(&took), "took {took}");
        assert_eq!(sent.bytes, got.bytes);
        assert!(sent.bytes > 0);
    }

    #[test]
    fn chunked_sends_make_one_call_per_chunk() {
        let (sent, _) = transfer(
            SendStrategy::Chunked { chunk: 1024 },
            RecvStrategy::Read { buffer: 65536 },
            4096,
            Amount::Bytes(1 << 20),
        );
        assert_eq!(sent.syscalls, (1 << 20) / 1024);
        let (sent, _) = transfer(
            SendStrategy::Writev { records: 8 },
            RecvStrategy::Read { buffer: 65536 },
            4096,
            Amount::Bytes(1 << 20),
        );
        assert!(
            sent.syscalls <= (1 << 20) / 4096 / 8 + 8,
            "{}",
            sent.syscalls
        );
    }

    #[test]
    fn port_in_use_is_named() {
        let holder = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = holder.local_addr().unwrap();
        let err = Receiver::listen(ReceiveSpec {
            bind: addr,
            options: SocketOptions::default(),
            strategy: RecvStrategy::Read { buffer: 1024 },
            verify: true,
            progress: false,
            interface: None,
            guard: None,
            limit_bytes: None,
            udp: false,
            udp_clock_shared: false,
        })
        .err()
        .unwrap();
        assert!(
            err.to_string()
                .contains(&format!("port {} is in use", addr.port())),
            "{err}"
        );
    }
}
