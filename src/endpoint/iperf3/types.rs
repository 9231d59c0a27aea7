//! What a test against an iperf3 server is asked ([`Iperf3Spec`]), what
//! it reports as it runs ([`Progress`], [`Tick`]) and at its end
//! ([`Iperf3Run`]: netlab's own streams, each with its thread's CPU, and
//! the server's results), and how it fails ([`ClientError`]).

use crate::wire::iperf3::{self, Iperf3Error, Params, Results};
use std::io;
use std::net::SocketAddr;
use std::time::Duration;

/// One test against an iperf3 server.
#[derive(Debug, Clone, PartialEq)]
pub struct Iperf3Spec {
    pub server: SocketAddr,
    /// Streams each way (`-P`).
    pub parallel: u32,
    /// The server sends (`-R`).
    pub reverse: bool,
    /// Both send (`--bidir`): `parallel` streams each way.
    pub bidir: bool,
    /// How long the test runs (by time), or at most, by bytes.
    pub duration: Duration,
    /// Ends when this many bytes were sent or received (`-n`).
    pub bytes: Option<u64>,
    /// Bytes per write (iperf3's TCP default: 128 KiB), or per UDP datagram.
    pub len: usize,
    /// UDP at this many bits a second per stream, instead of TCP.
    pub udp_bps: Option<u64>,
    /// The longest netlab waits for the server at any step.
    pub timeout: Duration,
    /// Every stream's counts are taken this often while the test runs
    /// (iperf3's `-i`, 1 s by default); `None`: only at its end.
    pub interval: Option<Duration>,
}

impl Iperf3Spec {
    /// The parameters iperf3's client would write for this test.
    pub fn params(&self) -> Params {
        Params {
            tcp: self.udp_bps.is_none().then_some(true),
            udp: self.udp_bps.is_some().then_some(true),
            bandwidth: self.udp_bps,
            omit: 0,
            time: if self.bytes.is_some() {
                0
            } else {
                self.duration.as_secs().max(1)
            },
            num: self.bytes.unwrap_or(0),
            blockcount: 0,
            parallel: self.parallel,
            reverse: self.reverse.then_some(true),
            bidirectional: self.bidir.then_some(true),
            len: Some(self.len as u64),
            pacing_timer: Some(1000),
            client_version: iperf3::CLIENT_VERSION.into(),
            ..Params::default()
        }
    }
}

/// One data stream as netlab's end saw it.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct LocalStream {
    /// iperf3's stream id (1, 3, 4, ...: iperf3 skips 2).
    pub id: i64,
    /// Whether netlab sent on it.
    pub sender: bool,
    pub bytes: u64,
    pub seconds: f64,
    /// UDP: datagrams sent, or the highest sequence number received.
    pub packets: u64,
    /// UDP, received: datagrams missing (iperf3's count: gaps, less those
    /// that came late) and the RFC 1889 jitter, seconds.
    pub lost: i64,
    pub jitter_s: f64,
    /// TCP: the kernel's account of netlab's socket (retransmits,
    /// congestion window, smoothed RTT and its variation, the chrono
    /// accounting): at an interval's end, or when the test ended.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tcp_info: Option<crate::measure::tcpinfo::TcpInfo>,
    /// What the stream's thread spent, read by the thread as the test
    /// ended (none in an interval's counts).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub thread: Option<ThreadAccount>,
}

/// A stream's thread over the test, as it read itself at the test's end.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct ThreadAccount {
    /// `getrusage(RUSAGE_THREAD)` from TEST_RUNNING to TEST_END.
    pub usage: crate::measure::rusage::ProcessUsage,
    /// Runnable but waiting for a CPU, seconds (schedstat).
    pub run_delay_s: Option<f64>,
    /// `read(2)`s or `write(2)`s on the data socket.
    pub calls: u64,
    /// The socket's buffer the kernel reported (SO_SNDBUF for a sender,
    /// SO_RCVBUF for a receiver), bytes.
    pub socket_buffer: Option<u64>,
    /// TCP: the socket's congestion control.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub congestion_control: Option<String>,
}

/// A data connection as it was opened: iperf3's `connected` entry.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Connected {
    pub id: i64,
    /// The descriptor (iperf3 reports its own as `socket`).
    pub socket: i32,
    pub local: Option<SocketAddr>,
    pub sender: bool,
    /// TCP: the maximum segment size (`TCP_MAXSEG`) as it opened.
    pub mss: Option<u32>,
    /// The socket's buffers as the kernel reported them as it opened.
    pub sndbuf: Option<u64>,
    pub rcvbuf: Option<u64>,
}

/// Every stream's counts, cumulative since TEST_RUNNING, at the end of one
/// interval (`start_s` to `end_s` after TEST_RUNNING).
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Tick {
    pub start_s: f64,
    pub end_s: f64,
    pub streams: Vec<LocalStream>,
}

/// What a test reports while it runs.
#[derive(Debug)]
pub enum Progress<'a> {
    /// The streams are open; the test starts.
    Started {
        connected: &'a [Connected],
        cookie: &'a str,
    },
    /// An interval ended.
    Interval(&'a Tick),
}

/// A finished test (or one that ended early: `incomplete`): both ends'
/// accounts.
#[derive(Debug, Clone, PartialEq, serde::Serialize)]
pub struct Iperf3Run {
    pub params: Params,
    /// The test's cookie, as iperf3 reports it.
    pub cookie: String,
    pub connected: Vec<Connected>,
    /// netlab's counts when the test ended.
    pub streams: Vec<LocalStream>,
    /// netlab's counts at each interval's end (empty without intervals).
    pub intervals: Vec<Tick>,
    /// What netlab reported to the server.
    pub client: Results,
    /// What the server reported (none when the test ended early).
    pub server: Option<Results>,
    /// From TEST_RUNNING to TEST_END.
    pub seconds: f64,
    /// netlab's process over the test (all its threads).
    pub usage: crate::measure::rusage::ProcessUsage,
    /// Why the test ended before the results were exchanged: the figures
    /// are netlab's own up to then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub incomplete: Option<String>,
}

/// Why a test against an iperf3 server did not finish.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    #[error("cannot reach {0}: {1}")]
    Connect(SocketAddr, io::Error),
    #[error("{0} is not an iperf3 server: {1}")]
    NotIperf3(SocketAddr, String),
    #[error("{0}: the server is busy running a test (iperf3's ACCESS_DENIED); try again later")]
    Busy(SocketAddr),
    #[error("{addr}: the server refused the test: {text} (errno {errno})")]
    Server {
        addr: SocketAddr,
        text: String,
        errno: i32,
    },
    #[error("{0}: the server ended the test (SERVER_TERMINATE)")]
    Terminated(SocketAddr),
    #[error("{0}: {1}")]
    OldServer(SocketAddr, String),
    #[error("{0}: {1}")]
    Protocol(SocketAddr, Iperf3Error),
    #[error("{0}: {1}")]
    Io(SocketAddr, String),
    #[error("{0}: stopped (SIGTERM or Ctrl-C)")]
    Interrupted(SocketAddr),
}
