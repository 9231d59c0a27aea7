//! The typing end of a login-load or terminal-output cell, as an endpoint
//! role: the typist load generator ([`super::typist`]) or one terminal
//! reading a file's output, against the server the serving end
//! ([`super::host`]) started.
//!
//! Both announce the measured window's edges through `edge(moment,
//! awaits)`, which the endpoint turns into events; the controller opens
//! and closes the serving host's window in between. The typist also says
//! when every session has logged in, and waits while the controller puts
//! the server's CPU budget on. An edge that must
//! wait (the typist's close, so sessions outlive the host's last sample;
//! both of the terminal's, so the server's tree is sampled before the
//! first byte and after the last) returns once the controller says
//! `Proceed`.

use super::client::Session;
use super::host::END_MARKER;
use super::programs::SshAccess;
use super::typist::{self, Connect, Moment, READY_MARKER, TypistConfig, TypistReport};
use crate::endpoint::login::host::Dialect;
use crate::endpoint::protocol::Token;
use crate::endpoint::stall::{StallBound, Stalled, connection_words};
use crate::measure::rusage::thread_cpu_ns;
use crate::measure::schedstat::TreeTasks;
use crate::measure::tcpinfo::TcpInfo;
use serde::{Deserialize, Serialize};
use std::io::{self, Read, Write};
use std::net::SocketAddr;
use std::os::fd::{AsFd, AsRawFd};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::{Duration, Instant};

/// The most text a typing end takes to type (it travels in one control frame).
pub const MAX_CORPUS: usize = 1 << 20;

/// A moment of the client's run (every session logged in, the window's
/// edges), and whether the client waits for `Proceed`.
pub type Edge<'a> = dyn FnMut(Moment, bool) -> io::Result<()> + 'a;

/// The server a typing end logs in to, and how: what the serving end
/// answered, as the controller hands it on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct LoginTarget {
    pub server: SocketAddr,
    pub dialect: Dialect,
    /// For sshd: how to log in.
    pub ssh: Option<SshAccess>,
    /// Through an agent, to netlab's own server: the run token each
    /// connection sends first.
    pub token: Option<Token>,
    /// The longest wait without progress (an echo, a byte of output)
    /// before the session gives up (`--stall-timeout`).
    #[serde(default)]
    pub stall: StallBound,
}

impl LoginTarget {
    /// A connection to it: netlab's own protocol logic, or OpenSSH's
    /// client with the key and host key the serving end made, in `dir`.
    fn connect(&self, dir: &std::path::Path) -> io::Result<Connect> {
        match (self.dialect.protocol(), &self.ssh) {
            (Some(protocol), _) => Ok(Connect::Socket {
                server: self.server,
                protocol,
                linemode: self.dialect.linemode(),
                token: self.token,
            }),
            (None, Some(access)) => Ok(Connect::Program {
                argv: access.argv(dir, self.server)?,
            }),
            (None, None) => Err(io::Error::other(
                "an SSH cell needs the serving end's login (no sshd answered)",
            )),
        }
    }
}

/// How the typing end of a login-load cell types (`Command::Type`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TypeSpec {
    pub target: LoginTarget,
    pub users: usize,
    pub rate: f64,
    pub poisson: bool,
    pub corpus: Vec<u8>,
    pub warmup_s: f64,
    pub duration_s: f64,
}

/// Types the load and reports the window; the window's close waits for
/// `Proceed` (the open does not: keystrokes are due).
pub fn type_load(spec: &TypeSpec, edge: &mut Edge) -> io::Result<TypistReport> {
    if spec.corpus.len() > MAX_CORPUS {
        return Err(io::Error::other(format!(
            "a corpus of {} bytes is over the {MAX_CORPUS} a typing end takes",
            spec.corpus.len()
        )));
    }
    let dir = crate::testbed::scratch::scratch_dir("typist")?;
    let config = TypistConfig {
        connect: spec.target.connect(dir.path())?,
        users: spec.users,
        rate: spec.rate,
        poisson: spec.poisson,
        corpus: spec.corpus.clone(),
        warmup: Duration::from_secs_f64(spec.warmup_s),
        duration: Duration::from_secs_f64(spec.duration_s),
        stall: spec.target.stall,
    };
    // Ctrl-C reaches the controller only; it ends this endpoint.
    let never = Arc::new(AtomicBool::new(false));
    let edge = std::cell::RefCell::new(edge);
    let failure = std::cell::RefCell::new(None);
    // The window's open does not wait (keystrokes are due); the budget
    // and the close do.
    let report = typist::run(&config, &never, &|moment| {
        if let Err(e) = (edge.borrow_mut())(moment, moment != Moment::WindowOpen) {
            failure.borrow_mut().get_or_insert(e);
        }
    })?;
    match failure.into_inner() {
        Some(e) => Err(e),
        None => Ok(report),
    }
}

/// What the terminal measured.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TerminalReport {
    /// Terminal data received, up to and including the end marker.
    pub bytes: u64,
    /// From the line that starts the output to the end marker.
    pub seconds: f64,
    /// The client's CPU over that time: this thread's, or the `ssh` process's.
    pub client_ns: u64,
    /// The client socket's TCP_INFO at the end.
    pub tcp_info: Option<TcpInfo>,
}

/// Reads terminal data through `next` (which appends what arrived, waiting
/// at most a fraction of a second, and says false at end of stream) until
/// `marker`, keeping only a tail. Returns the bytes up to and including the
/// marker; `TimedOut` when nothing came for `stall`.
fn receive_to(
    marker: &[u8],
    stall: StallBound,
    mut next: impl FnMut(&mut Vec<u8>) -> io::Result<bool>,
) -> io::Result<u64> {
    let mut last = Instant::now();
    let mut tail = Vec::new();
    let mut total = 0u64;
    loop {
        let before = tail.len();
        if !next(&mut tail)? {
            return Err(io::Error::other(format!(
                "the session ended before {}",
                String::from_utf8_lossy(marker)
            )));
        }
        let got = (tail.len() - before) as u64;
        total += got;
        if got > 0 {
            last = Instant::now();
        }
        if tail.windows(marker.len()).any(|w| w == marker) {
            return Ok(total);
        }
        let keep = tail.len().min(marker.len());
        tail.drain(..tail.len() - keep);
        if last.elapsed() > stall.duration() {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "{total} bytes had come before {}",
                    String::from_utf8_lossy(marker)
                ),
            ));
        }
    }
}

/// A terminal's wait for output that ran out, as the stall it is.
fn terminal_stalled(
    e: io::Error,
    stall: StallBound,
    connection: impl FnOnce() -> String,
) -> io::Error {
    if e.kind() != io::ErrorKind::TimedOut {
        return e;
    }
    io::Error::other(Stalled {
        side: "terminal",
        doing: "waiting for output",
        seconds: stall.seconds(),
        connection: format!("{e}; {}", connection()),
    })
}

/// Reads one file's output through the cell's server.
pub fn terminal(spec: &LoginTarget, edge: &mut Edge) -> io::Result<TerminalReport> {
    let dir = tempfile::Builder::new()
        .prefix("netlab-terminal")
        .tempdir()?;
    match spec.connect(dir.path())? {
        Connect::Socket { .. } => netlab_terminal(spec, edge),
        Connect::Program { argv } => ssh_terminal(&argv, spec.stall, edge),
    }
}

/// netlab's own client on a socket: this thread's CPU is the client's.
fn netlab_terminal(spec: &LoginTarget, edge: &mut Edge) -> io::Result<TerminalReport> {
    let mut stream = std::net::TcpStream::connect(spec.server)?;
    crate::endpoint::guard::present(&mut stream, spec.token.as_ref())?;
    let mut session = match spec.dialect {
        Dialect::Telnet | Dialect::TelnetLinemode => {
            Session::telnet_on(stream, spec.dialect.linemode())?
        }
        Dialect::Rlogin => Session::rlogin_on(stream, "netlab")?,
        Dialect::Ssh => return Err(io::Error::other("netlab's client does not speak SSH")),
    };
    let stall = spec.stall;
    let watch = session.stream().try_clone()?;
    let connection = || connection_words(watch.as_fd());
    let mut next = |tail: &mut Vec<u8>| {
        let open = session.pump(Duration::from_millis(200))?;
        tail.append(&mut session.received);
        Ok(open)
    };
    receive_to(READY_MARKER, stall, &mut next)
        .map_err(|e| terminal_stalled(e, stall, connection))?;
    edge(Moment::WindowOpen, true)?;
    let cpu0 = thread_cpu_ns();
    let go = Instant::now();
    session.type_bytes(b"\r")?;
    let bytes = receive_to(END_MARKER, stall, |tail| {
        let open = session.pump(Duration::from_millis(200))?;
        tail.append(&mut session.received);
        Ok(open)
    })
    .map_err(|e| terminal_stalled(e, stall, connection))?;
    let seconds = go.elapsed().as_secs_f64();
    let client_ns = thread_cpu_ns().saturating_sub(cpu0);
    edge(Moment::WindowClose, true)?;
    Ok(TerminalReport {
        bytes,
        seconds,
        client_ns,
        tcp_info: Some(TcpInfo::read(session.stream().as_fd())?),
    })
}

/// OpenSSH's client: its standard output is the terminal's; its CPU is
/// its own process's.
fn ssh_terminal(
    argv: &[String],
    spec_stall: StallBound,
    edge: &mut Edge,
) -> io::Result<TerminalReport> {
    let mut child = Command::new(&argv[0])
        .args(&argv[1..])
        // Held open: an end of input would end the remote session early.
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| {
            io::Error::other(format!(
                "cannot start ssh (apt-get install openssh-client): {e}"
            ))
        })?;
    let pid = child.id();
    let mut stdout = child.stdout.take().expect("piped");
    let mut buf = vec![0u8; 64 * 1024];
    let mut stdin = child.stdin.take().expect("piped");
    let mut next = |tail: &mut Vec<u8>| {
        let mut ready = libc::pollfd {
            fd: stdout.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd. A bounded wait, so a silent ssh is seen.
        if unsafe { libc::poll(&mut ready, 1, 200) } == 0 {
            return Ok(true);
        }
        let n = stdout.read(&mut buf)?;
        tail.extend_from_slice(&buf[..n]);
        Ok(n > 0)
    };
    let stall = spec_stall;
    let through_ssh = || format!("through ssh (pid {pid})");
    let outcome = (|| -> io::Result<TerminalReport> {
        receive_to(READY_MARKER, stall, &mut next)
            .map_err(|e| terminal_stalled(e, stall, through_ssh))?;
        edge(Moment::WindowOpen, true)?;
        let client0 = TreeTasks::read(pid);
        let go = Instant::now();
        stdin.write_all(b"\r")?;
        let bytes = receive_to(END_MARKER, stall, &mut next)
            .map_err(|e| terminal_stalled(e, stall, through_ssh))?;
        let report = TerminalReport {
            bytes,
            seconds: go.elapsed().as_secs_f64(),
            client_ns: TreeTasks::read(pid).since(&client0),
            tcp_info: tcp_info_of(pid),
        };
        edge(Moment::WindowClose, true)?;
        Ok(report)
    })();
    let _ = child.kill();
    let mut why = String::new();
    if let Some(mut err) = child.stderr.take() {
        let _ = err.read_to_string(&mut why);
    }
    let _ = child.wait();
    outcome.map_err(|e| io::Error::new(e.kind(), format!("{e}; ssh said: {}", why.trim())))
}

/// TCP_INFO of another process's TCP socket, duplicated into this one
/// ([`crate::measure::waits::sockets_of`]).
fn tcp_info_of(pid: u32) -> Option<TcpInfo> {
    // Not a TCP socket (ssh may hold others): TCP_INFO fails; go on.
    crate::measure::waits::sockets_of(pid)
        .iter()
        .find_map(|fd| TcpInfo::read(fd.as_fd()).ok())
}
