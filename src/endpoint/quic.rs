//! QUIC for the data paths (#65): quinn's configurations over the run's
//! certificate ([`crate::endpoint::tls`]), with its packet protection and
//! its UDP socket wrapped so that a data path can say where its CPU went.
//!
//! QUIC (RFC 9000) protects every packet with the AEAD its TLS 1.3
//! handshake chose (RFC 9001 §5.3), in user space, and sends datagrams
//! itself, one system call a datagram or, where the kernel has UDP GSO, one
//! a batch of equal segments; a receiver with UDP GRO takes a batch a call.
//! Two wrappers count that work without changing it:
//! - [`TimedPacketKey`] wraps each packet key quinn derives and times one
//!   packet in [`SAMPLE_EVERY`] (both clock reads cost about as much as
//!   sealing a small packet, so timing every one would double what it
//!   measures), counting every packet and byte; the time is scaled up;
//! - [`CountingRuntime`] wraps quinn's tokio runtime and its sockets,
//!   counting each send (a `sendmsg`, with its GSO segments) and each
//!   receive that returned datagrams (a `recvmsg`/`recvmmsg`, with its GRO
//!   segments); with GSO off it also turns GRO off, so the batches of both
//!   directions go together.
//!
//! The initial packets are always protected with AES-128-GCM (RFC 9001
//! §5.2); the suite the handshake negotiates, the run's cipher alone,
//! protects the rest.

use crate::checksum::aead::Cipher;
use crate::endpoint::tls::{TlsError, TlsSpec};
use quinn_proto::crypto::{self, HeaderKey, KeyPair, Keys, PacketKey};
use std::fmt;
use std::io::{self, IoSliceMut};
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering::Relaxed};
use std::task::{Context, Poll};
use std::time::Instant;

/// The ALPN both ends speak: netlab's stream over QUIC.
pub const ALPN: &[u8] = b"netlab-stream";

/// One packet in this many is timed.
pub const SAMPLE_EVERY: u64 = 8;

/// The library, as reports name it (a test checks it against Cargo.toml).
pub const LIBRARY: &str = "quinn 0.11 on rustls 0.23, ring 0.17";

/// What the wrappers counted, shared by every key and socket of an end.
#[derive(Debug, Default)]
pub struct Counters {
    pub sealed_packets: AtomicU64,
    pub sealed_bytes: AtomicU64,
    pub sealed_sampled: AtomicU64,
    pub sealed_sampled_ns: AtomicU64,
    pub opened_packets: AtomicU64,
    pub opened_bytes: AtomicU64,
    pub opened_sampled: AtomicU64,
    pub opened_sampled_ns: AtomicU64,
    /// `try_send` calls that reached the kernel, and the datagrams in them.
    pub sends: AtomicU64,
    pub sent_datagrams: AtomicU64,
    /// Receive calls that returned datagrams, and the datagrams.
    pub receives: AtomicU64,
    pub received_datagrams: AtomicU64,
    /// The largest GSO batch the socket allows (1: none).
    pub max_gso_segments: AtomicU64,
}

impl Counters {
    /// Time sealing, s: the sampled packets' time scaled to all of them.
    pub fn seal_s(&self) -> f64 {
        scaled(
            &self.sealed_sampled_ns,
            &self.sealed_sampled,
            &self.sealed_packets,
        )
    }

    pub fn open_s(&self) -> f64 {
        scaled(
            &self.opened_sampled_ns,
            &self.opened_sampled,
            &self.opened_packets,
        )
    }
}

fn scaled(ns: &AtomicU64, sampled: &AtomicU64, all: &AtomicU64) -> f64 {
    let sampled = sampled.load(Relaxed);
    if sampled == 0 {
        return 0.0;
    }
    ns.load(Relaxed) as f64 * 1e-9 * all.load(Relaxed) as f64 / sampled as f64
}

/// A packet key that counts its packets and times one in [`SAMPLE_EVERY`].
pub struct TimedPacketKey {
    inner: Box<dyn PacketKey>,
    counters: Arc<Counters>,
}

impl PacketKey for TimedPacketKey {
    fn encrypt(&self, packet: u64, buf: &mut [u8], header_len: usize) {
        let n = self.counters.sealed_packets.fetch_add(1, Relaxed);
        self.counters
            .sealed_bytes
            .fetch_add((buf.len() - header_len) as u64, Relaxed);
        if n.is_multiple_of(SAMPLE_EVERY) {
            let start = Instant::now();
            self.inner.encrypt(packet, buf, header_len);
            let ns = start.elapsed().as_nanos() as u64;
            self.counters.sealed_sampled.fetch_add(1, Relaxed);
            self.counters.sealed_sampled_ns.fetch_add(ns, Relaxed);
        } else {
            self.inner.encrypt(packet, buf, header_len);
        }
    }

    fn decrypt(
        &self,
        packet: u64,
        header: &[u8],
        payload: &mut bytes::BytesMut,
    ) -> Result<(), crypto::CryptoError> {
        let n = self.counters.opened_packets.fetch_add(1, Relaxed);
        self.counters
            .opened_bytes
            .fetch_add(payload.len() as u64, Relaxed);
        if n.is_multiple_of(SAMPLE_EVERY) {
            let start = Instant::now();
            let result = self.inner.decrypt(packet, header, payload);
            let ns = start.elapsed().as_nanos() as u64;
            self.counters.opened_sampled.fetch_add(1, Relaxed);
            self.counters.opened_sampled_ns.fetch_add(ns, Relaxed);
            result
        } else {
            self.inner.decrypt(packet, header, payload)
        }
    }

    fn tag_len(&self) -> usize {
        self.inner.tag_len()
    }

    fn confidentiality_limit(&self) -> u64 {
        self.inner.confidentiality_limit()
    }

    fn integrity_limit(&self) -> u64 {
        self.inner.integrity_limit()
    }
}

fn timed(key: Box<dyn PacketKey>, counters: &Arc<Counters>) -> Box<dyn PacketKey> {
    Box::new(TimedPacketKey {
        inner: key,
        counters: counters.clone(),
    })
}

fn timed_pair(
    pair: KeyPair<Box<dyn PacketKey>>,
    counters: &Arc<Counters>,
) -> KeyPair<Box<dyn PacketKey>> {
    KeyPair {
        local: timed(pair.local, counters),
        remote: timed(pair.remote, counters),
    }
}

fn timed_keys(keys: Keys, counters: &Arc<Counters>) -> Keys {
    Keys {
        header: keys.header,
        packet: timed_pair(keys.packet, counters),
    }
}

/// A TLS session whose packet keys are all [`TimedPacketKey`]s.
struct TimedSession {
    inner: Box<dyn crypto::Session>,
    counters: Arc<Counters>,
}

impl crypto::Session for TimedSession {
    fn initial_keys(&self, dst_cid: &quinn_proto::ConnectionId, side: quinn_proto::Side) -> Keys {
        timed_keys(self.inner.initial_keys(dst_cid, side), &self.counters)
    }

    fn handshake_data(&self) -> Option<Box<dyn std::any::Any>> {
        self.inner.handshake_data()
    }

    fn peer_identity(&self) -> Option<Box<dyn std::any::Any>> {
        self.inner.peer_identity()
    }

    fn early_crypto(&self) -> Option<(Box<dyn HeaderKey>, Box<dyn PacketKey>)> {
        self.inner
            .early_crypto()
            .map(|(header, packet)| (header, timed(packet, &self.counters)))
    }

    fn early_data_accepted(&self) -> Option<bool> {
        self.inner.early_data_accepted()
    }

    fn is_handshaking(&self) -> bool {
        self.inner.is_handshaking()
    }

    fn read_handshake(&mut self, buf: &[u8]) -> Result<bool, quinn_proto::TransportError> {
        self.inner.read_handshake(buf)
    }

    fn transport_parameters(
        &self,
    ) -> Result<
        Option<quinn_proto::transport_parameters::TransportParameters>,
        quinn_proto::TransportError,
    > {
        self.inner.transport_parameters()
    }

    fn write_handshake(&mut self, buf: &mut Vec<u8>) -> Option<Keys> {
        self.inner
            .write_handshake(buf)
            .map(|keys| timed_keys(keys, &self.counters))
    }

    fn next_1rtt_keys(&mut self) -> Option<KeyPair<Box<dyn PacketKey>>> {
        self.inner
            .next_1rtt_keys()
            .map(|pair| timed_pair(pair, &self.counters))
    }

    fn is_valid_retry(
        &self,
        orig_dst_cid: &quinn_proto::ConnectionId,
        header: &[u8],
        payload: &[u8],
    ) -> bool {
        self.inner.is_valid_retry(orig_dst_cid, header, payload)
    }

    fn export_keying_material(
        &self,
        output: &mut [u8],
        label: &[u8],
        context: &[u8],
    ) -> Result<(), crypto::ExportKeyingMaterialError> {
        self.inner.export_keying_material(output, label, context)
    }
}

/// The client's crypto: rustls' QUIC client, its sessions timed.
struct TimedClient {
    inner: Arc<quinn::crypto::rustls::QuicClientConfig>,
    counters: Arc<Counters>,
}

impl crypto::ClientConfig for TimedClient {
    fn start_session(
        self: Arc<Self>,
        version: u32,
        server_name: &str,
        params: &quinn_proto::transport_parameters::TransportParameters,
    ) -> Result<Box<dyn crypto::Session>, quinn_proto::ConnectError> {
        let inner = self
            .inner
            .clone()
            .start_session(version, server_name, params)?;
        Ok(Box::new(TimedSession {
            inner,
            counters: self.counters.clone(),
        }))
    }
}

/// The server's crypto: rustls' QUIC server, its sessions timed.
struct TimedServer {
    inner: Arc<quinn::crypto::rustls::QuicServerConfig>,
    counters: Arc<Counters>,
}

impl crypto::ServerConfig for TimedServer {
    fn initial_keys(
        &self,
        version: u32,
        dst_cid: &quinn_proto::ConnectionId,
    ) -> Result<Keys, crypto::UnsupportedVersion> {
        self.inner
            .initial_keys(version, dst_cid)
            .map(|keys| timed_keys(keys, &self.counters))
    }

    fn retry_tag(
        &self,
        version: u32,
        orig_dst_cid: &quinn_proto::ConnectionId,
        packet: &[u8],
    ) -> [u8; 16] {
        self.inner.retry_tag(version, orig_dst_cid, packet)
    }

    fn start_session(
        self: Arc<Self>,
        version: u32,
        params: &quinn_proto::transport_parameters::TransportParameters,
    ) -> Box<dyn crypto::Session> {
        Box::new(TimedSession {
            inner: self.inner.clone().start_session(version, params),
            counters: self.counters.clone(),
        })
    }
}

/// AES-128-GCM's QUIC suite, which protects the initial packets.
fn initial_suite() -> rustls::quic::Suite {
    rustls::crypto::ring::cipher_suite::TLS13_AES_128_GCM_SHA256
        .tls13()
        .and_then(|s| s.quic_suite())
        .expect("ring's AES-128-GCM suite has a QUIC suite")
}

/// How a QUIC end is set up: its cipher's TLS and whether it batches
/// datagrams (GSO on sending, GRO on receiving).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct QuicChoice {
    pub cipher: Cipher,
    /// Batch datagrams where the kernel can (UDP GSO and GRO).
    pub gso: bool,
}

impl QuicChoice {
    /// `QUIC, aes-128-gcm, GSO on`.
    pub fn describe(&self) -> String {
        format!(
            "QUIC, {}, GSO/GRO {}",
            self.cipher,
            if self.gso { "on" } else { "off" }
        )
    }
}

/// What each end is told of QUIC at set-up.
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct QuicSpec {
    pub tls: TlsSpec,
    pub gso: bool,
}

impl QuicSpec {
    pub fn choice(&self) -> QuicChoice {
        QuicChoice {
            cipher: self.tls.cipher,
            gso: self.gso,
        }
    }
}

/// The stream's flow-control window: quinn's default (1.25 MB, 100 Mbit/s
/// over 100 ms) would bound a long fast path; 8 MB carries 640 Mbit/s
/// over 100 ms. The connection's window and the send window stay quinn's.
pub const STREAM_WINDOW: u32 = 8 << 20;

/// The transport both ends use: [`STREAM_WINDOW`], an idle timeout of
/// the run's progress bound, GSO as asked.
fn transport(gso: bool, idle: std::time::Duration) -> Arc<quinn::TransportConfig> {
    let mut transport = quinn::TransportConfig::default();
    transport
        .enable_segmentation_offload(gso)
        .stream_receive_window(quinn::VarInt::from_u32(STREAM_WINDOW))
        .max_idle_timeout(quinn::IdleTimeout::try_from(idle).ok());
    Arc::new(transport)
}

/// The sender's configuration: a client of the run's certificate alone,
/// its packet keys timed into `counters`.
pub fn client(
    tls: &TlsSpec,
    gso: bool,
    idle: std::time::Duration,
    counters: &Arc<Counters>,
) -> Result<quinn::ClientConfig, TlsError> {
    let mut config = Arc::unwrap_or_clone(tls.quic_client()?);
    config.alpn_protocols = vec![ALPN.to_vec()];
    let quic =
        quinn::crypto::rustls::QuicClientConfig::with_initial(Arc::new(config), initial_suite())
            .map_err(|e| TlsError::Certificate(format!("QUIC's initial suite: {e}")))?;
    let mut client = quinn::ClientConfig::new(Arc::new(TimedClient {
        inner: Arc::new(quic),
        counters: counters.clone(),
    }));
    client.transport_config(transport(gso, idle));
    Ok(client)
}

/// The receiver's configuration: the run's certificate, one connection.
pub fn server(
    tls: &TlsSpec,
    gso: bool,
    idle: std::time::Duration,
    counters: &Arc<Counters>,
) -> Result<quinn::ServerConfig, TlsError> {
    let mut config = Arc::unwrap_or_clone(tls.quic_server()?);
    config.alpn_protocols = vec![ALPN.to_vec()];
    let quic =
        quinn::crypto::rustls::QuicServerConfig::with_initial(Arc::new(config), initial_suite())
            .map_err(|e| TlsError::Certificate(format!("QUIC's initial suite: {e}")))?;
    let mut server = quinn::ServerConfig::with_crypto(Arc::new(TimedServer {
        inner: Arc::new(quic),
        counters: counters.clone(),
    }));
    server.transport_config(transport(gso, idle));
    Ok(server)
}

/// quinn's tokio runtime with its sockets counted, GRO off where asked.
#[derive(Debug)]
pub struct CountingRuntime {
    inner: quinn::TokioRuntime,
    counters: Arc<Counters>,
    gro: bool,
}

impl CountingRuntime {
    pub fn new(counters: &Arc<Counters>, gro: bool) -> Arc<CountingRuntime> {
        Arc::new(CountingRuntime {
            inner: quinn::TokioRuntime,
            counters: counters.clone(),
            gro,
        })
    }
}

impl quinn::Runtime for CountingRuntime {
    fn new_timer(&self, i: Instant) -> Pin<Box<dyn quinn::AsyncTimer>> {
        self.inner.new_timer(i)
    }

    fn spawn(&self, future: Pin<Box<dyn std::future::Future<Output = ()> + Send>>) {
        self.inner.spawn(future)
    }

    fn wrap_udp_socket(
        &self,
        t: std::net::UdpSocket,
    ) -> io::Result<Arc<dyn quinn::AsyncUdpSocket>> {
        use std::os::fd::AsRawFd;
        let fd = t.as_raw_fd();
        let inner = self.inner.wrap_udp_socket(t)?;
        if !self.gro {
            // quinn-udp turned UDP_GRO on; the batches go off together.
            let off: libc::c_int = 0;
            // SAFETY: one c_int option value of its own size.
            unsafe {
                libc::setsockopt(
                    fd,
                    libc::SOL_UDP,
                    libc::UDP_GRO,
                    (&off as *const libc::c_int).cast(),
                    std::mem::size_of::<libc::c_int>() as libc::socklen_t,
                );
            }
        }
        self.counters
            .max_gso_segments
            .store(inner.max_transmit_segments() as u64, Relaxed);
        Ok(Arc::new(CountingSocket {
            inner,
            counters: self.counters.clone(),
            gro: self.gro,
        }))
    }
}

/// A socket whose sends and receives are counted.
struct CountingSocket {
    inner: Arc<dyn quinn::AsyncUdpSocket>,
    counters: Arc<Counters>,
    gro: bool,
}

impl fmt::Debug for CountingSocket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CountingSocket").finish_non_exhaustive()
    }
}

impl quinn::AsyncUdpSocket for CountingSocket {
    fn create_io_poller(self: Arc<Self>) -> Pin<Box<dyn quinn::UdpPoller>> {
        self.inner.clone().create_io_poller()
    }

    fn try_send(&self, transmit: &quinn::udp::Transmit) -> io::Result<()> {
        let sent = self.inner.try_send(transmit);
        if sent.is_ok() {
            let datagrams = match transmit.segment_size {
                Some(size) if size > 0 => transmit.contents.len().div_ceil(size),
                _ => 1,
            };
            self.counters.sends.fetch_add(1, Relaxed);
            self.counters
                .sent_datagrams
                .fetch_add(datagrams as u64, Relaxed);
        }
        sent
    }

    fn poll_recv(
        &self,
        cx: &mut Context,
        bufs: &mut [IoSliceMut<'_>],
        meta: &mut [quinn::udp::RecvMeta],
    ) -> Poll<io::Result<usize>> {
        let polled = self.inner.poll_recv(cx, bufs, meta);
        if let Poll::Ready(Ok(messages)) = &polled {
            let datagrams: usize = meta[..*messages]
                .iter()
                .map(|m| m.len.div_ceil(m.stride.max(1)))
                .sum();
            self.counters.receives.fetch_add(1, Relaxed);
            self.counters
                .received_datagrams
                .fetch_add(datagrams as u64, Relaxed);
        }
        polled
    }

    fn local_addr(&self) -> io::Result<SocketAddr> {
        self.inner.local_addr()
    }

    fn max_transmit_segments(&self) -> usize {
        self.inner.max_transmit_segments()
    }

    fn max_receive_segments(&self) -> usize {
        if self.gro {
            self.inner.max_receive_segments()
        } else {
            1
        }
    }

    fn may_fragment(&self) -> bool {
        self.inner.may_fragment()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_library_named_is_the_one_built() {
        let version = crate::endpoint::tls::manifest_version;
        assert_eq!(
            LIBRARY,
            format!(
                "quinn {} on rustls {}, ring {}",
                version("quinn"),
                version("rustls"),
                version("ring")
            )
        );
    }

    #[test]
    fn sampled_time_is_scaled_to_every_packet() {
        let c = Counters::default();
        assert_eq!(c.seal_s(), 0.0);
        c.sealed_packets.store(800, Relaxed);
        c.sealed_sampled.store(100, Relaxed);
        c.sealed_sampled_ns.store(50_000, Relaxed);
        // 500 ns a sampled packet, 800 packets: 400 µs.
        assert!((c.seal_s() - 400e-6).abs() < 1e-12);
    }
}
