//! What each end of a stream connection is told at set-up: the
//! receiver's [`ReceiveSpec`] and the sender's [`SendSpec`], carried by
//! the role's requests and read by the data paths (TCP and UDP).

use super::types::{Amount, RecvStrategy, SendStrategy, SocketOptions, UdpPace};
use crate::endpoint::protocol::{DataGuard, Token};
use crate::endpoint::tls::TlsSpec;
use serde::{Deserialize, Serialize};
use std::net::SocketAddr;

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
    /// `--tls`: serve TLS 1.3 with the run's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// `--quic`: receive over QUIC instead of TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::endpoint::quic::QuicSpec>,
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
    pub udp: Option<UdpPace>,
    /// `--tls`: TLS 1.3 to a server of the run's certificate.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsSpec>,
    /// `--quic`: send over QUIC instead of TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quic: Option<crate::endpoint::quic::QuicSpec>,
}
