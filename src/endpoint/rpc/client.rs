//! netlab's ONC RPC client, with the ways of sending a TCP request that
//! decide whether a call stalls:
//!
//! - `sun`: as Sun's xdrrec did, the message is marshalled into a 4000-byte
//!   send buffer (4 bytes of it for the fragment header) that is written out
//!   as a fragment each time it fills, and once more, as the last fragment,
//!   at the end of the record. A message over 3996 bytes therefore leaves in
//!   two or more `write(2)`s, the last one small;
//! - `two-write`: the record mark and call header in one write, the argument
//!   in a second;
//! - `writev`: the whole record in one gather write;
//! - UDP: one datagram per call, retransmitted after a timeout, replies
//!   matched by xid (stale ones discarded).
//!
//! A [`Request`] is built once per argument size (the bytes and where the
//! writes split); each call only patches the xid.

use super::busypoll;
use serde::{Deserialize, Serialize};
/// How the client writes a TCP request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "kebab-case")]
pub enum Strategy {
    /// As Sun's xdrrec: a write per 4000-byte fragment.
    Sun,
    /// The record mark and header, then the argument.
    TwoWrite,
    /// One writev of the whole record.
    Writev,
}

impl Strategy {
    pub fn name(&self) -> &'static str {
        match self {
            Strategy::Sun => "sun",
            Strategy::TwoWrite => "two-write",
            Strategy::Writev => "writev",
        }
    }
}

/// Socket options for the client's TCP connection.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClientOptions {
    pub nodelay: bool,
    /// Hold the writes of one call in TCP_CORK and release them together.
    pub cork: bool,
    /// Re-arm TCP_QUICKACK after every read.
    pub quickack: bool,
    /// Spin on non-blocking receives this many µs before sleeping in a
    /// blocking one (see [`crate::record::busypoll`]); 0 never spins.
    #[serde(default)]
    pub busy_poll_us: u32,
    /// The CPU the client runs on (`--pin`); none: where the scheduler puts it.
    #[serde(default)]
    pub cpu: Option<usize>,
    /// SO_SNDBUF and SO_RCVBUF asked for before connecting (`--sockbuf`);
    /// Linux doubles the value and keeps at least its minimum.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sockbuf: Option<u32>,
    /// A new TCP connection for every call, closed after its reply
    /// (netperf's TCP_CRR): each call's time holds the handshake, the call
    /// and the close.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub connect_per_call: bool,
    /// `--stall-timeout`: the longest wait for a call's write or its
    /// reply before the cell fails (none: the default bound).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stall: Option<StallBound>,
    /// UDP: the first wait for a reply before the call is sent again
    /// (doubling each time), ms; none: 500 ms. A reply later than it is
    /// counted as a retransmission's, as a probe's timeout counts it lost.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp_timeout_ms: Option<u32>,
}

use crate::endpoint::stall::{StallBound, Stalled, timed_out};
use crate::wire::recmark::{Assembler, LAST_FRAGMENT, fragment_header};
use crate::wire::rpc::{AcceptStat, Call, Message, Reply, ReplyBody, parse};
use crate::wire::xdr::Writer;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpStream, UdpSocket};
use std::os::fd::AsFd;
use std::os::fd::AsRawFd;
use std::time::Duration;
use thiserror::Error;

/// Size of the xdrrec send buffer of Sun's RPC library.
pub const SUN_SENDSIZE: usize = 4000;

#[derive(Debug, Error)]
pub enum CallError {
    #[error("{0}")]
    Io(#[from] io::Error),
    #[error("reply does not parse: {0}")]
    BadReply(String),
    #[error("reply xid {got} does not match call xid {want}")]
    Xid { got: u32, want: u32 },
    #[error("call rejected: {0:?}")]
    Rejected(ReplyBody),
    #[error("no reply after {0} tries")]
    Timeout(u32),
    #[error("server closed the connection")]
    Closed,
    #[error(transparent)]
    Stalled(#[from] Stalled),
}

/// A request's bytes and the `write(2)` boundaries a strategy uses.
#[derive(Debug, Clone)]
pub struct Request {
    /// All bytes sent, record marks included.
    pub bytes: Vec<u8>,
    /// End offsets of each write (the last is `bytes.len()`).
    pub writes: Vec<usize>,
    /// Offset of the xid in `bytes`.
    xid_at: usize,
}

/// The call message (header and XDR-encoded arguments), without record marks.
pub fn message(call: &Call, args: &[u8]) -> Vec<u8> {
    let mut w = Writer::with_capacity(call.header_len() + args.len());
    call.emit(&mut w);
    w.buf.extend_from_slice(args);
    w.into_bytes()
}

/// The XDR encoding of a SINK argument of `size` bytes.
pub fn sink_args(size: usize) -> Vec<u8> {
    let mut w = Writer::with_capacity(size + 8);
    w.opaque(&vec![0x5a; size]);
    w.into_bytes()
}

impl Request {
    /// Frames `message` (header length `header_len`) for TCP with `strategy`.
    pub fn tcp(message: &[u8], header_len: usize, strategy: Strategy) -> Request {
        match strategy {
            Strategy::Sun => {
                let mut bytes = Vec::with_capacity(message.len() + 4 * (message.len() / 3996 + 1));
                let mut writes = Vec::new();
                let chunk = SUN_SENDSIZE - 4;
                let mut chunks = message.chunks(chunk).peekable();
                if message.is_empty() {
                    bytes.extend_from_slice(&fragment_header(0, true));
                    writes.push(bytes.len());
                }
                while let Some(piece) = chunks.next() {
                    let last = chunks.peek().is_none();
                    bytes.extend_from_slice(&fragment_header(piece.len() as u32, last));
                    bytes.extend_from_slice(piece);
                    writes.push(bytes.len());
                }
                Request {
                    bytes,
                    writes,
                    xid_at: 4,
                }
            }
            Strategy::TwoWrite | Strategy::Writev => {
                let mut bytes = Vec::with_capacity(message.len() + 4);
                bytes.extend_from_slice(&(message.len() as u32 | LAST_FRAGMENT).to_be_bytes());
                bytes.extend_from_slice(message);
                // The call header and the argument's length word, then the argument.
                let split = (4 + header_len + 4).min(bytes.len());
                let writes = if strategy == Strategy::TwoWrite && split < bytes.len() {
                    vec![split, bytes.len()]
                } else {
                    vec![bytes.len()]
                };
                Request {
                    bytes,
                    writes,
                    xid_at: 4,
                }
            }
        }
    }

    /// The message as one UDP datagram.
    pub fn udp(message: &[u8]) -> Request {
        Request {
            bytes: message.to_vec(),
            writes: vec![message.len()],
            xid_at: 0,
        }
    }

    fn set_xid(&mut self, xid: u32) {
        self.bytes[self.xid_at..self.xid_at + 4].copy_from_slice(&xid.to_be_bytes());
    }
}

fn set_int_option(fd: i32, level: i32, name: i32, value: i32) -> io::Result<()> {
    // SAFETY: an int-valued socket option.
    let rc = unsafe { libc::setsockopt(fd, level, name, (&value as *const i32).cast(), 4) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// An RPC client over one TCP connection.
pub struct TcpClient {
    stream: TcpStream,
    options: ClientOptions,
    assembler: Assembler,
    buf: Vec<u8>,
    /// Data-path system calls made that moved data (or ended the stream).
    pub syscalls: u64,
    /// Busy-poll receives that found nothing.
    pub empty_polls: u64,
}

impl TcpClient {
    pub fn connect(addr: SocketAddr, options: ClientOptions) -> io::Result<TcpClient> {
        let stream = match options.sockbuf {
            None => TcpStream::connect(addr)?,
            // Before connecting, so that the SYN's window is already the small one.
            Some(size) => {
                let socket = socket2::Socket::new(
                    socket2::Domain::for_address(addr),
                    socket2::Type::STREAM,
                    Some(socket2::Protocol::TCP),
                )?;
                socket.set_send_buffer_size(size as usize)?;
                socket.set_recv_buffer_size(size as usize)?;
                socket.connect(&addr.into())?;
                socket.into()
            }
        };
        stream.set_nodelay(options.nodelay)?;
        options.stall.unwrap_or_default().arm(stream.as_fd())?;
        Ok(TcpClient {
            stream,
            options,
            assembler: Assembler::new(1 << 20),
            buf: vec![0u8; 64 * 1024],
            syscalls: 0,
            empty_polls: 0,
        })
    }

    /// Sends the run token of a run through an agent, if any.
    pub fn present(&mut self, token: Option<&crate::endpoint::protocol::Token>) -> io::Result<()> {
        crate::endpoint::guard::present(&mut self.stream, token)
    }

    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }

    /// A wait on the connection that ran out (`--stall-timeout`) as the
    /// stall it is, with the connection's state; other errors unchanged.
    fn stalled(&self, e: io::Error, doing: &'static str) -> CallError {
        if timed_out(&e) {
            CallError::Stalled(Stalled::on(
                "client",
                doing,
                self.options.stall.unwrap_or_default(),
                self.stream.as_fd(),
            ))
        } else {
            CallError::Io(e)
        }
    }

    /// Sends `request` with `xid` and waits for its reply.
    pub fn call(&mut self, request: &mut Request, xid: u32) -> Result<Reply, CallError> {
        request.set_xid(xid);
        let fd = self.stream.as_raw_fd();
        if self.options.cork {
            set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_CORK, 1)?;
        }
        let mut start = 0;
        for &end in &request.writes {
            (&self.stream)
                .write_all(&request.bytes[start..end])
                .map_err(|e| self.stalled(e, "writing a call"))?;
            self.syscalls += 1;
            start = end;
        }
        if self.options.cork {
            set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_CORK, 0)?;
        }
        loop {
            if let Some(record) = self
                .assembler
                .next_record()
                .map_err(|e| CallError::BadReply(e.to_string()))?
            {
                return check_reply(record, xid);
            }
            let spun = busypoll::spin(
                busypoll::budget(self.options.busy_poll_us),
                &mut self.empty_polls,
                || busypoll::recv_now(&self.stream, &mut self.buf),
            );
            let n = match spun {
                Some(got) => got?,
                None => (&self.stream)
                    .read(&mut self.buf)
                    .map_err(|e| self.stalled(e, "waiting for a reply"))?,
            };
            self.syscalls += 1;
            if n == 0 {
                return Err(CallError::Closed);
            }
            if self.options.quickack {
                set_int_option(fd, libc::IPPROTO_TCP, libc::TCP_QUICKACK, 1)?;
            }
            self.assembler.push(&self.buf[..n]);
        }
    }
}

/// A call's TCP request, single-write, for one-off calls (rpcbind, tests).
pub fn call_once_tcp(
    addr: SocketAddr,
    call: &Call,
    args: &[u8],
) -> Result<(Reply, Vec<u8>), CallError> {
    let mut client = TcpClient::connect(addr, ClientOptions::default())?;
    let msg = message(call, args);
    let mut request = Request::tcp(&msg, call.header_len(), Strategy::Writev);
    request.set_xid(call.xid);
    client.stream.write_all(&request.bytes)?;
    // One deadline for the whole reply: a server that trickles it a byte
    // at a time gets no longer than one that says nothing.
    let until = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let left = until.saturating_duration_since(std::time::Instant::now());
        if left.is_zero() {
            return Err(CallError::Io(io::Error::new(
                io::ErrorKind::TimedOut,
                "no whole reply within 5 s",
            )));
        }
        client.stream.set_read_timeout(Some(left))?;
        if let Some(record) = client
            .assembler
            .next_record()
            .map_err(|e| CallError::BadReply(e.to_string()))?
        {
            let reply = check_reply(record, call.xid)?;
            let results = parse(record)
                .map(|(_, rest)| rest.to_vec())
                .unwrap_or_default();
            return Ok((reply, results));
        }
        let n = client.stream.read(&mut client.buf)?;
        if n == 0 {
            return Err(CallError::Closed);
        }
        let (buf, assembler) = (&client.buf[..n], &mut client.assembler);
        assembler.push(buf);
    }
}

fn check_reply(record: &[u8], xid: u32) -> Result<Reply, CallError> {
    match parse(record) {
        Ok((Message::Reply(reply), _)) if reply.xid != xid => Err(CallError::Xid {
            got: reply.xid,
            want: xid,
        }),
        Ok((Message::Reply(reply), _)) => match &reply.body {
            ReplyBody::Accepted {
                stat: AcceptStat::Success,
                ..
            } => Ok(reply),
            other => Err(CallError::Rejected(other.clone())),
        },
        Ok((Message::Call(_), _)) => Err(CallError::BadReply("got a call, not a reply".into())),
        Err(e) => Err(CallError::BadReply(e.to_string())),
    }
}

/// An RPC client over UDP.
pub struct UdpClient {
    socket: UdpSocket,
    /// First wait for a reply; doubled on each retransmission.
    pub timeout: Duration,
    pub tries: u32,
    buf: Vec<u8>,
    pub retransmissions: u64,
    pub stale_replies: u64,
    pub syscalls: u64,
    /// Spin this long on non-blocking receives before each blocking one
    /// (which then waits up to the timeout).
    pub busy_poll: Duration,
    /// Busy-poll receives that found nothing.
    pub empty_polls: u64,
    timeout_set: Option<Duration>,
}

impl UdpClient {
    pub fn connect(addr: SocketAddr) -> io::Result<UdpClient> {
        let bind: SocketAddr = if addr.is_ipv4() {
            "0.0.0.0:0"
        } else {
            "[::]:0"
        }
        .parse()
        .expect("literal");
        let socket = UdpSocket::bind(bind)?;
        socket.connect(addr)?;
        Ok(UdpClient {
            socket,
            timeout: Duration::from_millis(500),
            tries: 5,
            buf: vec![0u8; 65536],
            retransmissions: 0,
            stale_replies: 0,
            syscalls: 0,
            busy_poll: Duration::ZERO,
            empty_polls: 0,
            timeout_set: None,
        })
    }

    /// Through an agent: says hello with the run's token until the server
    /// consents, and sends nothing else before (`endpoint::guard`).
    pub fn ask_consent(&mut self, token: &crate::endpoint::protocol::Token) -> io::Result<()> {
        crate::endpoint::guard::ask_udp_consent(&self.socket, token)?;
        self.timeout_set = None;
        Ok(())
    }

    /// Sends `request` with `xid`, retransmitting until a matching reply or
    /// `tries` timeouts; returns the reply and its results.
    pub fn call(&mut self, request: &mut Request, xid: u32) -> Result<(Reply, Vec<u8>), CallError> {
        request.set_xid(xid);
        let mut wait = self.timeout;
        for attempt in 0..self.tries {
            if attempt > 0 {
                self.retransmissions += 1;
            }
            // Only a changed timeout costs a setsockopt: not on the common path.
            if self.timeout_set != Some(wait) {
                self.socket.set_read_timeout(Some(wait))?;
                self.timeout_set = Some(wait);
            }
            self.socket.send(&request.bytes)?;
            self.syscalls += 1;
            loop {
                let spun = busypoll::spin(self.busy_poll, &mut self.empty_polls, || {
                    busypoll::recv_datagram_now(&self.socket, &mut self.buf)
                });
                let received = match spun {
                    Some(got) => got,
                    None => self.socket.recv(&mut self.buf),
                };
                let n = match received {
                    Ok(n) => n,
                    Err(e) if crate::endpoint::stall::timed_out(&e) => {
                        break;
                    }
                    Err(e) => return Err(e.into()),
                };
                self.syscalls += 1;
                match check_reply(&self.buf[..n], xid) {
                    // A late reply to an earlier try: keep waiting for ours.
                    Err(CallError::Xid { .. }) => self.stale_replies += 1,
                    Ok(reply) => {
                        let results = parse(&self.buf[..n])
                            .map(|(_, r)| r.to_vec())
                            .unwrap_or_default();
                        return Ok((reply, results));
                    }
                    Err(e) => return Err(e),
                }
            }
            wait *= 2;
        }
        Err(CallError::Timeout(self.tries))
    }
}

/// Calls procedure 0 (NULL) of `program` `version` at `server`, as
/// `rpcinfo -t`/`-u` does; returns how long the call took.
pub fn ping(
    server: SocketAddr,
    program: u32,
    version: u32,
    udp: bool,
) -> Result<Duration, CallError> {
    let xid = std::process::id().wrapping_mul(2_654_435_761);
    let call = Call::new(xid, program, version, 0);
    let start = std::time::Instant::now();
    if udp {
        let mut client = UdpClient::connect(server)?;
        client.tries = 3;
        let mut request = Request::udp(&message(&call, &[]));
        client.call(&mut request, xid)?;
    } else {
        call_once_tcp(server, &call, &[])?;
    }
    Ok(start.elapsed())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(size: usize, strategy: Strategy) -> Request {
        let call = Call::new(1, 0x2005_1989, 1, 1);
        Request::tcp(
            &message(&call, &sink_args(size)),
            call.header_len(),
            strategy,
        )
    }

    #[test]
    fn sun_splits_at_the_4000_byte_buffer() {
        // 40-byte header + 4-byte length + argument: up to 3996 bytes fit one buffer.
        assert_eq!(request(3952, Strategy::Sun).writes.len(), 1);
        let r = request(3953, Strategy::Sun);
        assert_eq!(r.writes, vec![4000, 4000 + 4 + 4]);
        let r = request(4096, Strategy::Sun);
        assert_eq!(r.writes.len(), 2);
        assert_eq!(r.writes[0], 4000);
        assert_eq!(r.writes[1] - r.writes[0], 4 + (44 + 4096 - 3996));
        assert_eq!(request(8192, Strategy::Sun).writes.len(), 3);
        // Fragments carry the last bit only at the end and reassemble to the message.
        let mut a = Assembler::new(1 << 20);
        a.push(&r.bytes);
        let record = a.next_record().unwrap().unwrap();
        assert_eq!(record.len(), 44 + 4096);
    }

    #[test]
    fn two_write_and_writev() {
        let r = request(1000, Strategy::TwoWrite);
        assert_eq!(r.writes, vec![48, 48 + 1000]);
        let r = request(1000, Strategy::Writev);
        assert_eq!(r.writes, vec![1048]);
        assert_eq!(&r.bytes[..4], &(0x8000_0000u32 | 1044).to_be_bytes());
        // A NULL call (no argument) is one write whatever the strategy.
        let call = Call::new(1, 0x2005_1989, 1, 0);
        let r = Request::tcp(&message(&call, &[]), call.header_len(), Strategy::TwoWrite);
        assert_eq!(r.writes, vec![44]);
    }

    #[test]
    fn xid_is_patched_in_place() {
        let mut r = request(10, Strategy::Sun);
        r.set_xid(0xdead_beef);
        assert_eq!(&r.bytes[4..8], &[0xde, 0xad, 0xbe, 0xef]);
        let mut u = Request::udp(&message(&Call::new(1, 2, 3, 4), &[]));
        u.set_xid(9);
        assert_eq!(&u.bytes[..4], &[0, 0, 0, 9]);
    }
}
