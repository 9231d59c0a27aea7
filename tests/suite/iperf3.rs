//! `netlab stream --to iperf3:HOST`: netlab as a client of Debian's stock
//! `iperf3 -s` (3.12) across a namespace pair with a shaped link, beside
//! iperf3's own client on the same link; and the servers it must refuse.

use crate::common;
use crate::common::words;
use common::netlab;
use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

static NEXT: AtomicU32 = AtomicU32::new(0);

fn ip(args: &[&str]) {
    let status = Command::new("ip").args(args).status().unwrap();
    assert!(status.success(), "ip {args:?}");
}

/// Two namespaces joined by a veth pair shaped to `rate` each way, an
/// iperf3 server in the first; all removed on drop (the server by PID).
struct Pair {
    names: [String; 2],
    subnet: u32,
    server: Option<Child>,
}

impl Pair {
    fn new(rate: &str) -> Pair {
        Pair::shaped(rate, &["burst", "64kb", "latency", "50ms"])
    }

    /// A pair whose tbf holds `queue` (e.g. a short `limit`: datagrams
    /// past it are dropped rather than held against the sender's socket).
    fn shaped(rate: &str, queue: &[&str]) -> Pair {
        assert!(
            netlab::testbed::netns::has_net_admin(),
            "the iperf3 tests need CAP_NET_ADMIN: run them as root"
        );
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let tag = format!("nli{}x{n}", std::process::id());
        let pair = Pair {
            names: [format!("{tag}s"), format!("{tag}c")],
            subnet: 60 + n,
            server: None,
        };
        for name in &pair.names {
            ip(&["netns", "add", name]);
        }
        let [s, c] = [pair.names[0].as_str(), pair.names[1].as_str()];
        ip(&[
            "-n", s, "link", "add", "eth0", "type", "veth", "peer", "name", "eth0", "netns", c,
        ]);
        for (ns, host) in [(s, 1), (c, 2)] {
            let addr = format!("10.232.{}.{host}/24", pair.subnet);
            ip(&["-n", ns, "addr", "add", &addr, "dev", "eth0"]);
            ip(&["-n", ns, "link", "set", "eth0", "up"]);
            ip(&["-n", ns, "link", "set", "lo", "up"]);
            let status = Command::new("tc")
                .args(["-n", ns, "qdisc", "add", "dev", "eth0", "root", "tbf"])
                .args(["rate", rate])
                .args(queue)
                .status()
                .unwrap();
            assert!(status.success(), "tc tbf in {ns}");
        }
        pair
    }

    fn server_addr(&self) -> String {
        format!("10.232.{}.1", self.subnet)
    }

    /// Starts `iperf3 -s` in the first namespace and waits until it listens.
    fn start_server(&mut self) {
        let child = Command::new("ip")
            .args(["netns", "exec", &self.names[0], "iperf3", "-s"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("iperf3 runs (apt-get install iperf3; scripts/test installs it)");
        self.server = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let listening = Command::new("ip")
                .args([
                    "netns",
                    "exec",
                    &self.names[0],
                    "ss",
                    "-ltnH",
                    "sport = :5201",
                ])
                .output()
                .unwrap();
            if !listening.stdout.is_empty() {
                return;
            }
            assert!(Instant::now() < deadline, "iperf3 -s never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `netlab stream --to iperf3:SERVER ARGS --json` from the client side.
    fn netlab(&self, args: &[&str]) -> Value {
        let binary = assert_cmd::cargo::cargo_bin("netlab");
        let target = format!("iperf3:{}", self.server_addr());
        let run = Command::new("ip")
            .args(["netns", "exec", &self.names[1]])
            .arg(binary)
            .args(["stream", "--to", &target, "--json"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "netlab {args:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        serde_json::from_slice(&run.stdout).unwrap()
    }

    /// iperf3's own client, `-J`, from the client side.
    fn iperf3(&self, args: &[&str]) -> Value {
        let run = Command::new("ip")
            .args(["netns", "exec", &self.names[1], "iperf3", "-c"])
            .arg(self.server_addr())
            .arg("-J")
            .args(args)
            .output()
            .unwrap();
        assert!(run.status.success(), "iperf3 {args:?}");
        serde_json::from_slice(&run.stdout).unwrap()
    }
}

impl Drop for Pair {
    fn drop(&mut self) {
        if let Some(mut server) = self.server.take() {
            let _ = server.kill();
            let _ = server.wait();
        }
        for name in &self.names {
            let _ = Command::new("ip").args(["netns", "del", name]).status();
        }
    }
}

/// Bits a second the server counted over `run`'s streams (netlab's JSON).
fn server_bits_per_s(doc: &Value) -> f64 {
    let streams = doc["run"]["server"]["streams"].as_array().unwrap();
    streams
        .iter()
        .map(|s| s["bytes"].as_f64().unwrap() * 8.0 / s["end_time"].as_f64().unwrap())
        .sum()
}

#[test(alone)]
fn netlab_and_iperf3_s_own_client_agree_on_a_shaped_link() {
    let mut pair = Pair::new("200mbit");
    pair.start_server();
    // Alternating, twice each: the link's rate is the answer both must find.
    let mut ratios = Vec::new();
    for _ in 0..2 {
        let ours = pair.netlab(&["--duration", "2"]);
        let theirs = pair.iperf3(&["-t", "2"]);
        let ours_bps = server_bits_per_s(&ours);
        let theirs_bps = theirs["end"]["sum_received"]["bits_per_second"]
            .as_f64()
            .unwrap();
        assert!(ours_bps > 100e6, "netlab: {ours_bps} bit/s: {ours}");
        // netlab's own end measured: its sender's TCP_INFO, reported to
        // the server as iperf3's client reports retransmits.
        assert!(
            ours["run"]["streams"][0]["tcp_info"]["rtt_us"]
                .as_u64()
                .unwrap()
                > 0
        );
        assert_eq!(ours["run"]["client"]["sender_has_retransmits"], 1, "{ours}");
        ratios.push(ours_bps / theirs_bps);
    }
    for r in &ratios {
        assert!((0.85..=1.15).contains(r), "netlab/iperf3 {ratios:?}");
    }
}

#[test(alone)]
fn reverse_parallel_bidir_and_bytes_run_against_a_stock_server() {
    let mut pair = Pair::new("500mbit");
    pair.start_server();
    let count = |doc: &Value, sender: bool| {
        doc["run"]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|s| s["sender"] == sender && s["bytes"].as_u64().unwrap() > 0)
            .count()
    };
    let reverse = pair.netlab(&["--duration", "1", "--reverse", "-P", "2"]);
    assert_eq!(
        (count(&reverse, false), count(&reverse, true)),
        (2, 0),
        "{reverse}"
    );
    let bidir = pair.netlab(&["--duration", "1", "--bidir"]);
    assert_eq!(
        (count(&bidir, true), count(&bidir, false)),
        (1, 1),
        "{bidir}"
    );
    assert_eq!(
        bidir["run"]["server"]["streams"].as_array().unwrap().len(),
        2
    );
    // By bytes: the test ends once netlab has sent them (as iperf3's
    // client ends it), the server having read all but what was in flight.
    let bytes = pair.netlab(&["--bytes", "10M"]);
    let sum = |side: &str| -> u64 {
        bytes["run"][side]["streams"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["bytes"].as_u64().unwrap())
            .sum()
    };
    assert!(sum("client") >= 10 << 20, "{bytes}");
    assert!(sum("server") * 2 >= sum("client"), "{bytes}");
    assert!(sum("server") <= sum("client"), "{bytes}");
}

#[test(alone)]
fn udp_loss_on_a_shaped_link_is_counted_as_iperf3_counts_it() {
    // A short queue: what the link cannot carry is dropped at it (with a
    // long one the sender's socket is held back instead, and nothing is lost).
    let mut pair = Pair::shaped("100mbit", &["burst", "16kb", "limit", "30kb"]);
    pair.start_server();
    let lost_pct = |packets: &Value, lost: &Value| {
        100.0 * lost.as_f64().unwrap() / packets.as_f64().unwrap().max(1.0)
    };
    // 150 Mbit/s into 100: about a third lost, whoever sends.
    let ours = pair.netlab(&["--udp", "--rate", "150mbit", "--duration", "2"]);
    let s = &ours["run"]["server"]["streams"][0];
    let ours_pct = lost_pct(&s["packets"], &s["errors"]);
    let theirs = pair.iperf3(&["-u", "-b", "150M", "-t", "2"]);
    let theirs_pct = theirs["end"]["sum"]["lost_percent"].as_f64().unwrap();
    assert!(
        (20.0..=45.0).contains(&ours_pct),
        "netlab {ours_pct}%: {ours}"
    );
    assert!(
        (ours_pct - theirs_pct).abs() < 8.0,
        "netlab {ours_pct}% vs iperf3 {theirs_pct}%"
    );
    // Reversed, netlab's receiver counts it.
    let reverse = pair.netlab(&["--udp", "--rate", "150mbit", "--duration", "2", "--reverse"]);
    let mine = &reverse["run"]["streams"][0];
    let mine_pct = lost_pct(&mine["packets"], &mine["lost"]);
    assert!(
        (20.0..=45.0).contains(&mine_pct),
        "netlab receiving: {mine_pct}%: {reverse}"
    );
    assert!(mine["jitter_s"].as_f64().unwrap() > 0.0, "{reverse}");
}

/// A server on loopback that answers each connection with `greeting`.
fn fake_server(greeting: &'static [u8]) -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    std::thread::spawn(move || {
        for mut conn in listener.incoming().flatten() {
            let _ = conn.write_all(greeting);
            std::thread::sleep(Duration::from_millis(200));
        }
    });
    port
}

#[test(alone)]
fn servers_that_are_not_iperf3_or_are_busy_are_refused_by_name() {
    let ssh = fake_server(b"SSH-2.0-OpenSSH_9.2\r\n");
    let run = netlab()
        .args(["stream", "--to", &format!("iperf3:127.0.0.1:{ssh}")])
        .output()
        .unwrap();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(stderr.contains("is not an iperf3 server"), "{stderr}");
    // A stock server busy with another client's test.
    let port = {
        let l = TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut server = Command::new("iperf3")
        .args(["-s", "-B", "127.0.0.1", "-p", &port.to_string()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(300));
    let mut busy_client = Command::new("iperf3")
        .args([
            "-c",
            "127.0.0.1",
            "-p",
            &port.to_string(),
            "-t",
            "5",
            "-b",
            "10M",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(700));
    let run = netlab()
        .args(["stream", "--to", &format!("iperf3:127.0.0.1:{port}")])
        .output()
        .unwrap();
    let _ = busy_client.kill();
    let _ = busy_client.wait();
    let _ = server.kill();
    let _ = server.wait();
    assert!(!run.status.success());
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        stderr.contains("the server is busy running a test"),
        "{stderr}"
    );
    // Options that do not apply are refused by name.
    let run = netlab()
        .args(["stream", "--to", "iperf3:127.0.0.1", "--repeat", "2"])
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&run.stderr).contains("--repeat does not apply"));
    // iperf3's event lines are for tests against an iperf3 server.
    let run = netlab()
        .args(words("stream --format iperf3 --json-stream --interval 1s"))
        .output()
        .unwrap();
    assert!(!run.status.success());
    let error: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(
        error["error"].as_str().unwrap().contains("--to iperf3:"),
        "{error}"
    );
}

/// What iperf3_exporter and k8s-netperf read from iperf3's document:
/// both sums' rates, the sender's retransmits and the client host's CPU.
fn exporter_fields(doc: &Value) -> Result<[f64; 4], String> {
    let at = |path: &str| -> Result<f64, String> {
        path.split('.')
            .try_fold(doc, |v, key| v.get(key).ok_or(path))
            .map_err(|p| format!("{p} is missing"))?
            .as_f64()
            .ok_or(format!("{path} is not a number"))
    };
    Ok([
        at("end.sum_sent.bits_per_second")?,
        at("end.sum_received.bits_per_second")?,
        at("end.sum_sent.retransmits")?,
        at("end.cpu_utilization_percent.host_total")?,
    ])
}

#[test(alone)]
fn one_reader_takes_the_same_fields_from_netlab_and_iperf3() {
    let mut pair = Pair::new("200mbit");
    pair.start_server();
    let ours = pair.netlab(&["--duration", "3", "--format", "iperf3"]);
    let theirs = pair.iperf3(&["-t", "3"]);
    let [ours, theirs] = [&ours, &theirs].map(|doc| match exporter_fields(doc) {
        Ok(fields) => (fields, doc),
        Err(e) => panic!("{e}: {doc}"),
    });
    let ((o, ours_doc), (t, _)) = (ours, theirs);
    eprintln!(
        "sum_sent bit/s, sum_received bit/s, retransmits, host CPU %: netlab {o:?}, iperf3 {t:?}"
    );
    for (i, name) in ["sum_sent", "sum_received"].iter().enumerate() {
        let ratio = o[i] / t[i];
        assert!(
            (0.85..=1.15).contains(&ratio),
            "{name}: netlab {} vs iperf3 {} bit/s",
            o[i],
            t[i]
        );
    }
    // Retransmits are counted the same way (the sender's TCP_INFO): on the
    // same link, the same order of magnitude.
    assert!(
        (o[2] - t[2]).abs() <= 50.0_f64.max(0.5 * o[2].max(t[2])),
        "retransmits: netlab {} vs iperf3 {}",
        o[2],
        t[2]
    );
    // The client's CPU, percent of one CPU, at 200 Mbit/s: both small.
    assert!(
        o[3] > 0.0 && o[3] < 50.0 && t[3] < 50.0,
        "CPU: netlab {} vs iperf3 {}",
        o[3],
        t[3]
    );
    // netlab's own verdict rides along under its key: the tbf on netlab's
    // egress, full, named as the link.
    let limits = &ours_doc["netlab"]["limits"][0];
    assert_eq!(limits["evidence"], "sender and receiver", "{limits}");
    assert_eq!(limits["verdict"]["limits"][0]["factor"], "link", "{limits}");
    // Reversed, netlab receives: the verdict says it rests on the
    // receiver alone.
    let reverse = pair.netlab(&["--duration", "2", "--reverse", "--format", "iperf3"]);
    exporter_fields(&reverse).unwrap_or_else(|e| panic!("{e}: {reverse}"));
    let limits = &reverse["netlab"]["limits"][0];
    assert_eq!(limits["evidence"], "receiver only", "{limits}");
    assert!(
        limits["verdict"]["missing"][0]
            .as_str()
            .unwrap()
            .contains("receiver's evidence alone"),
        "{limits}"
    );
}

#[test(alone)]
fn json_stream_prints_iperf3_s_events_as_the_test_runs() {
    let mut pair = Pair::new("100mbit");
    pair.start_server();
    let binary = assert_cmd::cargo::cargo_bin("netlab");
    let run = Command::new("ip")
        .args(["netns", "exec", &pair.names[1]])
        .arg(binary)
        .args(["stream", "--to", &format!("iperf3:{}", pair.server_addr())])
        .args(["--duration", "3", "--format", "iperf3", "--json-stream"])
        .output()
        .unwrap();
    assert!(
        run.status.success(),
        "{}",
        String::from_utf8_lossy(&run.stderr)
    );
    let events: Vec<Value> = String::from_utf8_lossy(&run.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l}")))
        .collect();
    let names: Vec<&str> = events
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    assert_eq!(names.first(), Some(&"start"), "{names:?}");
    assert_eq!(names.last(), Some(&"end"), "{names:?}");
    assert!(
        names.iter().filter(|n| **n == "interval").count() >= 3,
        "{names:?}"
    );
    let interval = &events[1]["data"];
    let rate = interval["sum"]["bits_per_second"].as_f64().unwrap();
    assert!((50e6..=110e6).contains(&rate), "{interval}");
    assert!(
        interval["streams"][0]["rtt"].as_u64().unwrap() > 0,
        "{interval}"
    );
    exporter_fields(&serde_json::json!({"end": events.last().unwrap()["data"]}))
        .unwrap_or_else(|e| panic!("{e}: {events:?}"));
}

#[test(alone)]
fn a_server_that_goes_away_mid_test_leaves_netlab_s_figures_marked_incomplete() {
    let pair = Pair::new("100mbit");
    let mut server = Command::new("ip")
        .args([
            "netns",
            "exec",
            &pair.names[0],
            "iperf3",
            "-s",
            "-p",
            "5301",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(500));
    let binary = assert_cmd::cargo::cargo_bin("netlab");
    let client = Command::new("ip")
        .args(["netns", "exec", &pair.names[1]])
        .arg(binary)
        .args([
            "stream",
            "--to",
            &format!("iperf3:{}:5301", pair.server_addr()),
        ])
        .args(["--duration", "6", "--format", "iperf3"])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(2500));
    // `ip netns exec` runs iperf3 in its own process: the server is its
    // child's PID (ip execs it), killed by PID.
    let _ = server.kill();
    let _ = server.wait();
    let run = client.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert_eq!(run.status.code(), Some(3), "{stderr}");
    assert!(stderr.contains("did not finish"), "{stderr}");
    let doc: Value = serde_json::from_slice(&run.stdout).unwrap();
    assert!(
        doc["error"].as_str().unwrap().contains("incomplete"),
        "{doc}"
    );
    let sent = &doc["end"]["sum_sent"];
    assert!(sent["bytes"].as_u64().unwrap() > 1_000_000, "{doc}");
    // The figures stop where the server did, not at the asked 6 s.
    let seconds = sent["seconds"].as_f64().unwrap();
    assert!((1.5..5.0).contains(&seconds), "{doc}");
    assert!(doc["end"].get("sum_received").is_none(), "{doc}");
}

#[test(alone)]
fn netlab_s_own_runs_print_iperf3_s_document_too() {
    let dir = tempfile::tempdir().unwrap();
    let records = dir.path().join("r.jsonl");
    for args in [
        &["--interval", "500ms"][..],
        &["--reverse", "-P", "2"][..],
        &["--udp", "--rate", "20mbit"][..],
    ] {
        let run = netlab()
            .args(["stream", "--duration", "1s", "--format", "iperf3"])
            .args(["--out", records.to_str().unwrap()])
            .args(args)
            .output()
            .unwrap();
        assert!(
            run.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&run.stderr)
        );
        let doc: Value = serde_json::from_slice(&run.stdout).unwrap();
        if args[0] == "--udp" {
            // UDP has no retransmits, in iperf3's document as in netlab's;
            // its loss is the receiver's.
            let received = &doc["end"]["sum_received"];
            assert!(received["bits_per_second"].as_f64().unwrap() > 0.0, "{doc}");
            assert!(received["lost_percent"].is_number(), "{doc}");
        } else {
            let [sent, received, retransmits, cpu] =
                exporter_fields(&doc).unwrap_or_else(|e| panic!("{args:?}: {e}: {doc}"));
            assert!(sent > 0.0 && received > 0.0 && cpu > 0.0, "{args:?}: {doc}");
            assert!(retransmits >= 0.0);
        }
        // netlab's own figures ride under their key.
        assert_eq!(doc["netlab"]["experiment"], "stream", "{doc}");
    }
    // One document is one test.
    let run = netlab()
        .args(["stream", "--format", "iperf3", "--repeat", "2"])
        .output()
        .unwrap();
    assert!(!run.status.success());
}

#[test]
fn sigterm_stops_a_run_that_a_silent_server_holds() {
    // A server that asks for the parameters, then says nothing: each wait
    // on it is 10 s, the whole exchange longer; SIGTERM must not wait.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let server = std::thread::spawn(move || {
        let (mut control, _) = listener.accept().unwrap();
        let mut cookie = [0u8; 37];
        control.read_exact(&mut cookie).unwrap();
        control.write_all(&[9]).unwrap(); // PARAM_EXCHANGE
        let mut rest = Vec::new();
        // Until netlab goes away.
        let _ = control.read_to_end(&mut rest);
    });
    let run = Command::new(env!("CARGO_BIN_EXE_netlab"))
        .args(["stream", "--to", &format!("iperf3:127.0.0.1:{port}")])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    // SAFETY: a signal to our own child, by its PID.
    unsafe { libc::kill(run.id() as i32, libc::SIGTERM) };
    let output = run.wait_with_output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success(), "{stderr}");
    // Ended by the signal, not by a wait running out.
    assert!(stderr.contains("stopped (SIGTERM or Ctrl-C)"), "{stderr}");
    server.join().unwrap();
}
