//! The receiving end of a bulk TCP transfer: it listens (on a plain
//! port, or behind a guarded port's gate through an agent), takes the
//! sender's one connection and drains it to end of stream with `read`
//! (verifying each byte against the shared pattern) or `splice` into
//! `/dev/null` (counting only), or maps it with TCP_ZEROCOPY_RECEIVE
//! ([`super::zerocopy`]).
//!
//! Invariant: the data path makes only the system calls it counts.

use super::read::{ReadSpec, Received, receive_read, receive_splice};
use super::socket::{
    Before, Shaping, StreamError, egress_interface, io_err, new_socket, socket_buffer,
};
use super::types::EndpointReport;
use super::types::RecvStrategy;
use super::types::ZerocopyReceiveStats;
use super::zerocopy::receive_zerocopy;
use crate::endpoint::bulk::spec::ReceiveSpec;
use crate::endpoint::guard;
use crate::endpoint::stall::{self, Stalled};
use socket2::Socket;
use std::io;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;

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
        // The data port closes as soon as the sender is in; with --mptcp
        // not until the stream ends, since the kernel takes a subflow's
        // MP_JOIN on the listening socket (RFC 8684 3.2: joins go to the
        // port the connection opened on). Nothing more is accepted from it.
        let door = match self.spec.options.mptcp {
            true => Some(self.door),
            false => {
                drop(self.door);
                None
            }
        };
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
        let mut session = self
            .spec
            .tls
            .as_ref()
            .map(|tls| super::tls::Session::server(&stream, tls))
            .transpose()
            .map_err(|e| e.stalled("receiver", bound, &stream))?;
        let before = Before::now(interface.as_deref());
        let (received, zerocopy_receive) = drain(&self.spec, &stream, session.as_mut(), progress);
        let (bytes, syscalls, first_byte) =
            received.map_err(|e| e.stalled("receiver", bound, &stream))?;
        let wall_s = first_byte.map(|t| t.elapsed().as_secs_f64()).unwrap_or(0.0);
        let over = before.end();
        drop(door);
        // At end of stream and before this end closes: every subflow is
        // still there, with all it received.
        let mptcp = self
            .spec
            .options
            .mptcp
            .then(|| super::types::MptcpStats::read(stream.as_fd()));
        let socket = Socket::from(stream);
        let buffer = socket_buffer(
            socket.recv_buffer_size(),
            self.spec.options.rcvbuf.is_some(),
            "tcp_rmem",
        );
        Ok(EndpointReport {
            verified: self.spec.verify && (session.is_some() || self.spec.strategy.sees_bytes()),
            zerocopy_receive,
            tls: session.map(super::tls::Session::stats),
            mptcp,
            ..over.tcp_report(
                "receiver",
                (bytes, syscalls, wall_s),
                &socket,
                buffer,
                shaping,
            )
        })
    }
}

/// Takes the stream to its end by the spec's strategy, or through the
/// TLS session's record layer; with zero-copy receive, what it mapped.
fn drain(
    spec: &ReceiveSpec,
    stream: &TcpStream,
    session: Option<&mut super::tls::Session>,
    progress: &mut dyn FnMut(u64),
) -> (Result<Received, StreamError>, Option<ZerocopyReceiveStats>) {
    let bound = spec.options.stall_bound();
    let read = |buffer, lowat| ReadSpec {
        buffer,
        verify: spec.verify,
        limit: spec.limit_bytes.unwrap_or(u64::MAX),
        lowat,
        stall_ms: bound.millis(),
    };
    let want = spec.progress;
    let limit = spec.limit_bytes.unwrap_or(u64::MAX);
    match (session, spec.strategy) {
        (Some(session), strategy) => {
            let buffer = match strategy {
                RecvStrategy::Read { buffer } | RecvStrategy::Zerocopy { buffer } => buffer,
                RecvStrategy::Splice => 128 << 10,
            };
            (
                session.receive(stream, read(buffer, None), want, progress),
                None,
            )
        }
        (None, RecvStrategy::Read { buffer }) => (
            receive_read(stream, read(buffer, spec.options.rcvlowat), want, progress),
            None,
        ),
        (None, RecvStrategy::Splice) => (receive_splice(stream, limit, want, progress), None),
        (None, RecvStrategy::Zerocopy { buffer }) => {
            match receive_zerocopy(stream, read(buffer, None), want, progress) {
                Ok((received, stats)) => (Ok(received), Some(stats)),
                Err(e) => (Err(e), None),
            }
        }
    }
}
