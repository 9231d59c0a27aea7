//! netlab's TLS ends (`endpoint::tls`, #65) against a real TLS peer: the
//! Debian `openssl s_server` and `s_client`, with the run's own
//! certificate, each cipher suite, TLS 1.3 only.

use netlab::checksum::aead::Cipher;
use netlab::endpoint::tls::{RunCertificate, openssl_suite};
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// A port free a moment ago on 127.0.0.1, for a peer that must be told one.
fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn certificate(dir: &std::path::Path) -> RunCertificate {
    let cert = RunCertificate::new(&["localhost".into(), "127.0.0.1".into()]).unwrap();
    std::fs::write(dir.join("cert.pem"), cert.cert_pem()).unwrap();
    std::fs::write(dir.join("key.pem"), cert.key_pem()).unwrap();
    cert
}

/// Kills the peer by its PID when the test ends, however it ends.
struct Peer(std::process::Child);

impl Drop for Peer {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn netlab_s_client_sends_to_openssl_s_server_with_each_suite() {
    let dir = tempfile::tempdir().unwrap();
    let cert = certificate(dir.path());
    for cipher in Cipher::ALL {
        let port = free_port();
        let mut server = Peer(
            Command::new("openssl")
                .args(["s_server", "-quiet", "-naccept", "1", "-tls1_3"])
                .args(["-ciphersuites", openssl_suite(cipher)])
                .args(["-accept", &format!("127.0.0.1:{port}")])
                .arg("-cert")
                .arg(dir.path().join("cert.pem"))
                .arg("-key")
                .arg(dir.path().join("key.pem"))
                .stdin(Stdio::piped())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("openssl runs"),
        );
        let started = Instant::now();
        let tcp = loop {
            match TcpStream::connect(("127.0.0.1", port)) {
                Ok(tcp) => break tcp,
                Err(_) if started.elapsed() < Duration::from_secs(10) => {
                    std::thread::sleep(Duration::from_millis(20))
                }
                Err(e) => panic!("openssl s_server never listened on {port}: {e}"),
            }
        };
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let conn = rustls::ClientConnection::new(
            cert.client(cipher).unwrap(),
            cert.server_name().unwrap(),
        )
        .unwrap();
        let mut tls = rustls::StreamOwned::new(conn, tcp);
        let line = format!("netlab over {cipher}\n");
        tls.write_all(line.as_bytes()).unwrap();
        tls.flush().unwrap();
        assert_eq!(
            tls.conn.negotiated_cipher_suite().unwrap().suite(),
            netlab::endpoint::tls::suite(cipher).suite(),
            "{cipher}"
        );
        tls.conn.send_close_notify();
        tls.flush().unwrap();
        drop(tls);
        // s_server prints what it received; it ends after its one
        // connection (-naccept 1).
        let mut out = String::new();
        server
            .0
            .stdout
            .take()
            .unwrap()
            .read_to_string(&mut out)
            .unwrap();
        assert!(
            out.contains(line.trim()),
            "{cipher}: s_server printed {out:?}"
        );
    }
}

/// `openssl s_client` to 127.0.0.1:`port`, TLS 1.3, trusting `ca` alone
/// and failing on a certificate it cannot verify.
fn s_client(port: u16, ca: &std::path::Path) -> Command {
    let mut client = Command::new("openssl");
    client
        .args(["s_client", "-brief", "-tls1_3", "-verify_return_error"])
        .args(["-connect", &format!("127.0.0.1:{port}")])
        .args(["-servername", "localhost"])
        .arg("-CAfile")
        .arg(ca);
    client
}

#[test]
fn openssl_s_client_sends_to_netlab_s_server_and_refuses_another_run_s_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let cert = certificate(dir.path());
    for cipher in [Cipher::Aes256Gcm, Cipher::Chacha20Poly1305] {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let config = cert.server(cipher).unwrap();
        let serving = std::thread::spawn(move || {
            let (tcp, _) = listener.accept().unwrap();
            tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            let mut tls =
                rustls::StreamOwned::new(rustls::ServerConnection::new(config).unwrap(), tcp);
            let mut got = Vec::new();
            let mut buf = [0u8; 256];
            // Until the line is in: s_client may close without a
            // close_notify once its input ends.
            while !got.ends_with(b"\n") {
                match tls.read(&mut buf) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => got.extend_from_slice(&buf[..n]),
                }
            }
            let suite = tls.conn.negotiated_cipher_suite().map(|s| s.suite());
            (String::from_utf8_lossy(&got).to_string(), suite)
        });
        let mut client = s_client(port, &dir.path().join("cert.pem"))
            .args(["-ciphersuites", openssl_suite(cipher)])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("openssl runs");
        let line = format!("openssl over {cipher}\n");
        client
            .stdin
            .take()
            .unwrap()
            .write_all(line.as_bytes())
            .unwrap();
        let (got, suite) = serving.join().unwrap();
        let out = client.wait_with_output().unwrap();
        assert_eq!(
            got,
            line,
            "{cipher}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert_eq!(suite, Some(netlab::endpoint::tls::suite(cipher).suite()));
    }

    // A client that trusts another run's certificate refuses this server.
    let other = tempfile::tempdir().unwrap();
    certificate(other.path());
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let config = cert.server(Cipher::Aes128Gcm).unwrap();
    let serving = std::thread::spawn(move || {
        let (tcp, _) = listener.accept().unwrap();
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut tls = rustls::StreamOwned::new(rustls::ServerConnection::new(config).unwrap(), tcp);
        let mut sink = Vec::new();
        tls.read_to_end(&mut sink).is_err()
    });
    let out = s_client(port, &other.path().join("cert.pem"))
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        !out.status.success(),
        "s_client trusted a certificate it was not given"
    );
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("verify"), "{stderr}");
    assert!(
        serving.join().unwrap(),
        "netlab's server saw the handshake fail"
    );
}
