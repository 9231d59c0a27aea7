//! The typed messages of the control channel (framed by [`crate::wire::control`]).
//!
//! A run goes: the controller spawns each endpoint, which announces itself
//! with [`Reply::Ready`]; the controller sets each up ([`Command::StreamReceive`]
//! answered by [`Reply::Listening`], [`Command::StreamSend`] answered by
//! [`Reply::Connected`]); then sends [`Command::Go`] to the receiver and then
//! the sender, and waits for each [`Reply::Done`]. Any failure is a
//! [`Reply::Failed`] naming the problem. Connection setup happens before `Go`,
//! so it is outside every measured interval.

use crate::measure::{
    ifstat::InterfaceCounters, netstat::Counters, rusage::ProcessUsage, tcpinfo::TcpInfo,
};
use crate::testbed::{
    capture::{CaptureReport, CaptureSpec},
    emulator::{EmulatorReport, EmulatorSpec},
};
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

/// How the sender hands bytes to the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum SendStrategy {
    /// One `write(2)` per record.
    Write,
    /// sosend-style: each record handed over in `write(2)`s of at most `chunk` bytes.
    Chunked { chunk: usize },
    /// One `writev(2)` gathering `records` records at a time.
    Writev { records: usize },
    /// `sendfile(2)` from a page-cached file holding the pattern.
    Sendfile,
    /// `splice(2)` file → pipe → socket.
    Splice,
    /// `send(2)` with `MSG_ZEROCOPY`, completions reaped from the error queue.
    Zerocopy,
}

impl SendStrategy {
    /// The short name used on the command line and in tables.
    pub fn name(&self) -> &'static str {
        match self {
            SendStrategy::Write => "write",
            SendStrategy::Chunked { .. } => "chunked",
            SendStrategy::Writev { .. } => "writev",
            SendStrategy::Sendfile => "sendfile",
            SendStrategy::Splice => "splice",
            SendStrategy::Zerocopy => "zerocopy",
        }
    }
}

/// How the receiver takes bytes from the kernel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "kind")]
pub enum RecvStrategy {
    /// `read(2)` into a buffer of `buffer` bytes (and verify, if asked).
    Read { buffer: usize },
    /// `splice(2)` socket → pipe → /dev/null: no user-space copy, no verification.
    Splice,
}

/// Socket options applied before connecting (sender) or listening (receiver).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SocketOptions {
    pub nodelay: bool,
    pub sndbuf: Option<usize>,
    pub rcvbuf: Option<usize>,
    /// Congestion control algorithm (`TCP_CONGESTION`).
    pub congestion_control: Option<String>,
}

/// How much the sender sends.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Amount {
    Bytes(u64),
    Seconds(f64),
}

/// Receiver set-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReceiveSpec {
    pub bind: SocketAddr,
    pub options: SocketOptions,
    pub strategy: RecvStrategy,
    pub verify: bool,
    /// Send [`Reply::Progress`] about four times a second.
    pub progress: bool,
    /// The interface whose counters to report (netns placement).
    #[serde(default)]
    pub interface: Option<String>,
}

/// Sender set-up.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SendSpec {
    pub connect: SocketAddr,
    pub options: SocketOptions,
    pub strategy: SendStrategy,
    pub record: usize,
    pub amount: Amount,
    /// The interface whose counters to report (netns placement).
    #[serde(default)]
    pub interface: Option<String>,
}

/// Controller → endpoint.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Command {
    StreamReceive(ReceiveSpec),
    StreamSend(SendSpec),
    /// Start the data path now.
    Go,
    /// Relay between two TUN devices as the wire emulator; answered by `Emulating`.
    Emulate(EmulatorSpec),
    /// Capture an interface in this endpoint's namespace; answered by `Capturing`.
    Capture(CaptureSpec),
    /// Serve netlab's RPC program on TCP and UDP; answered by `RpcServing`.
    RpcServe {
        bind: SocketAddr,
        options: crate::endpoint::rpc::ServerOptions,
    },
    /// Run the client side of one RPC cell; answered by `RpcClientDone`.
    RpcClient(crate::endpoint::rpc::RpcClientSpec),
    /// Time the checksum and copy variants at one size; answered by `CksumDone`.
    Cksum(crate::experiment::cksum::CksumSpec),
    /// End the emulator, capture or RPC server; answered by `EmulatorDone`,
    /// `CaptureDone` or `RpcServerDone`.
    Stop,
    /// Leave: the controller is done with this endpoint.
    Exit,
}

/// Counts specific to `MSG_ZEROCOPY` sends.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ZerocopyStats {
    /// Sends whose completion was reported.
    pub completed: u64,
    /// Of those, sends the kernel had to copy after all (always the case on
    /// loopback, where the receiver would otherwise read the sender's pages).
    pub copied: u64,
}

/// What one endpoint measured over its data path.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct EndpointReport {
    pub role: String,
    pub pid: u32,
    /// Payload bytes this side moved.
    pub bytes: u64,
    /// Data-path system calls made (write/read/sendfile/splice/... each counts one).
    pub syscalls: u64,
    /// Wall time of the data path: sender from the first send to the peer's
    /// close (all data delivered); receiver from the first byte to end of stream.
    pub wall_s: f64,
    pub usage: ProcessUsage,
    pub tcp_info: Option<TcpInfo>,
    /// Deltas of the kernel's protocol counters in this endpoint's namespace.
    pub counters: Counters,
    /// Congestion control the socket actually used.
    pub congestion_control: Option<String>,
    /// TCP_MAXSEG of the socket.
    pub mss: Option<u32>,
    /// The receiver compared every byte with the pattern.
    pub verified: bool,
    pub zerocopy: Option<ZerocopyStats>,
    /// The CPU this endpoint was on when its data path started and ended
    /// (`sched_getcpu`): on loopback, whether both ends shared a core changes
    /// throughput by tens of percent.
    #[serde(default)]
    pub cpus: Option<(u32, u32)>,
    /// The change in this endpoint's interface counters over the data path
    /// (netns placement).
    #[serde(default)]
    pub interface: Option<InterfaceCounters>,
}

/// The CPU the calling thread runs on now.
pub fn current_cpu() -> u32 {
    // SAFETY: sched_getcpu takes no arguments and only returns a number.
    let cpu = unsafe { libc::sched_getcpu() };
    cpu.max(0) as u32
}

/// Endpoint → controller.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Reply {
    Ready { pid: u32, version: String },
    Listening { addr: SocketAddr },
    Connected { local: SocketAddr },
    Progress { bytes: u64 },
    Done(Box<EndpointReport>),
    Emulating,
    EmulatorDone(Box<EmulatorReport>),
    Capturing,
    CaptureDone(Box<CaptureReport>),
    RpcServing { port: u16 },
    RpcServerDone(Box<crate::endpoint::rpc::ServerReport>),
    RpcClientDone(Box<crate::endpoint::rpc::RpcClientReport>),
    CksumDone(Box<crate::experiment::cksum::CksumResult>),
    Failed { message: String },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wire::control::{check, emit, parse};

    #[test]
    fn commands_round_trip_through_frames() {
        let commands = [
            Command::StreamReceive(ReceiveSpec {
                bind: "127.0.0.1:0".parse().unwrap(),
                options: SocketOptions {
                    nodelay: true,
                    rcvbuf: Some(1 << 20),
                    ..Default::default()
                },
                strategy: RecvStrategy::Read { buffer: 131072 },
                verify: true,
                progress: false,
                interface: None,
            }),
            Command::StreamSend(SendSpec {
                connect: "127.0.0.1:5001".parse().unwrap(),
                options: SocketOptions {
                    congestion_control: Some("cubic".into()),
                    ..Default::default()
                },
                strategy: SendStrategy::Chunked { chunk: 1024 },
                record: 4096,
                amount: Amount::Seconds(1.5),
                interface: Some("nlb1a".into()),
            }),
            Command::Go,
            Command::Exit,
        ];
        for command in commands {
            let mut frame = Vec::new();
            emit(&command, &mut frame).unwrap();
            assert_eq!(check(&frame).unwrap(), Some(frame.len()));
            assert_eq!(parse::<Command>(&frame).unwrap(), command);
        }
    }

    #[test]
    fn go_is_the_documented_frame() {
        let mut frame = Vec::new();
        emit(&Command::Go, &mut frame).unwrap();
        assert_eq!(frame, b"\x00\x00\x00\x05\x01\"Go\"");
    }

    #[test]
    fn replies_round_trip_through_frames() {
        let report = EndpointReport {
            role: "receiver".into(),
            bytes: 42,
            tcp_info: Some(TcpInfo {
                rtt_us: 5,
                segs_out: Some(3),
                ..Default::default()
            }),
            zerocopy: Some(ZerocopyStats {
                completed: 2,
                copied: 2,
            }),
            ..Default::default()
        };
        for reply in [
            Reply::Ready {
                pid: 7,
                version: "0.1.0".into(),
            },
            Reply::Done(Box::new(report)),
            Reply::Failed {
                message: "port 5001 is in use".into(),
            },
        ] {
            let mut frame = Vec::new();
            emit(&reply, &mut frame).unwrap();
            assert_eq!(parse::<Reply>(&frame).unwrap(), reply);
        }
    }
}
