//! The classic relay: one session, blocking in `poll(2)` over the socket and
//! the pty master, copying through user space with `read`/`write`, the
//! protocol applied on the way ([`super::protocol`]). The `fork` design runs
//! this in a process of its own per session, as rlogind and telnetd did; per
//! keystroke it spends a wake-up and a poll, a read from the socket and a
//! write to the pty, and for the echo a wake-up, a poll, a read from the pty
//! and a write to the socket.

use super::conn::{Conn, SessionConfig, SessionReport, Step};
use std::net::{SocketAddr, TcpStream};
use std::os::fd::AsRawFd;

/// Runs one session on `socket` until either side closes, the peer
/// misbehaves or it is idle too long.
pub fn run_session(
    socket: TcpStream,
    peer: SocketAddr,
    config: &SessionConfig,
) -> std::io::Result<SessionReport> {
    let mut conn = Conn::open(socket, peer, config)?;
    let mut buf = vec![0u8; 16 * 1024];
    let ended = loop {
        // Read a side only while the other side's backlog is written, so a
        // slow reader holds the writer back instead of growing a buffer.
        let mut fds = [
            libc::pollfd {
                fd: conn.socket.as_raw_fd(),
                events: if conn.to_pty.is_empty() {
                    libc::POLLIN
                } else {
                    0
                } | if conn.client_backlog() {
                    libc::POLLOUT
                } else {
                    0
                },
                revents: 0,
            },
            libc::pollfd {
                fd: conn.pty.master.as_raw_fd(),
                events: if conn.client_backlog() {
                    0
                } else {
                    libc::POLLIN
                } | if conn.to_pty.is_empty() {
                    0
                } else {
                    libc::POLLOUT
                },
                revents: 0,
            },
        ];
        // SAFETY: two valid pollfds.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), 2, 1000) };
        if ready < 0 {
            let e = std::io::Error::last_os_error();
            if e.kind() == std::io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if ready == 0 {
            if conn.idle_for(config.idle) {
                break format!("idle for {} s", config.idle.as_secs());
            }
            continue;
        }
        let (sock, pty) = (fds[0].revents, fds[1].revents);
        if sock & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
            && let Step::End(why) = conn.read_client(&mut buf)
        {
            break why;
        }
        if pty & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) != 0
            && let Step::End(why) = conn.read_pty(&mut buf)
        {
            // Whatever the command printed last still goes out.
            drain_to_client(&mut conn, config.idle);
            break why;
        }
        if let Err(e) = conn.flush_client() {
            break format!("client: {e}");
        }
        if let Err(e) = conn.flush_pty() {
            break format!("pty: {e}");
        }
    };
    conn.report.ended = ended;
    Ok(conn.report.clone())
}

/// Writes the client's backlog, waiting for the socket as long as the
/// client keeps taking bytes (and at most `idle` for each step).
fn drain_to_client(conn: &mut Conn, idle: std::time::Duration) {
    while conn.client_backlog() {
        if !matches!(conn.flush_client(), Ok(false)) {
            return;
        }
        let mut pfd = libc::pollfd {
            fd: conn.socket.as_raw_fd(),
            events: libc::POLLOUT,
            revents: 0,
        };
        let timeout = idle.as_millis().min(i32::MAX as u128) as i32;
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, timeout) } <= 0 || pfd.revents & libc::POLLERR != 0 {
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::telnet::{DO, IAC, SB, SE, WILL, negotiation, option};
    use std::io::{Read, Write};
    use std::net::TcpListener;
    use std::time::{Duration, Instant};

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
            let (socket, peer) = listener.accept().unwrap();
            let config = SessionConfig {
                protocol: crate::endpoint::login::protocol::Protocol::Telnet,
                linemode: false,
                command: vec!["cat".into()],
                idle: Duration::from_secs(10),
                nodelay: false,
                guard: None,
            };
            run_session(socket, peer, &config).unwrap()
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
