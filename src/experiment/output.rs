//! The terminal-output experiment (002_61bb30b7ada03247.txt, 1987): typing
//! text files to a terminal through a remote login, and what it costs per
//! KB on each side. A session runs `cat FILE` (or a paced writer, for a
//! `--baud` terminal) through netlab's server; netlab's client discards the
//! output. The command then prints an end marker and waits, so the session
//! (and its CPU time) is still there when the server's process tree is
//! sampled.
//!
//! Per cell: terminal throughput (the file's bytes over the time from the
//! first byte to the marker), server CPU per KB (the scheduler's accounting
//! of the server's process tree: server, session, command), client CPU per
//! KB (this thread's), and from the client socket's TCP_INFO the data
//! segments received per KB and their mean size.

use super::login::{Target, tree_cpu_ns};
use crate::endpoint::login::client::Session;
use crate::endpoint::login::protocol::Protocol;
use crate::measure::tcpinfo::TcpInfo;
use serde::{Deserialize, Serialize};
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::os::fd::AsFd;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// What the command prints after the file, so the client knows it has all.
pub const END_MARKER: &[u8] = b"NETLAB-END-OF-OUTPUT";

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutputParams {
    pub relay: Target,
    pub protocol: Protocol,
    pub file_bytes: u64,
    /// Terminal speed the output is paced to (bits per second, 10 bits a
    /// character as on a serial line), or unpaced.
    pub baud: Option<u32>,
}

#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct OutputResult {
    pub params: OutputParams,
    /// Terminal data the client received (the terminal turns LF into CR LF).
    pub bytes_received: u64,
    pub seconds: f64,
    pub kbytes_per_s: f64,
    pub server_cpu_us_per_kb: f64,
    pub client_cpu_us_per_kb: f64,
    /// Data segments the client received per KB of terminal data, and their mean size.
    pub segments_per_kb: f64,
    pub mean_segment_bytes: f64,
    /// The server tree's CPU over the transfer, % of one CPU.
    pub server_cpu_pct: f64,
}

fn thread_cpu_ns() -> u64 {
    // SAFETY: getrusage fills the struct.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) };
    let ns = |t: libc::timeval| t.tv_sec as u64 * 1_000_000_000 + t.tv_usec as u64 * 1000;
    ns(usage.ru_utime) + ns(usage.ru_stime)
}

/// Runs one cell: netlab's server in the given design, `file` typed through it.
pub fn run_cell(params: &OutputParams, file: &Path) -> anyhow::Result<OutputResult> {
    let Some(relay) = params.relay.relay() else {
        anyhow::bail!("netlab output runs netlab's relay designs only (not telnetd yet)");
    };
    let exe = std::env::current_exe()?;
    let writer = match params.baud {
        None => format!("cat {}", file.display()),
        Some(baud) => format!(
            "{} login pace --bytes-per-s {} {}",
            exe.display(),
            (baud / 10).max(1),
            file.display()
        ),
    };
    let script = format!(
        "{writer}; printf '{}\\n'; sleep 60",
        String::from_utf8_lossy(END_MARKER)
    );
    let mut server = Command::new(&exe)
        .args(["login", "serve", "--port", "0", "--relay", relay.name()])
        .args(["--protocol", params.protocol.name()])
        .args(["--command", "sh", "-c", &script])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()?;
    let stop_server = |server: &mut std::process::Child| {
        // SAFETY: signalling our own child by PID.
        unsafe { libc::kill(server.id() as i32, libc::SIGINT) };
        let _ = server.wait();
    };
    let mut line = String::new();
    BufReader::new(server.stdout.take().expect("piped")).read_line(&mut line)?;
    let Ok(port) = line.trim().parse::<u16>() else {
        stop_server(&mut server);
        anyhow::bail!("the login server did not start");
    };
    let result = (|| -> anyhow::Result<OutputResult> {
        let addr = SocketAddr::from(([127, 0, 0, 1], port));
        let tree0 = tree_cpu_ns(server.id());
        let cpu0 = thread_cpu_ns();
        let mut session = match params.protocol {
            Protocol::Telnet => Session::telnet(addr, false)?,
            Protocol::Rlogin => Session::rlogin(addr, "netlab")?,
        };
        let start = Instant::now();
        let limit = Duration::from_secs(600);
        // Keep only a tail of the data: enough to find the marker.
        let mut total = 0u64;
        let mut first_byte: Option<Instant> = None;
        loop {
            if !session.pump(Duration::from_millis(200))? {
                anyhow::bail!("the server closed the session before the end marker");
            }
            if !session.received.is_empty() && first_byte.is_none() {
                first_byte = Some(Instant::now());
            }
            let found = session
                .received
                .windows(END_MARKER.len())
                .any(|w| w == END_MARKER);
            total += session.received.len() as u64;
            if found {
                break;
            }
            let keep = session.received.len().min(END_MARKER.len());
            let tail = session.received.split_off(session.received.len() - keep);
            total -= tail.len() as u64;
            session.received = tail;
            if start.elapsed() > limit {
                anyhow::bail!("no end marker after {} s", limit.as_secs());
            }
        }
        let end = Instant::now();
        let tree1 = tree_cpu_ns(server.id());
        let cpu1 = thread_cpu_ns();
        let info = TcpInfo::read(session.stream().as_fd())?;
        let seconds = end
            .duration_since(first_byte.unwrap_or(start))
            .as_secs_f64()
            .max(1e-9);
        let kb = total as f64 / 1024.0;
        let (segs, bytes) = (
            info.data_segs_in.unwrap_or(0) as f64,
            info.bytes_received.unwrap_or(0) as f64,
        );
        Ok(OutputResult {
            params: params.clone(),
            bytes_received: total,
            seconds,
            kbytes_per_s: kb / seconds,
            server_cpu_us_per_kb: tree1.saturating_sub(tree0) as f64 / 1e3 / kb,
            client_cpu_us_per_kb: cpu1.saturating_sub(cpu0) as f64 / 1e3 / kb,
            segments_per_kb: segs / (bytes / 1024.0).max(1e-9),
            mean_segment_bytes: bytes / segs.max(1.0),
            server_cpu_pct: 100.0 * tree1.saturating_sub(tree0) as f64 / 1e9 / seconds,
        })
    })();
    stop_server(&mut server);
    result
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
