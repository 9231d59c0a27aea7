//! What both ends of a bulk TCP transfer share: the error they report,
//! the socket each opens with the options it was asked for, and the
//! facts of its host read before and after the data path (the
//! interface's counters, the shapers on its side, the socket buffers as
//! the kernel set them, the link's speed). Read outside the data path.

use super::types::EndpointReport;
use super::types::SocketBuffer;
use super::types::SocketOptions;
use crate::endpoint::protocol::current_cpu;
use crate::endpoint::stall::{self, StallBound, Stalled};
use crate::measure::procstat::{CoreLoad, StatSnapshot, core_load};
use crate::measure::schedstat::thread_run_delay_ns;
use crate::measure::tcpinfo::TcpInfo;
use crate::measure::{ifstat::InterfaceCounters, netstat::Counters, rusage::ProcessUsage};
use socket2::{Domain, Protocol, Socket, Type};
use std::io;
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, FromRawFd, OwnedFd, RawFd};
use thiserror::Error;

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
    #[error("TLS: {0}")]
    Tls(String),
    #[error("QUIC: {0}")]
    Quic(String),
    #[error("--mptcp: {0}")]
    Mptcp(String),
}

impl StreamError {
    /// An armed wait that ran out becomes the stall it is, with `side`'s
    /// connection as the kernel sees it; other errors pass unchanged.
    pub(super) fn stalled(
        self,
        side: &'static str,
        bound: StallBound,
        stream: &TcpStream,
    ) -> StreamError {
        match self {
            StreamError::Io { what, source } if stall::timed_out(&source) => {
                StreamError::Stalled(Stalled::on(side, what, bound, stream.as_fd()))
            }
            other => other,
        }
    }
}

pub(super) fn io_err(what: &'static str) -> impl FnOnce(io::Error) -> StreamError {
    move |source| StreamError::Io { what, source }
}

/// Turns a libc return value into a count, retrying on EINTR via the caller's loop.
pub(super) fn check(ret: isize) -> io::Result<usize> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret as usize)
    }
}

pub(super) fn new_socket(
    addr: &SocketAddr,
    options: &SocketOptions,
) -> Result<Socket, StreamError> {
    let protocol = if options.mptcp {
        Protocol::from(crate::measure::mptcp::IPPROTO_MPTCP)
    } else {
        Protocol::TCP
    };
    let socket = Socket::new(Domain::for_address(*addr), Type::STREAM, Some(protocol)).map_err(
        |source| match options.mptcp {
            true => StreamError::Mptcp(match crate::measure::mptcp::support() {
                crate::measure::mptcp::Support::Refused(why) => why,
                crate::measure::mptcp::Support::Present => source.to_string(),
            }),
            false => io_err("creating the socket")(source),
        },
    )?;
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

pub(super) fn congestion_control_of(socket: &Socket) -> Option<String> {
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

/// The interface the connection's local address is on: the one its data
/// leaves by.
pub(super) fn egress_interface(stream: &TcpStream) -> Option<String> {
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
pub(super) fn link_speed_of(socket: &Socket) -> Option<crate::measure::ifstat::LinkSpeed> {
    let local = socket.local_addr().ok()?.as_socket()?;
    let interface = crate::measure::ifstat::interface_with(local.ip())?;
    crate::measure::ifstat::link_speed(&interface)
}

/// What an endpoint reads as its data path starts, to difference at its
/// end. Read outside the measured interval: nothing here runs per record.
pub(super) struct Before {
    interface_name: Option<String>,
    interface: Option<InterfaceCounters>,
    counters: Counters,
    usage: ProcessUsage,
    cpu: u32,
    run_delay_ns: Option<u64>,
    stat: Option<StatSnapshot>,
}

/// The data path's own accounting, differenced over it.
pub(super) struct Over {
    pub(super) usage: ProcessUsage,
    /// The CPU it started and ended on.
    pub(super) cpus: Option<(u32, u32)>,
    pub(super) run_delay_s: Option<f64>,
    /// The core it ended on, and that core's load over the data path.
    pub(super) core: Option<CoreLoad>,
    pub(super) counters: Counters,
    pub(super) interface: Option<InterfaceCounters>,
}

impl Over {
    /// An end's report of its data path: who, how much, and what the
    /// accounting saw over it. The end fills in the rest.
    pub(super) fn report(
        self,
        role: &str,
        (bytes, syscalls, wall_s): (u64, u64, f64),
    ) -> EndpointReport {
        EndpointReport {
            role: role.into(),
            pid: std::process::id(),
            bytes,
            syscalls,
            wall_s,
            usage: self.usage,
            counters: self.counters,
            cpus: self.cpus,
            interface: self.interface,
            run_delay_s: self.run_delay_s,
            core: self.core,
            ..EndpointReport::default()
        }
    }

    /// A TCP end's report of its data path, the part both ends fill alike:
    /// who, how much, what the accounting saw over it, and what the socket
    /// (its TCP_INFO, control, MSS, link, buffer) and the shaping on its
    /// side say at the end. The end fills in the rest.
    pub(super) fn tcp_report(
        self,
        role: &str,
        (bytes, syscalls, wall_s): (u64, u64, f64),
        socket: &Socket,
        buffer: Option<SocketBuffer>,
        shaping: Shaping,
    ) -> EndpointReport {
        let (shapers, shapers_unread) = shaping.finish();
        EndpointReport {
            tcp_info: TcpInfo::read(socket.as_fd()).ok(),
            congestion_control: congestion_control_of(socket),
            mss: socket.tcp_mss().ok(),
            shapers,
            shapers_unread,
            buffer,
            link_speed: link_speed_of(socket),
            ..self.report(role, (bytes, syscalls, wall_s))
        }
    }
}

impl Before {
    pub(super) fn now(interface: Option<&str>) -> Before {
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

    /// The datagrams the stack dropped on their way in since (see
    /// `Counters::udp_receive_drops`).
    pub(super) fn udp_receive_drops(
        &self,
        now: &Counters,
    ) -> std::collections::BTreeMap<String, u64> {
        now.udp_receive_drops(&self.counters)
    }

    pub(super) fn end(self) -> Over {
        self.end_at(Counters::read())
    }

    /// As [`Before::end`], with the stack's counters read already (`now`).
    pub(super) fn end_at(self, now: Counters) -> Over {
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
            counters: now.delta_reported(&self.counters),
            interface: interface_delta(self.interface_name.as_deref(), self.interface),
        }
    }
}

/// A socket's buffer at the end, with the namespace's autotuning maximum
/// (`/proc/sys/net/ipv4/NAME`'s third field; per namespace since 4.15).
pub(super) fn socket_buffer(
    size: io::Result<usize>,
    set: bool,
    sysctl: &str,
) -> Option<SocketBuffer> {
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

/// Largest pipe netlab asks for (the default `fs.pipe-max-size`).
pub(super) const MAX_PIPE: usize = 1 << 20;

/// A pipe, closed on drop.
pub(super) struct Pipe {
    pub(super) read: OwnedFd,
    pub(super) write: OwnedFd,
    pub(super) capacity: usize,
}

impl Pipe {
    pub(super) fn new(want: usize) -> io::Result<Pipe> {
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

pub(super) fn splice(
    from: RawFd,
    from_off: Option<&mut i64>,
    to: RawFd,
    len: usize,
) -> io::Result<usize> {
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
