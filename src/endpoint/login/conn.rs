//! One login session as every relay design holds it: the client's socket,
//! the pty and its command, the protocol state, and the bytes produced for
//! each side but not yet written. Both descriptors are non-blocking; a
//! design decides when to read and write, [`Conn`] decides what.
//!
//! Invariant: bytes for a side are written in the order they were produced,
//! and an rlogin urgent byte goes out only after every byte produced before
//! it (RFC 1282: the window request follows the server's NUL).

use super::protocol::{Protocol, ServerSession};
use super::pty::{self, Pty};
use super::session::Output;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd};
use std::time::{Duration, Instant};

/// What every design needs to open sessions.
#[derive(Debug, Clone)]
pub struct SessionConfig {
    pub protocol: Protocol,
    /// TELNET: ask for LINEMODE (the client edits and echoes lines).
    pub linemode: bool,
    pub command: Vec<String>,
    /// A session without client input this long is closed.
    pub idle: Duration,
    /// TCP_NODELAY on the session's socket. Off by default, as in the
    /// 1980s servers and inetutils telnetd: Nagle then holds a write smaller
    /// than the MSS while earlier output is unacknowledged (on loopback,
    /// with its 64 KB MSS, most writes), until the client's delayed ACK.
    pub nodelay: bool,
    /// Through an agent: the only client address served, and the run
    /// token its connections begin with, checked by the gate in front of
    /// the relay (`endpoint::guard::Door`); others are closed and logged.
    pub guard: Option<crate::endpoint::protocol::DataGuard>,
}

/// Refusals and errors about peers, at most a burst per cause a window (a
/// stranger's flood must not fill the log).
static REFUSED: crate::endpoint::ratelog::RateLog =
    crate::endpoint::ratelog::RateLog::new("refused connections", login_line);

/// One line of the login server's log, written with one `write` (a line
/// of a few hundred bytes to a pipe is atomic), so the lines of forked
/// session processes never interleave mid-line.
pub fn login_line(line: std::fmt::Arguments<'_>) {
    use std::io::Write;
    let text = format!("netlab login serve {line}\n");
    let _ = std::io::stderr().lock().write_all(text.as_bytes());
}

/// A refusal or an error about a peer: rate-limited per `cause`.
pub fn refusal(cause: &'static str, line: std::fmt::Arguments<'_>) {
    REFUSED.line_about(cause, line);
}

/// How a session ended and what it moved.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SessionReport {
    pub bytes_from_client: u64,
    pub bytes_to_client: u64,
    /// Why it ended: "client closed", "command exited", "idle", or the peer's fault.
    pub ended: String,
}

/// What a read on either side came to.
#[derive(Debug, PartialEq, Eq)]
pub enum Step {
    /// Bytes were read and handled.
    Progress,
    /// Nothing to read now.
    WouldBlock,
    /// The session is over, for this reason.
    End(String),
}

pub struct Conn {
    pub socket: TcpStream,
    pub pty: Pty,
    /// The pty master as a file, for read/write.
    master: File,
    pub session: ServerSession,
    pub peer: SocketAddr,
    /// Produced for the client, not yet written.
    pub to_client: Vec<u8>,
    /// Produced for the pty, not yet written.
    pub to_pty: Vec<u8>,
    /// An urgent byte to send once `to_client` is empty.
    pending_urgent: Option<u8>,
    pub last_input: Instant,
    pub report: SessionReport,
}

pub fn set_nonblocking(fd: BorrowedFd<'_>, on: bool) -> io::Result<()> {
    use nix::fcntl::{FcntlArg, OFlag, fcntl};
    let mut flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    flags.set(OFlag::O_NONBLOCK, on);
    fcntl(fd, FcntlArg::F_SETFL(flags))?;
    Ok(())
}

/// Sends one byte as TCP urgent data (how rlogind sends its control bytes).
pub fn send_urgent(socket: &TcpStream, byte: u8) -> io::Result<()> {
    // SAFETY: sending one byte from a valid buffer.
    let n = unsafe {
        libc::send(
            socket.as_raw_fd(),
            (&byte as *const u8).cast(),
            1,
            libc::MSG_OOB | libc::MSG_NOSIGNAL,
        )
    };
    if n < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

impl Conn {
    /// Starts the command on a fresh pty and prepares the protocol's opening.
    pub fn open(socket: TcpStream, peer: SocketAddr, config: &SessionConfig) -> io::Result<Conn> {
        let pty = pty::spawn(&config.command, 24, 80)?;
        socket.set_nodelay(config.nodelay)?;
        socket.set_nonblocking(true)?;
        set_nonblocking(pty.master.as_fd(), true)?;
        let master = File::from(pty.master.try_clone()?);
        let (session, opening) = ServerSession::new(config.protocol, config.linemode);
        Ok(Conn {
            socket,
            pty,
            master,
            session,
            peer,
            to_client: opening,
            to_pty: Vec::new(),
            pending_urgent: None,
            last_input: Instant::now(),
            report: SessionReport::default(),
        })
    }

    /// Makes both descriptors blocking again, for designs (io_uring) that
    /// let the kernel wait instead of being told EAGAIN.
    pub fn blocking(&self) -> io::Result<()> {
        self.socket.set_nonblocking(false)?;
        set_nonblocking(self.pty.master.as_fd(), false)
    }

    /// Whether anything waits to be written to the client (urgent byte included).
    pub fn client_backlog(&self) -> bool {
        !self.to_client.is_empty() || self.pending_urgent.is_some()
    }

    /// Runs the protocol over bytes from the client and applies what it
    /// asks of the pty. `Err` ends the session with a reason.
    pub fn client_bytes(&mut self, bytes: &[u8]) -> Result<(), String> {
        self.last_input = Instant::now();
        self.report.bytes_from_client += bytes.len() as u64;
        let out = self.session.from_client(bytes);
        self.apply(out)
    }

    fn apply(&mut self, mut out: Output) -> Result<(), String> {
        let master = &self.pty.master;
        let setting =
            |what: &str, r: io::Result<()>| r.map_err(|e| format!("cannot set {what}: {e}"));
        if let Some((rows, cols)) = out.window {
            setting("the window size", pty::set_window(master, rows, cols))?;
        }
        if let Some(echo) = out.echo {
            setting("echo", pty::set_echo(master, echo))?;
        }
        if let Some(speed) = out.speed {
            setting("the line speed", pty::set_speed(master, speed))?;
        }
        self.to_client.append(&mut out.to_client);
        self.to_pty.append(&mut out.to_pty);
        if out.urgent.is_some() {
            self.pending_urgent = out.urgent;
        }
        match out.close {
            Some(why) => Err(why),
            None => Ok(()),
        }
    }

    /// Runs the protocol over output of the command.
    pub fn pty_bytes(&mut self, bytes: &[u8]) {
        let before = self.to_client.len();
        self.session.from_pty(bytes, &mut self.to_client);
        self.report.bytes_to_client += (self.to_client.len() - before) as u64;
    }

    /// Reads once from the client into `buf` and handles what came.
    pub fn read_client(&mut self, buf: &mut [u8]) -> Step {
        match self.socket.read(buf) {
            Ok(0) => Step::End("client closed".into()),
            Ok(n) => match self.client_bytes(&buf[..n]) {
                Ok(()) => Step::Progress,
                Err(why) => Step::End(why),
            },
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Step::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Step::WouldBlock,
            Err(e) => Step::End(format!("client: {e}")),
        }
    }

    /// Reads once from the pty into `buf` and handles what came.
    pub fn read_pty(&mut self, buf: &mut [u8]) -> Step {
        match self.master.read(buf) {
            Ok(0) => Step::End("command exited".into()),
            Ok(n) => {
                super::tally::pty_transfer();
                self.pty_bytes(&buf[..n]);
                Step::Progress
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => Step::WouldBlock,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => Step::WouldBlock,
            // EIO on the master: the command exited and the slave closed.
            Err(e) if e.raw_os_error() == Some(libc::EIO) => Step::End("command exited".into()),
            Err(e) => Step::End(format!("pty: {e}")),
        }
    }

    /// Writes as much of the client's backlog as the socket takes now.
    /// `Ok(true)` when nothing is left.
    pub fn flush_client(&mut self) -> io::Result<bool> {
        while !self.to_client.is_empty() {
            match self.socket.write(&self.to_client) {
                Ok(n) => {
                    self.to_client.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        if let Some(byte) = self.pending_urgent {
            match send_urgent(&self.socket, byte) {
                Ok(()) => self.pending_urgent = None,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Writes as much of the pty's backlog as it takes now.
    pub fn flush_pty(&mut self) -> io::Result<bool> {
        while !self.to_pty.is_empty() {
            match self.master.write(&self.to_pty) {
                Ok(n) => {
                    super::tally::pty_transfer();
                    self.to_pty.drain(..n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Ok(false),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(true)
    }

    /// Whether the session has been silent longer than `idle`.
    pub fn idle_for(&self, idle: Duration) -> bool {
        self.last_input.elapsed() > idle
    }

    /// Logs the end of the session on stderr (the server's log).
    pub fn log_end(&self, design: &str) {
        login_line(format_args!(
            "({design}): {}: session ended: {} ({} bytes in, {} out)",
            self.peer,
            self.report.ended,
            self.report.bytes_from_client,
            self.report.bytes_to_client
        ));
    }
}
