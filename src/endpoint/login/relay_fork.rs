//! The `fork` design, the classic daemon: the listening process accepts,
//! and every session gets a process of its own (this executable re-run as
//! the hidden `netlab login session`, the socket passed as fd 3) that blocks
//! in poll over its socket and pty ([`super::relay_poll`]). Per keystroke
//! the session process wakes, reads and writes; with N users there are N
//! such processes for the scheduler to switch between, as with rlogind.

use super::conn::SessionConfig;
use super::stop::StopSignal;
use crate::endpoint::guard::Door;
use std::io;
use std::os::fd::AsRawFd;
use std::os::unix::process::CommandExt;
use std::process::Child;
use std::time::Duration;

/// The descriptor a session process finds the server's pty-transfer
/// page at ([`super::tally`]).
const TALLY_FD: i32 = 4;
const TALLY_FD_TEXT: &str = "4";

/// Counts over a server's life.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct ForkReport {
    pub sessions: u64,
    pub refused: u64,
}

/// Serves sessions from `listener` until `stop` is requested, then kills and
/// reaps every session process it started (by PID).
pub fn serve(
    door: Door,
    config: &SessionConfig,
    max_sessions: usize,
    stop: &StopSignal,
) -> io::Result<ForkReport> {
    let door = door.nonblocking()?;
    let exe = std::env::current_exe()?;
    let mut sessions: Vec<Child> = Vec::new();
    let mut report = ForkReport::default();
    let tally = super::tally::descriptor().map(|fd| fd.as_raw_fd());
    while !stop.requested() {
        sessions.retain_mut(|c| matches!(c.try_wait(), Ok(None)));
        // The wait bounds how late `stop` and exited sessions are noticed.
        let (socket, peer) = match door.accept_within(Duration::from_millis(100)) {
            Ok(accepted) => accepted,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if sessions.len() >= max_sessions {
            report.refused += 1;
            super::conn::refusal(
                "too many sessions",
                format_args!(
                    "(fork): {peer}: refused, {} sessions already",
                    sessions.len()
                ),
            );
            continue;
        }
        socket.set_nonblocking(false)?;
        let fd = socket.as_raw_fd();
        let mut command = std::process::Command::new(&exe);
        command
            .args(["login", "session", "--protocol", config.protocol.name()])
            .args(["--idle-s", &config.idle.as_secs().to_string()])
            .args(["--peer", &peer.to_string()])
            .args(config.linemode.then_some("--linemode"))
            .args(config.nodelay.then_some("--nodelay"))
            .args(
                tally
                    .map(|_| ["--tally-fd", TALLY_FD_TEXT])
                    .into_iter()
                    .flatten(),
            )
            .arg("--")
            .args(&config.command);
        // SAFETY: async-signal-safe calls only, between fork and exec.
        unsafe {
            command.pre_exec(move || {
                // Both first to numbers above 3 and 4, so that neither
                // lands on the other's target (or on itself, keeping its
                // close-on-exec) before it is moved there.
                let high = |from: i32| -> io::Result<i32> {
                    match libc::fcntl(from, libc::F_DUPFD_CLOEXEC, 10) {
                        n if n < 0 => Err(io::Error::last_os_error()),
                        n => Ok(n),
                    }
                };
                let socket = high(fd)?;
                let page = match tally {
                    Some(page) => Some(high(page)?),
                    None => None,
                };
                if libc::dup2(socket, 3) < 0 {
                    return Err(io::Error::last_os_error());
                }
                if let Some(page) = page
                    && libc::dup2(page, TALLY_FD) < 0
                {
                    return Err(io::Error::last_os_error());
                }
                libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
                Ok(())
            });
        }
        match command.spawn() {
            Ok(child) => {
                sessions.push(child);
                report.sessions += 1;
            }
            Err(e) => super::conn::refusal(
                "cannot start a session",
                format_args!("(fork): {peer}: cannot start a session: {e}"),
            ),
        }
        // The session process has its own copy; ours closes here.
        drop(socket);
    }
    for mut child in sessions {
        let _ = child.kill();
        let _ = child.wait();
    }
    Ok(report)
}
/// A session process's whole life (`netlab login session`, started by
/// [`serve`] with the accepted socket as descriptor 3): relays until the
/// session ends, then says why on stderr (the server's log).
pub fn session_on_fd3(peer: std::net::SocketAddr, config: &SessionConfig) -> io::Result<()> {
    use std::os::fd::FromRawFd;
    // SAFETY: fd 3 is the socket the server passed us, and only we own it.
    let socket = unsafe { std::net::TcpStream::from_raw_fd(3) };
    let report = super::relay_poll::run_session(socket, peer, config)?;
    super::conn::login_line(format_args!(
        "(fork): {peer}: session ended: {} ({} bytes in, {} out)",
        report.ended, report.bytes_from_client, report.bytes_to_client
    ));
    Ok(())
}
