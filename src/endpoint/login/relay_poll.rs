//! The classic relay: one session, blocking in `poll(2)` over the socket and
//! the pty master, copying through user space with `read`/`write`, the
//! TELNET protocol applied on the way ([`super::session`]). The `fork`
//! design runs this in a process of its own per session, as rlogind and
//! telnetd did; per keystroke it spends a wake-up and a poll, a read from
//! the socket and a write to the pty, and for the echo a wake-up, a poll, a
//! read from the pty and a write to the socket.

use super::pty::{self, Pty};
use super::session::TelnetSession;
use std::fs::File;
use std::io::{self, Read, Write};
use std::net::TcpStream;
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

/// How a session ended and what it moved.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct SessionReport {
    pub bytes_from_client: u64,
    pub bytes_to_client: u64,
    /// Why it ended: "client closed", "command exited", or the peer's fault.
    pub ended: String,
    pub syscalls: u64,
}

/// Runs a TELNET session on `socket` with `command` on a fresh pty until
/// either side closes, the peer misbehaves or it is idle for `idle`.
pub fn telnet_session(
    mut socket: TcpStream,
    command: &[String],
    linemode: bool,
    idle: Duration,
) -> io::Result<SessionReport> {
    let pty: Pty = pty::spawn(command, 24, 80)?;
    let mut master = File::from(pty.master.try_clone()?);
    let (mut session, opening) = TelnetSession::new(linemode);
    socket.write_all(&opening)?;
    let mut report = SessionReport {
        syscalls: 1,
        ..Default::default()
    };
    let mut buf = vec![0u8; 16 * 1024];
    let mut last_input = Instant::now();
    loop {
        let mut fds = [
            libc::pollfd {
                fd: socket.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: pty.master.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
        report.syscalls += 1;
        if ready < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if ready == 0 {
            if last_input.elapsed() > idle {
                report.ended = format!("idle for {} s", idle.as_secs());
                return Ok(report);
            }
            continue;
        }
        if fds[0].revents != 0 {
            let n = socket.read(&mut buf)?;
            report.syscalls += 1;
            if n == 0 {
                report.ended = "client closed".into();
                return Ok(report);
            }
            last_input = Instant::now();
            report.bytes_from_client += n as u64;
            let out = session.from_client(&buf[..n]);
            if let Some((rows, cols)) = out.window {
                pty::set_window(&pty.master, rows, cols)?;
            }
            if let Some(echo) = out.echo {
                pty::set_echo(&pty.master, echo)?;
            }
            if !out.to_client.is_empty() {
                socket.write_all(&out.to_client)?;
                report.syscalls += 1;
            }
            if !out.to_pty.is_empty() {
                master.write_all(&out.to_pty)?;
                report.syscalls += 1;
            }
            if let Some(why) = out.close {
                report.ended = why;
                return Ok(report);
            }
        }
        if fds[1].revents != 0 {
            // EIO on the master means the command exited and the slave closed.
            let n = match master.read(&mut buf) {
                Ok(n) => n,
                Err(e) if e.raw_os_error() == Some(libc::EIO) => 0,
                Err(e) => return Err(e),
            };
            report.syscalls += 1;
            if n == 0 {
                report.ended = "command exited".into();
                return Ok(report);
            }
            let out = session.from_pty(&buf[..n]);
            report.bytes_to_client += out.len() as u64;
            socket.write_all(&out)?;
            report.syscalls += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::telnet::{DO, IAC, SB, SE, WILL, negotiation, option};
    use std::net::TcpListener;

    fn read_until(stream: &mut TcpStream, needle: &[u8]) -> Vec<u8> {
        stream
            .set_read_timeout(Some(Duration::from_millis(200)))
            .unwrap();
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        while Instant::now() < deadline && !got.windows(needle.len()).any(|w| w == needle) {
            if let Ok(n) = stream.read(&mut buf) {
                if n == 0 {
                    break;
                }
                got.extend_from_slice(&buf[..n]);
            }
        }
        got
    }

    #[test]
    fn a_line_typed_into_cat_comes_back_echoed_and_repeated() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = std::thread::spawn(move || {
            let (socket, _) = listener.accept().unwrap();
            telnet_session(socket, &["cat".into()], false, Duration::from_secs(10)).unwrap()
        });
        let mut client = TcpStream::connect(addr).unwrap();
        let opening = read_until(&mut client, &negotiation(DO, option::TERMINAL_TYPE));
        assert!(
            opening
                .windows(3)
                .any(|w| w == negotiation(WILL, option::ECHO))
        );
        let mut reply = Vec::new();
        reply.extend(negotiation(DO, option::ECHO));
        reply.extend(negotiation(DO, option::SUPPRESS_GO_AHEAD));
        reply.extend(negotiation(WILL, option::NAWS));
        reply.extend([IAC, SB, option::NAWS, 0, 100, 0, 40, IAC, SE]);
        client.write_all(&reply).unwrap();
        client.write_all(b"hello\r\n").unwrap();
        let got = read_until(&mut client, b"hello\r\nhello\r\n");
        assert!(
            got.windows(14).any(|w| w == b"hello\r\nhello\r\n"),
            "{:?}",
            String::from_utf8_lossy(&got)
        );
        drop(client);
        let report = server.join().unwrap();
        assert_eq!(report.ended, "client closed");
        assert!(report.bytes_from_client >= 7);
    }
}
