//! `--quic`: the stream over QUIC (RFC 9000), one connection and one
//! unidirectional stream a sender, by quinn on a current-thread tokio
//! runtime (the data path is one thread, as TCP's is), its packet keys and
//! socket counted by [`crate::endpoint::quic`].
//!
//! The receiver binds its UDP port at set-up and accepts when told to go;
//! through an agent it answers only the peer the controller named, and
//! the stream's first 16 bytes must be the run's token. The sender's first
//! byte of data follows a completed handshake, so it sends nothing to an
//! address that did not answer (QUIC's own address validation; RFC 9000
//! §8). Records go to quinn as slices of one shared pattern buffer, not
//! copied (`write_chunk`), as quinn's own perf client sends. The receiver verifies every byte against the pattern and closes the
//! connection once the stream's end has come; the sender's time runs until
//! that close, as TCP's runs until the receiver's.

use super::schedule::Schedule;
use super::socket::{Before, StreamError, io_err};
use super::spec::{ReceiveSpec, SendSpec};
use super::types::{EndpointReport, QuicStats};
use crate::endpoint::guard;
use crate::endpoint::pattern::Pattern;
use crate::endpoint::protocol::TOKEN_LEN;
use crate::endpoint::quic::{Counters, CountingRuntime, QuicSpec, client, server};
use std::net::{SocketAddr, UdpSocket};
use std::sync::Arc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::{Duration, Instant};

/// The socket buffers asked for (the kernel may grant less).
const SOCKET_BUFFER: usize = 4 << 20;

fn runtime() -> Result<tokio::runtime::Runtime, StreamError> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(io_err("starting the QUIC runtime"))
}

fn quic_err(what: &str) -> impl FnOnce(String) -> StreamError + '_ {
    move |why| StreamError::Quic(format!("{what}: {why}"))
}

fn udp_socket(addr: SocketAddr) -> std::io::Result<UdpSocket> {
    let socket = socket2::Socket::new(
        socket2::Domain::for_address(addr),
        socket2::Type::DGRAM,
        Some(socket2::Protocol::UDP),
    )?;
    let _ = socket.set_recv_buffer_size(SOCKET_BUFFER);
    let _ = socket.set_send_buffer_size(SOCKET_BUFFER);
    socket.bind(&addr.into())?;
    Ok(socket.into())
}

/// A QUIC receiver bound, not yet started.
pub struct QuicReceiver {
    socket: UdpSocket,
    spec: ReceiveSpec,
    quic: QuicSpec,
}

impl QuicReceiver {
    pub fn bind(spec: ReceiveSpec, quic: QuicSpec) -> Result<QuicReceiver, StreamError> {
        let socket = guard::bind_first(spec.bind, spec.guard.as_ref(), udp_socket)
            .map_err(io_err("binding the QUIC receiver"))?;
        Ok(QuicReceiver { socket, spec, quic })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Accepts the sender's connection and stream, and reads it to its end.
    pub fn run(self) -> Result<EndpointReport, StreamError> {
        let rt = runtime()?;
        let counters = Arc::new(Counters::default());
        let bound = self.spec.options.stall_bound().duration();
        let config = server(&self.quic.tls, self.quic.gso, bound, &counters)
            .map_err(|e| StreamError::Quic(e.to_string()))?;
        let alone = crate::checksum::aead::single_core_rate(self.quic.tls.cipher, 1200, 5);
        let before = Before::now(self.spec.interface.as_deref());
        let spec = &self.spec;
        let (bytes, first, handshake_s, stats) = rt.block_on(async {
            let endpoint = quinn::Endpoint::new(
                quinn::EndpointConfig::default(),
                Some(config),
                self.socket,
                CountingRuntime::new(&counters, self.quic.gso),
            )
            .map_err(io_err("starting the QUIC endpoint"))?;
            let got = receive(&endpoint, spec, bound).await;
            endpoint.wait_idle().await;
            got
        })?;
        let wall_s = first.map_or(0.0, |t| t.elapsed().as_secs_f64());
        let over = before.end();
        let quic = quic_stats(&self.quic, &counters, handshake_s, stats, alone, false);
        Ok(EndpointReport {
            verified: spec.verify,
            quic: Some(quic.clone()),
            ..over.report(
                "receiver",
                (bytes, quic.udp_sends + quic.udp_receives, wall_s),
            )
        })
    }
}

/// What a receiving connection returns: bytes, the first byte's time,
/// the handshake, quinn's statistics.
type Received = (u64, Option<Instant>, f64, quinn::ConnectionStats);

async fn receive(
    endpoint: &quinn::Endpoint,
    spec: &ReceiveSpec,
    bound: Duration,
) -> Result<Received, StreamError> {
    let stalled = |doing: &str| {
        StreamError::Quic(format!(
            "no progress for {} s while {doing} (--stall-timeout)",
            bound.as_secs_f64()
        ))
    };
    let conn = loop {
        let incoming = tokio::time::timeout(bound, endpoint.accept())
            .await
            .map_err(|_| stalled("waiting for the sender to connect"))?
            .ok_or_else(|| StreamError::Quic("the endpoint closed".into()))?;
        if !guard::admits(spec.guard.as_ref(), incoming.remote_address().ip()) {
            incoming.refuse();
            continue;
        }
        let started = Instant::now();
        let conn = incoming
            .await
            .map_err(|e| quic_err("the QUIC handshake")(e.to_string()))?;
        break (conn, started.elapsed().as_secs_f64());
    };
    let (conn, handshake_s) = conn;
    let mut stream = tokio::time::timeout(bound, conn.accept_uni())
        .await
        .map_err(|_| stalled("waiting for the sender's stream"))?
        .map_err(|e| quic_err("accepting the stream")(e.to_string()))?;
    if let Some(guard) = &spec.guard {
        let mut token = [0u8; TOKEN_LEN];
        stream
            .read_exact(&mut token)
            .await
            .map_err(|e| quic_err("reading the run token")(e.to_string()))?;
        if token != guard.token {
            conn.close(1u32.into(), b"wrong token");
            return Err(StreamError::Quic(
                "the sender's stream did not start with the run's token".into(),
            ));
        }
    }
    let pattern = spec.verify.then(|| Pattern::new(1 << 20));
    let limit = spec.limit_bytes.unwrap_or(u64::MAX);
    let (mut total, mut first) = (0u64, None);
    while let Some(chunk) = stream
        .read_chunk(1 << 20, true)
        .await
        .map_err(|e| quic_err("reading the stream")(e.to_string()))?
    {
        first.get_or_insert_with(Instant::now);
        if let Some(pattern) = &pattern {
            pattern
                .verify(total, &chunk.bytes)
                .map_err(StreamError::Corrupt)?;
        }
        total += chunk.bytes.len() as u64;
        if total > limit {
            conn.close(2u32.into(), b"over the limit");
            return Err(StreamError::Limit(limit));
        }
    }
    conn.close(0u32.into(), b"done");
    Ok((total, first, handshake_s, conn.stats()))
}

/// A QUIC sender with its socket open, not yet started.
pub struct QuicSender {
    socket: UdpSocket,
    spec: SendSpec,
    quic: QuicSpec,
}

impl QuicSender {
    pub fn connect(spec: SendSpec, quic: QuicSpec) -> Result<QuicSender, StreamError> {
        let any: SocketAddr = match spec.connect {
            SocketAddr::V4(_) => (std::net::Ipv4Addr::UNSPECIFIED, 0).into(),
            SocketAddr::V6(_) => (std::net::Ipv6Addr::UNSPECIFIED, 0).into(),
        };
        let socket = udp_socket(any).map_err(io_err("opening the QUIC socket"))?;
        Ok(QuicSender { socket, spec, quic })
    }

    pub fn local_addr(&self) -> std::io::Result<SocketAddr> {
        self.socket.local_addr()
    }

    /// Connects, sends the whole amount on one stream, and waits for the
    /// receiver to close.
    pub fn run(self) -> Result<EndpointReport, StreamError> {
        let rt = runtime()?;
        let counters = Arc::new(Counters::default());
        let bound = self.spec.options.stall_bound().duration();
        let config = client(&self.quic.tls, self.quic.gso, bound, &counters)
            .map_err(|e| StreamError::Quic(e.to_string()))?;
        let alone = crate::checksum::aead::single_core_rate(self.quic.tls.cipher, 1200, 5);
        let before = Before::now(self.spec.interface.as_deref());
        let spec = &self.spec;
        let (bytes, start, handshake_s, stats) = rt.block_on(async {
            let mut endpoint = quinn::Endpoint::new(
                quinn::EndpointConfig::default(),
                None,
                self.socket,
                CountingRuntime::new(&counters, self.quic.gso),
            )
            .map_err(io_err("starting the QUIC endpoint"))?;
            endpoint.set_default_client_config(config);
            let sent = send(&endpoint, spec).await;
            endpoint.wait_idle().await;
            sent
        })?;
        let wall_s = start.elapsed().as_secs_f64();
        let over = before.end();
        let quic = quic_stats(&self.quic, &counters, handshake_s, stats, alone, true);
        Ok(EndpointReport {
            quic: Some(quic.clone()),
            ..over.report(
                "sender",
                (bytes, quic.udp_sends + quic.udp_receives, wall_s),
            )
        })
    }
}

async fn send(
    endpoint: &quinn::Endpoint,
    spec: &SendSpec,
) -> Result<(u64, Instant, f64, quinn::ConnectionStats), StreamError> {
    let name = spec.connect.ip().to_string();
    let started = Instant::now();
    let conn = endpoint
        .connect(spec.connect, &name)
        .map_err(|e| quic_err("connecting")(e.to_string()))?
        .await
        .map_err(|e| quic_err("the QUIC handshake")(e.to_string()))?;
    let handshake_s = started.elapsed().as_secs_f64();
    let mut stream = conn
        .open_uni()
        .await
        .map_err(|e| quic_err("opening the stream")(e.to_string()))?;
    if let Some(token) = &spec.token {
        stream
            .write_all(token)
            .await
            .map_err(|e| quic_err("sending the run token")(e.to_string()))?;
    }
    // The pattern as one shared buffer: each record is handed to quinn
    // as a slice of it (`write_chunk`), not copied into quinn's own.
    let period = crate::endpoint::pattern::PERIOD;
    let backing = bytes::Bytes::copy_from_slice(
        Pattern::new(spec.record + period).slice(0, spec.record + period),
    );
    let mut schedule = Schedule::new(spec.amount, spec.record);
    let start = Instant::now();
    let mut bytes = 0u64;
    while let Some((offset, len)) = schedule.next() {
        let from = (offset % period as u64) as usize;
        stream
            .write_chunk(backing.slice(from..from + len))
            .await
            .map_err(|e| quic_err("sending")(e.to_string()))?;
        bytes += len as u64;
    }
    stream
        .finish()
        .map_err(|e| quic_err("finishing the stream")(e.to_string()))?;
    // The receiver closes once it has read the stream's end.
    let closed = conn.closed().await;
    match closed {
        quinn::ConnectionError::ApplicationClosed(close) if close.error_code == 0u32.into() => {}
        other => return Err(StreamError::Quic(format!("the receiver's close: {other}"))),
    }
    Ok((bytes, start, handshake_s, conn.stats()))
}

/// An end's QUIC account from its counters and quinn's statistics.
fn quic_stats(
    quic: &QuicSpec,
    counters: &Counters,
    handshake_s: f64,
    stats: quinn::ConnectionStats,
    alone: crate::checksum::aead::CipherRate,
    sends: bool,
) -> QuicStats {
    QuicStats {
        suite: crate::endpoint::tls::suite(quic.tls.cipher)
            .suite()
            .as_str()
            .unwrap_or("unknown")
            .to_string(),
        library: crate::endpoint::quic::LIBRARY.into(),
        handshake_s,
        gso: quic.gso,
        max_gso_segments: counters.max_gso_segments.load(Relaxed),
        sealed_packets: counters.sealed_packets.load(Relaxed),
        opened_packets: counters.opened_packets.load(Relaxed),
        seal_s: counters.seal_s(),
        open_s: counters.open_s(),
        sampled_every: crate::endpoint::quic::SAMPLE_EVERY,
        udp_sends: counters.sends.load(Relaxed),
        datagrams_sent: counters.sent_datagrams.load(Relaxed),
        udp_receives: counters.receives.load(Relaxed),
        datagrams_received: counters.received_datagrams.load(Relaxed),
        lost_packets: stats.path.lost_packets,
        congestion_events: stats.path.congestion_events,
        rtt_us: stats.path.rtt.as_secs_f64() * 1e6,
        cwnd: stats.path.cwnd,
        mtu: stats.path.current_mtu,
        cipher_alone: Some(alone),
        record_layer: if sends { "sealing" } else { "opening" }.into(),
    }
}
