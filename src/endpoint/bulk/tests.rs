//! End-to-end transfers over loopback through every strategy.

use super::receiver::Receiver;
use super::sender::Sender;
use super::socket::StreamError;
use super::types::Amount;
use super::types::EndpointReport;
use super::types::RecvStrategy;
use super::types::SendStrategy;
use super::types::SocketOptions;
use super::write::PATTERN_FILE_PERIODS;
use crate::endpoint::bulk::spec::{ReceiveSpec, SendSpec};
use crate::endpoint::pattern::PERIOD;
use crate::endpoint::protocol::DataGuard;
use crate::endpoint::tls::{RunCertificate, TlsChoice, TlsSpec};
use std::net::{TcpListener, TcpStream};
use std::thread;
use std::time::Instant;

fn transfer(
    strategy: SendStrategy,
    recv: RecvStrategy,
    record: usize,
    amount: Amount,
) -> (EndpointReport, EndpointReport) {
    transfer_with(SocketOptions::default(), strategy, recv, record, amount)
}

/// A verifying TCP receiver on `bind`, nothing else asked of it.
fn receive_spec(
    bind: std::net::SocketAddr,
    options: SocketOptions,
    strategy: RecvStrategy,
) -> ReceiveSpec {
    ReceiveSpec {
        tls: None,
        quic: None,
        bind,
        options,
        strategy,
        verify: true,
        progress: false,
        interface: None,
        guard: None,
        limit_bytes: None,
        udp: false,
        udp_clock_shared: false,
    }
}

fn transfer_with(
    options: SocketOptions,
    strategy: SendStrategy,
    recv: RecvStrategy,
    record: usize,
    amount: Amount,
) -> (EndpointReport, EndpointReport) {
    let receiver = Receiver::listen(receive_spec(
        "127.0.0.1:0".parse().unwrap(),
        options.clone(),
        recv,
    ))
    .unwrap();
    let addr = receiver.local_addr().unwrap();
    let recv_thread = thread::spawn(move || receiver.run(&mut |_| {}).unwrap());
    let sender = Sender::connect(SendSpec {
        tls: None,
        quic: None,
        connect: addr,
        options,
        strategy,
        record,
        amount,
        interface: None,
        token: None,
        interval_s: None,
        udp: None,
    })
    .unwrap();
    let sent = sender.run(&mut |_| {}).unwrap();
    (sent, recv_thread.join().unwrap())
}

#[test]
fn a_low_water_mark_makes_every_read_but_the_last_whole() {
    // 16 KB writes with TCP_NODELAY: without the mark a read returns
    // whatever the last segments brought; with 64 KB it waits for 64 KB.
    let total = 8u64 << 20;
    let lowat: u32 = 64 << 10;
    let options = SocketOptions {
        nodelay: true,
        rcvlowat: Some(lowat),
        ..Default::default()
    };
    let recv = RecvStrategy::Read { buffer: 128 << 10 };
    let (sent, got) = transfer_with(
        options,
        SendStrategy::Write,
        recv,
        16 << 10,
        Amount::Bytes(total),
    );
    assert_eq!(sent.bytes, total);
    assert_eq!(got.bytes, total);
    assert!(got.verified);
    // The first read (before the mark is set), the full ones, the
    // tail and the end of stream.
    let most = total.div_ceil(lowat as u64) + 3;
    assert!(
        got.syscalls <= most,
        "{} reads for {total} bytes: some returned less than {lowat}",
        got.syscalls
    );
}

#[test]
fn a_guarded_receiver_serves_the_token_and_holds_the_byte_limit() {
    let token = [9u8; crate::endpoint::protocol::TOKEN_LEN];
    let spec = |limit_bytes| ReceiveSpec {
        tls: None,
        quic: None,
        bind: "127.0.0.1:0".parse().unwrap(),
        options: SocketOptions::default(),
        strategy: RecvStrategy::Read { buffer: 4096 },
        verify: true,
        progress: false,
        interface: None,
        guard: Some(DataGuard {
            peer: "127.0.0.1".parse().unwrap(),
            token,
            ports: None,
        }),
        limit_bytes,
        udp: false,
        udp_clock_shared: false,
    };
    let send = |addr, bytes| {
        Sender::connect(SendSpec {
            tls: None,
            quic: None,
            connect: addr,
            options: SocketOptions::default(),
            strategy: SendStrategy::Write,
            record: 1000,
            amount: Amount::Bytes(bytes),
            interface: None,
            token: Some(token),
            interval_s: None,
            udp: None,
        })
        .unwrap()
        .run(&mut |_| {})
    };
    for (limit, bytes, ok) in [(Some(10_000), 10_000, true), (Some(10_000), 50_000, false)] {
        let receiver = Receiver::listen(spec(limit)).unwrap();
        let addr = receiver.local_addr().unwrap();
        let recv_thread = thread::spawn(move || receiver.run(&mut |_| {}));
        // A connection without the token is refused; the run goes on.
        drop(TcpStream::connect(addr).unwrap());
        let _ = send(addr, bytes);
        let received = recv_thread.join().unwrap();
        match (ok, received) {
            (true, Ok(report)) => assert_eq!(report.bytes, bytes),
            (false, Err(StreamError::Limit(10_000))) => {}
            (_, other) => panic!("limit {limit:?}, {bytes} bytes: {other:?}"),
        }
    }
}

#[test]
fn every_strategy_delivers_the_exact_stream() {
    let total = 3 * PERIOD as u64 * PATTERN_FILE_PERIODS as u64 / 2 + 12_345; // wraps the file
    for strategy in [
        SendStrategy::Write,
        SendStrategy::Chunked { chunk: 1000 },
        SendStrategy::Writev { records: 7 },
        SendStrategy::Sendfile,
        SendStrategy::Splice,
        SendStrategy::Zerocopy,
    ] {
        let (sent, got) = transfer(
            strategy,
            RecvStrategy::Read { buffer: 8191 },
            70_001,
            Amount::Bytes(total),
        );
        assert_eq!(sent.bytes, total, "{strategy:?}");
        assert_eq!(got.bytes, total, "{strategy:?}");
        assert!(got.verified);
        let records_per_call = if let SendStrategy::Writev { records } = strategy {
            records
        } else {
            1
        };
        assert!(
            sent.syscalls >= total / 70_001 / records_per_call as u64,
            "{strategy:?}"
        );
    }
}

#[test]
fn zero_copy_receive_maps_whole_pages_and_counts_every_byte() {
    // Segments of exactly one page of payload (4096 + the 12-byte
    // timestamp option) from the sender's own pages: the kernel maps
    // them. From write(2)'s copies it maps nothing and every byte is
    // read; either way every byte arrives, verified, counted once.
    let total = 8 << 20;
    let options = SocketOptions {
        mss: Some(4108),
        ..Default::default()
    };
    let mut mapped_share = Vec::new();
    for strategy in [SendStrategy::Write, SendStrategy::Zerocopy] {
        let (_, got) = transfer_with(
            options.clone(),
            strategy,
            RecvStrategy::Zerocopy { buffer: 128 << 10 },
            64 << 10,
            Amount::Bytes(total),
        );
        assert_eq!(got.bytes, total, "{strategy:?}");
        assert!(got.verified);
        assert_eq!(got.mss, Some(4096), "{strategy:?}");
        let zc = got.zerocopy_receive.expect("zero-copy receive stats");
        assert_eq!(zc.unavailable, None);
        assert_eq!(zc.mapped + zc.copied, total, "{strategy:?}: {zc:?}");
        mapped_share.push(zc.mapped_pct());
    }
    assert_eq!(mapped_share[0], 0.0, "write(2)'s pages never map");
    assert!(
        mapped_share[1] > 50.0,
        "MSG_ZEROCOPY's pages map: {mapped_share:?}"
    );
}

#[test]
fn zerocopy_reports_completions() {
    let (sent, _) = transfer(
        SendStrategy::Zerocopy,
        RecvStrategy::Read { buffer: 65536 },
        65536,
        Amount::Bytes(4 << 20),
    );
    let zc = sent.zerocopy.unwrap();
    // One completion per successful send of a whole 64 KiB record at least.
    assert!(zc.completed >= (4 << 20) / 65536, "{zc:?}");
    // On loopback the kernel must copy the pages after all, and says so.
    assert_eq!(zc.copied, zc.completed, "{zc:?}");
}

#[test]
fn splice_receiver_counts_bytes_without_verifying() {
    let (_, got) = transfer(
        SendStrategy::Write,
        RecvStrategy::Splice,
        4096,
        Amount::Bytes(1 << 20),
    );
    assert_eq!(got.bytes, 1 << 20);
    assert!(!got.verified);
}

#[test]
fn duration_mode_stops_on_time() {
    let start = Instant::now();
    let (sent, got) = transfer(
        SendStrategy::Write,
        RecvStrategy::Read { buffer: 65536 },
        16384,
        Amount::Seconds(0.3),
    );
    let took = start.elapsed().as_secs_f64();
    assert!((0.3..5.0).contains(&took), "took {took}");
    assert_eq!(sent.bytes, got.bytes);
    assert!(sent.bytes > 0);
}

#[test]
fn chunked_sends_make_one_call_per_chunk() {
    let (sent, _) = transfer(
        SendStrategy::Chunked { chunk: 1024 },
        RecvStrategy::Read { buffer: 65536 },
        4096,
        Amount::Bytes(1 << 20),
    );
    assert_eq!(sent.syscalls, (1 << 20) / 1024);
    let (sent, _) = transfer(
        SendStrategy::Writev { records: 8 },
        RecvStrategy::Read { buffer: 65536 },
        4096,
        Amount::Bytes(1 << 20),
    );
    assert!(
        sent.syscalls <= (1 << 20) / 4096 / 8 + 8,
        "{}",
        sent.syscalls
    );
}

#[test]
fn port_in_use_is_named() {
    let holder = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = holder.local_addr().unwrap();
    let err = Receiver::listen(receive_spec(
        addr,
        SocketOptions::default(),
        RecvStrategy::Read { buffer: 1024 },
    ))
    .err()
    .unwrap();
    assert!(
        err.to_string()
            .contains(&format!("port {} is in use", addr.port())),
        "{err}"
    );
}

/// A `--tls` spec with a fresh certificate for loopback.
fn tls_spec(cipher: crate::checksum::aead::Cipher, record: Option<usize>) -> TlsSpec {
    let certificate = RunCertificate::new(&["127.0.0.1".into()]).unwrap();
    TlsChoice { cipher, record }.spec(certificate)
}

#[test]
fn tls_streams_arrive_verified_whole_with_their_costs_split() {
    use crate::checksum::aead::Cipher;
    for (cipher, record, app_record) in [
        (Cipher::Aes128Gcm, None, 128 << 10),
        (Cipher::Chacha20Poly1305, Some(1000), 4096),
        (Cipher::Aes256Gcm, Some(16384), 1),
    ] {
        let tls = tls_spec(cipher, record);
        let total: u64 = if app_record == 1 { 64 << 10 } else { 8 << 20 };
        let receiver = Receiver::listen(ReceiveSpec {
            tls: Some(tls.clone()),
            ..receive_spec(
                "127.0.0.1:0".parse().unwrap(),
                SocketOptions::default(),
                RecvStrategy::Read { buffer: 64 << 10 },
            )
        })
        .unwrap();
        let addr = receiver.local_addr().unwrap();
        let receiving = thread::spawn(move || receiver.run(&mut |_| {}));
        let sender = Sender::connect(SendSpec {
            quic: None,
            tls: Some(tls),
            connect: addr,
            options: SocketOptions::default(),
            strategy: SendStrategy::Write,
            record: app_record,
            amount: Amount::Bytes(total),
            interface: None,
            token: None,
            interval_s: None,
            udp: None,
        })
        .unwrap();
        let sent = sender.run(&mut |_| {}).unwrap();
        let got = receiving.join().unwrap().unwrap();
        assert_eq!((sent.bytes, got.bytes), (total, total), "{cipher}");
        assert!(got.verified);
        let (s, r) = (sent.tls.unwrap(), got.tls.unwrap());
        assert_eq!(s.suite, r.suite);
        assert!(
            s.suite
                .contains(&cipher.name().replace('-', "_").to_uppercase()[..6]),
            "{s:?}"
        );
        assert_eq!(s.version, "TLSv1_3");
        // Every byte in records: at least one record's overhead per
        // record size of plaintext, plus close_notify.
        let per_record = record.unwrap_or(16384).min(app_record.max(1)) as u64;
        let records = total.div_ceil(per_record);
        assert!(
            s.wire_bytes >= total + records * 22,
            "{cipher}: {} wire bytes for {total} in {records} records",
            s.wire_bytes
        );
        // The receiver's last handshake read may bring the first records.
        assert!(
            r.wire_bytes <= s.wire_bytes && r.wire_bytes + (64 << 10) >= s.wire_bytes,
            "{} sent, {} received",
            s.wire_bytes,
            r.wire_bytes
        );
        assert!(s.record_s > 0.0 && s.record_s < sent.wall_s, "{s:?}");
        assert!(r.record_s > 0.0 && r.record_s < got.wall_s + 0.1, "{r:?}");
        assert_eq!(s.record_bytes, record.unwrap_or(16384));
        assert!(s.cipher_alone.is_some_and(|c| c.seal_ns_per_kb > 0.0));
        assert_ne!(s.kernel_tls, crate::endpoint::tls::KernelTls::default());
    }
}

#[test]
fn a_tls_stream_cut_short_or_tampered_with_is_an_error_not_a_short_run() {
    use crate::checksum::aead::Cipher;
    use std::io::Write;
    // A peer that completes the handshake and then closes without
    // close_notify; then one that flips a byte of a record.
    for tamper in [false, true] {
        let tls = tls_spec(Cipher::Aes128Gcm, None);
        let receiver = Receiver::listen(ReceiveSpec {
            tls: Some(tls.clone()),
            ..receive_spec(
                "127.0.0.1:0".parse().unwrap(),
                SocketOptions::default(),
                RecvStrategy::Read { buffer: 4096 },
            )
        })
        .unwrap();
        let addr = receiver.local_addr().unwrap();
        let receiving = thread::spawn(move || receiver.run(&mut |_| {}));
        let mut tcp = TcpStream::connect(addr).unwrap();
        let mut conn = rustls::ClientConnection::new(
            tls.client().unwrap(),
            rustls::pki_types::ServerName::IpAddress(addr.ip().into()),
        )
        .unwrap();
        while conn.is_handshaking() {
            conn.complete_io(&mut tcp).unwrap();
        }
        conn.writer().write_all(&[0u8; 1000]).unwrap();
        let mut wire = Vec::new();
        while conn.wants_write() {
            conn.write_tls(&mut wire).unwrap();
        }
        if tamper {
            let last = wire.len() - 1;
            wire[last] ^= 1;
        } else {
            // Part of a record's header, then the end.
            wire.truncate(3);
        }
        tcp.write_all(&wire).unwrap();
        drop(tcp);
        let err = receiving.join().unwrap().unwrap_err();
        let text = err.to_string();
        if tamper {
            // Opened in the data path, or by the handshake's last read.
            assert!(text.contains("TLS: ") && text.contains("decrypt"), "{text}");
        } else {
            assert!(text.contains("close_notify"), "{text}");
        }
    }
}

/// A QUIC spec for loopback with a fresh certificate.
fn quic_spec(cipher: crate::checksum::aead::Cipher, gso: bool) -> crate::endpoint::quic::QuicSpec {
    crate::endpoint::quic::QuicSpec {
        tls: tls_spec(cipher, None),
        gso,
    }
}

#[test]
fn quic_streams_arrive_verified_with_their_packets_and_calls_counted() {
    use super::quic::{QuicReceiver, QuicSender};
    use crate::checksum::aead::Cipher;
    for (cipher, gso) in [(Cipher::Aes128Gcm, true), (Cipher::Chacha20Poly1305, false)] {
        let quic = quic_spec(cipher, gso);
        let total: u64 = 8 << 20;
        let receiver = QuicReceiver::bind(
            receive_spec(
                "127.0.0.1:0".parse().unwrap(),
                SocketOptions::default(),
                RecvStrategy::Read { buffer: 64 << 10 },
            ),
            quic.clone(),
        )
        .unwrap();
        let addr = receiver.local_addr().unwrap();
        let receiving = thread::spawn(move || receiver.run());
        let sender = QuicSender::connect(
            SendSpec {
                quic: None,
                tls: None,
                connect: addr,
                options: SocketOptions::default(),
                strategy: SendStrategy::Write,
                record: 100_000,
                amount: Amount::Bytes(total),
                interface: None,
                token: None,
                interval_s: None,
                udp: None,
            },
            quic,
        )
        .unwrap();
        let sent = sender.run().unwrap();
        let got = receiving.join().unwrap().unwrap();
        assert_eq!((sent.bytes, got.bytes), (total, total), "{cipher}");
        assert!(got.verified);
        let (s, r) = (sent.quic.unwrap(), got.quic.unwrap());
        assert_eq!(s.suite, r.suite);
        assert!(
            s.suite
                .contains(&cipher.name().replace('-', "_").to_uppercase()[..6]),
            "{s:?}"
        );
        // Every byte went in protected packets of at most an MTU.
        assert!(s.datagrams_sent >= total / 1500, "{s:?}");
        assert!(s.sealed_packets >= s.datagrams_sent, "{s:?}");
        assert!(
            r.opened_packets >= s.datagrams_sent - s.lost_packets,
            "{r:?}"
        );
        assert!(s.seal_s > 0.0 && r.open_s > 0.0);
        assert_eq!(sent.syscalls, s.udp_sends + s.udp_receives);
        // A receive call may bring several datagrams (recvmmsg; GRO's
        // batches on top), never none.
        assert!(r.udp_receives <= r.datagrams_received, "{r:?}");
        if !gso {
            // One datagram a send call.
            assert_eq!(s.udp_sends, s.datagrams_sent, "{s:?}");
        }
    }
}

/// netlab's QUIC sender to a receiver written with quinn alone (the
/// library's own server: none of netlab's wrappers), and quinn's own
/// client to netlab's receiver.
#[test]
fn quic_ends_interoperate_with_plain_quinn_peers() {
    use super::quic::{QuicReceiver, QuicSender};
    use crate::checksum::aead::Cipher;
    let quic = quic_spec(Cipher::Aes256Gcm, true);
    let total: u64 = 2 << 20;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let plain_server = |spec: &crate::endpoint::quic::QuicSpec| {
        let mut tls = std::sync::Arc::unwrap_or_clone(spec.tls.quic_server().unwrap());
        tls.alpn_protocols = vec![crate::endpoint::quic::ALPN.to_vec()];
        quinn::ServerConfig::with_crypto(std::sync::Arc::new(
            quinn::crypto::rustls::QuicServerConfig::try_from(tls).unwrap(),
        ))
    };
    // quinn's own server, reading what netlab sends.
    let server = {
        let _guard = rt.enter();
        quinn::Endpoint::server(plain_server(&quic), "127.0.0.1:0".parse().unwrap()).unwrap()
    };
    let addr = server.local_addr().unwrap();
    let sender = QuicSender::connect(
        SendSpec {
            quic: None,
            tls: None,
            connect: addr,
            options: SocketOptions::default(),
            strategy: SendStrategy::Write,
            record: 65536,
            amount: Amount::Bytes(total),
            interface: None,
            token: None,
            interval_s: None,
            udp: None,
        },
        quic.clone(),
    )
    .unwrap();
    let sending = thread::spawn(move || sender.run());
    let got = rt.block_on(async {
        let conn = server.accept().await.unwrap().await.unwrap();
        let mut stream = conn.accept_uni().await.unwrap();
        let data = stream.read_to_end(64 << 20).await.unwrap();
        conn.close(0u32.into(), b"done");
        server.wait_idle().await;
        data
    });
    let sent = sending.join().unwrap().unwrap();
    assert_eq!(got.len() as u64, total);
    assert_eq!(sent.bytes, total);
    crate::endpoint::pattern::Pattern::new(got.len())
        .verify(0, &got)
        .expect("quinn's server got the pattern");

    // quinn's own client, sending the pattern to netlab's receiver.
    let receiver = QuicReceiver::bind(
        receive_spec(
            "127.0.0.1:0".parse().unwrap(),
            SocketOptions::default(),
            RecvStrategy::Read { buffer: 65536 },
        ),
        quic.clone(),
    )
    .unwrap();
    let addr = receiver.local_addr().unwrap();
    let receiving = thread::spawn(move || receiver.run());
    let mut tls = std::sync::Arc::unwrap_or_clone(quic.tls.quic_client().unwrap());
    tls.alpn_protocols = vec![crate::endpoint::quic::ALPN.to_vec()];
    let client_config = quinn::ClientConfig::new(std::sync::Arc::new(
        quinn::crypto::rustls::QuicClientConfig::try_from(tls).unwrap(),
    ));
    rt.block_on(async {
        let client = quinn::Endpoint::client("127.0.0.1:0".parse().unwrap()).unwrap();
        let conn = client
            .connect_with(client_config, addr, "127.0.0.1")
            .unwrap()
            .await
            .unwrap();
        let mut stream = conn.open_uni().await.unwrap();
        let pattern = crate::endpoint::pattern::Pattern::new(total as usize);
        stream
            .write_all(pattern.slice(0, total as usize))
            .await
            .unwrap();
        stream.finish().unwrap();
        let _ = conn.closed().await;
        client.wait_idle().await;
    });
    let got = receiving.join().unwrap().unwrap();
    assert_eq!(got.bytes, total);
    assert!(got.verified);
}
