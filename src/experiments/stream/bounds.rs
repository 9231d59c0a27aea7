//! The bounds of one stream, the same whoever asks for it: the command
//! line and a sweep's grid (through `StreamConfig::validate`) and a
//! controller's request to an agent (the roles' checks), so an agent never
//! runs what the command line would refuse.

use crate::endpoint::bulk::types::{Amount, RecvStrategy};
use crate::units::format_size;
use thiserror::Error;

/// Largest record netlab accepts: each side holds a pattern buffer this big.
pub const MAX_RECORD: u64 = 256 << 20;

/// The longest timed run accepted: a day (iperf3's bound too).
pub const MAX_DURATION_S: f64 = 86_400.0;

/// The most bytes a run may be asked to send: a day at 100 Gbit/s.
pub const MAX_BYTES: u64 = 1_080_000_000_000_000;

/// The largest receive buffer (`--rbuf`): as large as the largest record.
pub const MAX_RBUF: usize = MAX_RECORD as usize;

/// The most connections `-P` opens each way (each is two processes).
pub const MAX_PARALLEL: u32 = 128;

#[derive(Debug, Error, PartialEq)]
pub enum ConfigError {
    #[error("record size 0: give 1 byte or more")]
    RecordEmpty,
    #[error("record size {record} is larger than the total {total} to send")]
    RecordExceedsTotal { record: String, total: String },
    #[error("record size {0} exceeds the maximum of {max}", max = format_size(MAX_RECORD))]
    RecordTooLarge(String),
    #[error("duration {0} s is not a positive number of seconds")]
    Duration(f64),
    #[error(
        "--duration {0} s is longer than a day ({MAX_DURATION_S} s), the longest run netlab makes"
    )]
    DurationTooLong(f64),
    #[error(
        "--bytes {0} is more than a day at 100 Gbit/s (1.08 PB, {MAX_BYTES} bytes), the most a run sends"
    )]
    BytesTooMany(String),
    #[error("--rbuf {0} is larger than the largest receive buffer, {max}", max = format_size(MAX_RBUF as u64))]
    ReadBufferTooLarge(String),
    #[error("--rbuf 0: give 1 byte or more")]
    ReadBufferEmpty,
    #[error("-P {0}: give 1 to {MAX_PARALLEL} connections")]
    Parallel(u32),
    #[error("--interval {0}")]
    Interval(String),
    #[error("--confidence {0}")]
    Confidence(String),
    #[error("--udp: {0}")]
    Udp(String),
    #[error("--rcvlowat {0}")]
    Rcvlowat(String),
    #[error("{0}")]
    CpuBudget(String),
    #[error("--tls: {0}")]
    Tls(String),
    #[error("--quic: {0}")]
    Quic(String),
    #[error("--mptcp: {0}")]
    Mptcp(String),
}

/// `--mptcp`: the options the kernel's MPTCP sockets refuse (each tried
/// on Linux 6.18: EOPNOTSUPP), refused here by name before anything runs.
pub fn check_mptcp(
    options: &crate::endpoint::bulk::types::SocketOptions,
    send: crate::endpoint::bulk::types::SendStrategy,
    udp: bool,
) -> Result<(), ConfigError> {
    use crate::endpoint::bulk::types::SendStrategy;
    if !options.mptcp {
        return Ok(());
    }
    let refused = [
        (udp, "--udp: MPTCP is TCP's; --udp sends bare datagrams"),
        (
            send == SendStrategy::Zerocopy,
            "--strategy zerocopy: the kernel's MPTCP sockets refuse MSG_ZEROCOPY (EOPNOTSUPP); use write, writev, sendfile or splice",
        ),
        (
            options.pacing_bps.is_some(),
            "--rate: the kernel's MPTCP sockets refuse SO_MAX_PACING_RATE (EOPNOTSUPP); shape the link instead (--link-rate)",
        ),
    ];
    match refused.iter().find(|(given, _)| *given) {
        Some((_, why)) => Err(ConfigError::Mptcp((*why).to_string())),
        None => Ok(()),
    }
}

/// `--quic`: QUIC is its own transport, with its own TLS: the options of
/// TCP's sockets, TLS over TCP and bare datagrams are refused by name.
/// What a QUIC stream is asked beside QUIC itself.
pub struct Beside<'a> {
    pub udp: bool,
    pub tls: bool,
    pub send: crate::endpoint::bulk::types::SendStrategy,
    pub recv: RecvStrategy,
    pub options: &'a crate::endpoint::bulk::types::SocketOptions,
    pub interval: bool,
}

pub fn check_quic(config: Beside<'_>) -> Result<(), ConfigError> {
    use crate::endpoint::bulk::types::SendStrategy;
    let o = config.options;
    let tcp_only = [
        (
            config.udp,
            "--udp (QUIC runs over UDP itself; --udp sends bare datagrams)",
        ),
        (config.tls, "--tls (QUIC carries its own TLS 1.3)"),
        (
            config.send != SendStrategy::Write,
            "--strategy (quinn copies each write into its packets)",
        ),
        (!matches!(config.recv, RecvStrategy::Read { .. }), "--recv"),
        (
            o.congestion_control.is_some(),
            "--cc (quinn's congestion control is its own)",
        ),
        (
            o.mss.is_some(),
            "--mss (QUIC sizes its own packets by path MTU discovery)",
        ),
        (o.nodelay, "--nodelay"),
        (o.rcvlowat.is_some(), "--rcvlowat"),
        (o.pacing_bps.is_some(), "--rate (quinn paces itself)"),
        (
            o.sndbuf.is_some() || o.rcvbuf.is_some(),
            "--sndbuf/--rcvbuf",
        ),
        (config.interval, "--interval (it reads TCP_INFO)"),
    ];
    match tcp_only.iter().find(|(given, _)| *given) {
        Some((_, option)) => Err(ConfigError::Quic(format!(
            "{option} is a TCP option and does not apply"
        ))),
        None => Ok(()),
    }
}

/// `--tls`: a record size in bounds, over a TCP stream the record layer
/// can sit on (its own writes and reads: the copy-free strategies hand
/// the kernel plaintext, which only kTLS could seal).
pub fn check_tls(
    tls: Option<&crate::endpoint::tls::TlsChoice>,
    send: crate::endpoint::bulk::types::SendStrategy,
    recv: RecvStrategy,
) -> Result<(), ConfigError> {
    use crate::endpoint::bulk::types::SendStrategy;
    let Some(tls) = tls else {
        return Ok(());
    };
    tls.check().map_err(ConfigError::Tls)?;
    if send != SendStrategy::Write {
        return Err(ConfigError::Tls(format!(
            "--strategy {} hands the kernel plaintext, and records are sealed in user space (no kTLS offload is built): use --strategy write",
            send.name()
        )));
    }
    if !matches!(recv, RecvStrategy::Read { .. }) {
        return Err(ConfigError::Tls(format!(
            "--recv {} takes the stream without reading it, and records are opened in user space: use --recv read",
            recv.name()
        )));
    }
    Ok(())
}

/// What one sender sends, within netlab's bounds wherever the values come
/// from: the command line and a sweep's grid (through
/// [`StreamConfig::validate`]) or a controller's request to an agent (the
/// sender role's check), so an agent never runs what the command line
/// would refuse.
pub fn check_sender(
    record: u64,
    amount: Amount,
    interval_s: Option<f64>,
) -> Result<(), ConfigError> {
    if record == 0 {
        return Err(ConfigError::RecordEmpty);
    }
    if record > MAX_RECORD {
        return Err(ConfigError::RecordTooLarge(format_size(record)));
    }
    match amount {
        Amount::Bytes(total) if record > total => Err(ConfigError::RecordExceedsTotal {
            record: format_size(record),
            total: format_size(total),
        }),
        Amount::Seconds(s) if !(s.is_finite() && s > 0.0) => Err(ConfigError::Duration(s)),
        Amount::Seconds(s) if s > MAX_DURATION_S => Err(ConfigError::DurationTooLong(s)),
        Amount::Bytes(total) if total > MAX_BYTES => {
            Err(ConfigError::BytesTooMany(format_size(total)))
        }
        _ => check_interval(interval_s, amount),
    }
}

/// A receiver's read buffer, within netlab's bounds (see [`check_sender`]).
pub fn check_receiver(recv: RecvStrategy) -> Result<(), ConfigError> {
    match recv {
        RecvStrategy::Read { buffer: 0 } | RecvStrategy::Zerocopy { buffer: 0 } => {
            Err(ConfigError::ReadBufferEmpty)
        }
        RecvStrategy::Read { buffer } | RecvStrategy::Zerocopy { buffer } if buffer > MAX_RBUF => {
            Err(ConfigError::ReadBufferTooLarge(format_size(buffer as u64)))
        }
        _ => Ok(()),
    }
}

/// `--interval`: above 10 ms, and within a timed run's length.
pub fn check_interval(interval_s: Option<f64>, amount: Amount) -> Result<(), ConfigError> {
    let Some(every) = interval_s else {
        return Ok(());
    };
    if !(every.is_finite() && every >= 0.01) {
        return Err(ConfigError::Interval(format!(
            "{every} s: give 10ms or more"
        )));
    }
    if let Amount::Seconds(run) = amount
        && every > run
    {
        return Err(ConfigError::Interval(format!(
            "{every} s is longer than the run ({run} s): there would be one interval, the whole run"
        )));
    }
    Ok(())
}
