//! rpm's measuring end: the draft's test run for real
//! (draft-ietf-ippm-responsiveness-06, "Measuring Responsiveness Under
//! Working Conditions"), over netlab's own framing instead of HTTP/2 and
//! TLS.
//!
//! 1. Idle: foreign probes one after another on the quiet path (the idle
//!    round trip).
//! 2. Load: INP load-generating connections per direction; each interval
//!    (ID) the goodput is measured, and while its moving average is not
//!    stable (`saturation::goodput_saturation`) INC more are added per
//!    direction, up to the most allowed.
//! 3. Probes from the load's start, at most MPS pairs a second and within
//!    PTC of the goodput: a foreign probe (a new connection: the handshake
//!    timed, then, once the server says it serves it, a 1-byte request and
//!    its 1-byte answer) and a self probe
//!    (a 1-byte request on a randomly chosen load connection, answered
//!    behind the data that connection already queued).
//! 4. Once goodput saturated, the responsiveness of each interval (over
//!    the last MAD intervals' probes) until it is stable too, or the time
//!    is up.
//!
//! Every probe's time and every interval's goodput go into the report
//! raw; `analysis` computes the result from them.

use super::framing::{DATA_FRAME, Decoder, Event, HEADER_LEN, data_header, probe_frame};
use super::saturation::{goodput_saturation, responsiveness_at};
use super::server::{PROBE_READY, PROBE_REQUEST};
use super::sockets::{apply, queue_of};
use super::types::{
    ClientReport, ClientSpec, Direction, Ending, Interval, LoadReport, ProbeKind, Sample,
    SocketQueue,
};
use crate::analysis::responsiveness::Stability;
use crate::measure::tcpinfo::TcpInfo;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// How long a connection may take to open, and a probe to be answered.
const PROBE_TIMEOUT: Duration = Duration::from_secs(10);
/// Foreign probes out at once, at most (each a thread and a connection).
const MAX_FOREIGN_OUT: usize = 64;
/// How often the socket queues are read.
const QUEUE_EVERY: Duration = Duration::from_millis(100);

/// Opens a connection of `kind` (`D`, `U`, `P`): the handshake's time, and
/// the stream past the run's token and consent (through an agent), its
/// kind byte not yet sent.
fn open(spec: &ClientSpec) -> io::Result<(TcpStream, Duration)> {
    let started = Instant::now();
    let mut stream = TcpStream::connect_timeout(&spec.server, PROBE_TIMEOUT)?;
    let handshake = started.elapsed();
    stream.set_nodelay(true)?;
    crate::endpoint::guard::present(&mut stream, spec.token.as_ref())?;
    Ok((stream, handshake))
}

/// One foreign probe started `t_ms` after the load: its two samples.
fn foreign_probe(spec: &ClientSpec, t_ms: f64) -> io::Result<[Sample; 2]> {
    let (mut stream, handshake) = open(spec)?;
    stream.set_read_timeout(Some(PROBE_TIMEOUT))?;
    // The connection's setup, untimed: its kind, and the server's word
    // that it serves it (accepted, its thread running).
    stream.write_all(b"P")?;
    let mut ready = [0u8; 1];
    stream.read_exact(&mut ready)?;
    if ready != PROBE_READY {
        return Err(io::Error::other(format!(
            "the server answered a probe connection with {:#04x}",
            ready[0]
        )));
    }
    let asked = Instant::now();
    stream.write_all(&[PROBE_REQUEST])?;
    let mut answer = [0u8; 1];
    stream.read_exact(&mut answer)?;
    let request = asked.elapsed();
    Ok([
        Sample {
            kind: ProbeKind::TcpForeign,
            t_ms,
            ms: handshake.as_secs_f64() * 1000.0,
        },
        Sample {
            kind: ProbeKind::RequestForeign,
            t_ms,
            ms: request.as_secs_f64() * 1000.0,
        },
    ])
}

/// A self probe out on a load connection: when it was asked, and its
/// start in ms after the load started.
type Outstanding = Arc<Mutex<Option<(Instant, f64)>>>;

/// One load-generating connection and its threads.
struct Load {
    /// A handle for the queues and (downloads) the probe requests.
    control: TcpStream,
    sending: bool,
    /// Payload bytes received (downloads).
    received: Arc<AtomicU64>,
    /// Bytes acknowledged at the last interval (uploads, from TCP_INFO).
    acked_before: u64,
    out: Outstanding,
    /// An upload's writer puts a probe frame in at its next frame.
    probe_wanted: Arc<AtomicBool>,
    threads: Vec<JoinHandle<()>>,
}

/// Completes the self probe out, if any: its sample.
fn answered(out: &Outstanding, samples: &Mutex<Vec<Sample>>) {
    if let Some((asked, t_ms)) = out.lock().expect("probe lock").take() {
        samples.lock().expect("samples lock").push(Sample {
            kind: ProbeKind::RequestLoaded,
            t_ms,
            ms: asked.elapsed().as_secs_f64() * 1000.0,
        });
    }
}

impl Load {
    fn open(
        spec: &ClientSpec,
        sending: bool,
        samples: &Arc<Mutex<Vec<Sample>>>,
    ) -> io::Result<Load> {
        let (mut stream, _) = open(spec)?;
        apply(&stream, &spec.sockets, sending)?;
        stream.write_all(if sending { b"U" } else { b"D" })?;
        let out: Outstanding = Arc::default();
        let received = Arc::new(AtomicU64::new(0));
        let probe_wanted = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut reader = stream.try_clone()?;
        let (o, s, r) = (out.clone(), samples.clone(), received.clone());
        if sending {
            // Frames out; each byte back answers a probe frame.
            let mut writer = stream.try_clone()?;
            let wanted = probe_wanted.clone();
            threads.push(std::thread::spawn(move || {
                let mut frame = vec![0x5au8; HEADER_LEN + DATA_FRAME];
                frame[..HEADER_LEN].copy_from_slice(&data_header(DATA_FRAME as u32));
                loop {
                    if wanted.swap(false, Ordering::Relaxed)
                        && writer.write_all(&probe_frame()).is_err()
                    {
                        break;
                    }
                    if writer.write_all(&frame).is_err() {
                        break;
                    }
                }
            }));
            threads.push(std::thread::spawn(move || {
                let mut buf = [0u8; 64];
                while let Ok(n) = reader.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    for _ in 0..n {
                        answered(&o, &s);
                    }
                }
            }));
        } else {
            threads.push(std::thread::spawn(move || {
                let mut decoder = Decoder::default();
                let mut buf = vec![0u8; 256 << 10];
                while let Ok(n) = reader.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let mut data = 0u64;
                    let fed = decoder.feed(&buf[..n], &mut |e| match e {
                        Event::Data(bytes) => data += bytes as u64,
                        Event::Probe => answered(&o, &s),
                    });
                    r.fetch_add(data, Ordering::Relaxed);
                    if fed.is_err() {
                        break;
                    }
                }
            }));
        }
        Ok(Load {
            control: stream,
            sending,
            received,
            acked_before: 0,
            out,
            probe_wanted,
            threads,
        })
    }

    /// Sends a self probe unless one is still out: whether it did.
    fn probe(&self, t_ms: f64) -> bool {
        let mut out = self.out.lock().expect("probe lock");
        if out.is_some() {
            return false;
        }
        *out = Some((Instant::now(), t_ms));
        drop(out);
        if self.sending {
            self.probe_wanted.store(true, Ordering::Relaxed);
        } else if (&self.control).write_all(b"?").is_err() {
            self.out.lock().expect("probe lock").take();
            return false;
        }
        true
    }

    /// Bytes of goodput since the last call: received, or acknowledged.
    fn goodput_bytes(&mut self) -> u64 {
        if self.sending {
            let acked = TcpInfo::read(self.control.as_fd())
                .ok()
                .and_then(|i| i.bytes_acked)
                .unwrap_or(self.acked_before);
            let delta = acked.saturating_sub(self.acked_before);
            self.acked_before = acked;
            delta
        } else {
            self.received.swap(0, Ordering::Relaxed)
        }
    }

    fn close(self) {
        let _ = self.control.shutdown(std::net::Shutdown::Both);
        for thread in self.threads {
            let _ = thread.join();
        }
    }
}

/// The probes' shared state.
struct Probing {
    loads: Mutex<Vec<Arc<Mutex<Load>>>>,
    samples: Arc<Mutex<Vec<Sample>>>,
    failures: Mutex<Vec<String>>,
    skipped: AtomicU64,
    foreign_out: AtomicUsize,
    /// Probe pairs a second now (×1000).
    rate_milli: AtomicU64,
    stop: AtomicBool,
}

impl Probing {
    fn failed(&self, why: String) {
        let mut failures = self.failures.lock().expect("lock");
        if failures.len() < 100 {
            failures.push(why);
        }
    }
}

/// Sends probe pairs at the current rate until stopped.
fn schedule(spec: ClientSpec, probing: Arc<Probing>, load_start: Instant) {
    let mut foreign: Vec<JoinHandle<()>> = Vec::new();
    let mut next = Instant::now();
    while !probing.stop.load(Ordering::Relaxed) {
        let rate = probing.rate_milli.load(Ordering::Relaxed).max(1) as f64 / 1000.0;
        next += Duration::from_secs_f64(1.0 / rate);
        let now = Instant::now();
        if next > now {
            std::thread::sleep(next - now);
        } else {
            next = now;
        }
        let t_ms = load_start.elapsed().as_secs_f64() * 1000.0;
        if probing.foreign_out.load(Ordering::Relaxed) < MAX_FOREIGN_OUT {
            probing.foreign_out.fetch_add(1, Ordering::Relaxed);
            let (spec, p) = (spec.clone(), probing.clone());
            foreign.push(std::thread::spawn(move || {
                match foreign_probe(&spec, t_ms) {
                    Ok(samples) => p.samples.lock().expect("lock").extend(samples),
                    Err(e) => p.failed(format!("foreign probe: {e}")),
                }
                p.foreign_out.fetch_sub(1, Ordering::Relaxed);
            }));
        } else {
            probing.failed("foreign probe not sent: 64 still out".into());
        }
        foreign.retain(|t| !t.is_finished());
        let loads = probing.loads.lock().expect("lock").clone();
        if !loads.is_empty() {
            let chosen = &loads[fastrand::usize(..loads.len())];
            if !chosen.lock().expect("lock").probe(t_ms) {
                probing.skipped.fetch_add(1, Ordering::Relaxed);
            }
        }
    }
    for thread in foreign {
        let _ = thread.join();
    }
}

/// Runs the test against `spec.server`: every raw figure.
pub fn run(spec: &ClientSpec) -> Result<ClientReport, String> {
    let params = spec.draft;
    let mut report = ClientReport::default();
    // Idle: the quiet path's round trip.
    for k in 0..spec.idle_probes {
        match foreign_probe(spec, -1000.0 + f64::from(k)) {
            Ok(samples) => report.idle.extend(samples),
            Err(e) => return Err(format!("the idle probe to {} failed: {e}", spec.server)),
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let samples = Arc::new(Mutex::new(Vec::new()));
    let probing = Arc::new(Probing {
        loads: Mutex::new(Vec::new()),
        samples: samples.clone(),
        failures: Mutex::new(Vec::new()),
        skipped: AtomicU64::new(0),
        foreign_out: AtomicUsize::new(0),
        rate_milli: AtomicU64::new(u64::from(spec.probe_rate.min(10)) * 1000),
        stop: AtomicBool::new(false),
    });
    let directions: &[bool] = match spec.direction {
        Direction::Down => &[false],
        Direction::Up => &[true],
        Direction::Both => &[false, true],
    };
    let per_direction =
        |probing: &Probing| probing.loads.lock().expect("lock").len() / directions.len();
    let add = |n: usize| -> Result<(), String> {
        for _ in 0..n {
            for &sending in directions {
                let load = Load::open(spec, sending, &samples)
                    .map_err(|e| format!("a load-generating connection to {}: {e}", spec.server))?;
                probing
                    .loads
                    .lock()
                    .expect("lock")
                    .push(Arc::new(Mutex::new(load)));
            }
        }
        Ok(())
    };
    let load_start = Instant::now();
    report.load_started_unix_ns = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let mut scheduler = None;
    let outcome = (|| -> Result<(), String> {
        add(params.inp.max(1).min(spec.max_connections))?;
        scheduler = Some({
            let (spec, p) = (spec.clone(), probing.clone());
            std::thread::spawn(move || schedule(spec, p, load_start))
        });
        let mut goodput: Vec<f64> = Vec::new();
        let mut responsiveness = Stability::default();
        let interval = Duration::from_secs_f64(params.id_s);
        let mut i = 0usize;
        let mut next_queue = Duration::ZERO;
        let ending = loop {
            let due = interval * (i as u32 + 1);
            while load_start.elapsed() < due {
                let t = load_start.elapsed();
                if t >= next_queue {
                    next_queue += QUEUE_EVERY;
                    report.queues.push(queues(&probing, t.as_secs_f64()));
                }
                std::thread::sleep((due - t).min(QUEUE_EVERY).max(Duration::from_millis(1)));
            }
            let interval = tally(&probing, i, due, params.id_s);
            let total = interval.goodput_down_bps + interval.goodput_up_bps;
            report.intervals.push(interval);
            goodput.push(total);
            // Probes within PTC of the capacity seen, at most the rate asked.
            let rate = params
                .probe_pairs_per_s(total)
                .min(f64::from(spec.probe_rate))
                .max(1.0);
            probing
                .rate_milli
                .store((rate * 1000.0) as u64, Ordering::Relaxed);
            match report.goodput_saturated_at {
                None => {
                    if goodput_saturation(&goodput, &params) == Some(i) {
                        report.goodput_saturated_at = Some(i);
                    } else if per_direction(&probing) < spec.max_connections {
                        let room = spec.max_connections - per_direction(&probing);
                        add(params.inc.max(1).min(room))?;
                    }
                }
                Some(_) => {
                    let now = samples.lock().expect("lock").clone();
                    if let Some(rpm) = responsiveness_at(&now, &params, i) {
                        responsiveness.push(rpm.combined);
                        if responsiveness.stable(&params) {
                            report.responsiveness_saturated_at = Some(i);
                            break Ending::Saturated;
                        }
                    }
                }
            }
            i += 1;
            if load_start.elapsed().as_secs_f64() >= spec.max_duration_s {
                break Ending::TimeUp;
            }
        };
        report.ending = Some(ending);
        Ok(())
    })();
    // Whether the test ended or failed, everything it started stops.
    stop(&probing, scheduler);
    outcome?;
    report.loaded = std::mem::take(&mut *samples.lock().expect("lock"));
    report.loaded.sort_by(|a, b| a.t_ms.total_cmp(&b.t_ms));
    report.probe_failures = std::mem::take(&mut *probing.failures.lock().expect("lock"));
    report.self_probes_skipped = probing.skipped.load(Ordering::Relaxed);
    Ok(report)
}

/// Interval `i` (ending `due` after the load began, `seconds` long): each
/// direction's goodput over it, the connections open, and the probes of
/// each kind started in it.
fn tally(probing: &Probing, i: usize, due: Duration, seconds: f64) -> Interval {
    let (mut down, mut up) = (0u64, 0u64);
    let loads = probing.loads.lock().expect("lock").clone();
    for load in &loads {
        let mut load = load.lock().expect("lock");
        let bytes = load.goodput_bytes();
        if load.sending {
            up += bytes
        } else {
            down += bytes
        }
    }
    let started = |k: ProbeKind| {
        probing
            .samples
            .lock()
            .expect("lock")
            .iter()
            .filter(|s| s.kind == k && s.t_ms >= (i as f64) * seconds * 1000.0)
            .count() as u32
    };
    Interval {
        t_s: due.as_secs_f64(),
        goodput_down_bps: down as f64 * 8.0 / seconds,
        goodput_up_bps: up as f64 * 8.0 / seconds,
        connections: loads.len(),
        probes: (
            started(ProbeKind::TcpForeign),
            started(ProbeKind::RequestLoaded),
        ),
    }
}

/// The probes stop and are waited for, then the load connections close
/// (one a probe still holds is shut down instead).
fn stop(probing: &Probing, scheduler: Option<std::thread::JoinHandle<()>>) {
    probing.stop.store(true, Ordering::Relaxed);
    if let Some(scheduler) = scheduler {
        let _ = scheduler.join();
    }
    for load in std::mem::take(&mut *probing.loads.lock().expect("lock")) {
        match Arc::try_unwrap(load) {
            Ok(load) => load.into_inner().expect("lock").close(),
            Err(shared) => {
                let _ = shared
                    .lock()
                    .expect("lock")
                    .control
                    .shutdown(std::net::Shutdown::Both);
            }
        }
    }
}

/// The measuring end's queues now: unsent and unacknowledged bytes of
/// its uploads, unread bytes of its downloads.
fn queues(probing: &Probing, t_s: f64) -> SocketQueue {
    let mut total = SocketQueue {
        t_s,
        ..Default::default()
    };
    let loads = probing.loads.lock().expect("lock").clone();
    // The qdisc of the interface this end sends on.
    if let Some(first) = loads.first() {
        let local = first.lock().expect("lock").control.local_addr().ok();
        if let Some(name) = local.and_then(|a| crate::measure::qdisc::interface_of(a.ip())) {
            total.qdisc_backlog_bytes = crate::measure::qdisc::root_backlog(&name).unwrap_or(0);
        }
    }
    for (k, load) in loads.iter().enumerate() {
        let load = load.lock().expect("lock");
        if let Some(q) = queue_of(&load.control, t_s) {
            if load.sending {
                total.notsent_bytes += q.notsent_bytes;
                total.unacked_bytes += q.unacked_bytes;
            } else {
                total.unread_bytes += q.unread_bytes;
            }
            if k == 0 || (load.sending && total.srtt_ms == 0.0) {
                total.srtt_ms = q.srtt_ms;
                total.min_rtt_ms = q.min_rtt_ms;
            }
        }
    }
    total
}

/// Load without probes, for another experiment's cell to run beside it
/// (`netlab login --load`): `connections` load-generating connections in
/// `spec.direction`, running until [`BackgroundLoad::stop`].
pub struct BackgroundLoad {
    loads: Vec<Load>,
    started: Instant,
}

impl BackgroundLoad {
    /// Opens the connections (each way with `Both`); an error names the
    /// server and closes those already open.
    pub fn start(spec: &ClientSpec, connections: usize) -> Result<BackgroundLoad, String> {
        let samples = Arc::new(Mutex::new(Vec::new()));
        let directions: &[bool] = match spec.direction {
            Direction::Down => &[false],
            Direction::Up => &[true],
            Direction::Both => &[false, true],
        };
        let mut loads = Vec::new();
        for _ in 0..connections {
            for &sending in directions {
                match Load::open(spec, sending, &samples) {
                    Ok(load) => loads.push(load),
                    Err(e) => {
                        loads.into_iter().for_each(Load::close);
                        return Err(format!(
                            "a load-generating connection to {}: {e}",
                            spec.server
                        ));
                    }
                }
            }
        }
        Ok(BackgroundLoad {
            loads,
            started: Instant::now(),
        })
    }

    /// Closes every connection: what they carried.
    pub fn stop(mut self) -> LoadReport {
        let mut report = LoadReport {
            connections: self.loads.len(),
            seconds: self.started.elapsed().as_secs_f64(),
            ..Default::default()
        };
        for load in &mut self.loads {
            let bytes = load.goodput_bytes();
            if load.sending {
                report.up_bytes += bytes;
            } else {
                report.down_bytes += bytes;
            }
        }
        self.loads.into_iter().for_each(Load::close);
        report
    }
}
