//! The terminal-output experiment (002_61bb30b7ada03247.txt, 1987): typing
//! text files to a terminal through a remote login, and what it costs per
//! KB on each side. A session runs `cat FILE` (or a paced writer, for a
//! `--baud` terminal) through netlab's server; netlab's client discards the
//! output. The command then prints an end marker and waits, so the session
//! (and its CPU time) is still there when the server's process tree is
//! sampled.
//!
//! The servers are netlab's relay designs, inetutils telnetd (via socat)
//! and OpenSSH's sshd (see [`super::servers`]); against sshd the client is
//! OpenSSH's `ssh -tt`, its standard output read and discarded here.
//!
//! Per cell: terminal throughput (the file's bytes over the time from the
//! first byte to the marker), server CPU per KB (the scheduler's accounting
//! of the server's process tree: server, session, command), client CPU per
//! KB (this thread's, or the `ssh` process's), and from the client socket's
//! TCP_INFO (for `ssh`, its socket duplicated with `pidfd_getfd(2)`) the
//! data segments received per KB of terminal data and their mean size.
//! In the netns placement the client runs in side A's namespace, the
//! server in side B's, over the cell's link.

use super::CellError;
use super::Interrupted;
use super::bed::Bed;
use super::launcher::{End, Launcher};
use super::runner::{MeasureCell, Measured};
use super::servers::{self, Dialect, ServerSpec, Site, Target, enter_on_this_thread};
use crate::endpoint::login::client::Session;
use crate::endpoint::login::server::Relay;
use crate::endpoint::login::typist::READY_MARKER;
use crate::measure::schedstat::tree_cpu_ns;
use crate::measure::tcpinfo::TcpInfo;
use crate::record::RecordData;
pub use crate::record::login::{OutputParams, OutputResult};
use crate::record::testbed::Placement;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, FromRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the command prints after the file, so the client knows it has all.
pub const END_MARKER: &[u8] = b"NETLAB-END-OF-OUTPUT";

fn thread_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

/// The shell command a session runs: it announces itself and waits for a
/// line (so logins, key exchanges and process starts are over before the
/// counters start), then the file (or a paced copy), the end marker, and a
/// wait so the session is still there to be sampled.
fn output_command(file: &Path, baud: Option<u32>) -> Result<String, CellError> {
    let writer = match baud {
        None => format!("cat '{}'", file.display()),
        Some(baud) => format!(
            "'{}' login pace --bytes-per-s {} '{}'",
            std::env::current_exe()?.display(),
            (baud / 10).max(1),
            file.display()
        ),
    };
    Ok(format!(
        "stty -echo; printf '{}\\n'; read go; stty echo; {writer}; printf '{}\\n'; sleep 60",
        String::from_utf8_lossy(READY_MARKER),
        String::from_utf8_lossy(END_MARKER)
    ))
}

/// Reads terminal data through `next` (which appends what arrived and says
/// false at end of stream) until `marker`, keeping only a tail. Returns the
/// bytes up to and including the marker.
fn receive_to(
    marker: &[u8],
    mut next: impl FnMut(&mut Vec<u8>) -> std::io::Result<bool>,
) -> Result<u64, CellError> {
    let start = Instant::now();
    let limit = Duration::from_secs(600);
    let mut tail = Vec::new();
    let mut total = 0u64;
    loop {
        let before = tail.len();
        if !next(&mut tail)? {
            refuse!(
                "the session ended before {}",
                String::from_utf8_lossy(marker)
            );
        }
        total += (tail.len() - before) as u64;
        if tail.windows(marker.len()).any(|w| w == marker) {
            return Ok(total);
        }
        let keep = tail.len().min(marker.len());
        tail.drain(..tail.len() - keep);
        if start.elapsed() > limit {
            refuse!("no end marker after {} s", limit.as_secs());
        }
    }
}

/// What the client side measured.
struct ClientSide {
    bytes: u64,
    seconds: f64,
    server_ns: u64,
    client_ns: u64,
    info: Option<TcpInfo>,
}

/// netlab's own client on a socket: this thread's CPU is the client's.
fn run_netlab_client(
    params: &OutputParams,
    addr: SocketAddr,
    server_pid: u32,
) -> Result<ClientSide, CellError> {
    let mut session = match params.protocol {
        Dialect::Telnet | Dialect::TelnetLinemode => {
            Session::telnet(addr, params.protocol.linemode())?
        }
        Dialect::Rlogin => Session::rlogin(addr, "netlab")?,
        Dialect::Ssh => refuse!("netlab's client does not speak SSH"),
    };
    let mut next = |tail: &mut Vec<u8>| {
        let open = session.pump(Duration::from_millis(200))?;
        tail.append(&mut session.received);
        Ok(open)
    };
    receive_to(READY_MARKER, &mut next)?;
    let tree0 = tree_cpu_ns(server_pid);
    let cpu0 = thread_cpu_ns();
    let go = Instant::now();
    session.type_bytes(b"\r")?;
    let bytes = receive_to(END_MARKER, |tail| {
        let open = session.pump(Duration::from_millis(200))?;
        tail.append(&mut session.received);
        Ok(open)
    })?;
    let seconds = go.elapsed().as_secs_f64();
    let server_ns = tree_cpu_ns(server_pid).saturating_sub(tree0);
    let client_ns = thread_cpu_ns().saturating_sub(cpu0);
    Ok(ClientSide {
        bytes,
        seconds,
        server_ns,
        client_ns,
        info: Some(TcpInfo::read(session.stream().as_fd())?),
    })
}

/// OpenSSH's client: its standard output is the terminal's; its CPU is
/// its own process's.
fn run_ssh_client(argv: &[String], server_pid: u32) -> Result<ClientSide, CellError> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        // Held open: an end of input would end the remote session early.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| CellError::io("cannot start ssh (apt-get install openssh-client)", e))?;
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("piped");
    let mut buf = vec![0u8; 64 * 1024];
    let mut stdin = child.stdin.take().expect("piped");
    let mut next = |tail: &mut Vec<u8>| {
        let n = stdout.read(&mut buf)?;
        tail.extend_from_slice(&buf[..n]);
        Ok(n > 0)
    };
    let outcome = (|| -> Result<ClientSide, CellError> {
        receive_to(READY_MARKER, &mut next)?;
        let tree0 = tree_cpu_ns(server_pid);
        let client0 = tree_cpu_ns(pid);
        let go = Instant::now();
        stdin.write_all(b"\r")?;
        let bytes = receive_to(END_MARKER, &mut next)?;
        Ok(ClientSide {
            bytes,
            seconds: go.elapsed().as_secs_f64(),
            server_ns: tree_cpu_ns(server_pid).saturating_sub(tree0),
            client_ns: tree_cpu_ns(pid).saturating_sub(client0),
            info: tcp_info_of(pid),
        })
    })();

    let _ = child.kill();
    let mut why = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut why);
    }
    let _ = child.wait();
    outcome.map_err(|e| e.with(format!("ssh said: {}", why.trim())))
}

/// TCP_INFO of another process's TCP socket, duplicated into this one
/// with `pidfd_getfd(2)` (Linux 5.6; needs ptrace rights over it).
fn tcp_info_of(pid: u32) -> Option<TcpInfo> {
    // SAFETY: pidfd_open returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) };
    if pidfd < 0 {
        return None;
    }
    // SAFETY: the descriptor is ours.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    for entry in std::fs::read_dir(format!("/proc/{pid}/fd")).ok()?.flatten() {
        let is_socket = std::fs::read_link(entry.path())
            .is_ok_and(|target| target.to_string_lossy().starts_with("socket:"));
        let Some(target_fd) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<i32>().ok())
        else {
            continue;
        };
        if !is_socket {
            continue;
        }
        let fd = unsafe {
            libc::syscall(
                libc::SYS_pidfd_getfd,
                std::os::fd::AsRawFd::as_raw_fd(&pidfd),
                target_fd,
                0,
            )
        };
        if fd < 0 {
            continue;
        }
        // SAFETY: pidfd_getfd returned a new descriptor of ours.
        let fd = unsafe { OwnedFd::from_raw_fd(fd as i32) };
        // Not a TCP socket (ssh may hold others): TCP_INFO fails; go on.
        if let Ok(info) = TcpInfo::read(fd.as_fd()) {
            return Some(info);
        }
    }
    None
}

/// Runs one cell: the server, `file` typed through it, the client in the
/// cell's placement.
pub fn run_cell(params: &OutputParams, file: &Path) -> Result<OutputResult, CellError> {
    params
        .relay
        .speaks(params.protocol)
        .map_err(CellError::Refused)?;
    let bed = Bed::create(&params.placement)?;
    let launcher = Launcher::for_bed(bed.as_ref());
    let (site, client_netns) = (Site::serving_end(&launcher), launcher.netns(End::From));
    let command = output_command(file, params.baud)?;
    let server = servers::start(
        &ServerSpec {
            target: params.relay,
            dialect: params.protocol,
            command: &command,
            max_sessions: 4,
            nodelay: params.nodelay,
        },
        &site,
    )?;
    let ssh_argv = match server.readable_dir() {
        // sshd's test user reads the file from a directory of its own.
        Some(dir) => {
            let copy: PathBuf = dir.join("corpus.txt");
            std::fs::copy(file, &copy)?;
            std::fs::set_permissions(&copy, std::os::unix::fs::PermissionsExt::from_mode(0o644))?;
            server.ssh_argv(&output_command(&copy, params.baud)?)
        }
        None => None,
    };
    let addr = SocketAddr::V4(server.addr);
    let server_pid = server.pid();
    // The client side runs on a thread of its own, which enters side A's
    // namespace on netns (and the ssh it starts with it).
    let client = std::thread::scope(|scope| {
        scope
            .spawn(|| -> Result<ClientSide, CellError> {
                if let Some(path) = &client_netns {
                    enter_on_this_thread(path)?;
                }
                match &ssh_argv {
                    Some(argv) => run_ssh_client(argv, server_pid),
                    None => run_netlab_client(params, addr, server_pid),
                }
            })
            .join()
            .map_err(|_| CellError::Refused("the client thread panicked".into()))?
    });
    let log = server.log_text();
    drop(server);
    let link = match bed {
        Some(bed) => Some(bed.finish()?.link),
        None => None,
    };
    let client = client.map_err(|e| {
        let log = log.trim();
        if log.is_empty() {
            e
        } else {
            e.with(format!("server log: {}", log.lines().last().unwrap_or(log)))
        }
    })?;
    let kb = client.bytes as f64 / 1024.0;
    let seconds = client.seconds.max(1e-9);
    let (segs, bytes) = client.info.as_ref().map_or((0.0, 0.0), |info| {
        (
            info.data_segs_in.unwrap_or(0) as f64,
            info.bytes_received.unwrap_or(0) as f64,
        )
    });
    Ok(OutputResult {
        params: params.clone(),
        bytes_received: client.bytes,
        seconds,
        kbytes_per_s: kb / seconds,
        server_cpu_us_per_kb: client.server_ns as f64 / 1e3 / kb,
        client_cpu_us_per_kb: client.client_ns as f64 / 1e3 / kb,
        segments_per_kb: segs / kb.max(1e-9),
        mean_segment_bytes: bytes / segs.max(1.0),
        server_cpu_pct: 100.0 * client.server_ns as f64 / 1e9 / seconds,
        link,
    })
}

/// A text file of about `bytes` bytes: lines of English, as a user's files were.
pub fn write_corpus(path: &Path, bytes: u64) -> std::io::Result<()> {
    let paragraph = super::login::DEFAULT_CORPUS.as_bytes();
    let mut data = Vec::with_capacity(bytes as usize + paragraph.len());
    while (data.len() as u64) < bytes {
        data.extend_from_slice(paragraph);
    }
    data.truncate(bytes as usize);
    std::fs::write(path, data)
}

/// The grid of an output run: servers x protocols x placements, one file.
#[derive(Debug, Clone, PartialEq)]
pub struct OutputPlan {
    pub relays: Vec<Target>,
    pub protocols: Vec<Dialect>,
    pub placements: Vec<Placement>,
    /// Bytes of text typed.
    pub size: u64,
    /// Pace the output like a serial line of this many baud.
    pub baud: Option<u32>,
    /// TCP_NODELAY on netlab's sessions.
    pub nodelay: bool,
}

impl Default for OutputPlan {
    /// netlab's four designs that answer at once, over TELNET and rlogin,
    /// on loopback, 4 MB unpaced.
    fn default() -> Self {
        OutputPlan {
            relays: Relay::ALL.into_iter().map(Target::of).collect(),
            protocols: vec![Dialect::Telnet, Dialect::Rlogin],
            placements: vec![Placement::Loopback],
            size: 4 << 20,
            baud: None,
            nodelay: false,
        }
    }
}

impl OutputPlan {
    /// The lab's quick profile: 1 MB through each design.
    pub fn quick() -> Self {
        OutputPlan {
            size: 1 << 20,
            ..OutputPlan::default()
        }
    }

    pub fn full() -> Self {
        OutputPlan::default()
    }

    /// The cells, each server once per protocol it is asked with (sshd's
    /// always speak SSH, once).
    pub fn cells(&self) -> Vec<OutputParams> {
        let mut cells = Vec::new();
        for placement in &self.placements {
            for &protocol in &self.protocols {
                for &relay in &self.relays {
                    let cell = OutputParams {
                        relay,
                        protocol: relay.dialect_for(protocol),
                        placement: placement.clone(),
                        file_bytes: self.size,
                        baud: self.baud,
                        nodelay: self.nodelay,
                    };
                    if !cells.contains(&cell) {
                        cells.push(cell);
                    }
                }
            }
        }
        cells
    }
}

/// Types `file` through each cell's server.
pub struct OutputMeasure {
    pub file: PathBuf,
}

impl MeasureCell for OutputMeasure {
    type Cell = OutputParams;

    fn label(&self, cell: &OutputParams) -> String {
        format!(
            "output {} {} {}",
            cell.relay.name(),
            cell.protocol.name(),
            cell.placement.name()
        )
    }

    fn measure(&mut self, cell: &OutputParams) -> Result<Measured, Interrupted> {
        super::measured(
            cell.placement.name(),
            run_cell(cell, &self.file),
            |result| RecordData::Output {
                params: cell.clone(),
                result,
            },
        )
    }
}
