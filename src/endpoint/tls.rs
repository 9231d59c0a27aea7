//! TLS 1.3 for the data paths (#65): the run's own certificate and the
//! rustls configurations of both ends, one cipher suite each.
//!
//! A run makes its certificate when it starts ([`RunCertificate::new`]): a
//! self-signed ECDSA P-256 key and certificate for the names the run
//! connects to, held in memory and carried to the ends in their specs (over
//! the agents' Noise channel when an agent runs an end). It is never written
//! outside the run's own directory; a run that wants `openssl s_client` or
//! `s_server` beside it writes the PEM there itself.
//!
//! The client trusts that certificate alone, so a connection to anything
//! else fails its handshake. Each end offers TLS 1.3 only (RFC 8446) and
//! exactly the suite asked for, so the negotiated AEAD is the one whose
//! per-byte cost `netlab cksum` timed (RFC 8446 §B.4: AES-128-GCM and
//! AES-256-GCM with their SHA-2s, and ChaCha20-Poly1305).
//!
//! The crypto is rustls' ring provider: the same ring `netlab cksum` times.

use crate::checksum::aead::Cipher;
use rustls::crypto::ring as provider;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use rustls::{ClientConfig, ServerConfig, SupportedCipherSuite};
use serde::{Deserialize, Serialize};
use std::sync::Arc;
use thiserror::Error;

#[derive(Debug, Error)]
pub enum TlsError {
    #[error("making the run's certificate: {0}")]
    Certificate(String),
    #[error("the TLS configuration: {0}")]
    Config(#[from] rustls::Error),
    #[error("{0:?} is not a name or an address a certificate can hold")]
    Name(String),
}

/// What an end of a `--tls` stream is told: the run's certificate (the
/// receiver serves it, the sender trusts it alone), the one cipher both
/// offer, and the most plaintext a record holds.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TlsSpec {
    pub certificate: RunCertificate,
    pub cipher: Cipher,
    /// Plaintext bytes per record at most (None: TLS's largest, 16 KB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<usize>,
}

/// What a run asks of TLS, before its certificate exists (`--tls`,
/// `--cipher`, `--tls-record`): recorded with the run's parameters.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TlsChoice {
    pub cipher: Cipher,
    /// Plaintext bytes per record at most (None: 16 KB).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub record: Option<usize>,
}

impl TlsChoice {
    /// The ends' spec with the run's certificate.
    pub fn spec(&self, certificate: RunCertificate) -> TlsSpec {
        TlsSpec {
            certificate,
            cipher: self.cipher,
            record: self.record,
        }
    }

    /// A record size in bounds, or why not.
    pub fn check(&self) -> Result<(), String> {
        match self.record {
            Some(r) if !(MIN_RECORD..=MAX_RECORD).contains(&r) => Err(format!(
                "a TLS record of {r} bytes: give {MIN_RECORD} to {MAX_RECORD} bytes of plaintext (RFC 8446 §5.1)"
            )),
            _ => Ok(()),
        }
    }

    /// `TLS 1.3, aes-128-gcm, 16K records`.
    pub fn describe(&self) -> String {
        format!(
            "TLS 1.3, {}, {} records",
            self.cipher,
            crate::units::format_size(self.record.unwrap_or(MAX_RECORD) as u64)
        )
    }
}

/// The fewest and most plaintext bytes a record may be told to hold:
/// rustls' floor of 32 bytes a record, header included, and TLS's
/// ceiling of 2^14 (RFC 8446 §5.1).
pub const MIN_RECORD: usize = 32 - RECORD_HEADER;
pub const MAX_RECORD: usize = 1 << 14;

/// A TLS record's header (RFC 8446 §5.1), which rustls' fragment size
/// counts.
pub const RECORD_HEADER: usize = 5;

/// What TLS 1.3 adds to each record on the wire: the header, the inner
/// content type and the AEAD's 16-byte tag (RFC 8446 §5.2).
pub const RECORD_OVERHEAD: usize = RECORD_HEADER + 1 + 16;

impl TlsSpec {
    /// A record size in bounds, or why not.
    pub fn check(&self) -> Result<(), String> {
        self.choice().check()
    }

    /// What the run asked for, without the certificate.
    pub fn choice(&self) -> TlsChoice {
        TlsChoice {
            cipher: self.cipher,
            record: self.record,
        }
    }

    /// rustls' `max_fragment_size`: the record's plaintext and its header.
    fn fragment(&self) -> Option<usize> {
        self.record.map(|r| r + RECORD_HEADER)
    }

    /// The sender's configuration: the certificate's client side.
    pub fn client(&self) -> Result<Arc<ClientConfig>, TlsError> {
        let mut config = Arc::unwrap_or_clone(self.certificate.client(self.cipher)?);
        config.max_fragment_size = self.fragment();
        Ok(Arc::new(config))
    }

    /// QUIC's client: [`quic_suites`], no record size (QUIC frames its own).
    pub fn quic_client(&self) -> Result<Arc<ClientConfig>, TlsError> {
        self.certificate.client_with(quic_suites(self.cipher))
    }

    /// QUIC's server: [`quic_suites`], no early data.
    pub fn quic_server(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config =
            Arc::unwrap_or_clone(self.certificate.server_with(quic_suites(self.cipher))?);
        config.ignore_client_order = false;
        config.max_early_data_size = 0;
        Ok(Arc::new(config))
    }

    /// The receiver's configuration: no session tickets (the sender never
    /// reads after its handshake, so none would be read).
    pub fn server(&self) -> Result<Arc<ServerConfig>, TlsError> {
        let mut config = Arc::unwrap_or_clone(self.certificate.server(self.cipher)?);
        config.max_fragment_size = self.fragment();
        config.send_tls13_tickets = 0;
        Ok(Arc::new(config))
    }
}

/// Whether this kernel can take TLS records over (kTLS, the `tls` upper
/// layer protocol): asked of an unconnected socket, the kernel answers
/// ENOENT when it has no such module and ENOTCONN when it has one (it
/// attaches only to an established connection).
pub fn kernel_tls() -> KernelTls {
    use std::os::fd::AsRawFd;
    let Ok(socket) = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
    else {
        return KernelTls::Unknown("no TCP socket to ask with".into());
    };
    let name = b"tls";
    // SAFETY: the option value is a live byte string of its own length.
    let ret = unsafe {
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_TCP,
            libc::TCP_ULP,
            name.as_ptr().cast(),
            name.len() as libc::socklen_t,
        )
    };
    let err = std::io::Error::last_os_error();
    match (ret, err.raw_os_error()) {
        (0, _) | (_, Some(libc::ENOTCONN)) => KernelTls::Present,
        (_, Some(libc::ENOENT)) => KernelTls::Absent,
        _ => KernelTls::Unknown(err.to_string()),
    }
}

/// kTLS on this host, as [`kernel_tls`] found it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum KernelTls {
    /// The kernel has the `tls` ULP.
    Present,
    /// It has none (CONFIG_TLS off, or the module missing).
    Absent,
    /// The question failed, as said.
    Unknown(String),
}

impl Default for KernelTls {
    fn default() -> Self {
        KernelTls::Unknown("not asked".into())
    }
}

impl KernelTls {
    /// What a report says of it, for a stream whose records rustls made.
    pub fn describe(&self) -> String {
        match self {
            KernelTls::Present => "this kernel has kTLS, but netlab seals in user space (kernel offload of rustls' keys is not built yet)".into(),
            KernelTls::Absent => "this kernel has no kTLS (no `tls` upper-layer protocol: CONFIG_TLS off), so every record is sealed and opened in user space".into(),
            KernelTls::Unknown(why) => format!("whether this kernel has kTLS is unknown ({why})"),
        }
    }
}

/// A run's certificate and key, DER, as the specs carry them.
#[derive(Clone, PartialEq, Serialize, Deserialize)]
pub struct RunCertificate {
    /// The names it holds (DNS names or IP addresses).
    pub names: Vec<String>,
    pub cert_der: Vec<u8>,
    pub key_der: Vec<u8>,
}

impl std::fmt::Debug for RunCertificate {
    /// The key stays out of logs and error messages.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunCertificate")
            .field("names", &self.names)
            .field("cert_der", &format_args!("{} bytes", self.cert_der.len()))
            .finish_non_exhaustive()
    }
}

impl RunCertificate {
    /// A new key and a self-signed certificate for `names`.
    pub fn new(names: &[String]) -> Result<RunCertificate, TlsError> {
        let certified = rcgen::generate_simple_self_signed(names.to_vec())
            .map_err(|e| TlsError::Certificate(e.to_string()))?;
        Ok(RunCertificate {
            names: names.to_vec(),
            cert_der: certified.cert.der().to_vec(),
            key_der: certified.key_pair.serialize_der(),
        })
    }

    /// The certificate as PEM, for a peer such as `openssl s_client -CAfile`.
    pub fn cert_pem(&self) -> String {
        pem("CERTIFICATE", &self.cert_der)
    }

    /// The key as PEM (PKCS #8), for a peer such as `openssl s_server -key`.
    pub fn key_pem(&self) -> String {
        pem("PRIVATE KEY", &self.key_der)
    }

    /// The server's configuration: this certificate, TLS 1.3, `cipher` only.
    pub fn server(&self, cipher: Cipher) -> Result<Arc<ServerConfig>, TlsError> {
        self.server_with(one_suite(cipher))
    }

    fn server_with(
        &self,
        suites: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Arc<ServerConfig>, TlsError> {
        let key = PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(self.key_der.clone()));
        let config = ServerConfig::builder_with_provider(suites)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_no_client_auth()
            .with_single_cert(vec![CertificateDer::from(self.cert_der.clone())], key)?;
        Ok(Arc::new(config))
    }

    /// The client's configuration: it trusts this certificate alone.
    pub fn client(&self, cipher: Cipher) -> Result<Arc<ClientConfig>, TlsError> {
        self.client_with(one_suite(cipher))
    }

    fn client_with(
        &self,
        suites: Arc<rustls::crypto::CryptoProvider>,
    ) -> Result<Arc<ClientConfig>, TlsError> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(CertificateDer::from(self.cert_der.clone()))?;
        let config = ClientConfig::builder_with_provider(suites)
            .with_protocol_versions(&[&rustls::version::TLS13])?
            .with_root_certificates(roots)
            .with_no_client_auth();
        Ok(Arc::new(config))
    }

    /// The name a client checks the server's certificate against: the
    /// first of the run's names.
    pub fn server_name(&self) -> Result<ServerName<'static>, TlsError> {
        let name = self.names.first().cloned().unwrap_or_default();
        ServerName::try_from(name.clone()).map_err(|_| TlsError::Name(name))
    }
}

/// The TLS 1.3 suite that seals with `cipher`.
pub fn suite(cipher: Cipher) -> SupportedCipherSuite {
    match cipher {
        Cipher::Aes128Gcm => provider::cipher_suite::TLS13_AES_128_GCM_SHA256,
        Cipher::Aes256Gcm => provider::cipher_suite::TLS13_AES_256_GCM_SHA384,
        Cipher::Chacha20Poly1305 => provider::cipher_suite::TLS13_CHACHA20_POLY1305_SHA256,
    }
}

/// The suite's name as OpenSSL's `-ciphersuites` takes it.
pub fn openssl_suite(cipher: Cipher) -> &'static str {
    match cipher {
        Cipher::Aes128Gcm => "TLS_AES_128_GCM_SHA256",
        Cipher::Aes256Gcm => "TLS_AES_256_GCM_SHA384",
        Cipher::Chacha20Poly1305 => "TLS_CHACHA20_POLY1305_SHA256",
    }
}

/// The ring provider with `cipher`'s suite alone.
///
/// rustls 0.23.48 deprecates ring's provider because it has no
/// post-quantum key exchange. netlab's runs measure the data path's AEAD,
/// not the handshake, and their keys live for one run on a lab's own
/// hosts. aws-lc-rs, which has the hybrid groups, wants CMake to build
/// (see `checksum::aead`).
#[allow(deprecated)]
fn one_suite(cipher: Cipher) -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites: vec![suite(cipher)],
        ..provider::default_provider()
    })
}

/// QUIC's suites for `cipher`: it first, then AES-128-GCM (RFC 9001
/// §5.2: every QUIC connection's initial packets use it, and rustls wants
/// it offered). The client lists `cipher` first and the server follows
/// the client's order, so `cipher` is the one negotiated.
#[allow(deprecated)]
fn quic_suites(cipher: Cipher) -> Arc<rustls::crypto::CryptoProvider> {
    let mut cipher_suites = vec![suite(cipher)];
    if cipher != Cipher::Aes128Gcm {
        cipher_suites.push(suite(Cipher::Aes128Gcm));
    }
    Arc::new(rustls::crypto::CryptoProvider {
        cipher_suites,
        ..provider::default_provider()
    })
}

/// A dependency's major.minor as Cargo.toml asks for it, for the tests
/// that hold the libraries' names in reports to what is built.
#[cfg(test)]
pub(crate) fn manifest_version(name: &str) -> String {
    include_str!("../../Cargo.toml")
        .lines()
        .find(|l| l.starts_with(&format!("{name} =")))
        .and_then(|l| l.split('"').nth(1))
        .map(|v| v.split('.').take(2).collect::<Vec<_>>().join("."))
        .unwrap_or_default()
}

fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let body = base64::engine::general_purpose::STANDARD.encode(der);
    let mut out = format!("-----BEGIN {label}-----\n");
    for line in body.as_bytes().chunks(64) {
        out.push_str(std::str::from_utf8(line).expect("base64 is ASCII"));
        out.push('\n');
    }
    out.push_str(&format!("-----END {label}-----\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};

    fn names() -> Vec<String> {
        vec!["localhost".into(), "127.0.0.1".into()]
    }

    #[test]
    fn each_cipher_is_the_one_negotiated_and_a_megabyte_arrives_whole() {
        let cert = RunCertificate::new(&names()).unwrap();
        for cipher in Cipher::ALL {
            let listener = TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            let server = cert.server(cipher).unwrap();
            let serving = std::thread::spawn(move || {
                let (tcp, _) = listener.accept().unwrap();
                let conn = rustls::ServerConnection::new(server).unwrap();
                let mut tls = rustls::StreamOwned::new(conn, tcp);
                let mut got = Vec::new();
                tls.read_to_end(&mut got).unwrap();
                let suite = tls.conn.negotiated_cipher_suite().unwrap().suite();
                (got, suite)
            });
            let conn = rustls::ClientConnection::new(
                cert.client(cipher).unwrap(),
                cert.server_name().unwrap(),
            )
            .unwrap();
            let mut tls = rustls::StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
            let data: Vec<u8> = (0..1 << 20).map(|i: u32| (i * 7 % 253) as u8).collect();
            tls.write_all(&data).unwrap();
            tls.conn.send_close_notify();
            tls.flush().unwrap();
            let (got, negotiated) = serving.join().unwrap();
            assert_eq!(got, data, "{cipher}");
            assert_eq!(negotiated, suite(cipher).suite(), "{cipher}");
            assert_eq!(
                tls.conn.protocol_version(),
                Some(rustls::ProtocolVersion::TLSv1_3)
            );
        }
    }

    #[test]
    fn a_client_trusts_its_runs_certificate_alone() {
        let ours = RunCertificate::new(&names()).unwrap();
        let theirs = RunCertificate::new(&names()).unwrap();
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let server = theirs.server(Cipher::Aes128Gcm).unwrap();
        let serving = std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            let mut tls =
                rustls::StreamOwned::new(rustls::ServerConnection::new(server).unwrap(), tcp);
            let mut sink = Vec::new();
            tls.read_to_end(&mut sink).is_err()
        });
        let conn = rustls::ClientConnection::new(
            ours.client(Cipher::Aes128Gcm).unwrap(),
            ours.server_name().unwrap(),
        )
        .unwrap();
        let mut tls = rustls::StreamOwned::new(conn, TcpStream::connect(addr).unwrap());
        let err = tls
            .write_all(b"hello")
            .and_then(|()| tls.flush())
            .unwrap_err();
        assert!(err.to_string().contains("certificate"), "{err}");
        assert!(serving.join().unwrap(), "the server saw the handshake fail");
    }

    #[test]
    fn the_pem_round_trips_and_the_key_stays_out_of_debug() {
        let cert = RunCertificate::new(&names()).unwrap();
        let pem = cert.cert_pem();
        assert!(pem.starts_with("-----BEGIN CERTIFICATE-----\n"));
        use base64::Engine;
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
        assert!(pem.lines().all(|l| l.len() <= 64));
        assert_eq!(
            base64::engine::general_purpose::STANDARD
                .decode(body)
                .unwrap(),
            cert.cert_der
        );
        assert!(cert.key_pem().contains("BEGIN PRIVATE KEY"));
        let debug = format!("{cert:?}");
        assert!(
            !debug.contains("key_der") && debug.contains("localhost"),
            "{debug}"
        );
        assert!(
            RunCertificate {
                names: vec!["no such name!".into()],
                ..cert
            }
            .server_name()
            .is_err()
        );
    }
}
