//! `netlab stream --mptcp` (#65): one Multipath TCP connection whose
//! subflows take the two paths a netns placement gives it, each path's
//! share reported; one path on loopback, said plainly; and what the
//! kernel refuses, refused before anything runs.

use serde_json::Value;

/// Each path's bytes in a record's receiver report, by sender address.
fn received_by_path(report: &Value) -> Vec<(String, u64)> {
    let mut paths: Vec<(String, u64)> = Vec::new();
    for subflow in report["mptcp"]["subflows"].as_array().expect("subflows") {
        let from = subflow["remote"].as_str().unwrap();
        let ip = from.rsplit_once(':').unwrap().0.to_string();
        let bytes = subflow["info"]["bytes_received"].as_u64().unwrap();
        match paths.iter_mut().find(|(p, _)| *p == ip) {
            Some((_, b)) => *b += bytes,
            None => paths.push((ip, bytes)),
        }
    }
    paths
}

#[test(alone)]
fn stream_mptcp_spreads_one_connection_over_two_netns_paths() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let doc = crate::common::run_json(
        &[
            "stream",
            "--mptcp",
            "--bytes",
            "24M",
            "--placement",
            "netns",
            "--link-rate",
            "100mbit",
        ],
        &out,
    );
    let record = &doc["records"][0];
    assert!(record["error"].is_null(), "{record}");
    let r = &record["result"];
    assert_eq!(r["receiver"]["bytes"], 24 << 20);
    assert_eq!(r["receiver"]["verified"], true);
    let second = &r["link"]["second_path"];
    assert_eq!(second["addresses"][0], "198.18.0.5", "{second}");
    let paths = received_by_path(&r["receiver"]);
    let total: u64 = paths.iter().map(|(_, b)| b).sum();
    assert_eq!(paths.len(), 2, "a subflow over each path: {paths:?}");
    assert!(total >= 24 << 20, "{paths:?}");
    for (path, bytes) in &paths {
        // Two paths of one rate: neither carries nearly all of it.
        assert!(
            *bytes as f64 > 0.2 * total as f64,
            "path {path} carried {bytes} of {total}"
        );
    }
    assert_eq!(
        r["sender"]["mptcp"]["subflows"].as_array().unwrap().len(),
        2
    );
    // The verdict reads the two paths together.
    let first = &r["limits"]["limits"][0];
    assert_eq!(first["factor"], "link", "{first}");
    assert!(
        first["fix"].as_str().unwrap().contains("two paths' rate"),
        "{first}"
    );

    // The text report names each path's share.
    let text = crate::common::netlab()
        .args(["stream", "--mptcp", "--bytes", "4M", "--placement", "netns"])
        .arg("--reverse")
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&text.stdout);
    assert!(text.status.success(), "{said}");
    assert!(said.contains("2 subflows over 2 paths"), "{said}");
    assert!(said.contains("198.18.0.6 → 198.18.0.1"), "{said}");
}

#[test]
fn stream_mptcp_on_loopback_is_one_subflow_said_plainly() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("r.jsonl");
    let run = crate::common::netlab()
        .args([
            "stream",
            "--mptcp",
            "--bytes",
            "8M",
            "--strategy",
            "sendfile",
        ])
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&run.stdout);
    assert!(run.status.success(), "{said}");
    assert!(said.contains("1 subflow over 1 path"), "{said}");
    assert!(
        said.contains("on one host's loopback there is only the one"),
        "{said}"
    );
    let record = &crate::common::lines_of(&out)[0];
    let mptcp = &record["result"]["receiver"]["mptcp"];
    assert!(mptcp["fell_back"].is_null(), "{mptcp}");
    // Every byte, and any the connection sent again on the subflow
    // (MEASUREMENT.md: a reinjected byte counts once per subflow that
    // carried it), a few at most.
    let carried = received_by_path(&record["result"]["receiver"])[0].1;
    assert!(
        (8 << 20..(8 << 20) + (8 << 20) / 20).contains(&carried),
        "{carried}"
    );
}

#[test]
fn stream_mptcp_refuses_what_its_sockets_refuse_in_one_line_each() {
    crate::common::stream_refuses(&[
        ("--mptcp --strategy zerocopy", "MSG_ZEROCOPY"),
        ("--mptcp --rate 100M", "SO_MAX_PACING_RATE"),
        ("--mptcp --quic", "'--quic'"),
        ("--mptcp --udp --rate 10M", "'--udp'"),
    ]);
}

/// A namespace with MPTCP switched off (net.mptcp.enabled = 0) refuses
/// `--mptcp` on its loopback, naming the switch; a link the emulator
/// carries has no second path, and says why.
#[test]
fn stream_mptcp_refuses_a_namespace_without_it_and_an_emulated_link() {
    let namespace = format!("nlt{}mptcpoff", std::process::id());
    crate::common::run("ip", &["netns", "add", &namespace]);
    struct Gone(String);
    impl Drop for Gone {
        fn drop(&mut self) {
            let _ = std::process::Command::new("ip")
                .args(["netns", "del", &self.0])
                .status();
        }
    }
    let _gone = Gone(namespace.clone());
    crate::common::run(
        "ip",
        &[
            "netns",
            "exec",
            &namespace,
            "sysctl",
            "-qw",
            "net.mptcp.enabled=0",
        ],
    );
    let run = std::process::Command::new("ip")
        .args(["netns", "exec", &namespace])
        .arg(env!("CARGO_BIN_EXE_netlab"))
        .args(["stream", "--mptcp", "--bytes", "1M", "--out", "/dev/null"])
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(err.contains("net.mptcp.enabled = 0"), "{err}");
    assert_eq!(err.lines().count(), 1, "{err}");

    let dir = tempfile::tempdir().unwrap();
    let run = crate::common::netlab()
        .args(["stream", "--mptcp", "--bytes", "1M", "--placement", "netns"])
        .args(["--link-via", "emulator", "--out"])
        .arg(dir.path().join("r.jsonl"))
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&run.stderr);
    assert!(!run.status.success());
    assert!(err.contains("relays one path"), "{err}");
}
