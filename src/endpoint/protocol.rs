//! The typed messages of the control channel (framed by [`crate::wire::control`]).
//!
//! A run goes: the controller spawns each endpoint, which announces itself
//! with [`Reply::Ready`]; the controller sets each up ([`Command::StreamReceive`]
//! answered by [`Reply::Listening`], [`Command::StreamSend`] answered by
//! [`Reply::Connected`]); then sends [`Command::Go`] to the receiver and then
//! the sender, and waits for each [`Reply::Done`]. Any failure is a
//! [`Reply::Failed`] naming the problem. Connection setup happens before `Go`,
//! so it is outside every measured interval.

pub use crate::experiments::stream::record::{
    Amount, EndpointReport, IntervalSample, RecvStrategy, SendStrategy, SocketOptions,
    ZerocopyStats,
};
use crate::testbed::{
    capture::{CaptureReport, CaptureSpec},
    emulator::{EmulatorReport, EmulatorSpec},
};
use serde::{Deserialize, Serialize};
use std::net::{IpAddr, SocketAddr};

/// Bytes of a run token.
pub const TOKEN_LEN: usize = 16;
/// A run's token: random, made by the controller for one run through agents.
pub type Token = [u8; TOKEN_LEN];

/// How a listener of a run through an agent guards its data port
/// ([`crate::endpoint::guard`]).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DataGuard {
    /// The only address served.
    pub peer: IpAddr,
    /// The first bytes of every data connection.
    pub token: Token,
    /// The ports (inclusive) the listener may take; the agent sets them
    /// from its `--data-ports`.
    #[serde(default)]
    pub ports: Option<(u16, u16)>,
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
    /// Through an agent: who may connect, with which token.
    #[serde(default)]
    pub guard: Option<DataGuard>,
    /// Through an agent: the most bytes the receiver takes.
    #[serde(default)]
    pub limit_bytes: Option<u64>,
    /// `--udp`: receive test datagrams on a UDP socket instead.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub udp: bool,
    /// Both ends read the same CLOCK_MONOTONIC (one host), so one-way
    /// latency can be measured.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub udp_clock_shared: bool,
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
    /// Through an agent: the run token, sent first on the connection.
    #[serde(default)]
    pub token: Option<Token>,
    /// Sample TCP_INFO every this many seconds and report each interval
    /// as it ends (`--interval`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub interval_s: Option<f64>,
    /// `--udp`: paced datagrams instead of a TCP stream.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub udp: Option<crate::experiments::stream::record::UdpPace>,
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
        /// Through an agent: who may call, with which token.
        #[serde(default)]
        guard: Option<DataGuard>,
    },
    /// Run the client side of one RPC cell; answered by `RpcClientDone`.
    RpcClient(crate::endpoint::rpc::RpcClientSpec),
    /// Serve a login-load or terminal-output cell's server until `Stop`;
    /// answered by `HostServing`.
    HostServe(crate::endpoint::login::host::HostServeSpec),
    /// Open the serving host's measured window; answered by `WindowOpened`.
    WindowOpen,
    /// Close it; answered by `HostWindow`.
    WindowClose,
    /// Type a login load against a server; answered by `Window` at each
    /// edge of the measured window, then `Typed`.
    Type(crate::endpoint::login::clients::TypeSpec),
    /// Read one file's output through a server as a terminal; answered by
    /// `Window` at each edge, then `TerminalDone`.
    Terminal(crate::endpoint::login::clients::LoginTarget),
    /// Go on after a `Window` edge that awaits it.
    Proceed,
    /// Time the checksum and copy variants at one size; answered by `CksumDone`.
    Cksum(crate::experiments::cksum::record::CksumSpec),
    /// End the emulator, capture, RPC or login server; answered by
    /// `EmulatorDone`, `CaptureDone`, `RpcServerDone` or `HostDone`.
    Stop,
    /// Leave: the controller is done with this endpoint.
    Exit,
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
    Ready {
        pid: u32,
        version: String,
    },
    Listening {
        addr: SocketAddr,
    },
    Connected {
        local: SocketAddr,
    },
    Progress {
        bytes: u64,
    },
    /// A sender's interval just ended (`--interval`), as it happens.
    Interval(IntervalSample),
    Done(Box<EndpointReport>),
    Emulating,
    EmulatorDone(Box<EmulatorReport>),
    Capturing,
    CaptureDone(Box<CaptureReport>),
    RpcServing {
        port: u16,
    },
    HostServing(Box<crate::endpoint::login::host::HostServing>),
    WindowOpened,
    HostWindow(Box<crate::measure::window::HostWindow>),
    HostDone(Box<crate::endpoint::login::host::HostReport>),
    /// The typing end's measured window opens or closes; when `awaits`,
    /// it waits for `Proceed`.
    Window {
        open: bool,
        awaits: bool,
    },
    Typed(Box<crate::endpoint::login::typist::TypistReport>),
    TerminalDone(Box<crate::endpoint::login::clients::TerminalReport>),
    RpcServerDone(Box<crate::endpoint::rpc::ServerReport>),
    RpcClientDone(Box<crate::endpoint::rpc::RpcClientReport>),
    CksumDone(Box<crate::experiments::cksum::record::CksumResult>),
    Failed {
        message: String,
    },
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::measure::tcpinfo::TcpInfo;
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
                guard: None,
                limit_bytes: None,
                udp: true,
                udp_clock_shared: true,
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
                token: Some([1; TOKEN_LEN]),
                interval_s: Some(0.5),
                udp: Some(crate::experiments::stream::record::UdpPace {
                    rate_bps: 10_000_000,
                    length: 1460,
                }),
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
            Reply::Interval(IntervalSample {
                start_s: 0.5,
                end_s: 1.0,
                bytes: 1 << 20,
                mbit_s: 16.8,
                retransmits: 1,
                cwnd: 10,
                rtt_us: 50,
                delivery_rate_mbit_s: Some(20.0),
            }),
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
