//! The RPC server and client against real peers (rpcinfo, rpcbind) and
//! malformed ones, and the experiment through the binary.

use crate::common;
use crate::common::words;
use common::{netlab, run_json};
use netlab::endpoint::rpc::server::{PROGRAM, Server, ServerOptions};
use netlab::wire::recmark::{fragment_header, single_fragment};
use netlab::wire::rpc::{AcceptStat, Call, Message, RejectStat, Reply, parse};
use netlab::wire::xdr::Writer;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpStream};
use std::process::Stdio;
use std::time::Duration;

/// Runs `netlab rpc ARGS --json` with records in a temporary file; returns
/// the JSON document it printed.
fn rpc_json(args: &[&str]) -> Value {
    let dir = tempfile::tempdir().unwrap();
    let mut full = vec!["rpc"];
    full.extend_from_slice(args);
    run_json(&full, &dir.path().join("r.jsonl"))
}

fn reply_to(stream: &mut TcpStream, call: &Call, args: &[u8]) -> Reply {
    let mut w = Writer::new();
    call.emit(&mut w);
    w.buf.extend_from_slice(args);
    raw_reply(stream, &w.buf)
}

/// A call's record bytes.
fn call_bytes(call: &Call, args: &[u8]) -> Vec<u8> {
    let mut w = Writer::new();
    call.emit(&mut w);
    w.buf.extend_from_slice(args);
    w.buf
}

fn connect(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    s
}

/// This process's open TCP sockets whose local port is `port` (a server's
/// listener and its ends of connections), from /proc/self/fd and
/// /proc/net/tcp: other tests running in this process never use the port.
fn open_server_sockets(port: u16) -> usize {
    let ours: std::collections::HashSet<String> = std::fs::read_dir("/proc/self/fd")
        .unwrap()
        .filter_map(|e| std::fs::read_link(e.ok()?.path()).ok())
        .filter_map(|target| {
            let t = target.to_string_lossy().into_owned();
            Some(t.strip_prefix("socket:[")?.strip_suffix(']')?.to_string())
        })
        .collect();
    std::fs::read_to_string("/proc/net/tcp")
        .unwrap()
        .lines()
        .skip(1)
        .filter(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let local_port = fields[1].rsplit(':').next().unwrap();
            u16::from_str_radix(local_port, 16).unwrap() == port && ours.contains(fields[9])
        })
        .count()
}

/// The descriptors open in each of this process's threads named `name`
/// (a thread with a file table of its own has its own
/// /proc/self/task/TID/fd; one sharing the process's shows all of them).
fn descriptors_of_threads(name: &str) -> Vec<usize> {
    std::fs::read_dir("/proc/self/task")
        .unwrap()
        .filter_map(|task| {
            let path = task.ok()?.path();
            let comm = std::fs::read_to_string(path.join("comm")).ok()?;
            (comm.trim() == name)
                .then(|| std::fs::read_dir(path.join("fd")).ok().map(Iterator::count))?
        })
        .collect()
}

/// Whether the peer closed the connection (read returns 0 or a reset).
fn closed(stream: &mut TcpStream) -> bool {
    let mut buf = [0u8; 64];
    matches!(stream.read(&mut buf), Ok(0) | Err(_))
}

#[test]
fn the_server_survives_malformed_peers_and_keeps_serving() {
    survives_malformed_peers(0);
}

/// The same bad peers against a server that busy-polls: its spinning
/// receives must hand back end of file, resets and garbage exactly as its
/// blocking ones do.
#[test]
fn a_busy_polling_server_survives_malformed_peers_too() {
    survives_malformed_peers(200);
}

fn survives_malformed_peers(busy_poll_us: u32) {
    let options = ServerOptions {
        // Long enough that the good client's connection outlives the
        // checks below on a loaded host (at 300 ms, a busy-polling server
        // beside three other tests once closed it first).
        idle_timeout_ms: 1500,
        max_record: 1 << 20,
        busy_poll_us,
        ..Default::default()
    };
    let running = Server::bind((Ipv4Addr::LOCALHOST, 0).into(), options)
        .unwrap()
        .start()
        .unwrap();
    let addr: SocketAddr = (Ipv4Addr::LOCALHOST, running.port()).into();
    let null = Call::new(1, PROGRAM, 1, 0);
    {
        let mut before = connect(addr);
        assert_eq!(
            reply_to(&mut before, &null, &[]),
            Reply::accepted(1, AcceptStat::Success)
        );
    }

    // Garbage bytes.
    let mut bad = connect(addr);
    bad.write_all(&single_fragment(b"this is not an RPC message"))
        .unwrap();
    assert!(closed(&mut bad));
    // A record mark announcing 2 GB.
    let mut bad = connect(addr);
    bad.write_all(&fragment_header(0x7fff_fff0, true)).unwrap();
    bad.write_all(&[0u8; 100]).unwrap();
    assert!(closed(&mut bad));
    // A truncated fragment, then the client goes away.
    let mut bad = connect(addr);
    bad.write_all(&fragment_header(1000, true)).unwrap();
    bad.write_all(&[1u8; 10]).unwrap();
    drop(bad);
    // A client that connects and sends nothing is closed after the idle timeout.
    let mut silent = connect(addr);
    assert!(closed(&mut silent));

    // Another client is served after all that; calls that parse but cannot
    // be served get the RFC's answers, on a connection that stays up.
    let mut good = connect(addr);
    let mut v3 = Call::new(2, PROGRAM, 1, 0);
    v3.rpcvers = 3;
    assert_eq!(
        reply_to(&mut good, &v3, &[]),
        Reply::denied(2, RejectStat::RpcMismatch { low: 2, high: 2 })
    );
    let sink = Call::new(3, PROGRAM, 1, 1);
    // An opaque length beyond the record.
    assert_eq!(
        reply_to(&mut good, &sink, &[0, 0, 0x40, 0, 1, 2, 3, 4]),
        Reply::accepted(3, AcceptStat::GarbageArgs)
    );
    assert_eq!(
        reply_to(&mut good, &Call::new(4, 99, 1, 0), &[]),
        Reply::accepted(4, AcceptStat::ProgUnavail)
    );
    assert_eq!(
        reply_to(&mut good, &Call::new(5, PROGRAM, 2, 0), &[]),
        Reply::accepted(5, AcceptStat::ProgMismatch { low: 1, high: 1 })
    );
    assert_eq!(
        reply_to(&mut good, &Call::new(6, PROGRAM, 1, 9), &[]),
        Reply::accepted(6, AcceptStat::ProcUnavail)
    );
    // The UDP and connection threads hold the standard streams and their
    // socket only (this test's and any other test's server running beside).
    for name in ["rpc-udp", "rpc-conn"] {
        let counts = descriptors_of_threads(name);
        assert!(!counts.is_empty(), "no {name} thread");
        assert!(counts.iter().all(|&n| n <= 4), "{name}: {counts:?}");
    }
    // And the good client is still served. Called last, so that nothing
    // slow on a loaded host stands between its last call and its leaving:
    // a client quiet past the idle timeout is closed and counted, as it
    // should be (beside a CPU-bound job the checks once outlasted it).
    assert_eq!(
        reply_to(&mut good, &null, &[]),
        Reply::accepted(1, AcceptStat::Success)
    );
    // Each connection's thread serves from a file table of its own
    // (fdtable.rs); the server's handle on a finished connection closes
    // within its accept loop's 100 ms tick, leaving the listener and the good
    // client's connection.
    // (200 ms: two ticks, and well under the 1.5 s idle timeout.)
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(open_server_sockets(addr.port()), 2);
    // The good client leaves between calls: a clean end, not a bad peer;
    // its connection closes within a tick, leaving the listener.
    drop(good);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while open_server_sockets(addr.port()) > 1 && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(open_server_sockets(addr.port()), 1);
    let report = running.stop();
    assert_eq!(open_server_sockets(addr.port()), 0);
    assert_eq!(report.closed_bad_peers, 4, "{report:?}");
    assert_eq!(report.calls, 7);
    assert_eq!(report.connections, 6);
}

fn rpcbind_listening() -> bool {
    TcpStream::connect_timeout(
        &SocketAddr::from((Ipv4Addr::LOCALHOST, 111)),
        Duration::from_millis(200),
    )
    .is_ok()
}

/// Starts rpcbind if none is running; returns the child to stop afterwards.
fn ensure_rpcbind() -> Option<std::process::Child> {
    if rpcbind_listening() {
        return None;
    }
    let mut child = std::process::Command::new("rpcbind")
        .arg("-f")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("rpcbind is installed (Debian package rpcbind)");
    for _ in 0..100 {
        if rpcbind_listening() {
            return Some(child);
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let _ = child.wait();
    panic!("rpcbind did not start");
}

#[test]
fn interoperates_with_rpcinfo_and_rpcbind() {
    let mut started = ensure_rpcbind();
    // netlab's client calls procedure 0 of the real rpcbind, versions 2-4, TCP and UDP.
    for version in ["2", "3", "4"] {
        for udp in [false, true] {
            let mut cmd = netlab();
            cmd.args(["rpc", "ping", "127.0.0.1:111", "100000", version]);
            if udp {
                cmd.arg("--udp");
            }
            cmd.assert()
                .success()
                .stdout(predicates::str::contains("ready and waiting"));
        }
    }
    // rpcinfo calls netlab's server over TCP and UDP.
    let mut server = std::process::Command::new(assert_cmd::cargo::cargo_bin("netlab"))
        .args(["rpc", "serve", "--port", "0", "--register"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(server.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    let port: u16 = line.trim().parse().expect("the port on stdout");
    std::thread::sleep(Duration::from_millis(300));
    let program = PROGRAM.to_string();
    for transport in ["-t", "-u"] {
        let out = std::process::Command::new("rpcinfo")
            .args([
                "-n",
                &port.to_string(),
                transport,
                "127.0.0.1",
                &program,
                "1",
            ])
            .output()
            .expect("rpcinfo is installed (Debian package rpcbind)");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success(),
            "rpcinfo {transport}: {text} {}",
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            text.contains(&format!("program {program} version 1 ready and waiting")),
            "{text}"
        );
    }
    // SAFETY: signalling our own child by its PID.
    unsafe { libc::kill(server.id() as i32, libc::SIGINT) };
    let status = server.wait().unwrap();
    assert!(status.success());
    let mut err = String::new();
    server
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut err)
        .unwrap();
    assert!(err.contains("2 calls"), "{err}");
    if let Some(child) = started.as_mut() {
        let _ = child.kill();
        let _ = child.wait();
    }
}

#[test(alone)]
fn the_experiment_finds_and_explains_the_4k_cliff() {
    let doc = rpc_json(&[
        "--sizes",
        "0,1024,2048,4096",
        "--calls",
        "5",
        "--reps",
        "2",
        "--placements",
        "loopback",
    ]);
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 8, "4 sizes x TCP and UDP");
    for r in records {
        assert!(r["result"]["client"]["latency_us_p99"].as_f64().unwrap() > 0.0);
        assert_eq!(
            r["result"]["client"]["rep_seconds"]
                .as_array()
                .unwrap()
                .len(),
            2
        );
    }
    let findings = doc["findings"].as_array().unwrap();
    assert_eq!(findings.len(), 1, "{findings:?}");
    assert_eq!(findings[0]["column"], "TCP local");
    assert_eq!(findings[0]["size"], 4096);
    let d = &findings[0]["diagnosis"];
    let cause = d["cause"].as_str().unwrap();
    assert!(cause.contains("Nagle"), "{cause}");
    assert!(cause.contains("delayed ACKs per call"), "{cause}");
    let fixes: Vec<&str> = d["fixes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f[0].as_str().unwrap())
        .collect();
    assert!(fixes.contains(&"TCP_NODELAY on the client"), "{fixes:?}");
    assert!(fixes.contains(&"the request in one writev"), "{fixes:?}");
    assert!(d["stall_ms_per_call"].as_f64().unwrap() > 20.0);
    // Three reruns and one captured run.
    assert_eq!(doc["diagnosis_records"].as_array().unwrap().len(), 4);
    // The captured stalled call: the first write, the delayed ACK tens of ms later, the rest.
    let timeline: Vec<&str> = findings[0]["timeline"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| l.as_str().unwrap())
        .collect();
    assert!(timeline.len() >= 4, "{timeline:?}");
    assert!(
        timeline[0].starts_with("+0.000 ms client->server 4000 B"),
        "{timeline:?}"
    );
    assert!(
        timeline.last().unwrap().contains("server->client 28 B"),
        "{timeline:?}"
    );
}

#[test(alone)]
fn busy_polling_spins_on_both_ends_and_leaves_the_cliff_alone() {
    let doc = rpc_json(&[
        "--sizes",
        "0,1024,2048,4096",
        "--calls",
        "10",
        "--reps",
        "2",
        "--busy-poll",
        "100",
        "--no-diagnose",
        "--placements",
        "loopback",
    ]);
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 8, "4 sizes x TCP and UDP");
    for r in records {
        let params = &r["params"];
        assert_eq!(params["client"]["busy_poll_us"], 100, "{params}");
        assert_eq!(params["server"]["busy_poll_us"], 100, "{params}");
        // A reply cannot be back before the client's first look: it spun.
        let client = &r["result"]["client"];
        assert!(client["empty_polls"].as_u64().unwrap() > 0, "{client}");
    }
    // Spinning 100 µs does not outlast a 40 ms delayed ACK: the 4096-byte
    // TCP call still stalls, and is still flagged.
    let stalled = records
        .iter()
        .find(|r| r["params"]["size"] == 4096 && r["params"]["proto"] == "tcp")
        .unwrap();
    let p50 = stalled["result"]["client"]["latency_us_p50"]
        .as_f64()
        .unwrap();
    assert!(p50 > 20_000.0, "{p50}");
    let findings = doc["findings"].as_array().unwrap();
    assert!(
        findings
            .iter()
            .any(|f| f["column"] == "TCP local" && f["size"] == 4096),
        "{findings:?}"
    );
}

#[test(alone)]
fn pinned_ends_are_run_and_recorded_where_asked() {
    // The first and last CPUs this process may use (the same one on a
    // single-CPU machine).
    let allowed = netlab::endpoint::pin::allowed_cpus();
    let (client_cpu, server_cpu) = (allowed[0], *allowed.last().unwrap());
    let pin = format!("{client_cpu},{server_cpu}");
    let doc = rpc_json(&[
        "--sizes",
        "0",
        "--calls",
        "50",
        "--reps",
        "2",
        "--pin",
        &pin,
        "--no-diagnose",
        "--placements",
        "loopback",
    ]);
    let records = doc["records"].as_array().unwrap();
    assert_eq!(records.len(), 2, "TCP and UDP");
    for r in records {
        assert_eq!(r["params"]["client"]["cpu"], client_cpu);
        assert_eq!(r["params"]["server"]["cpu"], server_cpu);
        assert_eq!(r["result"]["server"]["calls"], 100);
    }
}

#[test(alone)]
fn find_cliffs_maps_the_stall_to_the_byte() {
    let doc = rpc_json(&words(
        "--find-cliffs --placements loopback --cliff-range 3800..4200",
    ));
    let ranges = doc["stall_ranges"].as_array().unwrap();
    assert_eq!(ranges.len(), 1, "{ranges:?}");
    // 40-byte header + 4-byte length + argument (padded) must exceed 3996 bytes: 3953 and up.
    assert_eq!(ranges[0]["from"], 3953);
    assert_eq!(ranges[0]["to"], 4200);
    assert_eq!(ranges[0]["open_ended"], true);
}

#[test(alone)]
fn small_socket_buffers_are_set_on_both_ends_and_move_linuxs_stall() {
    // With 4 KB buffers asked (Linux doubles them) a two-write call no
    // longer stalls on loopback (docs/EXPERIMENTS.md: from 7949 bytes on,
    // three writes, it does): the 3953-byte step, which every call of
    // 3953 bytes and up takes with the default buffers, is gone. What is
    // left near 4 KB under these buffers is sporadic (a probe in about
    // four stalls somewhere from 3980 bytes, 2026-11-26; its cause is not
    // yet investigated), so no range may start at the default's step.
    let doc = rpc_json(&words(
        "--find-cliffs --placements loopback --cliff-range 3900..4100 --sockbuf 4096",
    ));
    let ranges = doc["stall_ranges"].as_array().unwrap();
    assert!(
        ranges.iter().all(|r| r["from"] != 3953),
        "the default's step at 3953 bytes is still there: {doc}"
    );
    let doc = rpc_json(&words(
        "--sizes 4096 --calls 10 --reps 1 --proto tcp --sockbuf 4K --no-diagnose --placements loopback",
    ));
    let params = &doc["records"][0]["params"];
    assert_eq!(params["client"]["sockbuf"], 4096, "{params}");
    assert_eq!(params["server"]["sockbuf"], 4096, "{params}");
}

#[test]
fn bad_experiment_arguments_are_refused() {
    for (args, message) in [
        (vec!["rpc", "--sizes", "70000"], "too large"),
        (
            vec!["rpc", "--proto", "sctp"],
            "invalid value 'sctp' for '--proto",
        ),
        (vec!["rpc", "--placements", "mars"], "unknown placement"),
        (vec!["rpc", "--sizes", "4Q"], "unknown size suffix"),
        (vec!["rpc", "--busy-poll", "200000"], "not in 0..=100000"),
        (
            vec!["rpc", "--sockbuf", "0"],
            "invalid value '0' for '--sockbuf <SIZE>': a size from 1 byte to 1G",
        ),
        (
            vec!["rpc", "--sockbuf", "2G"],
            "invalid value '2G' for '--sockbuf <SIZE>': a size from 1 byte to 1G",
        ),
        (vec!["rpc", "--pin", "0"], "give two CPU numbers"),
        (vec!["rpc", "--pin", "0,x"], "give two CPU numbers"),
        (
            vec!["rpc", "--pin", "0,4096"],
            "CPU 4096 is not one this process may run on",
        ),
        (
            vec!["rpc", "serve", "--bind", "0.0.0.0"],
            "without --allow-remote",
        ),
    ] {
        let assert = netlab().args(&args).assert().failure();
        let stderr = String::from_utf8_lossy(&assert.get_output().stderr).to_string();
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

#[test]
fn the_sunos4_model_predicts_the_1989_ranges_through_the_binary() {
    let doc = rpc_json(&words(
        "--stack sunos4 --find-cliffs --cliff-range 3900..9100",
    ));
    assert_eq!(doc["experiment"], "rpc-model-find-cliffs");
    for placement in doc["stall_ranges"].as_array().unwrap() {
        assert_eq!(
            placement["ranges"],
            serde_json::json!([[4045, 4968], [8041, 8964]]),
            "{placement}"
        );
    }
    let table = netlab()
        .args(["rpc", "--stack", "sunos4", "--sizes", "4000,4096"])
        .arg("--out")
        .arg(tempfile::tempdir().unwrap().path().join("r.jsonl"))
        .assert()
        .success();
    let text = String::from_utf8_lossy(&table.get_output().stdout).to_string();
    assert!(text.contains("| 4096      | 4000+148 |"), "{text}");
    assert!(text.contains("200 stall"), "{text}");
    netlab()
        .args(["rpc", "--stack", "sunos5"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("invalid value 'sunos5'"));
    netlab()
        .args(["rpc", "--stack", "sunos4", "--to", "10.0.0.1"])
        .assert()
        .failure()
        .stderr(predicates::str::contains("runs no endpoints"));
}

/// Whether the peer closed the connection within `wait` (a read that
/// times out means it is still open).
fn closed_within(stream: &mut TcpStream, wait: Duration) -> bool {
    stream.set_read_timeout(Some(wait)).unwrap();
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
        ),
    }
}

/// Sends `record` (raw bytes, one fragment) and reads the reply.
fn raw_reply(stream: &mut TcpStream, record: &[u8]) -> Reply {
    stream.write_all(&single_fragment(record)).unwrap();
    let mut header = [0u8; 4];
    stream.read_exact(&mut header).unwrap();
    let len = (u32::from_be_bytes(header) & 0x7fff_ffff) as usize;
    let mut body = vec![0u8; len];
    stream.read_exact(&mut body).unwrap();
    match parse(&body).unwrap().0 {
        Message::Reply(r) => r,
        other => panic!("{other:?}"),
    }
}

fn serve(options: ServerOptions) -> (netlab::endpoint::rpc::server::Running, SocketAddr) {
    let running = Server::bind((Ipv4Addr::LOCALHOST, 0).into(), options)
        .unwrap()
        .start()
        .unwrap();
    let addr = (Ipv4Addr::LOCALHOST, running.port()).into();
    (running, addr)
}

#[test]
fn strangers_cannot_hold_records_memory_or_every_connection() {
    let null = Call::new(1, PROGRAM, 1, 0);
    // A record that trickles in, a byte every 300 ms, is cut at its deadline
    // though the connection is never idle; a record of version 3 that
    // breaks off after the version is RPC_MISMATCH (RFC 5531 §9).
    let (running, addr) = serve(ServerOptions {
        record_timeout_ms: 1000,
        ..Default::default()
    });
    let mut slow = connect(addr);
    let started = std::time::Instant::now();
    slow.write_all(&fragment_header(100, true)).unwrap();
    let mut cut = false;
    for _ in 0..30 {
        std::thread::sleep(Duration::from_millis(300));
        if slow.write_all(&[0]).is_err() {
            cut = true;
            break;
        }
    }
    assert!(
        cut || closed_within(&mut slow, Duration::from_secs(2)),
        "a trickled record was never cut"
    );
    assert!(
        started.elapsed() < Duration::from_secs(6),
        "{:?}",
        started.elapsed()
    );
    let mut v3 = connect(addr);
    let truncated = [0, 0, 0, 7, 0, 0, 0, 0, 0, 0, 0, 3, 0x20, 0x00];
    assert_eq!(
        raw_reply(&mut v3, &truncated),
        Reply::denied(7, RejectStat::RpcMismatch { low: 2, high: 2 })
    );
    running.stop();

    // Half-sent records of 1 MiB on 80 connections: past the budget for
    // records not yet whole, the connections that would grow it are closed,
    // and a caller is served after.
    let (running, addr) = serve(ServerOptions::default());
    let budget = netlab::endpoint::rpc::server::PARTIAL_BUDGET;
    let part = vec![0u8; 900 << 10];
    let mut holders = Vec::new();
    for _ in 0..80 {
        let mut s = connect(addr);
        s.write_all(&fragment_header(1 << 20, true)).unwrap();
        let _ = s.write_all(&part);
        holders.push(s);
    }
    std::thread::sleep(Duration::from_millis(500));
    let cut = holders
        .iter_mut()
        .map(|s| closed_within(s, Duration::from_millis(100)))
        .filter(|&c| c)
        .count();
    let most = budget / part.len() + 1;
    assert!(
        80 - cut <= most,
        "{cut} of 80 closed; at most {most} fit the budget"
    );
    let mut good = connect(addr);
    assert_eq!(
        reply_to(&mut good, &null, &[]),
        Reply::accepted(1, AcceptStat::Success)
    );
    drop(holders);
    running.stop();

    // At its connection limit the server closes the quietest connection
    // for a new one rather than refuse the newcomer.
    let (running, addr) = serve(ServerOptions {
        max_connections: 4,
        ..Default::default()
    });
    let mut idle: Vec<TcpStream> = (0..4).map(|_| connect(addr)).collect();
    std::thread::sleep(Duration::from_millis(1300));
    let mut good = connect(addr);
    assert_eq!(
        reply_to(&mut good, &null, &[]),
        Reply::accepted(1, AcceptStat::Success)
    );
    assert!(
        closed_within(&mut idle[0], Duration::from_secs(2)),
        "the oldest silent connection made room"
    );
    running.stop();

    // Strangers from one address that keep every connection busy (a call
    // each every 300 ms, on four times the server's connections) hold at
    // most their address's share: a client from another address is served
    // every time.
    let (running, addr) = serve(ServerOptions {
        max_connections: 16,
        ..Default::default()
    });
    let stop = std::sync::atomic::AtomicBool::new(false);
    let served = std::thread::scope(|scope| {
        for _ in 0..64 {
            scope.spawn(|| {
                while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                    let socket =
                        socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None)
                            .unwrap();
                    socket
                        .bind(&SocketAddr::from((Ipv4Addr::new(127, 0, 0, 2), 0)).into())
                        .unwrap();
                    if socket.connect(&addr.into()).is_err() {
                        continue;
                    }
                    let mut s: TcpStream = socket.into();
                    s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                    let call = single_fragment(&call_bytes(&null, &[]));
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        if s.write_all(&call).is_err() || s.read(&mut [0u8; 256]).unwrap_or(0) == 0
                        {
                            break;
                        }
                        std::thread::sleep(Duration::from_millis(300));
                    }
                }
            });
        }
        std::thread::sleep(Duration::from_secs(1));
        let served = (0..10)
            .filter(|_| {
                std::thread::sleep(Duration::from_millis(200));
                let mut ping = connect(addr);
                ping.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
                ping.write_all(&single_fragment(&call_bytes(&null, &[])))
                    .is_ok()
                    && ping.read(&mut [0u8; 256]).unwrap_or(0) > 0
            })
            .count();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        served
    });
    assert_eq!(served, 10, "pings answered while strangers held the server");
    running.stop();
}
