//! Multipath TCP (RFC 8684) as the Linux kernel shows it: whether this
//! kernel and network namespace let a program open an MPTCP socket, and
//! the subflows of one MPTCP connection with each one's `TCP_INFO`.
//!
//! The kernel's interface is `include/uapi/linux/mptcp.h`: at level
//! `SOL_MPTCP`, `MPTCP_TCPINFO` and `MPTCP_SUBFLOW_ADDRS` fill a
//! `struct mptcp_subflow_data` header (the caller sets `size_subflow_data`
//! and `size_user`; the kernel sets `num_subflows` and clamps `size_user`
//! to what it has) followed by one element per subflow, `size_user` bytes
//! apart. A connection that fell back to plain TCP (the peer did not
//! answer MP_CAPABLE) answers `SOL_MPTCP` with EOPNOTSUPP (or
//! ENOPROTOOPT where a kernel hands the call to its TCP subflow), which is how
//! [`subflows`] tells a fallback apart. Parsing is from bytes, so that
//! layout and its clamping live in one tested place; nothing here runs on
//! a data path.

use super::tcpinfo::TcpInfo;
use serde::{Deserialize, Serialize};
use std::io;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};
use std::os::fd::{AsRawFd, BorrowedFd};

/// `IPPROTO_MPTCP`: the third argument of `socket(2)` for an MPTCP socket.
pub const IPPROTO_MPTCP: i32 = libc::IPPROTO_MPTCP;
/// The socket level of MPTCP's own options (`linux/socket.h`).
const SOL_MPTCP: i32 = 284;
const MPTCP_TCPINFO: i32 = 2;
const MPTCP_SUBFLOW_ADDRS: i32 = 3;
/// `struct mptcp_subflow_data`: four u32s.
const HEADER: usize = 16;
/// `struct mptcp_subflow_addrs`: two `__kernel_sockaddr_storage`s.
const ADDRS: usize = 256;
/// Room for a `struct tcp_info` as large as any kernel's so far.
const TCP_INFO: usize = 256;
/// The most subflows read back: the kernel's own limit is 8
/// (`MPTCP_PM_ADDR_MAX`), so this is never the bound in practice.
const MOST_SUBFLOWS: usize = 16;

/// Whether this kernel and namespace open MPTCP sockets.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Support {
    Present,
    /// Why not, in words a user can act on.
    Refused(String),
}

/// Tries to open an MPTCP socket here, and says why it could not: the
/// kernel built without MPTCP (`CONFIG_MPTCP` off: EPROTONOSUPPORT or
/// EINVAL), or MPTCP switched off in this namespace (`net.mptcp.enabled`
/// 0: ENOPROTOOPT).
pub fn support() -> Support {
    // SAFETY: socket(2) takes no pointers; the descriptor is closed below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_STREAM, IPPROTO_MPTCP) };
    if fd >= 0 {
        // SAFETY: fd was just opened by this function and is not used again.
        unsafe { libc::close(fd) };
        return Support::Present;
    }
    let error = io::Error::last_os_error();
    let enabled = std::fs::read_to_string("/proc/sys/net/mptcp/enabled").ok();
    Support::Refused(refusal(&error, enabled.as_deref()))
}

/// The words for a refused MPTCP socket, from the error and what
/// `/proc/sys/net/mptcp/enabled` holds (absent: no MPTCP in the kernel).
pub fn refusal(error: &io::Error, enabled: Option<&str>) -> String {
    match enabled.map(str::trim) {
        None => format!(
            "this kernel has no MPTCP (CONFIG_MPTCP is off: there is no /proc/sys/net/mptcp; socket() said: {error})"
        ),
        Some("0") => format!(
            "MPTCP is switched off in this network namespace (net.mptcp.enabled = 0; socket() said: {error})"
        ),
        Some(_) => format!("the kernel refused an MPTCP socket: {error}"),
    }
}

/// One subflow of an MPTCP connection, as its own TCP connection.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Subflow {
    pub local: Option<SocketAddr>,
    pub remote: Option<SocketAddr>,
    pub info: TcpInfo,
}

impl Subflow {
    /// The bytes this subflow carried for its end: acknowledged to a
    /// sender, received by a receiver.
    pub fn carried(&self, sending: bool) -> u64 {
        let bytes = if sending {
            self.info.bytes_acked
        } else {
            self.info.bytes_received
        };
        bytes.unwrap_or(0)
    }
}

/// What one end's MPTCP socket says of its connection.
#[derive(Debug, Clone, PartialEq)]
pub enum Connection {
    /// MPTCP, with these subflows (the first is the one that opened it).
    Multipath(Vec<Subflow>),
    /// The peer did not speak MPTCP: the connection is plain TCP.
    FellBack,
}

/// The subflows of the MPTCP connection on `fd`, each with its addresses
/// and `TCP_INFO`; [`Connection::FellBack`] if it is plain TCP.
pub fn subflows(fd: BorrowedFd<'_>) -> io::Result<Connection> {
    let infos = match read_elements(fd, MPTCP_TCPINFO, TCP_INFO) {
        Ok(infos) => infos,
        Err(e) if matches!(e.raw_os_error(), Some(libc::ENOPROTOOPT | libc::EOPNOTSUPP)) => {
            return Ok(Connection::FellBack);
        }
        Err(e) => return Err(e),
    };
    let addresses = read_elements(fd, MPTCP_SUBFLOW_ADDRS, ADDRS)?;
    let (infos, addresses) = (parse_elements(&infos)?, parse_elements(&addresses)?);
    Ok(Connection::Multipath(
        infos
            .iter()
            .enumerate()
            .filter_map(|(i, info)| {
                let (local, remote) = addresses.get(i).map_or((None, None), |a| subflow_addrs(a));
                Some(Subflow {
                    local,
                    remote,
                    info: TcpInfo::parse(info)?,
                })
            })
            .collect(),
    ))
}

/// One `getsockopt(SOL_MPTCP, name)` of elements `size` bytes each: the
/// header and elements as the kernel filled them.
fn read_elements(fd: BorrowedFd<'_>, name: i32, size: usize) -> io::Result<Vec<u8>> {
    let mut buf = vec![0u8; HEADER + size * MOST_SUBFLOWS];
    buf[0..4].copy_from_slice(&(HEADER as u32).to_ne_bytes());
    buf[12..16].copy_from_slice(&(size as u32).to_ne_bytes());
    let mut len = buf.len() as libc::socklen_t;
    // SAFETY: buf is writable for len bytes; the kernel writes at most len.
    let rc = unsafe {
        libc::getsockopt(
            fd.as_raw_fd(),
            SOL_MPTCP,
            name,
            buf.as_mut_ptr().cast(),
            &mut len,
        )
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    buf.truncate(len as usize);
    Ok(buf)
}

/// The elements after a `struct mptcp_subflow_data` header, each as long
/// as the header's `size_user` says; as many as both `num_subflows` and
/// the bytes returned cover.
pub fn parse_elements(buf: &[u8]) -> io::Result<Vec<&[u8]>> {
    let field = |i: usize| {
        buf.get(i * 4..i * 4 + 4)
            .map(|b| u32::from_ne_bytes(b.try_into().expect("4 bytes")) as usize)
    };
    let bad = |what: &str| io::Error::new(io::ErrorKind::InvalidData, format!("MPTCP: {what}"));
    let (Some(header), Some(count), Some(size)) = (field(0), field(1), field(3)) else {
        return Err(bad("the subflow header is cut short"));
    };
    if header < HEADER || header > buf.len() || size == 0 {
        return Err(bad("the subflow header's sizes are out of range"));
    }
    Ok(buf[header..].chunks_exact(size).take(count).collect())
}

/// A `struct mptcp_subflow_addrs`: local then remote, each a
/// `__kernel_sockaddr_storage` of 128 bytes.
pub fn subflow_addrs(element: &[u8]) -> (Option<SocketAddr>, Option<SocketAddr>) {
    (
        element.get(..128).and_then(sockaddr),
        element.get(128..256).and_then(sockaddr),
    )
}

/// A `sockaddr_in` or `sockaddr_in6` from its bytes (family in host
/// order, port and address in network order).
fn sockaddr(bytes: &[u8]) -> Option<SocketAddr> {
    let family = i32::from(u16::from_ne_bytes(bytes.get(0..2)?.try_into().ok()?));
    let port = u16::from_be_bytes(bytes.get(2..4)?.try_into().ok()?);
    let ip = match family {
        libc::AF_INET => IpAddr::V4(Ipv4Addr::from(<[u8; 4]>::try_from(bytes.get(4..8)?).ok()?)),
        libc::AF_INET6 => IpAddr::V6(Ipv6Addr::from(
            <[u8; 16]>::try_from(bytes.get(8..24)?).ok()?,
        )),
        _ => return None,
    };
    Some(SocketAddr::new(ip, port))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn header(count: u32, size: u32) -> Vec<u8> {
        [HEADER as u32, count, 0, size]
            .iter()
            .flat_map(|v| v.to_ne_bytes())
            .collect()
    }

    #[test]
    fn elements_follow_the_header_at_the_size_the_kernel_kept() {
        let mut buf = header(2, 4);
        buf.extend_from_slice(&[1, 1, 1, 1, 2, 2, 2, 2, 9, 9]);
        let elements = parse_elements(&buf).unwrap();
        assert_eq!(elements, vec![&[1u8; 4][..], &[2u8; 4][..]]);
        // More subflows than the buffer held: only the whole ones.
        let mut short = header(3, 4);
        short.extend_from_slice(&[1, 1, 1, 1, 2, 2]);
        assert_eq!(parse_elements(&short).unwrap().len(), 1);
        assert!(parse_elements(&header(1, 0)).is_err());
        assert!(parse_elements(&[0u8; 8]).is_err());
    }

    #[test]
    fn subflow_addresses_read_as_the_kernel_writes_them() {
        let mut element = vec![0u8; 256];
        element[0..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        element[2..4].copy_from_slice(&5001u16.to_be_bytes());
        element[4..8].copy_from_slice(&[198, 18, 0, 5]);
        element[128..130].copy_from_slice(&(libc::AF_INET6 as u16).to_ne_bytes());
        element[130..132].copy_from_slice(&80u16.to_be_bytes());
        element[136..152].copy_from_slice(&Ipv6Addr::LOCALHOST.octets());
        let (local, remote) = subflow_addrs(&element);
        assert_eq!(local, Some("198.18.0.5:5001".parse().unwrap()));
        assert_eq!(remote, Some("[::1]:80".parse().unwrap()));
        assert_eq!(subflow_addrs(&[0u8; 100]), (None, None));
    }

    #[test]
    fn a_refusal_names_the_missing_kernel_or_the_switched_off_namespace() {
        let error = io::Error::from_raw_os_error(libc::EPROTONOSUPPORT);
        assert!(refusal(&error, None).contains("CONFIG_MPTCP"));
        assert!(refusal(&error, Some("0\n")).contains("net.mptcp.enabled = 0"));
    }

    /// A real MPTCP connection on loopback, where the kernel has MPTCP:
    /// one subflow (loopback is one path), carrying every byte.
    #[test]
    fn a_loopback_connection_has_one_subflow_carrying_the_bytes() {
        use std::io::{Read, Write};
        use std::os::fd::AsFd;
        if let Support::Refused(why) = support() {
            eprintln!("skipping the live check: {why}");
            return;
        }
        let mptcp = || {
            socket2::Socket::new(
                socket2::Domain::IPV4,
                socket2::Type::STREAM,
                Some(socket2::Protocol::from(IPPROTO_MPTCP)),
            )
            .unwrap()
        };
        let listener = mptcp();
        listener
            .bind(&"127.0.0.1:0".parse::<SocketAddr>().unwrap().into())
            .unwrap();
        listener.listen(1).unwrap();
        let addr = listener.local_addr().unwrap();
        let client = mptcp();
        client.connect(&addr).unwrap();
        let (server, _) = listener.accept().unwrap();
        let mut client = std::net::TcpStream::from(client);
        let mut server = std::net::TcpStream::from(server);
        client.write_all(&[7u8; 100_000]).unwrap();
        let mut got = vec![0u8; 100_000];
        server.read_exact(&mut got).unwrap();
        let Connection::Multipath(flows) = subflows(server.as_fd()).unwrap() else {
            panic!("an MPTCP peer fell back to TCP");
        };
        assert_eq!(flows.len(), 1);
        assert_eq!(flows[0].carried(false), 100_000);
        assert_eq!(flows[0].remote, client.local_addr().ok());
        // An MPTCP client of a plain TCP listener falls back, and says so.
        let plain = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = mptcp();
        client.connect(&plain.local_addr().unwrap().into()).unwrap();
        let _accepted = plain.accept().unwrap();
        assert_eq!(
            subflows(std::net::TcpStream::from(client).as_fd()).unwrap(),
            Connection::FellBack
        );
    }
}
