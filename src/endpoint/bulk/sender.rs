//! The sending end of a bulk TCP transfer (ttcp's `-t`): it connects,
//! sends the run token, and hands records to the kernel with one of
//! several strategies (write, writev, sendfile or splice from a file
//! holding the pattern, MSG_ZEROCOPY), sampling TCP_INFO on a thread of
//! its own for the verdict and for `--interval`.
//!
//! Invariants:
//! - the data path makes only the system calls it counts in `syscalls`, and
//!   reads the clock at most once per [`CLOCK_EVERY_BYTES`](super::schedule::CLOCK_EVERY_BYTES) of records in
//!   duration mode, so the measuring does not perturb what is measured;
//! - the sender's bytes are borrowed slices of the shared [`Pattern`](crate::endpoint::pattern::Pattern) (or a
//!   file holding it, for sendfile and splice), so every strategy sends the
//!   same stream and the receiver can verify any of them;
//! - the sender's wall time runs until the receiver has closed, i.e. until
//!   every byte was delivered to the receiving application, like ttcp.

use super::schedule::{QuietSamples, Schedule};
use super::socket::{
    Before, Shaping, StreamError, egress_interface, io_err, new_socket, socket_buffer,
};
use super::types::EndpointReport;
use super::types::IntervalSample;
use super::types::SendStrategy;
use super::write::{send_from_file, send_write, send_writev};
use super::zerocopy::send_zerocopy;
use crate::endpoint::bulk::spec::SendSpec;
use crate::endpoint::guard;
use socket2::Socket;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd};
use std::time::Instant;

/// A sender that is connected, not yet started.
pub struct Sender {
    stream: TcpStream,
    spec: SendSpec,
    /// How long `connect` took: the TCP handshake.
    handshake_s: f64,
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
        // The TLS handshake before the data path: its own figure.
        let mut session = spec
            .tls
            .as_ref()
            .map(|tls| super::tls::Session::client(&self.stream, tls))
            .transpose()?;
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
        let tally = match (&mut session, spec.strategy) {
            (Some(session), _) => session.send(&self.stream, &mut schedule, spec.record)?,
            (None, SendStrategy::Write) => send_write(fd, &mut schedule, spec.record, None)
                .map_err(io_err("writing to the socket"))?,
            (None, SendStrategy::Chunked { chunk }) => {
                send_write(fd, &mut schedule, spec.record, Some(chunk))
                    .map_err(io_err("writing to the socket"))?
            }
            (None, SendStrategy::Writev { records }) => {
                send_writev(fd, &mut schedule, spec.record, records.max(1))
                    .map_err(io_err("writev to the socket"))?
            }
            (None, SendStrategy::Sendfile) => {
                send_from_file(fd, &mut schedule, spec.record, false)?
            }
            (None, SendStrategy::Splice) => send_from_file(fd, &mut schedule, spec.record, true)?,
            (None, SendStrategy::Zerocopy) => send_zerocopy(
                &self.stream,
                &mut schedule,
                spec.record,
                spec.options.stall_bound(),
            )
            .map_err(io_err("MSG_ZEROCOPY send"))?,
        };
        // --mptcp: the subflows as the last byte was handed over (each
        // one's acknowledged bytes then), in case they are gone by the
        // time the receiver has closed.
        let handed = spec
            .options
            .mptcp
            .then(|| super::types::MptcpStats::read(self.stream.as_fd()));
        wait_for_close(&self.stream)?;
        let wall_s = start.elapsed().as_secs_f64();
        let over = before.end();
        let intervals = schedule.finish_intervals();
        let samples = quiet.map_or_else(Vec::new, QuietSamples::finish);
        let bbr_bw_bps = crate::measure::tcpinfo::bbr_bandwidth(self.stream.as_fd());
        // After the receiver closed, each subflow's acknowledged bytes are
        // final; a subflow already gone leaves the reading at hand-over.
        let mptcp = handed.map(|handed| {
            let closed = super::types::MptcpStats::read(self.stream.as_fd());
            if closed.subflows.len() >= handed.subflows.len() {
                closed
            } else {
                handed
            }
        });
        let socket = Socket::from(self.stream);
        let buffer = socket_buffer(
            socket.send_buffer_size(),
            spec.options.sndbuf.is_some(),
            "tcp_wmem",
        );
        Ok(EndpointReport {
            zerocopy: tally.zerocopy,
            intervals,
            samples,
            handshake_s: Some(self.handshake_s),
            bbr_bw_bps,
            tls: session.map(super::tls::Session::stats),
            mptcp,
            ..over.tcp_report(
                "sender",
                (tally.bytes, tally.syscalls, wall_s),
                &socket,
                buffer,
                shaping,
            )
        })
    }
}

/// Shuts the send side and waits until the receiver has read everything
/// and closed.
fn wait_for_close(stream: &TcpStream) -> Result<(), StreamError> {
    stream
        .shutdown(Shutdown::Write)
        .map_err(io_err("shutting down the send side"))?;
    let mut sink = [0u8; 64];
    loop {
        match (&*stream).read(&mut sink) {
            Ok(0) => return Ok(()),
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) if e.kind() == io::ErrorKind::ConnectionReset => return Ok(()),
            Err(e) => return Err(io_err("waiting for the receiver to close")(e)),
        }
    }
}
