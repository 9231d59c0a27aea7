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

/// `netlab stream --tls` on loopback and between namespaces: every byte
/// verified through TLS 1.3 with the asked suite, a plain TCP twin beside
/// each run, each side's record layer timed, the comparison in the
/// document, and no key in the records file.
#[test(alone)]
fn stream_tls_runs_beside_plain_tcp_on_loopback_and_netns() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    for (placement, cipher) in [("loopback", "chacha20-poly1305"), ("netns", "aes-256-gcm")] {
        let args = [
            "stream",
            "--tls",
            "--cipher",
            cipher,
            "--tls-record",
            "4K",
            "--bytes",
            "16M",
            "--placement",
            placement,
        ];
        let doc = crate::common::run_json(&args, &out);
        let records = doc["records"].as_array().unwrap();
        assert_eq!(records.len(), 2, "a TLS run and its plain twin");
        let tls: Vec<&serde_json::Value> = records
            .iter()
            .filter(|r| !r["params"]["tls"].is_null())
            .collect();
        assert_eq!(tls.len(), 1);
        let r = &tls[0]["result"];
        assert!(tls[0]["error"].is_null(), "{}", tls[0]);
        assert_eq!(r["receiver"]["bytes"], 16 << 20);
        assert_eq!(r["receiver"]["verified"], true);
        let suite = openssl_suite(cipher.parse().unwrap()).replace("TLS_", "TLS13_");
        for side in ["sender", "receiver"] {
            let t = &r[side]["tls"];
            assert_eq!(t["suite"], suite.as_str(), "{side}: {t}");
            assert_eq!(t["version"], "TLSv1_3");
            assert_eq!(t["record_bytes"], 4096);
            assert!(t["record_s"].as_f64().unwrap() > 0.0, "{t}");
            assert!(t["kernel_tls"].is_string() || t["kernel_tls"].is_object());
        }
        // 4 KB records: at least 4096 records' overhead on the wire.
        let wire = r["sender"]["tls"]["wire_bytes"].as_u64().unwrap();
        assert!(wire >= (16 << 20) + 4096 * 22, "{wire}");
        let beside = &doc["tls_beside_plain"];
        assert_eq!(beside["pairs"], 1, "{beside}");
        assert!(beside["ratio"]["median"].as_f64().unwrap() > 0.0);
        assert!(beside["sealing_share"].as_f64().unwrap() > 0.0);
        let verdict = r["limits"]["limits"][0]["fix"].as_str().unwrap_or("");
        if r["limits"]["limits"][0]["factor"] == "sender_cpu" {
            assert!(verdict.contains("sealing TLS records"), "{verdict}");
        }
    }
    let written = std::fs::read_to_string(&out).unwrap();
    assert!(
        !written.contains("key_der") && !written.contains("cert_der"),
        "the run's certificate and key stay out of the records"
    );
}

#[test]
fn stream_tls_refuses_what_it_cannot_carry_in_one_line_each() {
    crate::common::stream_refuses(&[
        ("--tls --udp --rate 10M", "--udp"),
        ("--tls --cipher rc4", "unknown cipher \"rc4\""),
        ("--tls --strategy sendfile", "--strategy sendfile"),
        ("--tls --recv splice", "--recv splice"),
        ("--tls --tls-record 20", "27 to 16384"),
        ("--tls --rcvlowat 64K", "--rcvlowat"),
        ("--cipher aes-256-gcm", "--tls or --quic"),
    ]);
}
