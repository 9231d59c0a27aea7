//! rpm's serving end: one listener; each connection says what it is in
//! its first byte and is served on a thread of its own until it closes.
//!
//! - `D` download: bulk data frames to the measuring end, and a probe
//!   frame after the data already written for each 1-byte probe request
//!   that comes back (a self probe waits behind the connection's queue);
//! - `U` upload: frames from the measuring end, read and dropped; each
//!   probe frame among them answered with one byte;
//! - `P` a foreign probe: one byte back at once.
//!
//! Anything else is refused and counted; the server goes on serving the
//! others. Through an agent the listener is guarded (`endpoint::guard`):
//! only the run's peer with the run's token gets in.

use super::framing::{DATA_FRAME, Decoder, Event, data_header, probe_frame};
use super::sockets::{apply, queue_of};
use super::types::{LoadSockets, ServerReport, SocketQueue};
use crate::endpoint::guard::Gate;
use crate::endpoint::protocol::DataGuard;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsFd;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

/// A running server; [`Server::stop`] ends it and says what it served.
pub struct Server {
    local: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: Option<JoinHandle<()>>,
    sampler: Option<JoinHandle<()>>,
    shared: Arc<Shared>,
}

#[derive(Default)]
struct Shared {
    report: Mutex<ServerReport>,
    connections: Mutex<Vec<(TcpStream, JoinHandle<()>)>>,
    /// The download connections open now, for the sampler, by a number
    /// of their own.
    downloads: Mutex<Vec<(u64, TcpStream)>>,
    next_download: std::sync::atomic::AtomicU64,
}

/// Connections served at once, at most: 16 load connections a direction,
/// 64 foreign probes out, and room to spare.
const MAX_CONNECTIONS: usize = 512;

/// How often the serving end reads its queues.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// Samples kept at most (100 minutes at 10 a second).
const MAX_SAMPLES: usize = 60_000;

/// Reads the download connections' queues and the interface's qdisc
/// every [`SAMPLE_EVERY`] while any download is open.
fn sample(shared: &Shared, interface: Option<&str>, stop: &AtomicBool) {
    while !stop.load(Ordering::Relaxed) {
        std::thread::sleep(SAMPLE_EVERY);
        let downloads: Vec<TcpStream> = shared
            .downloads
            .lock()
            .expect("lock")
            .iter()
            .filter_map(|(_, s)| s.try_clone().ok())
            .collect();
        if downloads.is_empty() {
            continue;
        }
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0.0, |d| d.as_secs_f64());
        let mut total = SocketQueue {
            t_s: now,
            ..Default::default()
        };
        for (k, stream) in downloads.iter().enumerate() {
            if let Some(q) = queue_of(stream, now) {
                total.notsent_bytes += q.notsent_bytes;
                total.unacked_bytes += q.unacked_bytes;
                if k == 0 {
                    total.srtt_ms = q.srtt_ms;
                    total.min_rtt_ms = q.min_rtt_ms;
                }
            }
        }
        if let Some(name) = interface {
            total.qdisc_backlog_bytes =
                crate::measure::qdisc::root_backlog(name).unwrap_or_default();
        }
        let mut report = shared.report.lock().expect("report lock");
        if report.queues.len() < MAX_SAMPLES {
            report.queues.push(total);
        }
    }
}

/// How the server takes new connections: a plain listener, or the gate.
enum Door {
    Open(TcpListener),
    Guarded(Gate),
}

impl Server {
    /// Listens on `bind` (guarded through an agent) and serves until stopped.
    pub fn start(
        bind: SocketAddr,
        guard: Option<DataGuard>,
        sockets: LoadSockets,
    ) -> io::Result<Server> {
        let door = match guard {
            Some(guard) => {
                let listener = crate::endpoint::guard::bind_first(bind, Some(&guard), |addr| {
                    TcpListener::bind(addr)
                })?;
                Door::Guarded(Gate::open(listener, guard)?)
            }
            None => {
                let listener = TcpListener::bind(bind)?;
                listener.set_nonblocking(true)?;
                Door::Open(listener)
            }
        };
        let local = match &door {
            Door::Open(l) => l.local_addr()?,
            Door::Guarded(g) => g.local_addr(),
        };
        let stop = Arc::new(AtomicBool::new(false));
        let shared = Arc::new(Shared::default());
        let interface = crate::measure::qdisc::interface_of(local.ip());
        shared.report.lock().expect("report lock").interface = interface.clone();
        let (flag, state) = (stop.clone(), shared.clone());
        let acceptor = std::thread::Builder::new()
            .name("rpm-accept".into())
            .spawn(move || accept(door, &flag, &state, &sockets))?;
        let (flag, state) = (stop.clone(), shared.clone());
        let sampler = std::thread::Builder::new()
            .name("rpm-queues".into())
            .spawn(move || sample(&state, interface.as_deref(), &flag))?;
        Ok(Server {
            local,
            stop,
            acceptor: Some(acceptor),
            sampler: Some(sampler),
            shared,
        })
    }

    pub fn local_addr(&self) -> SocketAddr {
        self.local
    }

    /// Closes every connection, joins every thread, and reports.
    pub fn stop(mut self) -> ServerReport {
        self.halt();
        std::mem::take(&mut *self.shared.report.lock().expect("report lock"))
    }

    fn halt(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for thread in [self.acceptor.take(), self.sampler.take()]
            .into_iter()
            .flatten()
        {
            let _ = thread.join();
        }
        let connections = std::mem::take(&mut *self.shared.connections.lock().expect("lock"));
        for (stream, _) in &connections {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        for (_, thread) in connections {
            let _ = thread.join();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.halt();
    }
}

fn accept(door: Door, stop: &AtomicBool, shared: &Arc<Shared>, sockets: &LoadSockets) {
    while !stop.load(Ordering::Relaxed) {
        let next = match &door {
            Door::Open(listener) => match listener.accept() {
                Ok((stream, _)) => Some(stream),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    // Wait for the next connection (or the stop), not a
                    // fixed sleep: a probe's request must not wait for
                    // the server to look.
                    let mut fd = [nix::poll::PollFd::new(
                        listener.as_fd(),
                        nix::poll::PollFlags::POLLIN,
                    )];
                    let _ = nix::poll::poll(&mut fd, nix::poll::PollTimeout::from(50u8));
                    None
                }
                Err(_) => None,
            },
            Door::Guarded(gate) => gate
                .next(Duration::from_millis(20))
                .ok()
                .flatten()
                .map(|(s, _)| s),
        };
        let Some(stream) = next else { continue };
        if prune(shared) >= MAX_CONNECTIONS {
            // A peer opening connections without end gets no thread for
            // them: closed at once, counted, and the others still served.
            let mut report = shared.report.lock().expect("report lock");
            report.turned_away += 1;
            continue;
        }
        let _ = stream.set_nonblocking(false);
        let _ = stream.set_nodelay(true);
        let Ok(handle) = stream.try_clone() else {
            continue;
        };
        let (state, sockets) = (shared.clone(), sockets.clone());
        let thread = std::thread::Builder::new()
            .name("rpm-conn".into())
            .spawn(move || {
                if let Err(why) = serve(stream, &state, &sockets) {
                    let mut report = state.report.lock().expect("report lock");
                    if report.refused.len() < 100 {
                        report.refused.push(why);
                    }
                }
            });
        if let Ok(thread) = thread {
            shared
                .connections
                .lock()
                .expect("lock")
                .push((handle, thread));
        }
    }
}

/// Forgets the connections that ended (foreign probes come and go a
/// hundred a second): how many are still served.
fn prune(shared: &Shared) -> usize {
    let mut connections = shared.connections.lock().expect("lock");
    let (ended, live): (Vec<_>, Vec<_>) = std::mem::take(&mut *connections)
        .into_iter()
        .partition(|(_, t)| t.is_finished());
    *connections = live;
    let served = connections.len();
    drop(connections);
    for (_, t) in ended {
        let _ = t.join();
    }
    served
}

/// A probe connection's bytes: the server's word that it serves the
/// connection, the prober's 1-byte request, and its 1-byte answer.
pub const PROBE_READY: &[u8] = b"+";
pub const PROBE_REQUEST: u8 = b'?';
pub const PROBE_ANSWER: &[u8] = b"!";

/// Serves one connection by the kind its first byte names. `Err` says
/// why a connection that spoke something else was dropped.
fn serve(mut stream: TcpStream, shared: &Shared, sockets: &LoadSockets) -> Result<(), String> {
    let mut kind = [0u8; 1];
    stream
        .set_read_timeout(Some(Duration::from_secs(10)))
        .map_err(|e| e.to_string())?;
    if stream.read_exact(&mut kind).is_err() {
        return Ok(());
    }
    let _ = stream.set_read_timeout(None);
    let count = |f: fn(&mut ServerReport) -> &mut u64| {
        *f(&mut shared.report.lock().expect("report lock")) += 1;
    };
    match kind[0] {
        b'P' => {
            count(|r| &mut r.probe_connections);
            // Served: the prober times its request only from here, on an
            // established connection with its thread running, as the
            // draft times http_f after the connection's setup.
            if stream.write_all(PROBE_READY).is_err() {
                return Ok(());
            }
            // Each request byte answered, until the prober closes it.
            let mut byte = [0u8; 1];
            while let Ok(1) = stream.read(&mut byte) {
                if byte[0] != PROBE_REQUEST {
                    return Err(format!(
                        "a probe connection sent {:#04x}, not a request",
                        byte[0]
                    ));
                }
                if stream.write_all(PROBE_ANSWER).is_err() {
                    break;
                }
            }
            Ok(())
        }
        b'D' => {
            count(|r| &mut r.download_connections);
            if let Err(e) = apply(&stream, sockets, true) {
                return Err(format!("download connection: {e}"));
            }
            download(stream, shared);
            Ok(())
        }
        b'U' => {
            count(|r| &mut r.upload_connections);
            if let Err(e) = apply(&stream, sockets, false) {
                return Err(format!("upload connection: {e}"));
            }
            upload(stream)
        }
        other => Err(format!(
            "a connection opened with byte {other:#04x}, not D, U or P"
        )),
    }
}

/// Sends data frames until the peer goes; each probe request read on the
/// way back gets a probe frame after the data already written.
fn download(mut stream: TcpStream, shared: &Shared) {
    let pending = Arc::new(AtomicU32::new(0));
    let Ok(mut back) = stream.try_clone() else {
        return;
    };
    let requests = pending.clone();
    let reader = std::thread::spawn(move || {
        let mut buf = [0u8; 64];
        while let Ok(n) = back.read(&mut buf) {
            if n == 0 {
                break;
            }
            requests.fetch_add(n as u32, Ordering::Relaxed);
        }
    });
    let mut frame = vec![0x5au8; super::framing::HEADER_LEN + DATA_FRAME];
    frame[..super::framing::HEADER_LEN].copy_from_slice(&data_header(DATA_FRAME as u32));
    let id = shared.next_download.fetch_add(1, Ordering::Relaxed);
    if let Ok(handle) = stream.try_clone() {
        shared.downloads.lock().expect("lock").push((id, handle));
    }
    loop {
        if pending.load(Ordering::Relaxed) > 0 {
            pending.fetch_sub(1, Ordering::Relaxed);
            if stream.write_all(&probe_frame()).is_err() {
                break;
            }
        }
        if stream.write_all(&frame).is_err() {
            break;
        }
    }
    shared
        .downloads
        .lock()
        .expect("lock")
        .retain(|(n, _)| *n != id);
    let _ = stream.shutdown(std::net::Shutdown::Both);
    let _ = reader.join();
}

/// Reads frames until the peer goes, answering each probe frame.
fn upload(mut stream: TcpStream) -> Result<(), String> {
    let mut decoder = Decoder::default();
    let mut buf = vec![0u8; 64 << 10];
    let mut out = stream.try_clone().map_err(|e| e.to_string())?;
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return Ok(()),
            Ok(n) => n,
        };
        let mut probes = 0;
        decoder
            .feed(&buf[..n], &mut |e| {
                if e == Event::Probe {
                    probes += 1;
                }
            })
            .map_err(|e| format!("upload connection: {e}"))?;
        for _ in 0..probes {
            if out.write_all(b"!").is_err() {
                return Ok(());
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(addr: SocketAddr) -> io::Result<u8> {
        let mut s = TcpStream::connect(addr)?;
        s.set_read_timeout(Some(Duration::from_secs(5)))?;
        s.write_all(b"P")?;
        let mut ready = [0u8; 1];
        s.read_exact(&mut ready)?;
        assert_eq!(&ready, PROBE_READY);
        // Two requests on the one connection, each answered.
        let mut answer = [0u8; 1];
        for _ in 0..2 {
            s.write_all(&[PROBE_REQUEST])?;
            s.read_exact(&mut answer)?;
        }
        Ok(answer[0])
    }

    #[test]
    fn malformed_peers_are_refused_and_the_others_served() {
        let server =
            Server::start("127.0.0.1:0".parse().unwrap(), None, LoadSockets::default()).unwrap();
        let addr = server.local_addr();
        assert_eq!(probe(addr).unwrap(), b'!');
        // A connection that names no kind it knows.
        let mut bad = TcpStream::connect(addr).unwrap();
        bad.write_all(b"X").unwrap();
        // An upload whose frames are nonsense.
        let mut garbage = TcpStream::connect(addr).unwrap();
        garbage.write_all(b"U\x07\x00\x00\x00\x01?").unwrap();
        // A silent one, and one that closes at once.
        let _silent = TcpStream::connect(addr).unwrap();
        drop(TcpStream::connect(addr).unwrap());
        // A well-formed upload's probe is answered.
        let mut upload = TcpStream::connect(addr).unwrap();
        upload.write_all(b"U").unwrap();
        upload
            .write_all(&super::super::framing::encode(&[
                Event::Data(1000),
                Event::Probe,
            ]))
            .unwrap();
        upload
            .set_read_timeout(Some(Duration::from_secs(5)))
            .unwrap();
        let mut answer = [0u8; 1];
        upload.read_exact(&mut answer).unwrap();
        assert_eq!(&answer, b"!");
        assert_eq!(probe(addr).unwrap(), b'!');
        // The refusals are counted once their threads have ended.
        let deadline = std::time::Instant::now() + Duration::from_secs(5);
        while server.shared.report.lock().unwrap().refused.len() < 2
            && std::time::Instant::now() < deadline
        {
            std::thread::sleep(Duration::from_millis(10));
        }
        drop((bad, garbage, upload));
        let report = server.stop();
        assert_eq!(report.probe_connections, 2);
        assert_eq!(report.upload_connections, 2);
        assert!(
            report.refused.iter().any(|r| r.contains("byte 0x58")),
            "{:?}",
            report.refused
        );
        assert!(
            report.refused.iter().any(|r| r.contains("frame kind 7")),
            "{:?}",
            report.refused
        );
    }
}
