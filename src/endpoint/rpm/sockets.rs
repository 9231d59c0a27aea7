//! The load-generating connections' socket settings (each a fix to try)
//! and the readings of their queues: the sender's unsent bytes
//! (`tcpi_notsent_bytes`), its unacknowledged ones (SIOCOUTQ less the
//! unsent), the receiver's unread ones (SIOCINQ), and the round trip the
//! kernel sees against the least it has seen.

use super::types::{LoadSockets, SocketQueue};
use crate::measure::tcpinfo::TcpState;
use std::io;
use std::net::TcpStream;
use std::os::fd::{AsFd, AsRawFd};

fn set_int(
    stream: &TcpStream,
    level: libc::c_int,
    name: libc::c_int,
    value: u32,
) -> io::Result<()> {
    let value = value as libc::c_int;
    // SAFETY: an int option of the size given, on a socket we own.
    let rc = unsafe {
        libc::setsockopt(
            stream.as_raw_fd(),
            level,
            name,
            (&value as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// Applies `sockets` to a load-generating connection; `sending`: this end
/// sends its bulk data (TCP_NOTSENT_LOWAT and the congestion control
/// matter there).
pub fn apply(stream: &TcpStream, sockets: &LoadSockets, sending: bool) -> io::Result<()> {
    if let Some(bytes) = sockets.sndbuf {
        set_int(stream, libc::SOL_SOCKET, libc::SO_SNDBUF, bytes)?;
    }
    if let Some(bytes) = sockets.rcvbuf {
        set_int(stream, libc::SOL_SOCKET, libc::SO_RCVBUF, bytes)?;
    }
    if sending {
        if let Some(bytes) = sockets.notsent_lowat {
            set_int(stream, libc::IPPROTO_TCP, libc::TCP_NOTSENT_LOWAT, bytes)?;
        }
        if let Some(name) = &sockets.congestion {
            // SAFETY: the name's bytes, of the length given.
            let rc = unsafe {
                libc::setsockopt(
                    stream.as_raw_fd(),
                    libc::IPPROTO_TCP,
                    libc::TCP_CONGESTION,
                    name.as_ptr().cast(),
                    name.len() as libc::socklen_t,
                )
            };
            if rc != 0 {
                let e = io::Error::last_os_error();
                return Err(io::Error::new(
                    e.kind(),
                    format!(
                        "congestion control {name}: {e} (see /proc/sys/net/ipv4/tcp_available_congestion_control)"
                    ),
                ));
            }
        }
    }
    Ok(())
}

/// Whether this host can give a TCP socket congestion control `name`
/// (tried on a scratch socket: the kernel may load its module then).
pub fn congestion_available(name: &str) -> io::Result<()> {
    let socket = std::net::TcpListener::bind("127.0.0.1:0")?;
    // SAFETY: the name's bytes, of the length given, on a socket we own.
    let rc = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::IPPROTO_TCP,
            libc::TCP_CONGESTION,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn ioctl_int(stream: &TcpStream, request: libc::c_ulong) -> Option<u64> {
    let mut value: libc::c_int = 0;
    // SAFETY: SIOCINQ and SIOCOUTQ write one int.
    let rc = unsafe { libc::ioctl(stream.as_raw_fd(), request, &mut value) };
    (rc == 0).then_some(value.max(0) as u64)
}

/// SIOCINQ and SIOCOUTQ (FIONREAD and TIOCOUTQ on a TCP socket).
const SIOCINQ: libc::c_ulong = libc::FIONREAD;
const SIOCOUTQ: libc::c_ulong = libc::TIOCOUTQ;

/// One reading of `stream`'s queues at `t_s`.
pub fn queue_of(stream: &TcpStream, t_s: f64) -> Option<SocketQueue> {
    let (state, info) = TcpState::read_with_info(stream.as_fd()).ok()?;
    let notsent = state.notsent_bytes.map_or(0, u64::from);
    let outq = ioctl_int(stream, SIOCOUTQ).unwrap_or(0);
    Some(SocketQueue {
        t_s,
        notsent_bytes: notsent,
        unacked_bytes: outq.saturating_sub(notsent),
        srtt_ms: f64::from(info.rtt_us) / 1000.0,
        min_rtt_ms: info.min_rtt_us.map_or(0.0, |us| f64::from(us) / 1000.0),
        unread_bytes: ioctl_int(stream, SIOCINQ).unwrap_or(0),
        qdisc_backlog_bytes: 0,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::TcpListener;

    #[test]
    fn the_queues_are_read_where_they_are() {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let mut client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (mut server, _) = listener.accept().unwrap();
        apply(
            &client,
            &LoadSockets {
                notsent_lowat: Some(16384),
                sndbuf: Some(65536),
                ..Default::default()
            },
            true,
        )
        .unwrap();
        client.write_all(&[7u8; 1000]).unwrap();
        // The receiver has not read: its 1000 bytes wait unread.
        let mut waited = 0;
        let q = loop {
            let q = queue_of(&server, 0.0).unwrap();
            if q.unread_bytes == 1000 || waited > 100 {
                break q;
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
            waited += 1;
        };
        assert_eq!(q.unread_bytes, 1000);
        let mut buf = [0u8; 1000];
        server.read_exact(&mut buf).unwrap();
        assert_eq!(queue_of(&server, 0.0).unwrap().unread_bytes, 0);
        let e = apply(
            &client,
            &LoadSockets {
                congestion: Some("no-such-cc".into()),
                ..Default::default()
            },
            true,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("congestion control no-such-cc"), "{e}");
    }
}
