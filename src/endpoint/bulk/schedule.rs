//! What a sender is to send and when it looks: the schedule of records
//! (by bytes or by duration, looking at the clock at most once per
//! [`CLOCK_EVERY_BYTES`]), and the TCP_INFO samples taken beside the data
//! path on a thread of its own, for `--interval` and for the verdict
//! ([`VERDICT_SAMPLE_S`]).

use super::types::Amount;
use super::types::{ChronoShares, IntervalSample};
use crate::measure::tcpinfo::TcpInfo;
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::Instant;

/// In duration mode the sender looks at the clock after about this many bytes.
pub const CLOCK_EVERY_BYTES: u64 = 256 * 1024;

/// Without `--interval`, the sender samples TCP_INFO for the limits
/// verdict this often (seconds), on a thread of its own: 100 samples
/// over a 2 s run, a getsockopt each.
pub const VERDICT_SAMPLE_S: f64 = 0.02;

/// Yields record lengths until the amount is sent.
pub(super) struct Schedule<'a> {
    amount: Amount,
    record: usize,
    offset: u64,
    pub(super) start: Instant,
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
pub(super) struct QuietSamples {
    stop: std::sync::mpsc::Sender<()>,
    thread: std::thread::JoinHandle<Vec<IntervalSample>>,
}

impl QuietSamples {
    /// Starts on a duplicate of `stream`'s descriptor; `None` if it
    /// cannot be had (the verdict then says it had no samples).
    pub(super) fn start(stream: &TcpStream, start: Instant) -> Option<QuietSamples> {
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
    pub(super) fn finish(self) -> Vec<IntervalSample> {
        let _ = self.stop.send(());
        self.thread.join().unwrap_or_default()
    }
}

impl<'a> Schedule<'a> {
    pub(super) fn new(amount: Amount, record: usize) -> Schedule<'a> {
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
    pub(super) fn with_intervals(
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
    pub(super) fn finish_intervals(&mut self) -> Vec<IntervalSample> {
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
