//! The receiving end of a bulk TCP transfer: it listens (on a plain
//! port, or behind a guarded port's gate through an agent), takes the
//! sender's one connection and drains it to end of stream with `read`
//! (verifying each byte against the shared pattern) or `splice` into
//! `/dev/null` (counting only), or maps it with TCP_ZEROCOPY_RECEIVE
//! ([`super::zerocopy`]).
//!
//! Invariant: the data path makes only the system calls it counts.

use super::socket::{
    Before, MAX_PIPE, Pipe, Shaping, StreamError, check, congestion_control_of, egress_interface,
    io_err, link_speed_of, new_socket, socket_buffer, splice,
};
use super::types::EndpointReport;
use super::types::RecvStrategy;
use super::zerocopy::receive_zerocopy;
use crate::endpoint::bulk::spec::ReceiveSpec;
use crate::endpoint::guard;
use crate::endpoint::pattern::{AlignedBuf, Pattern};
use crate::endpoint::stall::{self, Stalled};
use crate::measure::tcpinfo::TcpInfo;
use socket2::Socket;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

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
