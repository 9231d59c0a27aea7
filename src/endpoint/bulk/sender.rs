//! The sending end of a bulk TCP transfer (ttcp's `-t`): it connects,
//! sends the run token, and hands records to the kernel with one of
//! several strategies (write, writev, sendfile or splice from a file
//! holding the pattern, MSG_ZEROCOPY), sampling TCP_INFO on a thread of
//! its own for the verdict and for `--interval`.
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

use super::socket::{
    Before, Pipe, Shaping, StreamError, check, congestion_control_of, egress_interface, io_err,
    link_speed_of, new_socket, socket_buffer, splice,
};
use super::types::Amount;
use super::types::EndpointReport;
use super::types::SendStrategy;
use super::types::ZerocopyStats;
use super::types::{ChronoShares, IntervalSample};
use super::zerocopy::send_zerocopy;
use crate::endpoint::bulk::spec::SendSpec;
use crate::endpoint::guard;
use crate::endpoint::pattern::{PERIOD, Pattern};
use crate::measure::tcpinfo::TcpInfo;
use socket2::Socket;
use std::io::{self, Read};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

/// In duration mode the sender looks at the clock after about this many bytes.
pub const CLOCK_EVERY_BYTES: u64 = 256 * 1024;

/// Without `--interval`, the sender samples TCP_INFO for the limits
/// verdict this often (seconds), on a thread of its own: 100 samples
/// over a 2 s run, a getsockopt each.
pub const VERDICT_SAMPLE_S: f64 = 0.02;
/// Size of the file that sendfile and splice read from (a multiple of the pattern period).
pub(super) const PATTERN_FILE_PERIODS: usize = 64;

/// A sender that is connected, not yet started.
pub struct Sender {
    stream: TcpStream,
    spec: SendSpec,
    /// How long `connect` took: the TCP handshake.
    handshake_s: f64,
}

/// Yields record lengths until the amount is sent.
pub(super) struct Schedule<'a> {
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
    pub(super) fn next(&mut self) -> Option<(u64, usize)> {
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
pub(super) struct SendTally {
    pub(super) bytes: u64,
    pub(super) syscalls: u64,
    pub(super) zerocopy: Option<ZerocopyStats>,
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
